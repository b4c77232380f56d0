// Package mochattest is a fake Mochat server on loopback: the claw HTTP
// API nanobot's mochat channel calls (sessions list/watch/send, groups
// get, panel messages/send, X-Claw-Token, {"code":200,"data":…}) and its
// Socket.IO endpoint (Engine.IO 4 over a websocket, JSON packets: open,
// connect with {"token"}, connect_error, pings, subscribeSessions and
// subscribePanels with acks, claw.session.events and
// notify:chat.message.add pushes).
package mochattest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/nbots/nb/gateway/channel/channeltest"
)

// Sent is a message the agent sent.
type Sent struct {
	SessionID string `json:"sessionId,omitempty"`
	PanelID   string `json:"panelId,omitempty"`
	GroupID   string `json:"groupId,omitempty"`
	Content   string `json:"content"`
	ReplyTo   string `json:"replyTo,omitempty"`
}

type event struct {
	Seq       int64          `json:"seq"`
	Type      string         `json:"type"`
	Timestamp string         `json:"timestamp"`
	Payload   map[string]any `json:"payload"`
}

type panel struct {
	group string
	msgs  []map[string]any
}

// Server is the fake. Faults are injected by endpoint: "watch", "send"
// (both send endpoints), "messages", "socket" (Reset refuses the
// websocket).
type Server struct {
	channeltest.Faults
	// Token is the claw token accepted.
	Token string
	// URL is the server's base URL.
	URL string
	// PingInterval is sent in the open packet (default 200 ms).
	PingInterval time.Duration
	// NoSocket makes the Socket.IO endpoint answer 404, as a server
	// reachable only by the HTTP API.
	NoSocket bool

	srv *httptest.Server

	mu       sync.Mutex
	sessions map[string][]event
	panels   map[string]*panel
	sent     []Sent
	socks    map[*websocket.Conn]*subs
	seq      int64
	nextID   int
	changed  chan struct{}
	connects int
}

type subs struct {
	sessions map[string]bool
	panels   bool
}

// New starts a server accepting token with the sessions and panels
// given (panel id → group id); the test's cleanup stops it.
func New(t testing.TB, token string, sessions []string, panels map[string]string) *Server {
	t.Helper()
	s := &Server{Token: token, PingInterval: 200 * time.Millisecond, sessions: map[string][]event{}, panels: map[string]*panel{}, socks: map[*websocket.Conn]*subs{}}
	for _, id := range sessions {
		s.sessions[id] = nil
	}
	for id, g := range panels {
		s.panels[id] = &panel{group: g}
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/socket.io/", s.socket)
	mux.HandleFunc("POST /api/claw/", s.api)
	s.srv = httptest.NewServer(mux)
	s.URL = s.srv.URL
	t.Cleanup(s.Close)
	return s
}

func (s *Server) notify() {
	if s.changed != nil {
		close(s.changed)
		s.changed = nil
	}
}

func (s *Server) wait(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		s.mu.Lock()
		ok := cond()
		if !ok && s.changed == nil {
			s.changed = make(chan struct{})
		}
		ch := s.changed
		s.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("mochattest: timed out waiting for %s", what)
		}
	}
}

func reply(w http.ResponseWriter, data any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"code": 200, "data": data}) //nolint:errcheck // the client's loss
}

func (s *Server) api(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("X-Claw-Token") != s.Token {
		http.Error(w, `{"code":401,"message":"invalid claw token"}`, http.StatusUnauthorized)
		return
	}
	var body map[string]any
	json.NewDecoder(r.Body).Decode(&body) //nolint:errcheck // empty bodies are fine
	path := strings.TrimPrefix(r.URL.Path, "/api/claw/")
	endpoint := path[strings.LastIndex(path, "/")+1:]
	switch s.Next(endpoint) {
	case channeltest.Reset:
		channeltest.ResetConnection(w)
		return
	case channeltest.BadGateway:
		http.Error(w, "bad gateway", http.StatusBadGateway)
		return
	case channeltest.TooMany:
		w.Header().Set("Retry-After", "1")
		http.Error(w, `{"code":429,"message":"too many requests"}`, http.StatusTooManyRequests)
		return
	case channeltest.LoseAnswer:
		s.carry(path, body)
		channeltest.ResetConnection(w)
		return
	}
	switch path {
	case "sessions/list":
		s.mu.Lock()
		var list []map[string]string
		for id := range s.sessions {
			list = append(list, map[string]string{"sessionId": id, "converseId": "conv_" + id})
		}
		s.mu.Unlock()
		reply(w, map[string]any{"sessions": list})
	case "groups/get":
		s.mu.Lock()
		var list []map[string]any
		for id := range s.panels {
			list = append(list, map[string]any{"id": id, "type": 0})
		}
		s.mu.Unlock()
		reply(w, map[string]any{"panels": list})
	case "sessions/watch":
		s.watch(w, r, body)
	case "groups/panels/messages":
		id, _ := body["panelId"].(string)
		s.mu.Lock()
		p := s.panels[id]
		var out []map[string]any
		group := ""
		if p != nil {
			group = p.group
			for i := len(p.msgs) - 1; i >= 0 && len(out) < 100; i-- {
				out = append(out, p.msgs[i]) // newest first
			}
		}
		s.mu.Unlock()
		reply(w, map[string]any{"messages": out, "groupId": group})
	case "sessions/send", "groups/panels/send":
		reply(w, map[string]any{"messageId": s.carry(path, body)})
	default:
		http.NotFound(w, r)
	}
}

// carry records a send; it returns the new message's id.
func (s *Server) carry(path string, body map[string]any) string {
	if !strings.HasSuffix(path, "/send") {
		return ""
	}
	raw, _ := json.Marshal(body)
	var m Sent
	json.Unmarshal(raw, &m) //nolint:errcheck // our own encoding
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sent = append(s.sent, m)
	s.nextID++
	s.notify()
	return fmt.Sprintf("out_%d", s.nextID)
}

func (s *Server) watch(w http.ResponseWriter, r *http.Request, body map[string]any) {
	id, _ := body["sessionId"].(string)
	cursor, _ := body["cursor"].(float64)
	timeout, _ := body["timeoutMs"].(float64)
	deadline := time.Now().Add(time.Duration(timeout) * time.Millisecond)
	for {
		s.mu.Lock()
		evs, ok := s.sessions[id]
		var out []event
		for _, e := range evs {
			if e.Seq > int64(cursor) {
				out = append(out, e)
			}
		}
		cur := s.seq
		ch := s.changed
		if ch == nil {
			s.changed = make(chan struct{})
			ch = s.changed
		}
		s.mu.Unlock()
		if !ok {
			http.Error(w, `{"code":404,"message":"no such session"}`, http.StatusNotFound)
			return
		}
		if len(out) > 0 || time.Now().After(deadline) {
			reply(w, map[string]any{"sessionId": id, "cursor": cur, "events": out})
			return
		}
		select {
		case <-ch:
		case <-time.After(time.Until(deadline)):
		case <-r.Context().Done():
			return
		}
	}
}

// Say adds a message by author to a session and pushes it to subscribed
// sockets; it returns the message id.
func (s *Server) Say(session, author, content string) string {
	s.mu.Lock()
	s.seq++
	s.nextID++
	id := fmt.Sprintf("msg_%d", s.nextID)
	e := event{Seq: s.seq, Type: "message.add", Timestamp: time.Now().UTC().Format(time.RFC3339Nano), Payload: map[string]any{
		"messageId": id, "author": author, "content": content, "converseId": "conv_" + session, "authorInfo": map[string]any{"nickname": author},
	}}
	s.sessions[session] = append(s.sessions[session], e)
	var targets []*websocket.Conn
	for c, sub := range s.socks {
		if sub.sessions[session] {
			targets = append(targets, c)
		}
	}
	s.notify()
	s.mu.Unlock()
	for _, c := range targets {
		push(c, "claw.session.events", map[string]any{"sessionId": session, "cursor": e.Seq, "events": []event{e}})
	}
	return id
}

// Post adds a message to a panel (meta may say it mentions someone) and
// pushes it to subscribed sockets; it returns the message id.
func (s *Server) Post(panelID, author, content string, meta map[string]any) string {
	s.mu.Lock()
	p := s.panels[panelID]
	s.nextID++
	id := fmt.Sprintf("msg_%d", s.nextID)
	m := map[string]any{"messageId": id, "_id": id, "author": author, "content": content, "meta": meta, "groupId": p.group,
		"converseId": panelID, "createdAt": time.Now().UTC().Format(time.RFC3339Nano), "authorInfo": map[string]any{"nickname": author}}
	p.msgs = append(p.msgs, m)
	var targets []*websocket.Conn
	for c, sub := range s.socks {
		if sub.panels {
			targets = append(targets, c)
		}
	}
	s.notify()
	s.mu.Unlock()
	for _, c := range targets {
		push(c, "notify:chat.message.add", m)
	}
	return id
}

func push(c *websocket.Conn, name string, payload any) {
	data, _ := json.Marshal([]any{name, payload})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c.Write(ctx, websocket.MessageText, append([]byte("42"), data...)) //nolint:errcheck // a gone client polls instead
}

func (s *Server) socket(w http.ResponseWriter, r *http.Request) {
	if s.NoSocket || r.URL.Query().Get("EIO") != "4" || r.URL.Query().Get("transport") != "websocket" {
		http.NotFound(w, r)
		return
	}
	if s.Next("socket") == channeltest.Reset {
		channeltest.ResetConnection(w)
		return
	}
	c, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	defer c.CloseNow() //nolint:errcheck // closed either way
	ctx := r.Context()
	open, _ := json.Marshal(map[string]any{"sid": "eio1", "upgrades": []string{}, "pingInterval": s.PingInterval.Milliseconds(), "pingTimeout": 1000, "maxPayload": 1000000})
	if c.Write(ctx, websocket.MessageText, append([]byte("0"), open...)) != nil {
		return
	}
	_, p, err := c.Read(ctx)
	if err != nil || !strings.HasPrefix(string(p), "40") {
		return
	}
	var auth struct{ Token string }
	json.Unmarshal(p[2:], &auth) //nolint:errcheck // checked below
	if auth.Token != s.Token {
		c.Write(ctx, websocket.MessageText, []byte(`44{"message":"invalid token"}`)) //nolint:errcheck // going away
		return
	}
	c.Write(ctx, websocket.MessageText, []byte(`40{"sid":"sio1"}`)) //nolint:errcheck // the read fails next if gone
	sub := &subs{sessions: map[string]bool{}}
	s.mu.Lock()
	s.socks[c] = sub
	s.connects++
	s.notify()
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.socks, c)
		s.notify()
		s.mu.Unlock()
	}()
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(s.PingInterval):
				if c.Write(ctx, websocket.MessageText, []byte("2")) != nil {
					return
				}
			}
		}
	}()
	for {
		_, p, err := c.Read(ctx)
		if err != nil {
			return
		}
		msg := string(p)
		if !strings.HasPrefix(msg, "42") {
			continue // pongs
		}
		i := 2
		for i < len(msg) && msg[i] >= '0' && msg[i] <= '9' {
			i++
		}
		ackID := msg[2:i]
		var args []json.RawMessage
		if json.Unmarshal([]byte(msg[i:]), &args) != nil || len(args) < 2 {
			continue
		}
		var name string
		json.Unmarshal(args[0], &name) //nolint:errcheck // unknown names get a refusal
		var ack any
		switch name {
		case "com.claw.im.subscribeSessions":
			var req struct {
				SessionIDs []string         `json:"sessionIds"`
				Cursors    map[string]int64 `json:"cursors"`
			}
			json.Unmarshal(args[1], &req) //nolint:errcheck // empty lists subscribe nothing
			var items []map[string]any
			s.mu.Lock()
			for _, id := range req.SessionIDs {
				sub.sessions[id] = true
				var evs []event
				for _, e := range s.sessions[id] {
					if e.Seq > req.Cursors[id] {
						evs = append(evs, e)
					}
				}
				items = append(items, map[string]any{"sessionId": id, "cursor": s.seq, "events": evs})
			}
			s.mu.Unlock()
			ack = map[string]any{"result": true, "data": map[string]any{"sessions": items}}
		case "com.claw.im.subscribePanels":
			s.mu.Lock()
			sub.panels = true
			s.mu.Unlock()
			ack = map[string]any{"result": true}
		default:
			ack = map[string]any{"result": false, "message": "unknown event " + name}
		}
		if ackID != "" {
			data, _ := json.Marshal([]any{ack})
			c.Write(ctx, websocket.MessageText, append([]byte("43"+ackID), data...)) //nolint:errcheck // the read fails next if gone
		}
	}
}

// Close stops the server: its sockets are closed, and connections
// refused from now on.
func (s *Server) Close() {
	s.Drop()
	s.srv.CloseClientConnections()
	s.srv.Close()
}

// Drop closes every socket, as a server restart does.
func (s *Server) Drop() {
	s.mu.Lock()
	var cs []*websocket.Conn
	for c := range s.socks {
		cs = append(cs, c)
		delete(s.socks, c)
	}
	s.notify()
	s.mu.Unlock()
	for _, c := range cs {
		c.CloseNow() //nolint:errcheck // dropped on purpose
	}
}

// WaitSocket waits until a socket has subscribed (n connections so far
// at least).
func (s *Server) WaitSocket(t testing.TB, n int) {
	t.Helper()
	s.wait(t, "a socket connection "+strconv.Itoa(n), func() bool { return s.connects >= n && len(s.socks) > 0 })
}

// Connects is how many sockets connected so far.
func (s *Server) Connects() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.connects
}

// Sent are the messages the agent sent, in order.
func (s *Server) Sent() []Sent {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Sent(nil), s.sent...)
}

// WaitSent waits until n messages were sent and returns them.
func (s *Server) WaitSent(t testing.TB, n int) []Sent {
	t.Helper()
	s.wait(t, "sent messages", func() bool { return len(s.sent) >= n })
	return s.Sent()
}
