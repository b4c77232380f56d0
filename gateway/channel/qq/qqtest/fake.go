// Package qqtest is a QQ bot platform for tests, written from the QQ bot
// API's documentation (bot.q.qq.com/wiki/develop/api-v2): POST
// /app/getAppAccessToken trades {"appId","clientSecret"} for
// {"access_token","expires_in":"7200"} (a wrong secret: HTTP 200 with
// code 100016); GET /gateway names the websocket; on it the platform says
// Hello (op 10, heartbeat_interval), takes Identify (op 2, "QQBot
// <token>", intents) and answers READY with a session id, or takes
// Resume (op 6, session_id, seq) and replays the session's events after
// seq, then RESUMED (an unknown session: op 9, Invalid Session); it
// acknowledges heartbeats (op 1) with op 11, asks for a reconnection
// with op 7, and dispatches C2C_MESSAGE_CREATE and
// GROUP_AT_MESSAGE_CREATE (op 0, with s). The REST API
// (/v2/users/{openid}/messages, /v2/groups/{group_openid}/messages and
// their /files) takes "Authorization: QQBot <token>"; a reply names the
// msg_id it answers (within 60 minutes in a one-to-one chat, 5 in a
// group, at most 5 replies) and a msg_seq used once per msg_id (again:
// code 40054005, deduplicated); a message without msg_id is active.
package qqtest

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/nbots/nb/gateway/channel/channeltest"
)

// Endpoints, for Inject and Calls.
const (
	Token    = "token"
	Gateway  = "gateway"
	Messages = "messages"
	Files    = "files"
)

// Attachment is a file a person sends.
type Attachment struct {
	ContentType string `json:"content_type"`
	Filename    string `json:"filename"`
	URL         string `json:"url"`
	Size        int    `json:"size"`
}

// Message is a person's message: to the bot (Group "") or in a group,
// where it @ the bot.
type Message struct {
	ID          string       `json:"id"`
	User        string       `json:"-"` // the sender's openid
	Group       string       `json:"group_openid,omitempty"`
	Content     string       `json:"content"`
	Timestamp   string       `json:"timestamp"`
	Attachments []Attachment `json:"attachments,omitempty"`
}

// Sent is a message the bot sent.
type Sent struct {
	// Chat is the user's openid or "group:<group_openid>".
	Chat    string
	MsgType int
	Content string
	// ReplyTo is the msg_id it answered ("" for an active message) and
	// Seq its msg_seq.
	ReplyTo string
	Seq     int
	// File is the uploaded file's content, for msg_type 7.
	File []byte
}

type event struct {
	seq  int64
	t    string
	data []byte
}

type session struct {
	id     string
	events []event
}

// Server is a fake QQ bot platform on a loopback port.
type Server struct {
	channeltest.Faults
	URL           string
	AppID, Secret string
	// Heartbeat is the interval Hello names (default 200 ms).
	Heartbeat time.Duration

	srv *http.Server
	mu  sync.Mutex

	changed    chan struct{}
	n          int
	tokens     map[string]bool
	conn       *websocket.Conn
	conns      int
	identifies int
	resumes    int
	sess       *session // the current session, events queue here
	sessions   map[string]*session
	intents    int
	sent       []Sent
	received   map[string]time.Time // msg_id -> when
	inGroup    map[string]string    // msg_id -> group or ""
	seqs       map[string]bool      // msg_id + seq used
	files      map[string][]byte    // path -> content
	uploads    map[string][]byte    // file_info -> content
	interval   time.Duration
	last       map[string]time.Time
	silent     bool // heartbeats not acknowledged
}

// New starts a server on 127.0.0.1 for the bot appID/secret.
func New(appID, secret string) (*Server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &Server{
		URL: "http://" + ln.Addr().String(), AppID: appID, Secret: secret, Heartbeat: 200 * time.Millisecond,
		changed: make(chan struct{}), tokens: map[string]bool{}, sessions: map[string]*session{},
		received: map[string]time.Time{}, inGroup: map[string]string{}, seqs: map[string]bool{},
		files: map[string][]byte{}, uploads: map[string][]byte{}, last: map[string]time.Time{},
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /app/getAppAccessToken", s.token)
	mux.HandleFunc("GET /gateway", s.gateway)
	mux.HandleFunc("GET /websocket", s.socket)
	mux.HandleFunc("POST /v2/users/{id}/messages", s.message)
	mux.HandleFunc("POST /v2/groups/{id}/messages", s.message)
	mux.HandleFunc("POST /v2/users/{id}/files", s.upload)
	mux.HandleFunc("POST /v2/groups/{id}/files", s.upload)
	mux.HandleFunc("GET /media/{name}", s.download)
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go s.srv.Serve(ln) //nolint:errcheck // ends with Close
	return s, nil
}

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

func (s *Server) next(prefix string) string {
	s.n++
	return fmt.Sprintf("%s%06d", prefix, s.n)
}

// Say makes a person send m (its id and timestamp filled in). It is
// queued on the current session and dispatched at once when the bot is
// connected; with no session yet, the bot never sees it (QQ pushes only
// to a connected bot). It returns the message.
func (s *Server) Say(m Message) Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	if m.ID == "" {
		m.ID = s.next("ROBOT1.0_msg")
	}
	m.Timestamp = time.Now().Format(time.RFC3339)
	t, d := "C2C_MESSAGE_CREATE", map[string]any{}
	b, _ := json.Marshal(m)
	json.Unmarshal(b, &d) //nolint:errcheck // our own JSON
	if m.Group != "" {
		t = "GROUP_AT_MESSAGE_CREATE"
		d["author"] = map[string]string{"member_openid": m.User, "id": m.User}
	} else {
		d["author"] = map[string]string{"user_openid": m.User, "id": m.User}
	}
	s.received[m.ID] = time.Now()
	s.inGroup[m.ID] = m.Group
	data, _ := json.Marshal(d)
	if s.sess == nil {
		return m
	}
	ev := event{seq: int64(len(s.sess.events) + 2), t: t, data: data} // READY was 1
	s.sess.events = append(s.sess.events, ev)
	if s.conn != nil {
		s.dispatch(s.conn, ev)
	}
	return m
}

// AddFile serves a file a person sends and returns its attachment.
func (s *Server) AddFile(name, contentType string, data []byte) Attachment {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.next("f") + "_" + name
	s.files[p] = data
	return Attachment{ContentType: contentType, Filename: name, URL: s.URL + "/media/" + p, Size: len(data)}
}

func (s *Server) dispatch(c *websocket.Conn, ev event) {
	write(c, map[string]any{"op": 0, "s": ev.seq, "t": ev.t, "d": json.RawMessage(ev.data), "id": ev.t + ":" + fmt.Sprint(ev.seq)})
}

func write(c *websocket.Conn, v any) {
	b, _ := json.Marshal(v)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c.Write(ctx, websocket.MessageText, b) //nolint:errcheck // a broken socket is the client's to notice
}

// Reconnect sends op 7: the bot should reconnect and resume.
func (s *Server) Reconnect() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn != nil {
		write(s.conn, map[string]any{"op": 7})
	}
}

// Drop closes the socket without a word.
func (s *Server) Drop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn != nil {
		s.conn.CloseNow() //nolint:errcheck // dropping
	}
}

// CloseWith closes the socket with a gateway close code.
func (s *Server) CloseWith(code int, reason string) {
	s.mu.Lock()
	c := s.conn
	s.mu.Unlock()
	if c != nil {
		c.Close(websocket.StatusCode(code), reason) //nolint:errcheck // closing
	}
}

// ForgetSessions makes every session unknown: the next Resume is
// answered with op 9.
func (s *Server) ForgetSessions() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sessions = map[string]*session{}
}

// Silence stops acknowledging heartbeats (a connection that died
// without closing).
func (s *Server) Silence(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.silent = on
}

// SetInterval answers a chat sent to again within d with HTTP 429.
func (s *Server) SetInterval(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.interval = d
}

// Connections, Identifies and Resumes count the sockets opened and the
// sessions identified and resumed.
func (s *Server) Connections() int { s.mu.Lock(); defer s.mu.Unlock(); return s.conns }

// Identifies is how many Identify frames were accepted.
func (s *Server) Identifies() int { s.mu.Lock(); defer s.mu.Unlock(); return s.identifies }

// Resumes is how many Resume frames were accepted.
func (s *Server) Resumes() int { s.mu.Lock(); defer s.mu.Unlock(); return s.resumes }

// Intents are those of the last Identify.
func (s *Server) Intents() int { s.mu.Lock(); defer s.mu.Unlock(); return s.intents }

// Sent are the messages sent to chat ("" for all), in order.
func (s *Server) Sent(chat string) []Sent {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Sent
	for _, m := range s.sent {
		if chat == "" || m.Chat == chat {
			out = append(out, m)
		}
	}
	return out
}

// WaitConnected waits until n sessions are ready (READY or RESUMED).
func (s *Server) WaitConnected(ctx context.Context, n int) error {
	for {
		s.mu.Lock()
		got, ch := s.identifies+s.resumes, s.changed
		s.mu.Unlock()
		if got >= n {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("%d of %d sessions ready", got, n)
		}
	}
}

// WaitSent waits until chat was sent n messages.
func (s *Server) WaitSent(ctx context.Context, chat string, n int) ([]Sent, error) {
	for {
		got := s.Sent(chat)
		s.mu.Lock()
		ch := s.changed
		s.mu.Unlock()
		if len(got) >= n {
			return got, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return got, fmt.Errorf("%d of %d messages sent to %s", len(got), n, chat)
		}
	}
}

func answer(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v) //nolint:errcheck // the client's problem
}

func refuse(w http.ResponseWriter, status, code int, msg string) {
	answer(w, status, map[string]any{"code": code, "message": msg, "err_code": code, "trace_id": "trace-1"})
}

func (s *Server) fault(w http.ResponseWriter, endpoint string) bool {
	switch s.Next(endpoint) {
	case channeltest.Reset:
		channeltest.ResetConnection(w)
	case channeltest.BadGateway:
		http.Error(w, "bad gateway", http.StatusBadGateway)
	case channeltest.Hang:
		time.Sleep(40 * time.Second)
	case channeltest.TooMany:
		refuse(w, http.StatusTooManyRequests, 22009, "msg limit exceed")
	default:
		return false
	}
	return true
}

func (s *Server) token(w http.ResponseWriter, r *http.Request) {
	if s.fault(w, Token) {
		return
	}
	var body struct {
		AppID        string `json:"appId"`
		ClientSecret string `json:"clientSecret"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil || body.AppID != s.AppID || body.ClientSecret != s.Secret {
		refuse(w, http.StatusOK, 100016, "invalid appid or secret")
		return
	}
	s.mu.Lock()
	t := s.next("tok-")
	s.tokens[t] = true
	s.mu.Unlock()
	answer(w, http.StatusOK, map[string]string{"access_token": t, "expires_in": "7200"})
}

func (s *Server) authorized(r *http.Request) bool {
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "QQBot ")
	s.mu.Lock()
	defer s.mu.Unlock()
	return ok && s.tokens[tok] && r.Header.Get("X-Union-Appid") == s.AppID
}

func (s *Server) gateway(w http.ResponseWriter, r *http.Request) {
	if s.fault(w, Gateway) {
		return
	}
	if !s.authorized(r) {
		refuse(w, http.StatusUnauthorized, 11241, "wrong token")
		return
	}
	answer(w, http.StatusOK, map[string]string{"url": "ws" + strings.TrimPrefix(s.URL, "http") + "/websocket"})
}

func (s *Server) socket(w http.ResponseWriter, r *http.Request) {
	c, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	defer c.CloseNow() //nolint:errcheck // done
	s.mu.Lock()
	if s.conn != nil {
		s.conn.CloseNow() //nolint:errcheck // one connection at a time here
	}
	s.conn = c
	s.conns++
	s.notify()
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		if s.conn == c {
			s.conn = nil
		}
		s.mu.Unlock()
	}()
	write(c, map[string]any{"op": 10, "d": map[string]int64{"heartbeat_interval": s.Heartbeat.Milliseconds()}})
	for {
		_, b, err := c.Read(context.Background())
		if err != nil {
			return
		}
		var p struct {
			Op int             `json:"op"`
			D  json.RawMessage `json:"d"`
		}
		if json.Unmarshal(b, &p) != nil {
			c.Close(4001, "invalid payload") //nolint:errcheck // refusing
			return
		}
		var d struct {
			Token     string `json:"token"`
			Intents   int    `json:"intents"`
			SessionID string `json:"session_id"`
			Seq       int64  `json:"seq"`
		}
		json.Unmarshal(p.D, &d) //nolint:errcheck // a heartbeat's d is a number
		tok, _ := strings.CutPrefix(d.Token, "QQBot ")
		s.mu.Lock()
		switch p.Op {
		case 1:
			if !s.silent {
				write(c, map[string]any{"op": 11})
			}
		case 2:
			if !s.tokens[tok] {
				s.mu.Unlock()
				c.Close(4004, "invalid token") //nolint:errcheck // refusing
				return
			}
			s.intents = d.Intents
			s.sess = &session{id: s.next("sess-")}
			s.sessions[s.sess.id] = s.sess
			s.identifies++
			write(c, map[string]any{"op": 0, "s": 1, "t": "READY", "d": map[string]any{
				"version": 1, "session_id": s.sess.id, "shard": []int{0, 1},
				"user": map[string]any{"id": "bot-1", "username": "nb-test-bot", "bot": true},
			}})
			s.notify()
		case 6:
			ss := s.sessions[d.SessionID]
			if ss == nil || !s.tokens[tok] {
				write(c, map[string]any{"op": 9, "d": false})
				s.mu.Unlock()
				continue
			}
			s.sess = ss
			s.resumes++
			for _, ev := range ss.events {
				if ev.seq > d.Seq {
					s.dispatch(c, ev)
				}
			}
			write(c, map[string]any{"op": 0, "s": int64(len(ss.events) + 1), "t": "RESUMED", "d": ""})
			s.notify()
		}
		s.mu.Unlock()
	}
}

func (s *Server) throttled(chat string) bool {
	if s.interval > 0 && time.Since(s.last[chat]) < s.interval {
		return true
	}
	s.last[chat] = time.Now()
	return false
}

func (s *Server) chat(r *http.Request) string {
	if strings.HasPrefix(r.URL.Path, "/v2/groups/") {
		return "group:" + r.PathValue("id")
	}
	return r.PathValue("id")
}

func (s *Server) message(w http.ResponseWriter, r *http.Request) {
	if s.fault(w, Messages) {
		return
	}
	if !s.authorized(r) {
		refuse(w, http.StatusUnauthorized, 11241, "wrong token")
		return
	}
	var body struct {
		MsgType  int               `json:"msg_type"`
		Content  string            `json:"content"`
		Markdown map[string]string `json:"markdown"`
		Media    map[string]string `json:"media"`
		MsgID    string            `json:"msg_id"`
		MsgSeq   int               `json:"msg_seq"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&body); err != nil {
		refuse(w, http.StatusBadRequest, 40034001, "bad body")
		return
	}
	chat := s.chat(r)
	s.mu.Lock()
	defer s.mu.Unlock()
	if body.MsgID != "" {
		at, ok := s.received[body.MsgID]
		window := 60 * time.Minute
		g := s.inGroup[body.MsgID]
		if g != "" {
			window = 5 * time.Minute
		}
		if !ok || ("group:"+g != chat && g != "") || (g == "" && strings.HasPrefix(chat, "group:")) {
			refuse(w, http.StatusBadRequest, 40034024, "msg_id is not a message of this chat")
			return
		}
		if time.Since(at) > window {
			refuse(w, http.StatusBadRequest, 40034025, "passive reply window is over")
			return
		}
		key := fmt.Sprintf("%s/%d", body.MsgID, body.MsgSeq)
		if s.seqs[key] {
			refuse(w, http.StatusBadRequest, 40054005, "消息被去重，请检查请求msgseq")
			return
		}
		n := 0
		for k := range s.seqs {
			if strings.HasPrefix(k, body.MsgID+"/") {
				n++
			}
		}
		if n >= 5 {
			refuse(w, http.StatusBadRequest, 40034026, "a message takes at most 5 replies")
			return
		}
		if s.throttled(chat) {
			refuse(w, http.StatusTooManyRequests, 22009, "msg limit exceed")
			return
		}
		s.seqs[key] = true
	} else if s.throttled(chat) {
		refuse(w, http.StatusTooManyRequests, 22009, "msg limit exceed")
		return
	}
	m := Sent{Chat: chat, MsgType: body.MsgType, Content: body.Content, ReplyTo: body.MsgID, Seq: body.MsgSeq}
	if body.MsgType == 2 {
		m.Content = body.Markdown["content"]
	}
	if body.MsgType == 7 {
		m.File = s.uploads[body.Media["file_info"]]
	}
	s.sent = append(s.sent, m)
	s.notify()
	answer(w, http.StatusOK, map[string]any{"id": s.next("sent-"), "timestamp": time.Now().Unix()})
}

func (s *Server) upload(w http.ResponseWriter, r *http.Request) {
	if s.fault(w, Files) {
		return
	}
	if !s.authorized(r) {
		refuse(w, http.StatusUnauthorized, 11241, "wrong token")
		return
	}
	var body struct {
		FileType   int    `json:"file_type"`
		FileData   string `json:"file_data"`
		SrvSendMsg bool   `json:"srv_send_msg"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 30<<20)).Decode(&body); err != nil || body.FileType < 1 || body.FileType > 4 {
		refuse(w, http.StatusBadRequest, 40034001, "bad body")
		return
	}
	data, err := base64.StdEncoding.DecodeString(body.FileData)
	if err != nil {
		refuse(w, http.StatusBadRequest, 40034001, "file_data is not base64")
		return
	}
	s.mu.Lock()
	info := s.next("info-")
	s.uploads[info] = data
	s.mu.Unlock()
	answer(w, http.StatusOK, map[string]any{"file_uuid": info, "file_info": info, "ttl": 3600})
}

func (s *Server) download(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	data, ok := s.files[r.PathValue("name")]
	s.mu.Unlock()
	if !ok {
		http.NotFound(w, r)
		return
	}
	w.Write(data) //nolint:errcheck // the client's problem
}
