// Package web is the gateway's HTTP listener: GET /health, GET /ready, the
// web chat page at / (one static page embedded in the binary) and its
// websocket at /ws, which programs use too. It is also the "web" channel:
// the dispatcher delivers the assistant's messages to the sockets of the
// chat. Without tokens it answers only requests addressed to a loopback
// name and pages of its own origin, as nb serve does.
package web

import (
	"container/heap"
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"

	"github.com/nbots/nb/connlimit"
	"github.com/nbots/nb/gateway"
	"github.com/nbots/nb/gateway/bus"
	"github.com/nbots/nb/gateway/channel"
	"github.com/nbots/nb/gateway/session"
	"github.com/nbots/nb/gateway/webgate"
	"github.com/nbots/nb/internal/httpguard"
	"github.com/nbots/nb/internal/metric"
)

//go:embed chat.html
var page []byte

// Frame is a websocket message, both ways.
type Frame struct {
	// Type is "message" (in and out), "progress", "tool_hint", "error",
	// "sessions" (out) and "subscribe" (in).
	Type    string `json:"type"`
	ChatID  string `json:"chat_id,omitempty"`
	Content string `json:"content,omitempty"`
	// Sessions lists the web chat's sessions ("sessions" frames): the
	// 200 updated last, the newest first.
	Sessions []SessionInfo `json:"sessions,omitempty"`
}

// SessionInfo is one entry of the session list.
type SessionInfo struct {
	ChatID    string    `json:"chat_id"`
	UpdatedAt time.Time `json:"updated_at"`
}

// Server is the listener and the web channel.
type Server struct {
	Gateway  *gateway.Gateway
	Sessions *session.Manager
	// Tokens, when set, are required (Authorization: Bearer, or ?token=
	// for the page's websocket); without them only loopback requests of
	// the page's own origin are answered.
	Tokens []*httpguard.Token
	Log    *slog.Logger
	// MaxFrame bounds an incoming frame (default 1 MiB).
	MaxFrame int64
	// Webhooks are the platform channels served by path on the listener
	// (POST only), outside the token and Host checks: each authenticates
	// its platform itself (channel.Webhook).
	Webhooks map[string]http.Handler
	// Checks are what GET /ready checks besides the channels (the stores
	// the gateway must reach); a failed one is reported by name.
	Checks []httpguard.Check
	// Limits bound the listener's connections, their deadlines and
	// request bodies (zero fields: connlimit.DefaultLimits, nb serve's).
	Limits connlimit.Limits
	// Gates are the pipelines' human gates asked in the web chat
	// (human.channel="web:<chat>"): their questions are shown in their
	// chats, and a message written in a chat with a gate waiting goes to
	// the gate, not to the assistant (nil: none).
	Gates *webgate.Board
	// Metrics serves GET /metrics (package internal/metric) behind the
	// listener's tokens and Host checks.
	Metrics bool
	// Control, when set, answers /control and below (the control page,
	// package internal/control), which checks tokens, Origin and Host
	// itself.
	Control http.Handler

	mu    sync.Mutex
	conns map[string]map[*conn]bool // chat -> sockets
	// chats are the web sessions and when they were last answered, read
	// from the sessions folder once, then kept up to date here: a reply
	// must not cost a listing of every session file. The times are
	// Unix nanoseconds: 8 bytes an entry where a time.Time is 24.
	chats map[string]int64
}

type conn struct {
	ws *websocket.Conn
	mu sync.Mutex
}

func (c *conn) write(ctx context.Context, f Frame) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return wsjson.Write(ctx, c.ws, f)
}

func (s *Server) log() *slog.Logger {
	if s.Log != nil {
		return s.Log
	}
	return slog.Default()
}

// ShutdownTimeout is how long Serve waits, once its context ends, for
// the requests in progress.
const ShutdownTimeout = 5 * time.Second

// Serve serves the listener on lns until ctx ends, then waits up to
// ShutdownTimeout for the requests in progress. It returns the first
// listener's failure (which stops the others), nil after ctx ended.
func (s *Server) Serve(ctx context.Context, lns ...net.Listener) error {
	lim := s.Limits.WithDefaults()
	conns := connlimit.New(lim.MaxClientConns, lim.MaxConns, nil, "raise gateway.limits.clientConns in the gateway's configuration")
	hs := conns.Server(s.Handler(), lim, s.log())
	failed := make(chan error, len(lns))
	var wg sync.WaitGroup
	for _, ln := range lns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := hs.Serve(conns.Listen(ln)); !errors.Is(err, http.ErrServerClosed) {
				failed <- fmt.Errorf("listener %s: %w", ln.Addr(), err)
			}
		}()
	}
	var err error
	select {
	case <-ctx.Done():
	case err = <-failed:
	}
	shut, cancel := context.WithTimeout(context.WithoutCancel(ctx), ShutdownTimeout)
	defer cancel()
	if hs.Shutdown(shut) != nil {
		hs.Close() //nolint:errcheck // the requests still running are cut
	}
	wg.Wait()
	return err
}

// Start serves the listener on lns within Limits (see Serve) and
// returns what stops it: stop closes the listeners and waits, until ctx
// ends, for the requests in progress.
func (s *Server) Start(lns ...net.Listener) (stop func(ctx context.Context) error) {
	lim := s.Limits.WithDefaults()
	conns := connlimit.New(lim.MaxClientConns, lim.MaxConns, nil, "raise gateway.limits.clientConns in the gateway's configuration")
	hs := conns.Server(s.Handler(), lim, s.log())
	for _, ln := range lns {
		go hs.Serve(conns.Listen(ln)) //nolint:errcheck // ErrServerClosed at shutdown
	}
	return func(ctx context.Context) error {
		if err := hs.Shutdown(ctx); err != nil {
			return hs.Close()
		}
		return nil
	}
}

// Handler routes the listener's requests.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"status": "ok"})
	})
	mux.HandleFunc("GET /ready", func(w http.ResponseWriter, r *http.Request) {
		ready, chans := s.Gateway.Ready()
		body := map[string]any{"channels": chans}
		if len(s.Checks) > 0 {
			ok, checks := httpguard.RunChecks(r.Context(), s.Checks)
			ready = ready && ok
			body["checks"] = checks
		}
		body["ready"] = ready
		status := http.StatusOK
		if !ready {
			status = http.StatusServiceUnavailable
		}
		writeJSON(w, status, body)
	})
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Type", "text/html; charset=utf-8")
		h.Set("Content-Security-Policy", "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		w.Write(page) //nolint:errcheck // the client may have gone
	})
	mux.HandleFunc("GET /ws", s.serveWS)
	if s.Metrics {
		mux.Handle("GET /metrics", metric.Handler())
	}
	guarded := s.guard(mux)
	if len(s.Webhooks) == 0 && s.Control == nil {
		return metric.Middleware(metric.Gateway, guarded)
	}
	// A platform's webhook is called by the platform, which has no token
	// of ours and no loopback Host: the channel checks the platform's own
	// secret instead. The control page checks its own login.
	top := http.NewServeMux()
	for path, h := range s.Webhooks {
		top.Handle("POST "+path, h)
	}
	if s.Control != nil {
		top.Handle("/control", s.Control)
		top.Handle("/control/", s.Control)
	}
	top.Handle("/", guarded)
	return metric.Middleware(metric.Gateway, top)
}

// guard applies nb serve's rules: with tokens, a valid token (except for
// /health); without, a loopback Host and no foreign Origin.
func (s *Server) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(s.Tokens) > 0 {
			if r.URL.Path != "/health" && r.URL.Path != "/" {
				if tok := r.URL.Query().Get("token"); tok != "" && r.Header.Get("Authorization") == "" {
					r.Header.Set("Authorization", "Bearer "+tok)
				}
				if _, err := httpguard.Authenticate(s.Tokens, r); err != nil {
					// A 401 names the scheme it wants (RFC 9110, 15.5.2),
					// as nb serve's, nb mcp serve's and the robopages API's.
					w.Header().Set("WWW-Authenticate", `Bearer realm="nb gateway"`)
					writeJSON(w, http.StatusUnauthorized, map[string]any{"error": err.Error()})
					return
				}
			}
		} else if la, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok && httpguard.IsLoopbackAddr(la.String()) && !httpguard.IsLoopbackHost(r.Host) {
			writeJSON(w, http.StatusForbidden, map[string]any{"error": fmt.Sprintf("the gateway has no token, so it answers only requests addressed to localhost, 127.0.0.1 or ::1, not %q (a web page could reach it through DNS rebinding)", r.Host)})
			return
		}
		if o := r.Header.Get("Origin"); o != "" && !sameOrigin(o, r) {
			writeJSON(w, http.StatusForbidden, map[string]any{"error": fmt.Sprintf("the gateway does not answer the web page of origin %q: only its own page", o)})
			return
		}
		next.ServeHTTP(w, r)
	})
}

// sameOrigin tells whether origin is the page the gateway served itself.
func sameOrigin(origin string, r *http.Request) bool {
	u, err := url.Parse(origin)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		return false
	}
	return strings.EqualFold(u.Host, r.Host)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v) //nolint:errcheck // the client may have gone
}

func (s *Server) serveWS(w http.ResponseWriter, r *http.Request) {
	// Origin was checked by guard (its own page, or no browser at all).
	ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
	if err != nil {
		return
	}
	limit := s.MaxFrame
	if limit <= 0 {
		limit = 1 << 20
	}
	ws.SetReadLimit(limit)
	c := &conn{ws: ws}
	ctx := r.Context()
	defer func() {
		s.mu.Lock()
		for chat, set := range s.conns {
			delete(set, c)
			if len(set) == 0 {
				delete(s.conns, chat)
			}
		}
		if len(s.conns) == 0 {
			// A Go map keeps the room of the most entries it held: a
			// socket that talked in 10,000 chats left 400 KB of it.
			s.conns = nil
		}
		s.mu.Unlock()
		ws.Close(websocket.StatusNormalClosure, "")
	}()
	s.sendSessions(ctx, c)
	for {
		var f Frame
		if err := wsjson.Read(ctx, ws, &f); err != nil {
			var ce websocket.CloseError
			if !errors.As(err, &ce) && ctx.Err() == nil && !errors.Is(err, net.ErrClosed) {
				c.write(ctx, Frame{Type: "error", Content: "bad frame: " + err.Error()}) //nolint:errcheck // closing anyway
			}
			return
		}
		switch f.Type {
		case "subscribe":
			if f.ChatID != "" {
				s.subscribe(f.ChatID, c)
				s.showGate(ctx, f.ChatID, c)
			}
		case "sessions":
			s.sendSessions(ctx, c)
		case "message":
			chat := strings.TrimSpace(f.ChatID)
			if chat == "" || len(chat) > 128 || strings.ContainsAny(chat, "/\\\x00") {
				c.write(ctx, Frame{Type: "error", Content: "chat_id must be 1 to 128 characters, without / or \\"}) //nolint:errcheck // the client is told if it listens
				continue
			}
			s.subscribe(chat, c)
			if s.Gates != nil {
				taken, err := s.Gates.Answer(chat, f.Content, time.Now())
				if err != nil {
					c.write(ctx, Frame{Type: "error", ChatID: chat, Content: "not taken: " + err.Error()}) //nolint:errcheck // same
				}
				if taken {
					continue
				}
			}
			m := bus.Inbound{Channel: gateway.WebChannel, ID: newID(), SenderID: "web", ChatID: chat, Content: f.Content, Timestamp: time.Now(),
				Metadata: map[string]any{gateway.MetaWebAuthenticated: true}}
			if err := s.Gateway.Inbox(gateway.WebChannel).Publish(ctx, m); err != nil {
				c.write(ctx, Frame{Type: "error", ChatID: chat, Content: "not queued: " + err.Error()}) //nolint:errcheck // same
			}
		default:
			c.write(ctx, Frame{Type: "error", Content: fmt.Sprintf("unknown frame type %q: send {\"type\":\"message\",\"chat_id\":…,\"content\":…}", f.Type)}) //nolint:errcheck // same
		}
	}
}

// showGate shows c the question of a pipeline's gate waiting in chat.
func (s *Server) showGate(ctx context.Context, chat string, c *conn) {
	if s.Gates == nil {
		return
	}
	if q, ok := s.Gates.Show(chat); ok {
		c.write(ctx, Frame{Type: string(bus.Message), ChatID: chat, Content: q}) //nolint:errcheck // the socket's reader ends it
	}
}

func (s *Server) subscribe(chat string, c *conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conns == nil {
		s.conns = map[string]map[*conn]bool{}
	}
	if s.conns[chat] == nil {
		s.conns[chat] = map[*conn]bool{}
	}
	s.conns[chat][c] = true
}

// loadChatsLocked reads the web sessions from the sessions folder, once
// (again at the next call when ctx ended before they were read).
func (s *Server) loadChatsLocked(ctx context.Context) {
	if s.chats != nil {
		return
	}
	list, err := s.Sessions.List(ctx)
	if err != nil && ctx.Err() != nil {
		return
	}
	s.chats = map[string]int64{}
	if err != nil {
		s.log().Warn("web chat: cannot list the sessions", "error", err)
		return
	}
	for _, i := range list {
		if chat, ok := strings.CutPrefix(i.Key, gateway.WebChannel+":"); ok {
			s.chats[chat] = i.UpdatedAt.UnixNano()
		}
	}
}

// answered records that chat was answered; it reports whether the chat
// is new to the list.
func (s *Server) answered(ctx context.Context, chat string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.loadChatsLocked(ctx)
	if s.chats == nil {
		return false // ctx ended: read at the next call, this chat with them
	}
	_, known := s.chats[chat]
	s.chats[chat] = time.Now().UnixNano()
	return !known
}

// listedSessions is how many sessions a "sessions" frame lists at most:
// the ones updated last. The list goes to a chat's sockets at each new
// chat, so a gateway that had seen 10,000 chats sent the whole list
// (about 800 KB of JSON, sorted and encoded) at every new one.
const listedSessions = 200

func (s *Server) sendSessions(ctx context.Context, c *conn) {
	s.mu.Lock()
	s.loadChatsLocked(ctx)
	out := make(sessionHeap, 0, min(len(s.chats), listedSessions))
	for chat, at := range s.chats {
		switch {
		case len(out) < listedSessions:
			heap.Push(&out, SessionInfo{ChatID: chat, UpdatedAt: time.Unix(0, at)})
		case at > out[0].UpdatedAt.UnixNano():
			out[0] = SessionInfo{ChatID: chat, UpdatedAt: time.Unix(0, at)}
			heap.Fix(&out, 0)
		}
	}
	s.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].UpdatedAt.After(out[j].UpdatedAt) })
	c.write(ctx, Frame{Type: "sessions", Sessions: out}) //nolint:errcheck // the socket's reader ends it
}

// sessionHeap keeps the sessions updated last, the oldest of them first
// (container/heap).
type sessionHeap []SessionInfo

func (h sessionHeap) Len() int           { return len(h) }
func (h sessionHeap) Less(i, j int) bool { return h[i].UpdatedAt.Before(h[j].UpdatedAt) }
func (h sessionHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *sessionHeap) Push(x any)        { *h = append(*h, x.(SessionInfo)) }
func (h *sessionHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// Name implements channel.Channel.
func (s *Server) Name() string { return gateway.WebChannel }

// Capabilities implements channel.Channel.
func (s *Server) Capabilities() channel.Capabilities {
	return channel.Capabilities{Markdown: channel.CommonMark, Edits: true}
}

// Run implements channel.Channel: the listener is served by the caller;
// the channel is ready at once. It delivers the pipelines' gates
// (Gates) until ctx ends.
func (s *Server) Run(ctx context.Context, in channel.Inbox, ready func()) error {
	ready()
	if s.Gates == nil {
		<-ctx.Done()
		return nil
	}
	return s.Gates.Run(ctx, func(ctx context.Context, chat, content string) error {
		_, err := s.Send(ctx, bus.Outbound{Kind: bus.Message, ChatID: chat, Content: content})
		return err
	})
}

// Edit implements channel.Editor: a progress frame replaces the last one
// on the page.
func (s *Server) Edit(ctx context.Context, chatID, id, content string) error {
	_, err := s.Send(ctx, bus.Outbound{Kind: bus.Progress, ChatID: chatID, Content: content})
	return err
}

// Send implements channel.Channel: the frame goes to every socket of the
// chat; with none, the message is undeliverable.
func (s *Server) Send(ctx context.Context, m bus.Outbound) (string, error) {
	s.mu.Lock()
	var targets []*conn
	for c := range s.conns[m.ChatID] {
		targets = append(targets, c)
	}
	s.mu.Unlock()
	if len(targets) == 0 {
		return "", &channel.Undeliverable{Reason: "no web chat is open on chat " + m.ChatID}
	}
	kind := string(m.Kind)
	if kind == "" {
		kind = string(bus.Message)
	}
	f := Frame{Type: kind, ChatID: m.ChatID, Content: m.Content}
	delivered := 0
	var last error
	for _, c := range targets {
		if err := c.write(ctx, f); err != nil {
			last = err
			continue
		}
		delivered++
	}
	if delivered == 0 {
		return "", &channel.Undeliverable{Reason: fmt.Sprintf("the web chat of %s went away: %v", m.ChatID, last)}
	}
	if m.Kind == bus.Message && s.answered(ctx, m.ChatID) {
		for _, c := range targets {
			s.sendSessions(ctx, c) // a new session in the list
		}
	}
	return "progress", nil
}

func newID() string {
	var b [12]byte
	rand.Read(b[:]) //nolint:errcheck // never fails
	return hex.EncodeToString(b[:])
}
