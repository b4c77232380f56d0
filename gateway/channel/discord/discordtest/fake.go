// Package discordtest is a Discord server for tests, written from
// Discord's developer documentation: the Gateway (a WebSocket sending
// Hello with the heartbeat interval, answering Identify with READY and a
// session id, Heartbeats with Heartbeat ACKs, numbering dispatches with
// a sequence, replaying after a Resume the dispatches the client missed
// and then RESUMED, or answering Invalid Session; closing with 4004 on a
// bad token) and the REST API the channel calls (GET gateway and
// gateway/bot with its session start limit, users/@me, channel messages:
// create, as JSON or as multipart/form-data with payload_json and
// files[n], with a nonce that enforce_nonce makes unique per author for a
// few minutes; edit, list after an id; typing; attachments served from a
// CDN path), with the rate-limit headers on every answer and 429 with
// retry_after when a channel's bucket is empty.
//
// Faults a test can inject: a dropped connection, opcode 7 (reconnect),
// opcode 1 (heartbeat now), an invalidated session, heartbeats left
// unacknowledged, a short heartbeat interval, intents closed with 4014,
// the session start limit spent (Identify closed with 4008), a resume
// address that answers 404, a gateway that answers 503.
package discordtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/nbots/nb/gateway/channel/channeltest"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
)

// User is a Discord user.
type User struct {
	ID       string `json:"id"`
	Username string `json:"username"`
	Bot      bool   `json:"bot,omitempty"`
}

// Message is a Discord message object (the fields the channel reads).
type Message struct {
	ID               string            `json:"id"`
	ChannelID        string            `json:"channel_id"`
	GuildID          string            `json:"guild_id,omitempty"`
	Author           User              `json:"author"`
	Content          string            `json:"content"`
	Timestamp        string            `json:"timestamp"`
	EditedTimestamp  *string           `json:"edited_timestamp"`
	Mentions         []User            `json:"mentions"`
	MessageReference *MessageReference `json:"message_reference,omitempty"`
	Attachments      []Attachment      `json:"attachments"`
	// Nonce is what the creator sent to recognise its message.
	Nonce string `json:"nonce,omitempty"`

	created time.Time
}

// Attachment is a file of a message, served by the fake's CDN at URL.
type Attachment struct {
	ID          string `json:"id"`
	Filename    string `json:"filename"`
	ContentType string `json:"content_type,omitempty"`
	Size        int    `json:"size"`
	URL         string `json:"url"`
	ProxyURL    string `json:"proxy_url"`
}

// File is a file a person attaches.
type File struct {
	Name, ContentType string
	Data              []byte
}

// MaxFileBytes is a file's upload limit (Discord's for servers without
// boosts: 10 MiB).
const MaxFileBytes = 10 << 20

// MessageReference is what a reply points to.
type MessageReference struct {
	MessageID string `json:"message_id"`
	ChannelID string `json:"channel_id,omitempty"`
}

type payload struct {
	Op int             `json:"op"`
	D  json.RawMessage `json:"d"`
	S  *int64          `json:"s"`
	T  *string         `json:"t"`
}

// Server is a fake Discord on a loopback port.
type Server struct {
	// URL is the server's base (apiBase).
	URL   string
	Token string
	Bot   User

	srv *channeltest.Loopback
	mu  sync.Mutex

	changed  chan struct{}
	snow     int64
	session  string
	seq      int64
	events   []payload // this session's dispatches, for resumes
	conn     *websocket.Conn
	conns    int
	resumes  int
	invalid  bool
	messages map[string][]*Message // per channel, people's and the bot's
	channels map[string]string     // channel -> guild ("" for a DM)
	denied   map[string]bool
	limit    int
	window   time.Duration
	buckets  map[string]*bucket
	files    map[string][]byte // CDN path -> content
	// nonceHits counts creates answered with an earlier message.
	nonceHits int
	// interval is Hello's heartbeat_interval in milliseconds; mute
	// leaves heartbeats unacknowledged (a connection gone zombie).
	interval int
	mute     bool
	beats    int
	firsts   []time.Duration // per connection, from Hello to its first heartbeat
	// disallowed are intents Identify may not ask for (closed with
	// 4014); refuse makes the gateway answer 503 before upgrading.
	disallowed int
	refuse     bool
	// starts are the sessions the bot may still start (Identify) before
	// startsReset, when they are 1000 again.
	starts      int
	startsReset time.Time
	// resumeGone makes READY's resume_gateway_url an address that
	// answers 404.
	resumeGone bool
}

// NonceWindow is how long an enforced nonce stays unique ("the past few
// minutes" of Discord's documentation).
const NonceWindow = 5 * time.Minute

type bucket struct {
	remaining int
	reset     time.Time
}

// New starts a server for token (without "Bot ").
func New(token string) (*Server, error) {
	s := &Server{
		Token:   token,
		Bot:     User{ID: "900000000000000001", Username: "nb", Bot: true},
		changed: make(chan struct{}), snow: 1_100_000_000_000_000_000,
		messages: map[string][]*Message{}, channels: map[string]string{}, denied: map[string]bool{},
		limit: 5, window: time.Second, buckets: map[string]*bucket{}, files: map[string][]byte{},
		interval: 41250, starts: 1000, startsReset: time.Now().Add(24 * time.Hour),
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /gateway", s.gateway)
	mux.HandleFunc("GET /gateway/", s.gateway)
	mux.HandleFunc("/api/{version}/{rest...}", s.rest)
	mux.HandleFunc("GET /attachments/{rest...}", s.cdn)
	srv, err := channeltest.NewLoopback(mux, token)
	if err != nil {
		return nil, err
	}
	s.srv = srv
	s.URL = srv.URL + s.URL
	return s, nil
}

// Requests are the requests received so far ("GET /gateway").
func (s *Server) Requests() []string { return s.srv.Requests() }

// Close stops the server.
func (s *Server) Close() {
	s.mu.Lock()
	if s.conn != nil {
		s.conn.CloseNow() //nolint:errcheck // closing
	}
	s.mu.Unlock()
	s.srv.Close()
}

func (s *Server) notify() {
	close(s.changed)
	s.changed = make(chan struct{})
}

func (s *Server) id() string {
	s.snow++
	return strconv.FormatInt(s.snow, 10)
}

// Post makes a person write in a channel (guild "" for a direct
// message); it returns the message, dispatched as MESSAGE_CREATE.
func (s *Server) Post(guild, channel string, from User, content string, mentions ...User) Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.channels[channel] = guild
	m := &Message{ID: s.id(), ChannelID: channel, GuildID: guild, Author: from, Content: content,
		Timestamp: time.Now().UTC().Format(time.RFC3339Nano), Mentions: append([]User{}, mentions...)}
	s.messages[channel] = append(s.messages[channel], m)
	s.dispatch("MESSAGE_CREATE", m)
	return *m
}

// PostFiles is Post with files attached.
func (s *Server) PostFiles(guild, channel string, from User, content string, files ...File) Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.channels[channel] = guild
	m := &Message{ID: s.id(), ChannelID: channel, GuildID: guild, Author: from, Content: content,
		Timestamp: time.Now().UTC().Format(time.RFC3339Nano), Mentions: []User{}}
	for _, f := range files {
		m.Attachments = append(m.Attachments, s.storeLocked(channel, f))
	}
	s.messages[channel] = append(s.messages[channel], m)
	s.dispatch("MESSAGE_CREATE", m)
	return *m
}

// storeLocked puts a file on the CDN.
func (s *Server) storeLocked(channel string, f File) Attachment {
	id := s.id()
	path := "/attachments/" + channel + "/" + id + "/" + url.PathEscape(f.Name)
	s.files[path] = f.Data
	return Attachment{ID: id, Filename: f.Name, ContentType: f.ContentType, Size: len(f.Data), URL: s.URL + path, ProxyURL: s.URL + path}
}

// File returns the content of an attachment's URL.
func (s *Server) File(u string) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.files[strings.TrimPrefix(u, s.URL)]
}

func (s *Server) cdn(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	b, ok := s.files[r.URL.EscapedPath()]
	s.mu.Unlock()
	if !ok {
		http.Error(w, "Not Found", http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.Write(b) //nolint:errcheck // the client reads what it gets
}

// dispatch numbers and sends an event; called with s.mu held.
func (s *Server) dispatch(t string, d any) {
	b, _ := json.Marshal(d)
	s.seq++
	seq := s.seq
	p := payload{Op: 0, D: b, S: &seq, T: &t}
	s.events = append(s.events, p)
	if s.conn != nil {
		s.write(s.conn, p)
	}
}

func (s *Server) write(c *websocket.Conn, v any) {
	b, _ := json.Marshal(v)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c.Write(ctx, websocket.MessageText, b) //nolint:errcheck // a lost frame is the client's to resume
}

// Drop closes the gateway connection without a close frame.
func (s *Server) Drop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn != nil {
		s.conn.CloseNow() //nolint:errcheck // the point
		s.conn = nil
	}
}

// Reconnect sends opcode 7: the client must reconnect and resume.
func (s *Server) Reconnect() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn != nil {
		s.write(s.conn, map[string]any{"op": 7, "d": nil})
	}
}

// SetHeartbeatInterval sets the heartbeat_interval the next connections'
// Hello gives (41250 ms unless set).
func (s *Server) SetHeartbeatInterval(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.interval = int(d.Milliseconds())
}

// MuteAcks stops (true) or restarts acknowledging heartbeats: the
// connection looks alive to the server and dead to the client, which
// must notice a heartbeat without its ACK and reconnect.
func (s *Server) MuteAcks(mute bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mute = mute
}

// Heartbeats is how many heartbeats the clients sent.
func (s *Server) Heartbeats() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.beats
}

// FirstBeats are, per connection that beat, the time from its Hello to
// its first heartbeat.
func (s *Server) FirstBeats() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Duration(nil), s.firsts...)
}

// RequestHeartbeat sends opcode 1: the client must heartbeat at once.
func (s *Server) RequestHeartbeat() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn != nil {
		s.write(s.conn, map[string]any{"op": 1, "d": nil})
	}
}

// SetSessionStartLimit leaves the bot n new sessions until reset from
// now, when it has 1000 again (Get Gateway Bot's session_start_limit).
func (s *Server) SetSessionStartLimit(n int, reset time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.starts, s.startsReset = n, time.Now().Add(reset)
}

// startsLocked renews the session start limit once its reset has
// passed; called with s.mu held.
func (s *Server) startsLocked() {
	if time.Now().After(s.startsReset) {
		s.starts, s.startsReset = 1000, time.Now().Add(24*time.Hour)
	}
}

// BreakResumeURL makes the next READYs name a resume_gateway_url that
// answers 404: a client must fall back to a new session.
func (s *Server) BreakResumeURL() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.resumeGone = true
}

// DisallowIntents makes an Identify asking for any of bits fail with
// close code 4014 (a privileged intent not turned on for the bot).
func (s *Server) DisallowIntents(bits int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.disallowed = bits
}

// Refuse stops the gateway (true): the current connection is dropped
// and new ones are answered 503 until Refuse(false).
func (s *Server) Refuse(refuse bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refuse = refuse
	if refuse && s.conn != nil {
		s.conn.CloseNow() //nolint:errcheck // the point
		s.conn = nil
	}
}

// InvalidateSession makes the next resume fail with opcode 9.
func (s *Server) InvalidateSession() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.invalid = true
}

// Deny makes sending to the channel fail with 403 Missing Access.
func (s *Server) Deny(channel string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.denied[channel] = true
}

// SetRateLimit sets each channel's message bucket: n requests per window.
func (s *Server) SetRateLimit(n int, window time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.limit, s.window = n, window
}

// Stats are the gateway connections and successful resumes so far.
func (s *Server) Stats() (conns, resumes int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.conns, s.resumes
}

// NonceHits is how many message creates were answered with the message
// an earlier create made with the same enforced nonce.
func (s *Server) NonceHits() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.nonceHits
}

// WaitConnected waits for the n-th gateway connection to be ready.
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

// Sent returns the bot's messages in a channel.
func (s *Server) Sent(channel string) []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Message
	for _, m := range s.messages[channel] {
		if m.Author.ID == s.Bot.ID {
			out = append(out, *m)
		}
	}
	return out
}

func (s *Server) gateway(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	refuse := s.refuse
	s.mu.Unlock()
	if refuse {
		http.Error(w, "Service Unavailable", http.StatusServiceUnavailable)
		return
	}
	c, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
	if err != nil {
		return
	}
	c.SetReadLimit(1 << 20)
	ctx := r.Context()
	s.mu.Lock()
	interval := s.interval
	s.mu.Unlock()
	s.write(c, map[string]any{"op": 10, "d": map[string]any{"heartbeat_interval": interval}, "s": nil, "t": nil})
	hello, beaten := time.Now(), false
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
		var p payload
		if json.Unmarshal(data, &p) != nil {
			c.Close(4002, "Error while decoding payload.") //nolint:errcheck // closing
			return
		}
		switch p.Op {
		case 1:
			s.mu.Lock()
			s.beats++
			if !beaten {
				beaten = true
				s.firsts = append(s.firsts, time.Since(hello))
			}
			mute := s.mute
			s.mu.Unlock()
			if !mute {
				s.write(c, map[string]any{"op": 11})
			}
		case 2:
			var id struct {
				Token   string `json:"token"`
				Intents int    `json:"intents"`
			}
			json.Unmarshal(p.D, &id) //nolint:errcheck // checked below
			if strings.TrimPrefix(id.Token, "Bot ") != s.Token {
				c.Close(4004, "Authentication failed.") //nolint:errcheck // closing
				return
			}
			s.mu.Lock()
			disallowed := s.disallowed
			s.mu.Unlock()
			if id.Intents&disallowed != 0 {
				c.Close(4014, "Disallowed intent(s).") //nolint:errcheck // closing
				return
			}
			s.mu.Lock()
			s.startsLocked()
			if s.starts <= 0 {
				s.mu.Unlock()
				c.Close(4008, "Rate limited.") //nolint:errcheck // closing
				return
			}
			s.starts--
			s.session, s.seq, s.events, s.invalid = s.id(), 0, nil, false
			s.attach(c)
			resume := "ws" + strings.TrimPrefix(s.URL, "http") + "/gateway"
			if s.resumeGone {
				resume = "ws" + strings.TrimPrefix(s.URL, "http") + "/resume-gone"
			}
			s.dispatch("READY", map[string]any{"v": 10, "user": s.Bot, "session_id": s.session,
				"resume_gateway_url": resume, "guilds": []any{}, "private_channels": []any{}})
			s.mu.Unlock()
		case 6:
			var rs struct {
				Token     string `json:"token"`
				SessionID string `json:"session_id"`
				Seq       int64  `json:"seq"`
			}
			json.Unmarshal(p.D, &rs) //nolint:errcheck // checked below
			s.mu.Lock()
			if s.invalid || rs.SessionID != s.session || strings.TrimPrefix(rs.Token, "Bot ") != s.Token {
				s.invalid = false
				s.session = ""
				s.write(c, map[string]any{"op": 9, "d": false})
				s.mu.Unlock()
				continue
			}
			s.resumes++
			s.attach(c)
			for _, e := range s.events {
				if *e.S > rs.Seq {
					s.write(c, e)
				}
			}
			t := "RESUMED"
			s.write(c, payload{Op: 0, D: json.RawMessage("{}"), S: &s.seq, T: &t})
			s.mu.Unlock()
		}
	}
}

// attach makes c the connection dispatches go to; called with s.mu held.
func (s *Server) attach(c *websocket.Conn) {
	if s.conn != nil && s.conn != c {
		s.conn.CloseNow() //nolint:errcheck // one connection at a time
	}
	s.conn = c
	s.conns++
	s.notify()
}

func apiError(w http.ResponseWriter, status, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"message": msg, "code": code}) //nolint:errcheck // the client went away
}

func reply(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	if v != nil {
		json.NewEncoder(w).Encode(v) //nolint:errcheck // the client went away
	}
}

func (s *Server) rest(w http.ResponseWriter, r *http.Request) {
	parts := strings.Split(r.PathValue("rest"), "/")
	if len(parts) == 1 && parts[0] == "gateway" {
		reply(w, 200, map[string]string{"url": "ws" + strings.TrimPrefix(s.URL, "http") + "/gateway"})
		return
	}
	if r.Header.Get("Authorization") != "Bot "+s.Token {
		apiError(w, 401, 0, "401: Unauthorized")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case len(parts) == 2 && parts[0] == "gateway" && parts[1] == "bot":
		// Get Gateway Bot: the address, the recommended shards and the
		// session start limit.
		s.startsLocked()
		reply(w, 200, map[string]any{"url": "ws" + strings.TrimPrefix(s.URL, "http") + "/gateway", "shards": 1,
			"session_start_limit": map[string]any{"total": 1000, "remaining": s.starts,
				"reset_after": time.Until(s.startsReset).Milliseconds(), "max_concurrency": 1}})
	case len(parts) == 2 && parts[0] == "users" && parts[1] == "@me":
		reply(w, 200, s.Bot)
	case len(parts) >= 3 && parts[0] == "channels" && parts[2] == "typing":
		reply(w, 204, nil)
	case len(parts) >= 3 && parts[0] == "channels" && parts[2] == "messages":
		ch := parts[1]
		if _, ok := s.channels[ch]; !ok {
			apiError(w, 404, 10003, "Unknown Channel")
			return
		}
		if r.Method == http.MethodGet {
			s.list(w, r, ch)
			return
		}
		if s.denied[ch] {
			apiError(w, 403, 50001, "Missing Access")
			return
		}
		if !s.take(w, ch) {
			return
		}
		var body struct {
			Content          string            `json:"content"`
			MessageReference *MessageReference `json:"message_reference"`
			Nonce            json.RawMessage   `json:"nonce"`
			EnforceNonce     bool              `json:"enforce_nonce"`
		}
		var files []File
		var jsonBody io.Reader = r.Body
		if mt, params, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt == "multipart/form-data" {
			// A message with files: the JSON in the payload_json field,
			// each file in a files[n] field.
			mr := multipart.NewReader(http.MaxBytesReader(w, r.Body, 11*MaxFileBytes), params["boundary"])
			jsonBody = strings.NewReader("")
			for {
				p, err := mr.NextPart()
				if err == io.EOF {
					break
				}
				if err != nil {
					apiError(w, 413, 40005, "Request entity too large")
					return
				}
				b, err := io.ReadAll(p)
				if err != nil {
					apiError(w, 413, 40005, "Request entity too large")
					return
				}
				switch name := p.FormName(); {
				case name == "payload_json":
					jsonBody = bytes.NewReader(b)
				case strings.HasPrefix(name, "files[") || strings.HasPrefix(name, "file"):
					if len(b) > MaxFileBytes {
						apiError(w, 413, 40005, "Request entity too large")
						return
					}
					files = append(files, File{Name: p.FileName(), ContentType: p.Header.Get("Content-Type"), Data: b})
				}
			}
			if len(files) > 10 {
				apiError(w, 400, 50035, "Invalid Form Body: files: Must be 10 or fewer in length.")
				return
			}
		}
		if err := json.NewDecoder(jsonBody).Decode(&body); err != nil {
			apiError(w, 400, 50109, "The request body contains invalid JSON.")
			return
		}
		if len([]rune(body.Content)) > 2000 {
			apiError(w, 400, 50035, "Invalid Form Body: content: Must be 2000 or fewer in length.")
			return
		}
		if strings.TrimSpace(body.Content) == "" && (len(files) == 0 || r.Method == http.MethodPatch) {
			apiError(w, 400, 50006, "Cannot send an empty message")
			return
		}
		if r.Method == http.MethodPatch && len(parts) == 4 {
			for _, m := range s.messages[ch] {
				if m.ID == parts[3] && m.Author.ID == s.Bot.ID {
					now := time.Now().UTC().Format(time.RFC3339Nano)
					m.Content, m.EditedTimestamp = body.Content, &now
					s.notify()
					reply(w, 200, m)
					return
				}
			}
			apiError(w, 404, 10008, "Unknown Message")
			return
		}
		// The nonce: an integer or a string of at most 25 characters.
		// Enforced, it is unique per author for a few minutes: a
		// message created again is answered with the first.
		var nonce string
		if len(body.Nonce) > 0 && string(body.Nonce) != "null" {
			if json.Unmarshal(body.Nonce, &nonce) != nil {
				nonce = string(body.Nonce)
			}
			if len(nonce) > 25 {
				apiError(w, 400, 50035, "Invalid Form Body: nonce: Must be 25 or fewer in length.")
				return
			}
		}
		if nonce != "" && body.EnforceNonce {
			for _, m := range s.messages[ch] {
				if m.Author.ID == s.Bot.ID && m.Nonce == nonce && time.Since(m.created) < NonceWindow {
					s.nonceHits++
					reply(w, 200, m)
					return
				}
			}
		}
		m := &Message{ID: s.id(), ChannelID: ch, GuildID: s.channels[ch], Author: s.Bot, Content: body.Content,
			Timestamp: time.Now().UTC().Format(time.RFC3339Nano), Mentions: []User{}, MessageReference: body.MessageReference,
			Nonce: nonce, created: time.Now()}
		for _, f := range files {
			m.Attachments = append(m.Attachments, s.storeLocked(ch, f))
		}
		s.messages[ch] = append(s.messages[ch], m)
		s.notify()
		reply(w, 200, m)
	default:
		apiError(w, 404, 0, "404: Not Found")
	}
}

// take spends one request of the channel's bucket and writes the
// rate-limit headers, or answers 429; called with s.mu held.
func (s *Server) take(w http.ResponseWriter, ch string) bool {
	now := time.Now()
	b := s.buckets[ch]
	if b == nil || now.After(b.reset) {
		b = &bucket{remaining: s.limit, reset: now.Add(s.window)}
		s.buckets[ch] = b
	}
	after := b.reset.Sub(now).Seconds()
	h := w.Header()
	h.Set("X-RateLimit-Limit", strconv.Itoa(s.limit))
	h.Set("X-RateLimit-Reset", strconv.FormatFloat(float64(b.reset.UnixMilli())/1000, 'f', 3, 64))
	h.Set("X-RateLimit-Reset-After", strconv.FormatFloat(after, 'f', 3, 64))
	h.Set("X-RateLimit-Bucket", "bucket-"+ch)
	if b.remaining <= 0 {
		h.Set("X-RateLimit-Remaining", "0")
		h.Set("Retry-After", strconv.Itoa(int(after)+1))
		h.Set("X-RateLimit-Scope", "user")
		reply(w, 429, map[string]any{"message": "You are being rate limited.", "retry_after": after, "global": false})
		return false
	}
	b.remaining--
	h.Set("X-RateLimit-Remaining", strconv.Itoa(b.remaining))
	return true
}

// list answers GET messages?after=ID&limit=N: the messages after ID,
// newest first, as Discord returns them.
func (s *Server) list(w http.ResponseWriter, r *http.Request, ch string) {
	after, _ := strconv.ParseInt(r.URL.Query().Get("after"), 10, 64)
	limit, err := strconv.Atoi(r.URL.Query().Get("limit"))
	if err != nil || limit <= 0 || limit > 100 {
		limit = 50
	}
	var out []*Message
	for _, m := range s.messages[ch] {
		if id, _ := strconv.ParseInt(m.ID, 10, 64); id > after {
			out = append(out, m)
		}
	}
	if len(out) > limit {
		out = out[:limit] // the oldest ones after the id
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID > out[j].ID })
	reply(w, 200, out)
}

// String describes the server's state for failing tests.
func (s *Server) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return fmt.Sprintf("discordtest: %d connections, %d resumes, seq %d", s.conns, s.resumes, s.seq)
}
