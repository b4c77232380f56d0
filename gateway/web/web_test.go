package web

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"

	"github.com/nbots/nb/agent"
	"github.com/nbots/nb/gateway"
	"github.com/nbots/nb/gateway/access"
	"github.com/nbots/nb/gateway/bus"
	"github.com/nbots/nb/gateway/channel"
	"github.com/nbots/nb/gateway/dispatch"
	"github.com/nbots/nb/gateway/replica"
	"github.com/nbots/nb/gateway/session"
	"github.com/nbots/nb/internal/httpguard"
	"github.com/nbots/nb/provider"
	"github.com/nbots/nb/state"
	"github.com/nbots/nb/tool"
)

// fakeRunner streams "echo: <input>" and calls a tool first when asked.
type fakeRunner struct{}

func (fakeRunner) Model() string { return "fake/echo" }

func (fakeRunner) Run(ctx context.Context, t gateway.Turn) (gateway.Answer, error) {
	in := t.Input
	t.Conversation.Append(state.Event{Who: "user", Message: in, Input: &in})
	if strings.Contains(in, "tool") {
		t.OnEvent(agent.Event{Kind: agent.RoundEnd, Calls: []tool.Call{{Name: "read_file", Arguments: map[string]any{"path": "notes.md"}}}})
	}
	t.OnEvent(agent.Event{Kind: agent.TextDelta, Text: "echo: "})
	t.OnEvent(agent.Event{Kind: agent.TextDelta, Text: in})
	t.OnEvent(agent.Event{Kind: agent.RoundEnd, Usage: provider.Usage{InputTokens: 3}})
	t.Conversation.Append(state.Event{Who: "AI", Message: "echo: " + in})
	return gateway.Answer{Text: "echo: " + in}, nil
}

func start(t *testing.T) (*httptest.Server, *gateway.Gateway) {
	t.Helper()
	return startWith(t, nil)
}

// startWith is start with the server's options changed by configure.
func startWith(t *testing.T, configure func(*Server)) (*httptest.Server, *gateway.Gateway) {
	t.Helper()
	dir := t.TempDir()
	sm, _ := session.NewManager(dir + "/sessions")
	t.Cleanup(func() { sm.Close() })
	b := bus.NewLocal()
	t.Cleanup(func() { b.Close() })
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	g := &gateway.Gateway{Bus: b, Sessions: sm, Runner: fakeRunner{}, Prompt: &gateway.Prompt{Workspace: dir}, Log: log,
		Access: &access.Checker{Pairings: &access.FilePairings{Path: dir + "/pairing.json"}}}
	g.Alone()
	s := &Server{Gateway: g, Sessions: sm, Log: log}
	if configure != nil {
		configure(s)
	}
	d := &dispatch.Dispatcher{Bus: b, Channels: []channel.Channel{s}, Log: log, Progress: true, ToolHints: true, Delivered: &replica.Local{}}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go g.Run(ctx)
	go d.Run(ctx)
	g.Expect("web", "telegram")
	go g.RunChannel(ctx, s)
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	return srv, g
}

// dial opens the web chat's websocket on srv as the page does (its own
// Origin), for the test's next 10 s.
func dial(t *testing.T, srv *httptest.Server) (context.Context, *websocket.Conn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http")+"/ws", &websocket.DialOptions{HTTPHeader: http.Header{"Origin": {srv.URL}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.CloseNow() })
	return ctx, ws
}

func TestWebChatOverWebsocket(t *testing.T) {
	srv, g := start(t)
	ctx, ws := dial(t, srv)
	var f Frame
	if err := wsjson.Read(ctx, ws, &f); err != nil || f.Type != "sessions" {
		t.Fatal(f, err)
	}
	wsjson.Write(ctx, ws, Frame{Type: "message", ChatID: "c1", Content: "use a tool"})
	var kinds []string
	for {
		if err := wsjson.Read(ctx, ws, &f); err != nil {
			t.Fatal(err)
		}
		kinds = append(kinds, f.Type)
		if f.Type == "message" {
			break
		}
	}
	if f.Content != "echo: use a tool" || f.ChatID != "c1" || !strings.Contains(strings.Join(kinds, ","), "tool_hint") {
		t.Fatalf("%+v after %v", f, kinds)
	}
	// The session list follows the answer.
	if err := wsjson.Read(ctx, ws, &f); err != nil || f.Type != "sessions" || len(f.Sessions) != 1 || f.Sessions[0].ChatID != "c1" {
		t.Fatalf("%+v %v", f, err)
	}
	sess, _ := g.Sessions.Get(t.Context(), "web:c1")
	if sess.Len() != 2 {
		t.Fatal(sess.Len())
	}
	wsjson.Write(ctx, ws, Frame{Type: "bogus"})
	if wsjson.Read(ctx, ws, &f); f.Type != "error" || !strings.Contains(f.Content, "unknown frame type") {
		t.Fatal(f)
	}
}

func TestBrowserChecks(t *testing.T) {
	srv, _ := start(t)
	get := func(path string, h map[string]string) (int, string) {
		req, _ := http.NewRequest("GET", srv.URL+path, nil)
		for k, v := range h {
			if k == "Host" {
				req.Host = v
			} else {
				req.Header.Set(k, v)
			}
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("/health", nil); code != 200 || !strings.Contains(body, `"ok"`) {
		t.Fatal(code, body)
	}
	if code, body := get("/", nil); code != 200 || !strings.Contains(body, "<title>nb gateway</title>") {
		t.Fatal(code, body)
	}
	if code, body := get("/ws", map[string]string{"Origin": "https://evil.example"}); code != 403 || !strings.Contains(body, "evil.example") {
		t.Fatal(code, body)
	}
	if code, body := get("/", map[string]string{"Host": "rebind.example:18790"}); code != 403 || !strings.Contains(body, "DNS rebinding") {
		t.Fatal(code, body)
	}
	// /ready waits for every channel: telegram never connected.
	code, body := get("/ready", nil)
	var r struct {
		Ready    bool
		Channels map[string]string
	}
	json.Unmarshal([]byte(body), &r)
	if code != 503 || r.Ready || r.Channels["web"] != "connected" || r.Channels["telegram"] != "connecting" {
		t.Fatal(code, body)
	}
}

func TestTokens(t *testing.T) {
	srv, g := start(t)
	tok, _ := httpguard.NewToken("", "0123456789abcdef0123")
	s := &Server{Gateway: g, Sessions: g.Sessions, Tokens: []*httpguard.Token{tok}, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	h := s.Handler()
	for _, tc := range []struct {
		path, auth string
		host       string
		want       int
	}{
		{"/ready", "", "", 401},
		{"/ready", "Bearer nope-nope-nope-nope", "", 401},
		{"/ready", "Bearer 0123456789abcdef0123", "", 503},
		{"/ready?token=0123456789abcdef0123", "", "", 503},
		{"/health", "", "", 200},
		{"/", "", "assistant.example:18790", 200}, // with a token, any name may serve the page
	} {
		req := httptest.NewRequest("GET", tc.path, nil)
		if tc.auth != "" {
			req.Header.Set("Authorization", tc.auth)
		}
		if tc.host != "" {
			req.Host = tc.host
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != tc.want {
			t.Errorf("%s %q: %d, want %d: %s", tc.path, tc.auth, w.Code, tc.want, w.Body)
		}
		if got := w.Header().Get("WWW-Authenticate"); (w.Code == 401) != (got == `Bearer realm="nb gateway"`) {
			t.Errorf("%s %q: %d with WWW-Authenticate %q", tc.path, tc.auth, w.Code, got)
		}
	}
	_ = srv
}

// TestSessionsListBounded: a "sessions" frame lists the listedSessions
// chats updated last, the newest first, however many chats the gateway
// has seen (it goes to the chat's sockets at every new chat).
func TestSessionsListBounded(t *testing.T) {
	const chats = 3 * listedSessions
	base := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	srv, _ := startWith(t, func(s *Server) {
		s.chats = map[string]int64{}
		for i := range chats {
			s.chats["old-"+strconv.Itoa(i)] = base.Add(time.Duration(i) * time.Minute).UnixNano()
		}
	})
	ctx, ws := dial(t, srv)
	ws.SetReadLimit(1 << 20)
	// check compares a frame with the sessions wanted: first (when not
	// empty), then the old chats from the newest on.
	check := func(when string, f Frame, first string) {
		t.Helper()
		var want []string
		if first != "" {
			want = append(want, first)
		}
		for i := chats - 1; len(want) < listedSessions; i-- {
			want = append(want, "old-"+strconv.Itoa(i))
		}
		var got []string
		for _, si := range f.Sessions {
			got = append(got, si.ChatID)
		}
		if f.Type != "sessions" || !slices.Equal(got, want) {
			t.Fatalf("%s: %s frame of %d sessions, want sessions of %d: got %.80v…, want %.80v…", when, f.Type, len(got), len(want), got, want)
		}
	}
	var f Frame
	if err := wsjson.Read(ctx, ws, &f); err != nil {
		t.Fatal(err)
	}
	check("on connect", f, "")
	wsjson.Write(ctx, ws, Frame{Type: "message", ChatID: "new", Content: "hi"})
	for f.Type != "message" {
		if err := wsjson.Read(ctx, ws, &f); err != nil {
			t.Fatal(err)
		}
	}
	if err := wsjson.Read(ctx, ws, &f); err != nil {
		t.Fatal(err)
	}
	check("after a new chat", f, "new")
}

// TestSocketsForgottenOnClose: a socket subscribed to many chats and
// closed leaves no room for them in the server's map of sockets (a Go
// map keeps the room of the most entries it held).
func TestSocketsForgottenOnClose(t *testing.T) {
	var s *Server
	srv, _ := startWith(t, func(srv *Server) { s = srv })
	ctx, ws := dial(t, srv)
	const chats = 300
	for i := range chats {
		if err := wsjson.Write(ctx, ws, Frame{Type: "subscribe", ChatID: "c" + strconv.Itoa(i)}); err != nil {
			t.Fatal(err)
		}
	}
	subscribed := func() (int, bool) {
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(s.conns), s.conns == nil
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if n, _ := subscribed(); n == chats {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the socket was not subscribed to its chats")
		}
	}
	ws.Close(websocket.StatusNormalClosure, "")
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, gone := subscribed(); gone {
			break
		}
		if time.Now().After(deadline) {
			n, _ := subscribed()
			t.Fatalf("the closed socket's chats are still in the server's map (%d entries, or its room for %d)", n, chats)
		}
	}
}
