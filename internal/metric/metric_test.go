package metric

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nbots/nb/internal/httpguard"
)

func TestLabelIsBounded(t *testing.T) {
	for in, want := range map[string]string{
		"":                       "none",
		"gpt-4o-mini":            "gpt-4o-mini",
		"models/gemini-2.5:x@1":  "models/gemini-2.5:x@1",
		`a"b`:                    Other,
		"a b":                    Other,
		"a\nb":                   Other,
		strings.Repeat("x", 101): Other,
	} {
		if got := Label("test-kind", in); got != want {
			t.Errorf("Label(%q) = %q, want %q", in, got, want)
		}
	}
	for i := range MaxValues + 10 {
		Label("test-cap", fmt.Sprint("v", i))
	}
	if got := Label("test-cap", "v5"); got != "v5" {
		t.Errorf("a value kept early: %q", got)
	}
	if got := Label("test-cap", "new-one"); got != Other {
		t.Errorf("past MaxValues: %q", got)
	}
}

var expositionRuns atomic.Int32

func TestExpositionHasHelpTypeAndBuckets(t *testing.T) {
	// The families are the process's: each run (-count) observes under a
	// label value of its own.
	v := fmt.Sprint("v", expositionRuns.Add(1))
	h := NewHistogram("nb_test_seconds", "A test histogram.", .1, 1)
	h.Observe(.5, "k", v)
	c := NewCounter("nb_test_total", "A test counter.")
	c.Inc("k", v)
	var b strings.Builder
	Write(&b)
	out := b.String()
	for _, want := range []string{
		"# HELP nb_test_seconds A test histogram.\n# TYPE nb_test_seconds histogram\n",
		`nb_test_seconds_bucket{k="` + v + `",le="0.1"} 0` + "\n",
		`nb_test_seconds_bucket{k="` + v + `",le="1"} 1` + "\n",
		`nb_test_seconds_bucket{k="` + v + `",le="+Inf"} 1` + "\n",
		`nb_test_seconds_count{k="` + v + `"} 1` + "\n",
		"# HELP nb_test_total A test counter.\n# TYPE nb_test_total counter\n",
		`nb_test_total{k="` + v + `"} 1` + "\n",
		"# TYPE go_goroutines gauge\n",
		"# TYPE process_cpu_seconds_total counter\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q", want)
		}
	}
	for line := range strings.Lines(out) {
		if strings.HasPrefix(line, "# HELP ") && len(strings.Fields(line)) < 4 {
			t.Errorf("HELP without text: %q", line)
		}
	}
}

func TestGuard(t *testing.T) {
	tok, _ := httpguard.NewToken("", "0123456789abcdef0123")
	for _, c := range []struct {
		name   string
		auth   Auth
		header map[string]string
		host   string
		want   int
	}{
		{"loopback, no token", nil, nil, "", 200},
		{"rebinding host", nil, nil, "evil.example", 403},
		{"any origin", nil, map[string]string{"Origin": "http://127.0.0.1"}, "", 403},
		{"token missing", Tokens([]*httpguard.Token{tok}), nil, "", 401},
		{"token given", Tokens([]*httpguard.Token{tok}), map[string]string{"Authorization": "Bearer 0123456789abcdef0123"}, "", 200},
		{"short secret", Secret("abc"), map[string]string{"Authorization": "Bearer abc"}, "", 200},
		{"wrong secret", Secret("abc"), map[string]string{"Authorization": "Bearer abd"}, "", 401},
	} {
		srv := httptest.NewServer(Guard(c.auth, Handler()))
		req, _ := http.NewRequest("GET", srv.URL+"/metrics", nil)
		for k, v := range c.header {
			req.Header.Set(k, v)
		}
		if c.host != "" {
			req.Host = c.host
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		srv.Close()
		if resp.StatusCode != c.want {
			t.Errorf("%s: %d, want %d", c.name, resp.StatusCode, c.want)
		}
	}
}

func TestListenRefusesBeyondLoopbackWithoutToken(t *testing.T) {
	if _, err := Listen(context.Background(), "0.0.0.0:0", nil, nil); err == nil {
		t.Fatal("listening beyond loopback without a token")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addr, err := Listen(ctx, "127.0.0.1:0", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + addr.String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != ContentType {
		t.Errorf("%d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
}

func TestGaugeFuncIsReplaced(t *testing.T) {
	g := NewGauge("nb_test_func", "A test gauge.")
	g.Func(func() float64 { return 1 }, "k", "v")
	g.Func(func() float64 { return 2 }, "k", "v")
	var b strings.Builder
	Write(&b)
	if !strings.Contains(b.String(), `nb_test_func{k="v"} 2`+"\n") {
		t.Errorf("the second function is not read:\n%s", b.String())
	}
}

// Route patterns keep their spaces and braces, but are bounded as other
// labels: none is "unmatched", past MaxValues a new one is Other.
func TestRouteLabelIsBounded(t *testing.T) {
	if got := routeLabel(""); got != "unmatched" {
		t.Errorf(`routeLabel("") = %q`, got)
	}
	if got := routeLabel("GET /a/{id}"); got != "GET /a/{id}" {
		t.Errorf("a pattern: %q", got)
	}
	if got := routeLabel(`GET /"`); got != Other {
		t.Errorf("a quote: %q", got)
	}
	for i := range MaxValues + 10 {
		routeLabel(fmt.Sprint("GET /r", i))
	}
	if got := routeLabel("GET /a/{id}"); got != "GET /a/{id}" {
		t.Errorf("a pattern kept early: %q", got)
	}
	if got := routeLabel("POST /new"); got != Other {
		t.Errorf("past MaxValues: %q", got)
	}
}

// A server error is listed once by its method and route, whether the
// route's pattern names the method or not.
func TestHTTPErrorNamesMethodOnce(t *testing.T) {
	// Other tests fill the routes' budget of values: start it afresh.
	labelsMu.Lock()
	saved := labels["route"]
	delete(labels, "route")
	labelsMu.Unlock()
	defer func() {
		labelsMu.Lock()
		labels["route"] = saved
		labelsMu.Unlock()
	}()
	HTTP("test", "POST /v1/chat/completions", "POST", 502, time.Millisecond)
	HTTP("test", "/ready", "GET", 503, time.Millisecond)
	errs := LastErrors()
	if len(errs) < 2 {
		t.Fatalf("errors: %+v", errs)
	}
	if got, want := errs[1].Message, "POST /v1/chat/completions: HTTP 502"; got != want {
		t.Errorf("a pattern with its method: %q, want %q", got, want)
	}
	if got, want := errs[0].Message, "GET /ready: HTTP 503"; got != want {
		t.Errorf("a pattern without: %q, want %q", got, want)
	}
}

// TestQueueFuncReadsOncePerScrape: the two queue gauges of a channel come
// from one call of its depth function per scrape, so they agree and a
// queue that takes a lock to count is counted once.
func TestQueueFuncReadsOncePerScrape(t *testing.T) {
	calls := 0
	QueueFunc("once-per-scrape", func() (int, int) { calls++; return 5 * calls, calls })
	for scrape := 1; scrape <= 3; scrape++ {
		var b strings.Builder
		Write(&b)
		if calls != scrape {
			t.Fatalf("after %d scrapes the depth was read %d times, want %d", scrape, calls, scrape)
		}
		for _, want := range []string{
			fmt.Sprintf("nb_gateway_queue_depth{channel=\"once-per-scrape\"} %d\n", 5*scrape),
			fmt.Sprintf("nb_gateway_queue_depth_max{channel=\"once-per-scrape\"} %d\n", scrape),
		} {
			if !strings.Contains(b.String(), want) {
				t.Errorf("scrape %d lacks %q", scrape, want)
			}
		}
	}
}
