// Package slacktest is a Slack server for tests, written from Slack's
// documentation of Socket Mode (https://api.slack.com/apis/socket-mode)
// and of the Web API methods the channel calls: apps.connections.open
// with the app-level token answers a WebSocket URL; the socket says
// hello, carries events_api envelopes (and slash_commands or interactive
// ones, PostEnvelope) that the app acknowledges with {"envelope_id":…},
// redelivers on the next connection what was not acknowledged
// (retry_attempt, retry_reason), asks the app to reconnect with a
// disconnect message (refresh_requested, or another reason), and pings;
// auth.test, chat.postMessage, chat.update, files.getUploadURLExternal
// (with the upload URL it names) and files.completeUploadExternal take
// the bot token as a Bearer header and answer {"ok":true,…} or
// {"ok":false,"error":…}, with HTTP 429 and Retry-After when a channel
// gets messages faster than allowed (or a method is limited by
// RateLimit); people's files are served at url_private_download to the
// bot token only.
package slacktest

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/nbots/nb/gateway/channel/channeltest"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
)

// Event is a message a person posts (the inner event of event_callback).
type Event struct {
	Type        string `json:"type"`
	Channel     string `json:"channel"`
	ChannelType string `json:"channel_type,omitempty"`
	User        string `json:"user"`
	Text        string `json:"text"`
	TS          string `json:"ts"`
	ThreadTS    string `json:"thread_ts,omitempty"`
	EventTS     string `json:"event_ts"`
	BotID       string `json:"bot_id,omitempty"`
	Subtype     string `json:"subtype,omitempty"`
	Files       []File `json:"files,omitempty"`
}

// File is a file object as events and files.* methods carry it; its
// url_private_download is served to the bot token only.
type File struct {
	ID                 string `json:"id"`
	Name               string `json:"name"`
	Title              string `json:"title,omitempty"`
	Mimetype           string `json:"mimetype,omitempty"`
	Size               int    `json:"size"`
	URLPrivate         string `json:"url_private,omitempty"`
	URLPrivateDownload string `json:"url_private_download,omitempty"`
}

// Upload is a file the bot shared (files.getUploadURLExternal, the
// upload, files.completeUploadExternal).
type Upload struct {
	ID, Name, Title string
	Data            []byte
	ThreadTS        string
	Comment         string
}

// Message is one the bot posted.
type Message struct {
	Channel  string
	TS       string
	ThreadTS string
	Text     string
	Edited   bool
	// Files are the bot's uploads shared in the channel.
	Files []Upload
}

type envelope struct {
	EnvelopeID             string          `json:"envelope_id"`
	Payload                json.RawMessage `json:"payload"`
	Type                   string          `json:"type"`
	AcceptsResponsePayload bool            `json:"accepts_response_payload"`
	RetryAttempt           int             `json:"retry_attempt"`
	RetryReason            string          `json:"retry_reason"`
}

// Server is a fake Slack on a loopback port.
type Server struct {
	// URL is the Web API's base ("…/api/").
	URL                string
	BotToken, AppToken string
	BotUserID          string

	srv *channeltest.Loopback
	mu  sync.Mutex

	changed  chan struct{}
	clock    int64
	pending  []*envelope // sent or to send, not acknowledged
	acked    map[string]time.Duration
	sentAt   map[string]time.Time
	conn     *websocket.Conn
	conns    int
	sent     map[string][]*Message
	channels map[string]bool
	gone     map[string]string
	faults   map[string]int // method -> 5xx answers to give
	limits   map[string]int // method -> 429 answers to give
	limitFor int            // their Retry-After, in seconds
	acks     []string       // the acknowledgements received, as sent
	deaf     bool           // stop reading the socket at its next message
	interval time.Duration
	last     map[string]time.Time
	calls    map[string]int
	files    map[string][]byte  // url_private_download path -> content
	uploads  map[string]*Upload // file id -> upload
}

// New starts a server on 127.0.0.1.
func New(botToken, appToken string) (*Server, error) {
	s := &Server{
		URL: "/api/", BotToken: botToken, AppToken: appToken, BotUserID: "UBOT0001",
		changed: make(chan struct{}), clock: 1_700_000_000_000_000, acked: map[string]time.Duration{}, sentAt: map[string]time.Time{},
		sent: map[string][]*Message{}, channels: map[string]bool{}, gone: map[string]string{}, faults: map[string]int{}, limits: map[string]int{},
		last: map[string]time.Time{}, calls: map[string]int{}, files: map[string][]byte{}, uploads: map[string]*Upload{},
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/{method}", s.api)
	mux.HandleFunc("GET /link/", s.socket)
	mux.HandleFunc("GET /files-pri/", s.download)
	mux.HandleFunc("POST /upload/v1/{id}", s.upload)
	srv, err := channeltest.NewLoopback(mux, botToken, appToken)
	if err != nil {
		return nil, err
	}
	s.srv = srv
	s.URL = srv.URL + s.URL
	return s, nil
}

// deafUntilReplaced reads nothing more of c (pings go unanswered) until
// another socket replaces it or the server closes.
func (s *Server) deafUntilReplaced(ctx context.Context, c *websocket.Conn) {
	for {
		s.mu.Lock()
		same, ch := s.conn == c, s.changed
		s.mu.Unlock()
		if !same {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-ch:
		}
	}
}

// Requests are the requests received so far ("GET /gateway").
func (s *Server) Requests() []string { return s.srv.Requests() }

// Close stops the server.
func (s *Server) Close() {
	s.mu.Lock()
	if s.conn != nil {
		s.conn.CloseNow() //nolint:errcheck // closing
		s.conn = nil
		s.notify()
	}
	s.mu.Unlock()
	s.srv.Close()
}

func (s *Server) notify() {
	close(s.changed)
	s.changed = make(chan struct{})
}

func (s *Server) ts() string {
	s.clock += 100
	return fmt.Sprintf("%d.%06d", s.clock/1_000_000, s.clock%1_000_000)
}

// Post makes a person post ev (its ts, event_ts and type are filled in)
// and queues its envelope; it returns the event.
func (s *Server) Post(ev Event) Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ev.Type == "" {
		ev.Type = "message"
	}
	ev.TS = s.ts()
	ev.EventTS = ev.TS
	s.channels[ev.Channel] = true
	payload, _ := json.Marshal(map[string]any{
		"token": "verification-token", "team_id": "T0001", "api_app_id": "A0001",
		"event": ev, "type": "event_callback", "event_id": "Ev" + strings.ReplaceAll(ev.TS, ".", ""), "event_time": s.clock / 1_000_000,
	})
	env := &envelope{EnvelopeID: fmt.Sprintf("env-%d", s.clock), Payload: payload, Type: "events_api"}
	s.pending = append(s.pending, env)
	if s.conn != nil {
		s.write(s.conn, env)
	}
	return ev
}

// AddFile stores a file a person shares and returns its file object,
// for Event.Files.
func (s *Server) AddFile(name, mimetype string, data []byte) File {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := fmt.Sprintf("F%08d", len(s.files)+1)
	base := strings.TrimSuffix(s.URL, "/api/")
	path := "/files-pri/T0001-" + id + "/download/" + url.PathEscape(name)
	s.files[path] = data
	return File{ID: id, Name: name, Title: name, Mimetype: mimetype, Size: len(data),
		URLPrivate: base + "/files-pri/T0001-" + id + "/" + url.PathEscape(name), URLPrivateDownload: base + path}
}

// download serves a private file to the bot token; without it Slack
// answers its sign-in page's redirect.
func (s *Server) download(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "Bearer "+s.BotToken {
		http.Redirect(w, r, "https://fake.slack.com/?redir="+url.QueryEscape(r.URL.Path), http.StatusFound)
		return
	}
	s.mu.Lock()
	b, ok := s.files[r.URL.EscapedPath()]
	s.mu.Unlock()
	if !ok {
		http.Error(w, "file not found", http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.Write(b) //nolint:errcheck // the client reads what it gets
}

// upload takes a file's bytes at the URL files.getUploadURLExternal gave
// (a multipart form's file field, or the raw body).
func (s *Server) upload(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	u := s.uploads[r.PathValue("id")]
	s.mu.Unlock()
	if u == nil {
		http.Error(w, "upload URL not found", http.StatusNotFound)
		return
	}
	var data []byte
	var err error
	if f, _, ferr := r.FormFile("file"); ferr == nil {
		data, err = io.ReadAll(f)
	} else {
		data, err = io.ReadAll(r.Body)
	}
	if err != nil {
		http.Error(w, "unreadable upload", http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	u.Data = data
	s.mu.Unlock()
	fmt.Fprintf(w, "OK - %d", len(data))
}

// write sends v on c; called with s.mu held.
func (s *Server) write(c *websocket.Conn, v any) {
	if e, ok := v.(*envelope); ok {
		s.sentAt[e.EnvelopeID] = time.Now()
	}
	b, _ := json.Marshal(v)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c.Write(ctx, websocket.MessageText, b) //nolint:errcheck // a dropped socket redelivers on the next one
}

// Disconnect sends Slack's disconnect message ("refresh_requested").
func (s *Server) Disconnect() { s.DisconnectFor("refresh_requested") }

// DisconnectFor sends a disconnect message with the reason ("warning",
// "refresh_requested", "link_disabled", …); the socket stays open, as
// Slack's does until it closes it.
func (s *Server) DisconnectFor(reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn != nil {
		s.write(s.conn, map[string]any{"type": "disconnect", "reason": reason, "debug_info": map[string]any{"host": "slacktest"}})
	}
}

// PostEnvelope queues an envelope of another type than events_api
// ("slash_commands", "interactive") with the payload, and returns its
// envelope_id.
func (s *Server) PostEnvelope(typ string, payload any) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, _ := json.Marshal(payload)
	s.clock += 100
	env := &envelope{EnvelopeID: fmt.Sprintf("env-%d", s.clock), Payload: b, Type: typ, AcceptsResponsePayload: true}
	s.pending = append(s.pending, env)
	if s.conn != nil {
		s.write(s.conn, env)
	}
	return env.EnvelopeID
}

// Acks are the acknowledgements received, each as the app sent it.
func (s *Server) Acks() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.acks...)
}

// Deafen makes the socket, from the next message the app sends (which
// is lost), read nothing more: no acknowledgement taken, no ping
// answered, as a connection that the network dropped without a word.
// The next connection is heard again.
func (s *Server) Deafen() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.deaf = true
}

// RateLimit makes the next n calls of the Web API method answer 429
// with Retry-After: retryAfter (seconds).
func (s *Server) RateLimit(method string, n, retryAfter int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.limits[method] += n
	s.limitFor = retryAfter
}

// Drop closes the socket without a word, as a network failure does.
func (s *Server) Drop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn != nil {
		s.conn.CloseNow() //nolint:errcheck // the point
		s.conn = nil
	}
}

// Fail makes the next n calls of the Web API method answer 500.
func (s *Server) Fail(method string, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults[method] += n
}

// SetChannelInterval is the least time between two messages of the bot
// in one channel; sooner gets 429 with Retry-After.
func (s *Server) SetChannelInterval(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.interval = d
}

// Archive makes posting to the channel fail with Slack's error (is_archived,
// not_in_channel, …).
func (s *Server) Archive(channel, errCode string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gone[channel] = errCode
}

// Connections is how many sockets were opened.
func (s *Server) Connections() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.conns
}

// Unacked is how many envelopes wait for their acknowledgement.
func (s *Server) Unacked() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.pending)
}

// AckLatencies are the times from sending an envelope (last time) to its
// acknowledgement.
func (s *Server) AckLatencies() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []time.Duration
	for _, d := range s.acked {
		out = append(out, d)
	}
	return out
}

// Calls is how many times the Web API method was called.
func (s *Server) Calls(method string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[method]
}

// Sent returns the bot's messages in a channel.
func (s *Server) Sent(channel string) []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Message
	for _, m := range s.sent[channel] {
		out = append(out, *m)
	}
	return out
}

// WaitConnected waits for a socket to be open, ctx permitting.
func (s *Server) WaitConnected(ctx context.Context, n int) error {
	for {
		s.mu.Lock()
		ok, ch := s.conns >= n && s.conn != nil, s.changed
		s.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ch:
		}
	}
}

func answer(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v) //nolint:errcheck // the client went away
}

func (s *Server) api(w http.ResponseWriter, r *http.Request) {
	method := r.PathValue("method")
	if err := r.ParseForm(); err != nil {
		answer(w, 200, map[string]any{"ok": false, "error": "invalid_form_data"})
		return
	}
	token := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	if token == "" {
		token = r.Form.Get("token")
	}
	want := s.BotToken
	if method == "apps.connections.open" {
		want = s.AppToken
	}
	if token == "" {
		answer(w, 200, map[string]any{"ok": false, "error": "not_authed"})
		return
	}
	if token != want {
		answer(w, 200, map[string]any{"ok": false, "error": "invalid_auth"})
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls[method]++
	if s.faults[method] > 0 {
		s.faults[method]--
		answer(w, 500, map[string]any{"ok": false, "error": "internal_error"})
		return
	}
	if s.limits[method] > 0 {
		s.limits[method]--
		w.Header().Set("Retry-After", strconv.Itoa(s.limitFor))
		answer(w, 429, map[string]any{"ok": false, "error": "ratelimited"})
		return
	}
	switch method {
	case "auth.test":
		answer(w, 200, map[string]any{"ok": true, "url": "https://fake.slack.com/", "team": "Fake", "user": "nb", "team_id": "T0001", "user_id": s.BotUserID, "bot_id": "B0001"})
	case "apps.connections.open":
		answer(w, 200, map[string]any{"ok": true, "url": "ws://" + r.Host + "/link/?ticket=t" + strconv.Itoa(s.conns+1)})
	case "chat.postMessage", "chat.update":
		ch := r.Form.Get("channel")
		if !s.channels[ch] {
			answer(w, 200, map[string]any{"ok": false, "error": "channel_not_found"})
			return
		}
		if code := s.gone[ch]; code != "" {
			answer(w, 200, map[string]any{"ok": false, "error": code})
			return
		}
		text := r.Form.Get("text")
		if strings.TrimSpace(text) == "" {
			answer(w, 200, map[string]any{"ok": false, "error": "no_text"})
			return
		}
		if s.interval > 0 {
			now := time.Now()
			if last, ok := s.last[ch]; ok && now.Sub(last) < s.interval {
				w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil((s.interval - now.Sub(last)).Seconds()))))
				answer(w, 429, map[string]any{"ok": false, "error": "ratelimited"})
				return
			}
			s.last[ch] = now
		}
		var m *Message
		if method == "chat.update" {
			for _, x := range s.sent[ch] {
				if x.TS == r.Form.Get("ts") {
					m = x
				}
			}
			if m == nil {
				answer(w, 200, map[string]any{"ok": false, "error": "message_not_found"})
				return
			}
			m.Text, m.Edited = text, true
		} else {
			m = &Message{Channel: ch, TS: s.ts(), ThreadTS: r.Form.Get("thread_ts"), Text: text}
			s.sent[ch] = append(s.sent[ch], m)
		}
		s.notify()
		answer(w, 200, map[string]any{"ok": true, "channel": ch, "ts": m.TS, "text": text, "message": map[string]any{"type": "message", "user": s.BotUserID, "text": text, "ts": m.TS}})
	case "files.getUploadURLExternal":
		n, err := strconv.Atoi(r.Form.Get("length"))
		if r.Form.Get("filename") == "" || err != nil || n <= 0 {
			answer(w, 200, map[string]any{"ok": false, "error": "invalid_arguments"})
			return
		}
		id := fmt.Sprintf("F%08d", 1000+len(s.uploads))
		s.uploads[id] = &Upload{ID: id, Name: r.Form.Get("filename")}
		answer(w, 200, map[string]any{"ok": true, "upload_url": "http://" + r.Host + "/upload/v1/" + id, "file_id": id})
	case "files.completeUploadExternal":
		var files []struct {
			ID    string `json:"id"`
			Title string `json:"title"`
		}
		if err := json.Unmarshal([]byte(r.Form.Get("files")), &files); err != nil || len(files) == 0 {
			answer(w, 200, map[string]any{"ok": false, "error": "invalid_arguments"})
			return
		}
		ch := r.Form.Get("channel_id")
		if ch != "" && !s.channels[ch] {
			answer(w, 200, map[string]any{"ok": false, "error": "channel_not_found"})
			return
		}
		m := &Message{Channel: ch, TS: s.ts(), ThreadTS: r.Form.Get("thread_ts"), Text: r.Form.Get("initial_comment")}
		var out []map[string]any
		for _, f := range files {
			u := s.uploads[f.ID]
			if u == nil || u.Data == nil {
				answer(w, 200, map[string]any{"ok": false, "error": "file_not_found"})
				return
			}
			u.Title, u.ThreadTS, u.Comment = f.Title, m.ThreadTS, m.Text
			m.Files = append(m.Files, *u)
			out = append(out, map[string]any{"id": u.ID, "title": u.Title})
		}
		if ch != "" {
			s.sent[ch] = append(s.sent[ch], m)
			s.notify()
		}
		answer(w, 200, map[string]any{"ok": true, "files": out})
	default:
		answer(w, 200, map[string]any{"ok": false, "error": "unknown_method"})
	}
}

func (s *Server) socket(w http.ResponseWriter, r *http.Request) {
	c, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
	if err != nil {
		return
	}
	s.mu.Lock()
	if s.conn != nil {
		s.conn.CloseNow() //nolint:errcheck // one socket at a time in this fake
	}
	s.conn = c
	s.conns++
	s.deaf = false
	s.write(c, map[string]any{"type": "hello", "num_connections": 1, "debug_info": map[string]any{"host": "slacktest", "build_number": 10, "approximate_connection_time": 18060}, "connection_info": map[string]any{"app_id": "A0001"}})
	for _, e := range s.pending {
		if _, sent := s.sentAt[e.EnvelopeID]; sent {
			e.RetryAttempt++
			e.RetryReason = "timeout"
		}
		s.write(c, e)
	}
	s.notify()
	s.mu.Unlock()
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	go func() {
		t := time.NewTicker(5 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				c.Ping(ctx) //nolint:errcheck // Slack pings; the app must answer
			}
		}
	}()
	for {
		_, data, err := c.Read(ctx)
		if err != nil {
			s.mu.Lock()
			if s.conn == c {
				s.conn = nil
			}
			s.mu.Unlock()
			return
		}
		s.mu.Lock()
		if s.deaf && s.conn == c {
			s.mu.Unlock()
			s.deafUntilReplaced(ctx, c)
			return
		}
		s.mu.Unlock()
		var ack struct {
			EnvelopeID string `json:"envelope_id"`
		}
		if json.Unmarshal(data, &ack) != nil || ack.EnvelopeID == "" {
			continue
		}
		s.mu.Lock()
		s.acks = append(s.acks, string(data))
		for i, e := range s.pending {
			if e.EnvelopeID == ack.EnvelopeID {
				s.pending = append(s.pending[:i], s.pending[i+1:]...)
				s.acked[e.EnvelopeID] = time.Since(s.sentAt[e.EnvelopeID])
				break
			}
		}
		s.notify()
		s.mu.Unlock()
	}
}
