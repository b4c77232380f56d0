package mcpserver

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/nbots/nb/bot"
	"github.com/nbots/nb/provider/openai/openaitest"
	"github.com/nbots/nb/provider/providertest"

	_ "github.com/nbots/nb/provider/openai"
)

// setup writes files into a folder and serves an OpenAI fake with brain.
func setup(t *testing.T, brain providertest.Brain, files map[string]string) (dir string, host bot.Host) {
	t.Helper()
	srv := httptest.NewServer(openaitest.New(brain))
	t.Cleanup(srv.Close)
	dir = t.TempDir()
	for name, body := range files {
		path := filepath.Join(dir, name)
		os.MkdirAll(filepath.Dir(path), 0o755)
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	host = bot.Host{Environ: []string{
		"OPENAI_API_ADDRESS=" + srv.URL, "OPENAI_API_KEY=k", "PATH=" + os.Getenv("PATH"),
		"NANO_BOTS_STATE_PATH=" + filepath.Join(dir, "state"),
	}, AllowMCP: true}
	return dir, host
}

const provider = `provider:
  id: openai
  credentials: {address: ENV/OPENAI_API_ADDRESS, access-token: ENV/OPENAI_API_KEY}
  settings: {model: gpt-4o}
`

// connect serves s to an in-process client.
func connect(t *testing.T, s *Server, opts *sdk.ClientOptions) *sdk.ClientSession {
	t.Helper()
	return connectVersion(t, s, opts, "")
}

// connectVersion connects with a protocol version ("" for the latest).
func connectVersion(t *testing.T, s *Server, opts *sdk.ClientOptions, version string) *sdk.ClientSession {
	t.Helper()
	ct, st := sdk.NewInMemoryTransports()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.mcp.Run(ctx, st)
	}()
	sess, err := sdk.NewClient(&sdk.Implementation{Name: "test"}, opts).Connect(context.Background(), ct, &sdk.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sess.Close()
		cancel()
		<-done
		s.Close()
	})
	return sess
}

func text(t *testing.T, res *sdk.CallToolResult) string {
	t.Helper()
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

func TestToolsAndAsk(t *testing.T) {
	dir, host := setup(t, providertest.Echo, map[string]string{
		"writer.yml":    "meta: {name: Writer, description: Writes things.}\n" + provider,
		"pages/say.yml": "functions:\n  say:\n    description: Says the text back.\n    parameters:\n      text: {type: string, description: What to say.}\n    cmdline: [echo, '${text}']\n",
		"notes.txt":     "not a cartridge",
	})
	s, err := New(context.Background(), Config{Host: host, Paths: []string{filepath.Join(dir, "writer.yml"), filepath.Join(dir, "pages")}})
	if err != nil {
		t.Fatal(err)
	}
	sess := connect(t, s, nil)
	list, err := sess.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range list.Tools {
		names = append(names, tl.Name)
	}
	if strings.Join(names, ",") != "say,writer" {
		t.Fatalf("tools %v", names)
	}
	for _, tl := range list.Tools {
		if tl.Name == "writer" && (tl.Title != "Writer" || !strings.Contains(tl.Description, "Writes things.")) {
			t.Errorf("writer: %+v", tl)
		}
	}

	res, err := sess.CallTool(context.Background(), &sdk.CallToolParams{Name: "writer", Arguments: map[string]any{"message": "hello"}})
	if err != nil || res.IsError || text(t, res) != "echo: hello" {
		t.Fatalf("writer: %+v %q, %v", res, text(t, res), err)
	}
	res, err = sess.CallTool(context.Background(), &sdk.CallToolParams{Name: "say", Arguments: map[string]any{"text": "from a page"}})
	if err != nil || res.IsError || strings.TrimSpace(text(t, res)) != "from a page" {
		t.Fatalf("say: %+v %q, %v", res, text(t, res), err)
	}
	res, err = sess.CallTool(context.Background(), &sdk.CallToolParams{Name: "writer", Arguments: map[string]any{}})
	if err != nil || !res.IsError || !strings.Contains(text(t, res), "message is empty") {
		t.Errorf("no message: %+v, %v", res, err)
	}
}

func TestStateKey(t *testing.T) {
	var mu sync.Mutex
	var seen []int
	brain := func(turn providertest.Turn) providertest.Reply {
		mu.Lock()
		seen = append(seen, len(turn.Messages))
		mu.Unlock()
		return providertest.Echo(turn)
	}
	dir, host := setup(t, brain, map[string]string{"bot.yml": "meta: {author: test, name: keyed}\n" + provider})
	s, err := New(context.Background(), Config{Host: host, Paths: []string{filepath.Join(dir, "bot.yml")}})
	if err != nil {
		t.Fatal(err)
	}
	sess := connect(t, s, nil)
	for _, args := range []map[string]any{{"message": "one", "state": "k"}, {"message": "two", "state": "k"}, {"message": "three"}} {
		if _, err := sess.CallTool(context.Background(), &sdk.CallToolParams{Name: "bot", Arguments: args}); err != nil {
			t.Fatal(err)
		}
	}
	// The second call on key k sees the first exchange; the third, without
	// a key, starts afresh.
	if len(seen) != 3 || seen[1] != seen[0]+2 || seen[2] != seen[0] {
		t.Errorf("messages per request: %v", seen)
	}
}

func TestProgress(t *testing.T) {
	dir, host := setup(t, providertest.Echo, map[string]string{"bot.yml": provider})
	s, err := New(context.Background(), Config{Host: host, Paths: []string{dir}})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var msgs []string
	var last float64
	monotonic := true
	sess := connect(t, s, &sdk.ClientOptions{ProgressNotificationHandler: func(_ context.Context, req *sdk.ProgressNotificationClientRequest) {
		mu.Lock()
		defer mu.Unlock()
		if req.Params.Progress <= last {
			monotonic = false
		}
		last = req.Params.Progress
		msgs = append(msgs, req.Params.Message)
	}})
	params := &sdk.CallToolParams{Name: "bot", Arguments: map[string]any{"message": "stream this answer"}}
	params.SetProgressToken("p1")
	res, err := sess.CallTool(context.Background(), params)
	if err != nil || text(t, res) != "echo: stream this answer" {
		t.Fatal(res, err)
	}
	// The client handles notifications apart from results: the last ones
	// may land just after the call returns.
	var joined string
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		mu.Lock()
		joined = strings.Join(msgs, "")
		mu.Unlock()
		if strings.Contains(joined, "echo: stream this answer") || time.Now().After(deadline) {
			break
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if !monotonic || !strings.Contains(joined, "echo: stream this answer") || len(msgs) < 5 {
		t.Errorf("progress (monotonic %v): %q", monotonic, msgs)
	}
}

// confirmCartridge has a Lua tool that needs confirmation and leaves a
// file when it runs.
func confirmCartridge(ran string) string {
	return provider + fmt.Sprintf(`safety: {functions: {sandboxed: false}, tools: {confirmable: true}}
tools:
  - name: touch
    description: Leaves a mark.
    lua: |
      io.open(%q, "w"):close()
      return "touched"
`, ran)
}

func TestConfirmation(t *testing.T) {
	tests := []struct {
		name    string
		allow   bool
		elicit  func(context.Context, *sdk.ElicitRequest) (*sdk.ElicitResult, error)
		wantRan bool
	}{
		{"no elicitation: denied", false, nil, false},
		{"no elicitation, --allow-tools", true, nil, true},
		{"elicitation accepted", false, func(_ context.Context, req *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
			if !strings.Contains(req.Params.Message, "touch") {
				return nil, fmt.Errorf("message %q", req.Params.Message)
			}
			return &sdk.ElicitResult{Action: "accept", Content: map[string]any{"allow": true}}, nil
		}, true},
		{"elicitation with allow false", true, func(context.Context, *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
			return &sdk.ElicitResult{Action: "accept", Content: map[string]any{"allow": false}}, nil
		}, false},
		{"elicitation declined", true, func(context.Context, *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
			return &sdk.ElicitResult{Action: "decline"}, nil
		}, false},
	}
	// The latest protocol asks through input requests (the call is
	// retried with the answer); before 2026-07-28, through a request of
	// the server during the call.
	for _, version := range []string{"", "2025-11-25"} {
		for _, tt := range tests {
			t.Run(tt.name+" "+version, func(t *testing.T) {
				confirmCase(t, version, tt.allow, tt.elicit, tt.wantRan)
			})
		}
	}
}

// AllowTool runs the named tools without asking a client that cannot be
// asked, and only them.
func TestAllowTool(t *testing.T) {
	for _, tc := range []struct {
		allow []string
		ran   bool
	}{{[]string{"other", "touch"}, true}, {[]string{"other"}, false}} {
		ran := filepath.Join(t.TempDir(), "ran")
		dir, host := setup(t, providertest.Echo, map[string]string{"bot.yml": confirmCartridge(ran)})
		s, err := New(context.Background(), Config{Host: host, Paths: []string{filepath.Join(dir, "bot.yml")}, AllowTool: tc.allow})
		if err != nil {
			t.Fatal(err)
		}
		sess := connect(t, s, nil)
		if _, err := sess.CallTool(context.Background(), &sdk.CallToolParams{Name: "bot", Arguments: map[string]any{"message": "call touch {}"}}); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(ran); (err == nil) != tc.ran {
			t.Errorf("AllowTool %v: the tool ran: %v, want %v", tc.allow, err == nil, tc.ran)
		}
	}
}

func confirmCase(t *testing.T, version string, allow bool, elicit func(context.Context, *sdk.ElicitRequest) (*sdk.ElicitResult, error), wantRan bool) {
	ran := filepath.Join(t.TempDir(), "ran")
	dir, host := setup(t, providertest.Echo, map[string]string{"bot.yml": confirmCartridge(ran)})
	s, err := New(context.Background(), Config{Host: host, Paths: []string{filepath.Join(dir, "bot.yml")}, AllowTools: allow})
	if err != nil {
		t.Fatal(err)
	}
	sess := connectVersion(t, s, &sdk.ClientOptions{ElicitationHandler: elicit}, version)
	if got := sess.InitializeResult().ProtocolVersion; version != "" && got != version {
		t.Fatalf("protocol %s", got)
	}
	res, err := sess.CallTool(context.Background(), &sdk.CallToolParams{Name: "bot", Arguments: map[string]any{"message": "call touch {}"}})
	if err != nil {
		t.Fatal(err)
	}
	_, statErr := os.Stat(ran)
	if ranIt := statErr == nil; ranIt != wantRan {
		t.Errorf("the tool ran: %v, want %v (answer %q)", ranIt, wantRan, text(t, res))
	}
	want := "tool touch said: touched"
	if !wantRan {
		want = "tool touch said: We asked the user you're chatting with for permission, but the user did not allow you to run this tool or function."
	}
	if got := text(t, res); got != want {
		t.Errorf("answer %q, want %q", got, want)
	}
}

// A cancelled call stops the provider request and the tool process it
// was running.
func TestCancel(t *testing.T) {
	mark := fmt.Sprintf("nb-cancel-%d-%d", os.Getpid(), time.Now().UnixNano())
	page := fmt.Sprintf("functions:\n  nap:\n    description: Sleeps.\n    parameters: {}\n    cmdline: [sh, -c, 'sleep 30 # %s']\n", mark)
	// (The fake sleeps through a cancel: two chunks keep its handler
	// within the test server's close.)
	slow := providertest.Reply{Chunks: []string{"a", "b"}, Delay: 2 * time.Second}
	brain := func(turn providertest.Turn) providertest.Reply {
		if turn.LastUser() == "slow" {
			return slow
		}
		return providertest.Echo(turn)
	}
	dir, host := setup(t, brain, map[string]string{"bot.yml": provider + "safety: {tools: {confirmable: false}}\nrobopages: [pages/nap.yml]\n", "pages/nap.yml": page})
	s, err := New(context.Background(), Config{Host: host, Paths: []string{filepath.Join(dir, "bot.yml")}})
	if err != nil {
		t.Fatal(err)
	}
	sess := connect(t, s, nil)

	for _, msg := range []string{"slow", "call nap {}"} {
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() {
			_, err := sess.CallTool(ctx, &sdk.CallToolParams{Name: "bot", Arguments: map[string]any{"message": msg}})
			errc <- err
		}()
		time.Sleep(700 * time.Millisecond)
		if msg == "call nap {}" && len(sleepers(mark)) == 0 {
			t.Fatal("the tool's process is not running")
		}
		cancel()
		select {
		case <-errc:
		case <-time.After(3 * time.Second):
			t.Fatalf("%s: the cancelled call did not return", msg)
		}
		// The server stops its side too: the process goes, and the bot
		// answers the next call at once.
		deadline := time.Now().Add(5 * time.Second)
		for len(sleepers(mark)) > 0 && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		if left := sleepers(mark); len(left) > 0 {
			t.Errorf("%s: processes left after the cancel: %v", msg, left)
		}
		begin := time.Now()
		res, err := sess.CallTool(context.Background(), &sdk.CallToolParams{Name: "bot", Arguments: map[string]any{"message": "quick"}})
		if err != nil || text(t, res) != "echo: quick" || time.Since(begin) > 2*time.Second {
			t.Errorf("after %s: %v %v in %s", msg, res, err, time.Since(begin))
		}
	}
}

// sleepers lists the processes whose command line has mark.
func sleepers(mark string) []string {
	entries, _ := os.ReadDir("/proc")
	var out []string
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !bytes.Contains(cmdline, []byte(mark)) {
			continue
		}
		stat, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if i := bytes.LastIndexByte(stat, ')'); i >= 0 && len(stat) > i+2 && stat[i+2] == 'Z' {
			continue
		}
		out = append(out, e.Name()+" "+string(bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '})))
	}
	return out
}

func TestHTTPToken(t *testing.T) {
	dir, host := setup(t, providertest.Echo, map[string]string{"bot.yml": provider})
	s, err := New(context.Background(), Config{Host: host, Paths: []string{filepath.Join(dir, "bot.yml")}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	hs := httptest.NewServer(s.Handler("s3cret"))
	defer hs.Close()
	defer hs.CloseClientConnections() // the client's event stream
	for _, auth := range []string{"", "Bearer wrong", "Bearer s3cret2", "s3cret"} {
		req, _ := http.NewRequest("POST", hs.URL, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") != `Bearer realm="nb"` {
			t.Errorf("Authorization %q: status %d, WWW-Authenticate %q", auth, resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
		}
	}
	// The scheme in any case, spaces around the token: the check of nb's
	// other servers (httpguard.Bearer).
	for _, auth := range []string{"bearer s3cret", "Bearer  s3cret"} {
		req, _ := http.NewRequest("POST", hs.URL, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", auth)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusUnauthorized {
			t.Errorf("Authorization %q: status %d", auth, resp.StatusCode)
		}
	}
	client := &http.Client{Transport: bearer("s3cret")}
	sess, err := sdk.NewClient(&sdk.Implementation{Name: "test"}, nil).Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: hs.URL, HTTPClient: client}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	res, err := sess.CallTool(context.Background(), &sdk.CallToolParams{Name: "bot", Arguments: map[string]any{"message": "over http"}})
	if err != nil || text(t, res) != "echo: over http" {
		t.Errorf("%v %v", res, err)
	}
}

type bearer string

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+string(b))
	return http.DefaultTransport.RoundTrip(r)
}

func TestNothingToServe(t *testing.T) {
	dir := t.TempDir()
	if _, err := New(context.Background(), Config{Paths: []string{dir}}); err == nil || !strings.Contains(err.Error(), "no cartridge") {
		t.Errorf("an empty folder: %v", err)
	}
	if _, err := New(context.Background(), Config{Paths: []string{filepath.Join(dir, "nope.yml")}}); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Errorf("a missing cartridge: %v", err)
	}
}

// Over HTTP the Origin header is checked as nb serve checks it, with a
// token or without (the MCP specification requires it): a web page gets
// 403 unless its origin is allowed; a request that reaches the loopback
// listener addressed to another name gets 403 too (DNS rebinding).
func TestHTTPOrigin(t *testing.T) {
	dir, host := setup(t, providertest.Echo, map[string]string{"bot.yml": provider})
	for _, token := range []string{"", "s3cret"} {
		s, err := New(context.Background(), Config{Host: host, Paths: []string{filepath.Join(dir, "bot.yml")}, AllowOrigins: []string{"https://app.example"},
			OriginAdvice: "start nb mcp serve with --cors-origins %s to allow it"}) // as nb mcp serve words it
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		hs := httptest.NewServer(s.Handler(token))
		defer hs.Close()
		for _, tc := range []struct {
			origin, host string
			status       int
		}{
			{"https://evil.com", "", 403},
			{"null", "", 403},
			{"http://localhost:8080", "", 403},
			{"", "evil.com", 403},
			{"https://app.example", "", 200},
			{"", "", 200},
		} {
			req, _ := http.NewRequest("POST", hs.URL, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			if tc.origin != "" {
				req.Header.Set("Origin", tc.origin)
			}
			if tc.host != "" {
				req.Host = tc.host
			}
			if token != "" {
				req.Header.Set("Authorization", "Bearer "+token)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Errorf("token %q, Origin %q, Host %q: status %d: %s", token, tc.origin, tc.host, resp.StatusCode, body)
			}
			if tc.origin == "https://evil.com" && !strings.Contains(string(body), `nb mcp serve answers no web page of origin "https://evil.com" (any page the user opens could use it otherwise): start nb mcp serve with --cors-origins https://evil.com to allow it`) {
				t.Errorf("refusal: %s", body)
			}
		}
	}
}
