package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nbots/nb/bot"
	"github.com/nbots/nb/cartridge"
	"github.com/nbots/nb/catalog"
	"github.com/nbots/nb/netguard"
	"github.com/nbots/nb/provider/openai/openaitest"
	"github.com/nbots/nb/provider/providertest"
	"github.com/nbots/nb/tool"
)

func get(t *testing.T, method, url, body string, header ...string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		if header[i] == "Host" {
			req.Host = header[i+1]
			continue
		}
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := noRedirects.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// noRedirects shows redirects instead of following them: a preflighted
// browser request cannot follow one.
var noRedirects = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

func echoRoute(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	WriteJSON(w, 200, map[string]any{"body": string(b)})
}

func TestAuthAndErrorShapes(t *testing.T) {
	secret := "s3cret-token-0123456789"
	tok, _ := NewToken("", secret)
	f := newFixture(t, nil, func(o *Options) { o.Tokens = []*Token{tok} })
	url := f.serve(map[string]http.HandlerFunc{"POST /echo": echoRoute, "POST /v1/echo": echoRoute})

	// Without a token: 401 in each family's shape, CORS headers included.
	resp, body := get(t, "POST", url+"/echo", "{}")
	if resp.StatusCode != 401 || body != `{"error":{"message":"this server needs a token: send it as \"Authorization: Bearer <token>\" (an OpenAI client's API key)"}}` {
		t.Errorf("nano bots 401: %d %s", resp.StatusCode, body)
	}
	if resp.Header.Get("Access-Control-Allow-Origin") != "*" || resp.Header.Get("WWW-Authenticate") == "" {
		t.Errorf("401 headers: %v", resp.Header)
	}
	resp, body = get(t, "POST", url+"/v1/echo", "{}", "Authorization", "Bearer wrong-token-xxxxxxxx")
	if resp.StatusCode != 401 || body != `{"error":{"message":"the token is not valid for this server","type":"authentication_error","param":null,"code":"invalid_api_key"}}` {
		t.Errorf("openai 401: %d %s", resp.StatusCode, body)
	}
	// With it.
	resp, body = get(t, "POST", url+"/echo", "hello", "Authorization", "Bearer "+secret)
	if resp.StatusCode != 200 || body != `{"body":"hello"}` {
		t.Errorf("with the token: %d %s", resp.StatusCode, body)
	}
	// Preflights and /healthz need none.
	resp, _ = get(t, "OPTIONS", url+"/echo", "", "Origin", "app://obsidian.md", "Access-Control-Request-Method", "POST", "Access-Control-Request-Headers", "authorization,content-type,nano_bots_end_user")
	if resp.StatusCode != 204 || resp.Header.Get("Access-Control-Allow-Headers") != "authorization,content-type,nano_bots_end_user" || resp.Header.Get("Access-Control-Allow-Origin") != "*" {
		t.Errorf("preflight: %d %v", resp.StatusCode, resp.Header)
	}
	resp, body = get(t, "GET", url+"/healthz", "")
	if resp.StatusCode != 200 || body != `{"status":"ok"}` {
		t.Errorf("healthz: %d %s", resp.StatusCode, body)
	}
	// Unknown routes and methods, in each family's shape.
	auth := []string{"Authorization", "Bearer " + secret}
	resp, body = get(t, "GET", url+"/nope", "", auth...)
	if resp.StatusCode != 404 || body != `{"error":{"message":"there is no route GET /nope on this server"}}` {
		t.Errorf("404: %d %s", resp.StatusCode, body)
	}
	resp, body = get(t, "GET", url+"/v1/echo", "", auth...)
	if resp.StatusCode != 405 || !strings.Contains(body, `"type":"invalid_request_error"`) || resp.Header.Get("Allow") == "" {
		t.Errorf("405: %d %s %v", resp.StatusCode, body, resp.Header)
	}
	// A doubled slash (an address ending in /) reaches the route, no redirect.
	resp, body = get(t, "POST", url+"//echo", "x", auth...)
	if resp.StatusCode != 200 || body != `{"body":"x"}` {
		t.Errorf("//echo: %d %s", resp.StatusCode, body)
	}
	// The secret is never logged.
	if strings.Contains(f.log.String(), secret) || strings.Contains(f.log.String(), "wrong-token") {
		t.Errorf("a token is in the log:\n%s", f.log)
	}
}

func TestBodyLimit(t *testing.T) {
	f := newFixture(t, nil, func(o *Options) { o.Limits.MaxBody = 10 })
	url := f.serve(map[string]http.HandlerFunc{"POST /echo": echoRoute, "POST /v1/echo": echoRoute})
	resp, body := get(t, "POST", url+"/echo", strings.Repeat("x", 11))
	if resp.StatusCode != 413 || !strings.Contains(body, `"message":"the request body is 11 bytes, more than the server's limit of 10 bytes (--max-body)"`) {
		t.Errorf("413: %d %s", resp.StatusCode, body)
	}
	// Chunked: no length to check first.
	req, _ := http.NewRequest("POST", url+"/v1/echo", io.MultiReader(strings.NewReader("12345"), strings.NewReader("678901")))
	req.ContentLength = -1
	r, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(r.Body)
	r.Body.Close()
	if r.StatusCode != 413 || !strings.Contains(string(b), `"code":"request_too_large"`) {
		t.Errorf("chunked 413: %d %s", r.StatusCode, b)
	}
	req, _ = http.NewRequest("POST", url+"/echo", io.MultiReader(strings.NewReader("12345"), strings.NewReader("67")))
	req.ContentLength = -1
	r, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(r.Body)
	r.Body.Close()
	if r.StatusCode != 200 || string(b) != `{"body":"1234567"}` {
		t.Errorf("chunked body: %d %s", r.StatusCode, b)
	}
}

func TestPanicIsContained(t *testing.T) {
	f := newFixture(t, nil, nil)
	url := f.serve(map[string]http.HandlerFunc{"GET /boom": func(http.ResponseWriter, *http.Request) { panic("boom") }})
	resp, body := get(t, "GET", url+"/boom", "")
	if resp.StatusCode != 500 || body != `{"error":{"message":"internal error in nb (please report it): boom"}}` {
		t.Errorf("%d %s", resp.StatusCode, body)
	}
	if !strings.Contains(f.log.String(), "stack=") {
		t.Error("the stack is not logged")
	}
}

func TestAdmitLimits(t *testing.T) {
	tok, _ := NewToken("a", strings.Repeat("a", 16))
	tok.MaxRuns = 1
	rated, _ := NewToken("b", strings.Repeat("b", 16))
	rated.Rate = Rate{N: 1, Per: time.Hour}
	f := newFixture(t, nil, func(o *Options) { o.Limits.MaxRuns = 2; o.Tokens = []*Token{tok, rated} })
	ctxA := context.WithValue(context.Background(), infoKey{}, &reqInfo{token: tok})
	ctxB := context.WithValue(context.Background(), infoKey{}, &reqInfo{token: rated})
	_, doneA, err := f.srv.Admit(ctxA, false)
	if err != nil {
		t.Fatal(err)
	}
	var se *Error
	if _, _, err := f.srv.Admit(ctxA, false); !errors.As(err, &se) || se.Status != 429 || se.Code != "too_many_runs" {
		t.Fatalf("second run of a 1-run token: %v", err)
	}
	_, doneB, err := f.srv.Admit(ctxB, true)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.srv.Admit(ctxB, false); !errors.As(err, &se) || se.Code != "server_busy" {
		t.Fatalf("a third run on a 2-run server: %v", err)
	}
	doneB()
	doneB() // twice is harmless
	if _, _, err := f.srv.Admit(ctxB, false); !errors.As(err, &se) || se.Status != 429 || se.RetryAfter < 59*time.Minute {
		t.Fatalf("a second run of a 1/hour token: %v", err)
	}
	doneA()
	if f.srv.Active() != 0 {
		t.Fatalf("%d runs left", f.srv.Active())
	}
	// The answer carries Retry-After.
	w := httptest.NewRecorder()
	f.srv.WriteError(w, httptest.NewRequest("POST", "/v1/chat/completions", nil), se)
	if w.Code != 429 || w.Header().Get("Retry-After") == "" || !strings.Contains(w.Body.String(), `"type":"rate_limit_error"`) {
		t.Fatalf("%d %v %s", w.Code, w.Header(), w.Body)
	}
}

func TestRunTimeout(t *testing.T) {
	f := newFixture(t, nil, func(o *Options) { o.Limits.RunTimeout = 20 * time.Millisecond })
	ctx, done, err := f.srv.Admit(context.Background(), false)
	if err != nil {
		t.Fatal(err)
	}
	defer done()
	<-ctx.Done()
	e := AsError(ctx, ctx.Err())
	if e.Status != 504 || !strings.Contains(e.Message, "--run-timeout") {
		t.Fatalf("%+v", e)
	}
}

func TestListenLocalhost(t *testing.T) {
	lns, err := Listen("localhost:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	port := lns[0].Addr().(*net.TCPAddr).Port
	if !lns[0].Addr().(*net.TCPAddr).IP.Equal(net.IPv4(127, 0, 0, 1)) {
		t.Fatalf("first listener %v", lns[0].Addr())
	}
	if len(lns) == 2 && (lns[1].Addr().(*net.TCPAddr).Port != port || !lns[1].Addr().(*net.TCPAddr).IP.Equal(net.IPv6loopback)) {
		t.Fatalf("second listener %v", lns[1].Addr())
	}
	if _, err := Listen("nonsense"); err == nil || !strings.Contains(err.Error(), "host:port") {
		t.Fatalf("bad address: %v", err)
	}
}

// X-Forwarded-For names the end user only on a connection from a
// trusted proxy (--trusted-proxies); by default, none is trusted, not
// even one on this machine: with a shared token any local program could
// otherwise take another user's address, and their conversations.
func TestEndUser(t *testing.T) {
	f := newFixture(t, nil, nil)
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "203.0.113.7:5555"
	r.Header.Set("nano_bots_end_user", "obsidian-me")
	r.Header.Set("X-Forwarded-For", "10.0.0.1")
	if got := f.srv.EndUser(r); got != "203.0.113.7-obsidian-me" {
		t.Errorf("from afar: %q (X-Forwarded-For is trusted only from a trusted proxy)", got)
	}
	r.RemoteAddr = "127.0.0.1:5555"
	r.Header.Set("X-Forwarded-For", "6.6.6.6, 198.51.100.9")
	if got := f.srv.EndUser(r); got != "127.0.0.1-obsidian-me" {
		t.Errorf("from this machine, no trusted proxy: %q", got)
	}
	tok := &Token{Name: "team"}
	r = r.WithContext(context.WithValue(r.Context(), infoKey{}, &reqInfo{token: tok}))
	if got := f.srv.EndUser(r); got != "team/127.0.0.1-obsidian-me" {
		t.Errorf("with a token: %q", got)
	}

	proxies, err := ParseProxies("127.0.0.1, 10.0.0.0/8")
	if err != nil {
		t.Fatal(err)
	}
	f = newFixture(t, nil, func(o *Options) { o.TrustedProxies = proxies })
	for _, tc := range []struct{ remote, xff, want string }{
		{"127.0.0.1:5555", "6.6.6.6, 198.51.100.9", "198.51.100.9"},
		// The proxy chain is walked from the right: trusted hops are
		// skipped, the first other address is the client.
		{"127.0.0.1:5555", "6.6.6.6, 198.51.100.9, 10.1.2.3", "198.51.100.9"},
		{"[::ffff:127.0.0.1]:5555", "198.51.100.9", "198.51.100.9"},
		// A hop that is not an address ends the walk at the connection.
		{"127.0.0.1:5555", "198.51.100.9, unknown", "127.0.0.1"},
		{"127.0.0.1:5555", "", "127.0.0.1"},
		// Not a trusted proxy: the header is the client's to write.
		{"[::1]:5555", "198.51.100.9", "::1"},
		{"203.0.113.7:5555", "198.51.100.9", "203.0.113.7"},
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = tc.remote
		if tc.xff != "" {
			r.Header.Set("X-Forwarded-For", tc.xff)
		}
		if got := f.srv.EndUser(r); got != tc.want+"-" {
			t.Errorf("%s, X-Forwarded-For %q: %q, want %q", tc.remote, tc.xff, got, tc.want+"-")
		}
	}
	if _, err := ParseProxies("10.0.0.0/33"); err == nil || !strings.Contains(err.Error(), `"10.0.0.0/33" is not an address or a network`) {
		t.Errorf("bad network: %v", err)
	}
}

// A client's cartridge never reads the server's environment: the
// reference substitutes it, so a client could have the server send its
// API key to an address of the client's choosing. nb refuses the
// cartridge, naming the key, and sends nothing anywhere.
func TestClientCartridgeCannotReadEnvironment(t *testing.T) {
	attacker := openaitest.New(providertest.Echo)
	srv := httptest.NewServer(attacker)
	defer srv.Close()
	f := newFixture(t, nil, nil)
	l := &catalog.Leases{}
	ctx := context.WithValue(context.Background(), leasesKey{}, l)
	defer l.Release()
	src := `{"provider":{"id":"openai","credentials":{"address":"` + srv.URL + `","access-token":"ENV/OPENAI_API_KEY"},"settings":{"model":"m"}}}`
	_, err := f.srv.ClientBot(ctx, []byte(src))
	var se *Error
	if !errors.As(err, &se) || se.Status != 400 || se.Message != "request.cartridge: provider.credentials.access-token is ENV/OPENAI_API_KEY: a cartridge sent to the server may not read the server's environment; put the value itself in the cartridge, or ask the operator to serve the cartridge" {
		t.Fatalf("%v", err)
	}
	if n := len(attacker.Recorder.Bodies()); n != 0 {
		t.Fatalf("the attacker's address received %d requests", n)
	}

	// The same cartridge with its own key runs, sandboxed, without host
	// credentials, and is closed with the request.
	src = strings.Replace(src, "ENV/OPENAI_API_KEY", "sk-client", 1)
	b, err := f.srv.ClientBot(ctx, []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if h := b.Host(); h.AllowHostCredentials || !h.ForceSandbox {
		t.Fatalf("client host: %+v", h)
	}
	if _, err := b.Ask(ctx, botExchange(), "hi"); err != nil {
		t.Fatal(err)
	}
	if got := attacker.Recorder.Last(); got == nil {
		t.Fatal("the client's cartridge did not run")
	}
}

func TestClientCartridgeRules(t *testing.T) {
	f := newFixture(t, nil, nil)
	l := &catalog.Leases{}
	ctx := context.WithValue(context.Background(), leasesKey{}, l)
	defer l.Release()
	base := `provider: {id: openai, credentials: {address: "http://127.0.0.1:1", access-token: k}, settings: {model: m}}` + "\n"
	for src, want := range map[string]string{
		base + "state: {path: /etc}\n":                        "state.path names a folder of the server",
		base + "state: {directory: /tmp}\n":                   "state.directory names a folder of the server",
		base + "robopages: [{path: /opt/pages}]\n":            "robopages name folders of the server",
		base + "builtins: {exec: true}\n":                     "builtins work on the server's files",
		base + "mcp: {x: {command: sh}}\n":                    "mcp servers are programs the server would start",
		"tools: [{name: x, lua: 'return ENV/HOME'}]\n" + base: "",
		`provider: {id: google, credentials: {service: vertex-ai-api, region: r, file-path: /srv/key.json}, options: {model: g}}`: "provider.credentials.file-path names a file of the server",
		`provider: {id: google, credentials: {service: vertex-ai-api, region: r, project-id: p}, options: {model: g}}`:            "may not use the server's Google credentials",
		`provider: {id: openai, credentials: {access-token: "ENV-SECRET"}}`:                                                       "provider.credentials.access-token is ENV/SECRET",
		"provider: [\n": "request.cartridge:",
	} {
		_, err := f.srv.ClientBot(ctx, []byte(src))
		if want == "" {
			if err != nil {
				t.Errorf("%q: %v", src, err)
			}
			continue
		}
		var se *Error
		if !errors.As(err, &se) || se.Status != 400 || !strings.Contains(se.Message, want) {
			t.Errorf("%q: %v, want %q", src, err, want)
		}
	}
	f2 := newFixture(t, nil, func(o *Options) { o.ClientCartridges = false })
	if _, err := f2.srv.ClientBot(ctx, []byte(base)); err == nil || err.(*Error).Status != 403 {
		t.Fatalf("client cartridges off: %v", err)
	}
}

// Tools that ask for a confirmation are denied over HTTP (the model is
// told), unless the operator allows them.
func TestConfirmer(t *testing.T) {
	for _, allow := range []bool{false, true} {
		f := newFixture(t, nil, func(o *Options) { o.AllowUnconfirmed = allow })
		ok, err := f.srv.Confirmer().Confirm(context.Background(), toolCall("rm"), "rm {}")
		if err != nil || ok != allow {
			t.Errorf("allow=%v: %v %v", allow, ok, err)
		}
		if !allow && !strings.Contains(f.log.String(), "tool call denied") {
			t.Errorf("the denial is not logged:\n%s", f.log)
		}
	}
	// --allow-tool: the named tools only.
	f := newFixture(t, nil, func(o *Options) { o.AllowTools = []string{"rm"} })
	if ok, err := f.srv.Confirmer().Confirm(context.Background(), toolCall("rm"), "rm {}"); !ok || err != nil {
		t.Errorf("an allowed tool: %v %v", ok, err)
	}
	if ok, err := f.srv.Confirmer().Confirm(context.Background(), toolCall("mv"), "mv {}"); ok || err != nil {
		t.Errorf("another tool: %v %v", ok, err)
	}
}

// SIGTERM (the end of Serve's context) lets a run in flight finish while
// new runs are refused, then stops; past the grace period, runs are
// cancelled.
func TestShutdown(t *testing.T) {
	for _, tc := range []struct {
		name     string
		grace    time.Duration
		runFor   time.Duration
		finished bool
	}{
		{"run finishes within grace", 5 * time.Second, 300 * time.Millisecond, true},
		{"grace over", 200 * time.Millisecond, 10 * time.Second, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, nil, func(o *Options) { o.Limits.Grace = tc.grace })
			started := make(chan struct{})
			var result string
			f.srv.HandleFunc("POST /run", func(w http.ResponseWriter, r *http.Request) {
				ctx, done, err := f.srv.Admit(r.Context(), false)
				if err != nil {
					f.srv.WriteError(w, r, err)
					return
				}
				defer done()
				close(started)
				select {
				case <-time.After(tc.runFor):
					WriteJSON(w, 200, map[string]any{"ok": true})
				case <-ctx.Done():
					f.srv.WriteError(w, r.WithContext(ctx), ctx.Err())
				}
			})
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			url := "http://" + ln.Addr().String()
			ctx, stop := context.WithCancel(context.Background())
			served := make(chan error, 1)
			go func() { served <- f.srv.Serve(ctx, ln) }()
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				resp, err := http.Post(url+"/run", "application/json", nil)
				if err != nil {
					result = err.Error()
					return
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				result = fmt.Sprintf("%d %s", resp.StatusCode, b)
			}()
			<-started
			begin := time.Now()
			stop()
			time.Sleep(50 * time.Millisecond)
			// Draining: new runs are refused, health says so.
			resp, body := get(t, "POST", url+"/run", "")
			if resp.StatusCode != 503 || !strings.Contains(body, "shutting down") {
				t.Errorf("a new run while stopping: %d %s", resp.StatusCode, body)
			}
			if resp, _ := get(t, "GET", url+"/healthz", ""); resp.StatusCode != 503 {
				t.Errorf("healthz while stopping: %d", resp.StatusCode)
			}
			select {
			case err := <-served:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("Serve did not return")
			}
			wg.Wait()
			if tc.finished && result != `200 {"ok":true}` {
				t.Errorf("the run in flight did not finish: %s", result)
			}
			if !tc.finished {
				if !strings.HasPrefix(result, "503 ") || !strings.Contains(result, "shutting down") {
					t.Errorf("the cancelled run answered %s", result)
				}
				if d := time.Since(begin); d > 4*time.Second {
					t.Errorf("stopping took %v", d)
				}
			}
			if _, err := http.Get(url + "/healthz"); err == nil {
				t.Error("still accepting connections after Serve returned")
			}
		})
	}
}

func toolCall(name string) tool.Call { return tool.Call{Name: name, Arguments: map[string]any{}} }

func botExchange() bot.Exchange { return bot.Exchange{Mode: cartridge.Eval} }

// A client's cartridge chooses its provider's address: without a guard a
// client could have the server send requests into its own network (a
// model server, a cloud metadata service). Its provider reaches public
// addresses only, unless the operator allows the host; the refusal is not
// retried and says how to allow it. The operator's cartridges are not
// guarded.
func TestClientCartridgeReachesPublicAddressesOnly(t *testing.T) {
	inside := openaitest.New(providertest.Echo)
	srv := httptest.NewServer(inside)
	defer srv.Close()
	f := newFixture(t, nil, func(o *Options) { o.ClientHosts = nil })
	l := &catalog.Leases{}
	ctx := context.WithValue(context.Background(), leasesKey{}, l)
	defer l.Release()
	for _, address := range []string{srv.URL, "http://169.254.169.254", "http://[::1]:1", "http://2130706433:1"} {
		src := `{"provider":{"id":"openai","credentials":{"address":"` + address + `","access-token":"sk-client"},"settings":{"model":"m"}}}`
		b, err := f.srv.ClientBot(ctx, []byte(src))
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		_, err = b.Ask(ctx, botExchange(), "hi")
		var blocked *netguard.BlockedError
		if !errors.As(err, &blocked) || !strings.Contains(err.Error(), "--client-hosts") {
			t.Errorf("%s: %v, want a refusal naming --client-hosts", address, err)
		}
		if d := time.Since(start); d > 500*time.Millisecond {
			t.Errorf("%s: refused after %v: a refusal is not retried", address, d)
		}
	}
	if n := len(inside.Recorder.Bodies()); n != 0 {
		t.Fatalf("the inside address received %d requests", n)
	}

	// Allowed by the operator, the host is reached.
	f2 := newFixture(t, nil, func(o *Options) { o.ClientHosts = []string{"127.0.0.1"} })
	src := `{"provider":{"id":"openai","credentials":{"address":"` + srv.URL + `","access-token":"sk-client"},"settings":{"model":"m"}}}`
	b, err := f2.srv.ClientBot(ctx, []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Ask(ctx, botExchange(), "hi"); err != nil {
		t.Fatal(err)
	}
	if inside.Recorder.Last() == nil {
		t.Fatal("the allowed host was not reached")
	}
}
