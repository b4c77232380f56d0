package web

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nbots/nb/netguard"
	"github.com/nbots/nb/tool"
)

// fakeDNS resolves names from a table; nothing goes to the network.
type fakeDNS struct {
	mu    sync.Mutex
	names map[string][]string
	calls map[string]int
	// flip answers alternately from names and from flipTo (a rebinding DNS).
	flipTo map[string][]string
}

func (r *fakeDNS) LookupIPAddr(ctx context.Context, host string) ([]net.IPAddr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.calls == nil {
		r.calls = map[string]int{}
	}
	host = strings.ToLower(host) // DNS names are case-insensitive
	r.calls[host]++
	list, ok := r.names[host]
	if alt, flip := r.flipTo[host]; flip && r.calls[host]%2 == 0 {
		list = alt
	}
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	var out []net.IPAddr
	for _, s := range list {
		out = append(out, net.IPAddr{IP: net.ParseIP(s)})
	}
	return out, nil
}

// fakeNet connects every address it is asked for to one local test
// server, and records the addresses: the guard's decisions are visible.
type fakeNet struct {
	target string
	mu     sync.Mutex
	dialed []string
}

func (d *fakeNet) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	d.mu.Lock()
	d.dialed = append(d.dialed, address)
	d.mu.Unlock()
	var nd net.Dialer
	return nd.DialContext(ctx, network, d.target)
}

func (d *fakeNet) addresses() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.dialed...)
}

// setup starts a test server with a secret page and a public-looking DNS.
func setup(t *testing.T, cfg FetchOptions, mux *http.ServeMux) (*Fetch, *fakeNet, *atomic.Int64, string) {
	t.Helper()
	var secretHits atomic.Int64
	mux.HandleFunc("/secret", func(w http.ResponseWriter, r *http.Request) {
		secretHits.Add(1)
		fmt.Fprint(w, "SECRET-DATA")
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	dns := &fakeDNS{names: map[string][]string{
		"public.example":           {"93.184.216.34"},
		"other.example":            {"140.82.121.3"},
		"localhost.test":           {"127.0.0.1"},
		"metadata.google.internal": {"169.254.169.254"},
		"mixed.example":            {"93.184.216.34", "10.0.0.1"},
		"v6loop.example":           {"::1"},
		"intranet.test":            {"10.1.2.3"},
	}}
	netw := &fakeNet{target: srv.Listener.Addr().String()}
	cfg.Guard.Resolver, cfg.Guard.Dialer = dns, netw
	return NewFetch(cfg), netw, &secretHits, srv.Listener.Addr().String()
}

func fetch(f *Fetch, url string) (string, bool, error) {
	out, err := f.Run(context.Background(), tool.Call{Name: "web_fetch", Arguments: map[string]any{"url": url}})
	if err != nil {
		return "", false, err
	}
	switch v := out.(type) {
	case string:
		return v, false, nil
	case *tool.Result:
		return v.Text, v.IsError, nil
	}
	return "", false, fmt.Errorf("web_fetch returned %T", out)
}

// TestFetchRefusesInternalAddresses: loopback, private, link-local,
// metadata and unspecified addresses are refused in every notation, by
// name and through redirects; the local server's secret page is never
// reached.
func TestFetchRefusesInternalAddresses(t *testing.T) {
	mux := http.NewServeMux()
	f, netw, secretHits, local := setup(t, FetchOptions{}, mux)
	_, port, _ := net.SplitHostPort(local)
	mux.HandleFunc("/to-loopback", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://127.0.0.1:"+port+"/secret", http.StatusFound)
	})
	mux.HandleFunc("/to-name", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://localhost.test:"+port+"/secret", http.StatusMovedPermanently)
	})
	mux.HandleFunc("/to-metadata", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://169.254.169.254/latest/meta-data/", http.StatusTemporaryRedirect)
	})
	mux.HandleFunc("/hop", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://other.example/to-loopback", http.StatusFound)
	})

	for _, tc := range []struct{ url, want string }{
		{"http://127.0.0.1:" + port + "/secret", "loopback"},
		{"http://[::1]:" + port + "/secret", "loopback"},
		{"http://169.254.169.254/latest/meta-data/", "link-local"},
		{"http://2130706433:" + port + "/secret", "loopback"},
		{"http://0x7f000001:" + port + "/secret", "loopback"},
		{"http://0177.0.0.1:" + port + "/secret", "loopback"},
		{"http://127.1:" + port + "/secret", "loopback"},
		{"http://127.0.0.1.:" + port + "/secret", "loopback"},
		{"http://[::ffff:127.0.0.1]:" + port + "/secret", "loopback"},
		{"http://[::ffff:7f00:1]:" + port + "/secret", "loopback"},
		{"http://0.0.0.0:" + port + "/secret", "0.0.0.0/8"},
		{"http://[::]:" + port + "/secret", "unspecified"},
		{"http://10.0.0.1/", "private"},
		{"http://172.16.5.1/", "private"},
		{"http://192.168.1.1/", "private"},
		{"http://100.100.100.200/latest/meta-data/", "carrier-grade"},
		{"http://[fd00:ec2::254]/latest/meta-data/", "private"},
		{"http://[fe80::1]/", "link-local"},
		{"http://224.0.0.1/", "multicast"},
		{"http://198.18.0.1/", "benchmarking"},
		{"http://[2002:7f00:1::]/", "6to4"},
		{"http://[64:ff9b::a9fe:a9fe]/", "NAT64"},
		{"http://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/", "Teredo"},
		{"http://localhost.test:" + port + "/secret", "resolves to 127.0.0.1"},
		{"http://LOCALHOST.TEST:" + port + "/secret", "resolves to 127.0.0.1"},
		{"http://metadata.google.internal/computeMetadata/v1/", "resolves to 169.254.169.254"},
		{"http://mixed.example/", "resolves to 10.0.0.1"},
		{"http://v6loop.example/", "resolves to ::1"},
		{"http://public.example/to-loopback", "it redirected to http://127.0.0.1:" + port + "/secret"},
		{"http://public.example/to-name", "it redirected to http://localhost.test:" + port + "/secret"},
		{"http://public.example/to-metadata", "it redirected to http://169.254.169.254/latest/meta-data/"},
		{"https://public.example/hop", ""}, // TLS to a plain server fails: still never the secret
		{"http://public.example/hop", "it redirected to http://127.0.0.1:" + port + "/secret"},
		{"ftp://public.example/", "only http and https"},
		{"file:///etc/passwd", "only http and https"},
		{"http://", "has no host"},
		{"http://1.2.3.4.5/", "not a valid address"},
		{"http://nowhere.example/", "cannot resolve"},
	} {
		out, _, err := fetch(f, tc.url)
		if err == nil {
			t.Errorf("web_fetch %s was not refused: %.200q", tc.url, out)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("web_fetch %s: %v\nwant it to say %q", tc.url, err, tc.want)
		}
	}
	if n := secretHits.Load(); n != 0 {
		t.Errorf("the secret page was served %d times", n)
	}
	for _, a := range netw.addresses() {
		ap, err := netip.ParseAddrPort(a)
		if err != nil || netguard.Blocked(ap.Addr()) != "" {
			t.Errorf("the guard let the dialer connect to %s", a)
		}
	}
}

// TestFetchPinsTheCheckedAddress: a DNS that answers a public address
// first and a loopback one next (rebinding) never gets a connection to
// loopback.
func TestFetchPinsTheCheckedAddress(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "public page") })
	f, netw, secretHits, _ := setup(t, FetchOptions{}, mux)
	dns := f.cfg.Guard.Resolver.(*fakeDNS)
	dns.flipTo = map[string][]string{"public.example": {"127.0.0.1"}}
	for i := 0; i < 6; i++ {
		fetch(f, "http://public.example/secret")
		f.client.CloseIdleConnections()
	}
	for _, a := range netw.addresses() {
		if !strings.HasPrefix(a, "93.184.216.34:") {
			t.Errorf("the dialer was asked for %s", a)
		}
	}
	if secretHits.Load() > 0 && len(netw.addresses()) == 0 {
		t.Error("the secret was served without a checked connection")
	}
}

func TestFetchPage(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/start", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("User-Agent") == "" {
			t.Error("no User-Agent")
		}
		http.Redirect(w, r, "/page", http.StatusFound)
	})
	mux.HandleFunc("/page", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, `<!doctype html><html><head><title>The  Title</title><style>body{}</style><script>alert("x")</script></head>
<body><nav><a href="/">Home</a> | <a href="/about">About</a></nav>
<h1>Heading</h1><p>Some <b>bold</b> text and a <a href="/docs/x.html">relative link</a>.</p>
<ul><li>one</li><li>two</li></ul><table><tr><th>a</th><th>b</th></tr><tr><td>1</td><td>2</td></tr></table>
<footer>Copyright</footer></body></html>`)
	})
	mux.HandleFunc("/latin1", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=iso-8859-1")
		w.Write([]byte("caf\xe9\n"))
	})
	mux.HandleFunc("/image", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "image/png")
		w.Write([]byte("\x89PNG\r\n\x1a\n\x00\x00"))
	})
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprint(w, strings.Repeat("z", 5000))
	})
	mux.HandleFunc("/missing", func(w http.ResponseWriter, r *http.Request) { http.NotFound(w, r) })
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(5 * time.Second):
		case <-r.Context().Done():
		}
	})
	mux.HandleFunc("/loop", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/loop", http.StatusFound) })
	f, _, _, _ := setup(t, FetchOptions{MaxBytes: 1000, Timeout: 700 * time.Millisecond}, mux)

	out, isErr, err := fetch(f, "http://public.example/start")
	if err != nil || isErr {
		t.Fatalf("web_fetch: %v (error %v)", err, isErr)
	}
	for _, want := range []string{
		"URL: http://public.example/page\n", "Content-Type: text/html; charset=utf-8\n", "Status: 200 OK\n", untrusted,
		"Title: The Title\n", "# Heading", "Some **bold** text", "[relative link](http://public.example/docs/x.html)", "- one\n- two", "| a | b |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the page lacks %q:\n%s", want, out)
		}
	}
	for _, unwanted := range []string{"alert", "body{}", "Copyright", "About"} {
		if strings.Contains(out, unwanted) {
			t.Errorf("the page kept %q:\n%s", unwanted, out)
		}
	}
	if out, _, _ := fetch(f, "http://public.example/latin1"); !strings.HasSuffix(out, "café\n") {
		t.Errorf("latin-1 text: %q", out)
	}
	if _, _, err := fetch(f, "http://public.example/image"); err == nil || !strings.Contains(err.Error(), "image/png is not text") {
		t.Errorf("an image: %v", err)
	}
	if out, _, _ := fetch(f, "http://public.example/big"); !strings.Contains(out, "[The response was cut at 1000 bytes.]") || strings.Count(out, "z") != 1000 {
		t.Errorf("a big page: %.300q", out)
	}
	if out, isErr, err := fetch(f, "http://public.example/missing"); err != nil || !isErr || !strings.Contains(out, "Status: 404 Not Found") {
		t.Errorf("a missing page: %q, %v, %v", out, isErr, err)
	}
	if _, _, err := fetch(f, "http://public.example/slow"); err == nil || !strings.Contains(err.Error(), "no answer in time") {
		t.Errorf("a slow page: %v", err)
	}
	if _, _, err := fetch(f, "http://public.example/loop"); err == nil || !strings.Contains(err.Error(), "more than 5 redirects") {
		t.Errorf("a redirect loop: %v", err)
	}
}

// TestFetchAllowHosts: a host the cartridge names may be private.
func TestFetchAllowHosts(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "intranet page") })
	f, _, _, _ := setup(t, FetchOptions{Guard: netguard.Guard{AllowHosts: []string{"Intranet.test"}}}, mux)
	if out, _, err := fetch(f, "http://intranet.test/"); err != nil || !strings.HasSuffix(out, "intranet page") {
		t.Errorf("an allowed intranet host: %q, %v", out, err)
	}
	if _, _, err := fetch(f, "http://localhost.test/"); err == nil {
		t.Error("a host not allowed was fetched")
	}
}

func braveFake(t *testing.T, key string) *httptest.Server {
	t.Helper()
	ok, _ := os.ReadFile("testdata/brave-web-search.json")
	tokenErr, _ := os.ReadFile("testdata/brave-error-token.json")
	rateErr, _ := os.ReadFile("testdata/brave-error-rate.json")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || r.URL.Path != "/res/v1/web/search" {
			http.NotFound(w, r)
			return
		}
		if r.Header.Get("Accept") != "application/json" {
			t.Errorf("Accept = %q", r.Header.Get("Accept"))
		}
		w.Header().Set("Content-Type", "application/json")
		switch q := r.URL.Query().Get("q"); {
		case r.Header.Get("X-Subscription-Token") != key:
			w.WriteHeader(http.StatusUnprocessableEntity)
			w.Write(tokenErr)
		case q == "rate":
			w.WriteHeader(http.StatusTooManyRequests)
			w.Write(rateErr)
		case q == "nothing":
			fmt.Fprint(w, `{"type":"search","query":{"original":"nothing"},"mixed":{"type":"mixed","main":[],"top":[],"side":[]}}`)
		default:
			if c := r.URL.Query().Get("count"); c == "" {
				t.Error("no count parameter")
			}
			w.Write(ok)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func search(s *Search, args map[string]any) (string, error) {
	out, err := s.Run(context.Background(), tool.Call{Name: "web_search", Arguments: args})
	if err != nil {
		return "", err
	}
	return out.(string), nil
}

func TestSearch(t *testing.T) {
	srv := braveFake(t, "good-key")
	s := mustSearch(t, SearchOptions{APIKey: "good-key", BaseURL: srv.URL, Count: 2})
	got, err := search(s, map[string]any{"query": "golang os.Root"})
	if err != nil {
		t.Fatal(err)
	}
	want := `Results for: golang os.Root

1. os package - os - Go Packages
   https://pkg.go.dev/os#Root
   Root may be used to only access files within a single directory tree. Methods on Root can only access files and directories beneath a root directory.

2. Traversal-resistant file APIs - The Go Programming Language
   https://go.dev/blog/osroot
   Go 1.24 adds the os.Root type & functions that prevent path traversal "escapes".`
	if got != want {
		t.Errorf("web_search =\n%s\nwant\n%s", got, want)
	}
	if got, _ := search(s, map[string]any{"query": "golang os.Root", "count": 3}); !strings.Contains(got, "3. A third result\n   https://example.org/third") {
		t.Errorf("count 3: %s", got)
	}
	if got, _ := search(s, map[string]any{"query": "nothing"}); got != "No results for: nothing" {
		t.Errorf("no results: %q", got)
	}
	if _, err := search(s, map[string]any{"query": "rate"}); err == nil || !strings.Contains(err.Error(), "rate limit") || !strings.Contains(err.Error(), "Request rate limit exceeded for plan.") {
		t.Errorf("rate limited: %v", err)
	}
	bad := mustSearch(t, SearchOptions{APIKey: "bad-key", BaseURL: srv.URL})
	if _, err := search(bad, map[string]any{"query": "x"}); err == nil || !strings.Contains(err.Error(), "refused the API key") || !strings.Contains(err.Error(), "SUBSCRIPTION_TOKEN_INVALID") {
		t.Errorf("a bad key: %v", err)
	}
	for _, tc := range []struct {
		cfg  SearchOptions
		want string
	}{
		{SearchOptions{BaseURL: srv.URL, APIKeyVar: "BRAVE_API_KEY"}, "takes it from BRAVE_API_KEY, which is not set"},
		{SearchOptions{BaseURL: srv.URL}, "set builtins.web.search.api-key"},
	} {
		if _, err := search(mustSearch(t, tc.cfg), map[string]any{"query": "x"}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("no key: %v, want %q", err, tc.want)
		}
	}
	if _, err := search(s, map[string]any{"query": " "}); err == nil {
		t.Error("an empty query was sent")
	}
	if _, err := search(s, map[string]any{"query": "x", "count": 21}); err == nil {
		t.Error("count 21 was accepted")
	}
	down := mustSearch(t, SearchOptions{APIKey: "k", BaseURL: "http://127.0.0.1:1"})
	if _, err := search(down, map[string]any{"query": "x"}); err == nil || !strings.Contains(err.Error(), "did not answer") {
		t.Errorf("API down: %v", err)
	}
}

func TestToolKinds(t *testing.T) {
	var f tool.Tool = NewFetch(FetchOptions{})
	if ro, ok := f.(tool.ReadOnly); ok && ro.ReadOnly() {
		t.Error("web_fetch must need confirmation")
	}
	var s tool.Tool = mustSearch(t, SearchOptions{})
	if ro, ok := s.(tool.ReadOnly); !ok || !ro.ReadOnly() {
		t.Error("web_search must be read-only")
	}
	if _, ok := f.(tool.Limited); !ok {
		t.Error("web_fetch has no limits")
	}
	var be *netguard.BlockedError
	_, err := NewFetch(FetchOptions{}).Run(context.Background(), tool.Call{Arguments: map[string]any{"url": "http://127.0.0.1/"}})
	if !errors.As(err, &be) {
		t.Errorf("the refusal is not a *BlockedError: %v", err)
	}
}

func mustSearch(t *testing.T, cfg SearchOptions) *Search {
	t.Helper()
	s, err := NewSearch(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestSearchEngines: Tavily, SearXNG and Jina are asked as each
// documents it (Tavily: POST /search {query, max_results} with a Bearer
// key; SearXNG: GET /search?q=…&format=json; Jina: GET /?q=… with Accept:
// application/json and a Bearer key), and their answers listed as
// nanobot lists them.
func TestSearchEngines(t *testing.T) {
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		seen = append(seen, fmt.Sprintf("%s %s %s %s", r.Method, r.URL.RequestURI(), r.Header.Get("Authorization"), b))
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.URL.Path == "/search" && r.Method == http.MethodPost: // Tavily
			fmt.Fprint(w, `{"query":"go","answer":null,"images":[],"results":[{"title":"The Go Programming Language","url":"https://go.dev/","content":"Go is an open source programming language.","score":0.98,"raw_content":null}],"response_time":0.9}`)
		case r.URL.Path == "/searx/search": // SearXNG
			fmt.Fprint(w, `{"query":"go","number_of_results":0,"results":[{"url":"https://go.dev/","title":"The Go <b>Programming</b> Language","content":"Build simple, secure, scalable systems.","engine":"duckduckgo","engines":["duckduckgo"],"score":1.0,"category":"general"}],"answers":[],"corrections":[],"infoboxes":[],"suggestions":[],"unresponsive_engines":[]}`)
		case r.URL.Path == "/": // Jina
			fmt.Fprint(w, `{"code":200,"status":20000,"data":[{"title":"The Go Programming Language","url":"https://go.dev/","description":"Go is expressive, concise, clean, and efficient.","content":"long page text","usage":{"tokens":1000}}]}`)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	for _, tc := range []struct {
		opts      SearchOptions
		request   string
		title, sn string
	}{
		{SearchOptions{Provider: Tavily, APIKey: "tvly-k", BaseURL: srv.URL}, `POST /search Bearer tvly-k {"max_results":3,"query":"go"}`, "The Go Programming Language", "Go is an open source programming language."},
		{SearchOptions{Provider: SearXNG, BaseURL: srv.URL + "/searx/"}, "GET /searx/search?format=json&q=go  ", "The Go Programming Language", "Build simple, secure, scalable systems."},
		{SearchOptions{Provider: Jina, APIKey: "jina-k", BaseURL: srv.URL}, "GET /?q=go Bearer jina-k ", "The Go Programming Language", "Go is expressive, concise, clean, and efficient."},
	} {
		seen = nil
		got, err := search(mustSearch(t, tc.opts), map[string]any{"query": "go", "count": 3})
		if err != nil {
			t.Fatalf("%s: %v", tc.opts.Provider, err)
		}
		want := "Results for: go\n\n1. " + tc.title + "\n   https://go.dev/\n   " + tc.sn
		if len(seen) != 1 || seen[0] != tc.request || got != want {
			t.Errorf("%s: sent %q, want %q\ngot %q\nwant %q", tc.opts.Provider, seen, tc.request, got, want)
		}
	}
	if _, err := NewSearch(SearchOptions{Provider: SearXNG}); err == nil {
		t.Error("SearXNG without an address was accepted")
	}
	if _, err := NewSearch(SearchOptions{Provider: "bing"}); err == nil {
		t.Error("an unknown engine was accepted")
	}
	if _, err := search(mustSearch(t, SearchOptions{Provider: Tavily, BaseURL: srv.URL, KeyName: "tools.web.search.apiKey"}), map[string]any{"query": "go"}); err == nil || !strings.Contains(err.Error(), "set tools.web.search.apiKey") {
		t.Errorf("no key: %v", err)
	}
}
