package provider

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

type flaky struct {
	errs  []error
	calls int
	emit  bool
}

func (f *flaky) ID() string { return "flaky" }
func (f *flaky) Complete(ctx context.Context, req Request, onEvent func(Event)) (*Response, error) {
	f.calls++
	if f.emit {
		onEvent(Event{Kind: TextDelta, Text: "partial"})
	}
	if len(f.errs) > 0 {
		err := f.errs[0]
		f.errs = f.errs[1:]
		return nil, err
	}
	return &Response{Text: "ok"}, nil
}

func TestRetrySchedule(t *testing.T) {
	var slept []time.Duration
	policy := DefaultRetryPolicy()
	policy.Jitter = false
	policy.Sleep = func(ctx context.Context, d time.Duration) error { slept = append(slept, d); return nil }
	f := &flaky{errs: []error{&Error{Provider: "x", Status: 429, Retryable: true}, &Error{Provider: "x", Status: 503, Retryable: true}}}
	resp, err := WithRetry(f, policy).Complete(context.Background(), Request{}, nil)
	if err != nil || resp.Text != "ok" || f.calls != 3 {
		t.Fatalf("got %v %v after %d calls", resp, err, f.calls)
	}
	if len(slept) != 2 || slept[0] != time.Second || slept[1] != 2*time.Second {
		t.Fatalf("delays %v, want [1s 2s]", slept)
	}
	if d := policy.Delay(10); d != 60*time.Second {
		t.Fatalf("delay cap: %v", d)
	}
}

func TestRetryGivesUp(t *testing.T) {
	policy := DefaultRetryPolicy()
	policy.Sleep = func(context.Context, time.Duration) error { return nil }
	e := &Error{Provider: "x", Status: 500, Retryable: true}
	f := &flaky{errs: []error{e, e, e, e}}
	_, err := WithRetry(f, policy).Complete(context.Background(), Request{}, nil)
	if !errors.Is(err, e) || f.calls != 3 {
		t.Fatalf("err %v after %d calls, want 3 calls", err, f.calls)
	}
}

func TestNoRetry(t *testing.T) {
	policy := DefaultRetryPolicy()
	policy.Sleep = func(context.Context, time.Duration) error { return nil }
	for name, f := range map[string]*flaky{
		"401":               {errs: []error{&Error{Provider: "x", Status: 401}}},
		"after data":        {errs: []error{&Error{Provider: "x", Retryable: true}}, emit: true},
		"retry-after > cap": {errs: []error{&Error{Provider: "x", Status: 429, Retryable: true, RetryAfter: 2 * time.Minute}}},
	} {
		WithRetry(f, policy).Complete(context.Background(), Request{}, func(Event) {})
		if f.calls != 1 {
			t.Errorf("%s: %d calls, want 1", name, f.calls)
		}
	}
}

func TestRetryAfterHonoured(t *testing.T) {
	var slept []time.Duration
	policy := DefaultRetryPolicy()
	policy.Sleep = func(ctx context.Context, d time.Duration) error { slept = append(slept, d); return nil }
	f := &flaky{errs: []error{&Error{Provider: "x", Status: 429, Retryable: true, RetryAfter: 7 * time.Second}}}
	WithRetry(f, policy).Complete(context.Background(), Request{}, nil)
	if len(slept) != 1 || slept[0] != 7*time.Second {
		t.Fatalf("slept %v, want [7s]", slept)
	}
}

func TestErrorFromResponse(t *testing.T) {
	CredentialHints["fake"] = "provider.credentials.api-key"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/401":
			w.WriteHeader(401)
			w.Write([]byte(`{"error":{"message":"Incorrect API key provided","type":"invalid_request_error","code":"invalid_api_key"}}`))
		case "/429":
			w.Header().Set("Retry-After", "20")
			w.WriteHeader(429)
			w.Write([]byte(`{"error":"slow down"}`))
		case "/429-huge":
			// A count of seconds too large for a Duration: capped, not
			// wrapped round to a negative wait.
			w.Header().Set("Retry-After", "99999999999")
			w.WriteHeader(429)
			w.Write([]byte(`{"error":"slow down"}`))
		case "/500":
			w.WriteHeader(500)
			w.Write([]byte(`upstream exploded`))
		}
	}))
	defer srv.Close()
	tests := map[string]struct {
		want      string
		retryable bool
		after     time.Duration
	}{
		"/401":      {"fake: HTTP 401 Unauthorized: Incorrect API key provided (check provider.credentials.api-key)", false, 0},
		"/429":      {"fake: HTTP 429 Too Many Requests: slow down", true, 20 * time.Second},
		"/429-huge": {"fake: HTTP 429 Too Many Requests: slow down", true, maxRetryAfter},
		"/500":      {"fake: HTTP 500 Internal Server Error: upstream exploded", true, 0},
	}
	for path, tt := range tests {
		_, _, err := Post(context.Background(), srv.Client(), "fake", srv.URL+path, nil, map[string]any{})
		var pe *Error
		if !errors.As(err, &pe) {
			t.Fatalf("%s: %v", path, err)
		}
		if pe.Error() != tt.want || pe.Retryable != tt.retryable || pe.RetryAfter != tt.after {
			t.Errorf("%s: %q retryable=%v after=%v", path, pe.Error(), pe.Retryable, pe.RetryAfter)
		}
	}
}

func TestConnectionRefused(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	_, _, err := Post(context.Background(), http.DefaultClient, "fake", url+"/v1", nil, map[string]any{})
	if err == nil || IsRetryable(err) || !strings.Contains(err.Error(), "cannot reach "+url+"/v1") || !strings.Contains(err.Error(), "is the server running?") {
		t.Fatalf("got %v", err)
	}
}

// A password in the address (a gateway with basic authentication) is not
// repeated in the error.
func TestConnectionRefusedHidesPassword(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	addr := strings.Replace(srv.URL, "http://", "http://user:s3cret@", 1)
	srv.Close()
	_, _, err := Post(context.Background(), http.DefaultClient, "fake", addr+"/v1", nil, map[string]any{})
	if err == nil || strings.Contains(err.Error(), "s3cret") || !strings.Contains(err.Error(), "cannot reach http://user:xxxxx@") {
		t.Fatalf("got %v", err)
	}
	_, _, err = Post(context.Background(), http.DefaultClient, "fake", "http://user:s3cret@[::1", nil, map[string]any{})
	if err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("invalid address: got %v", err)
	}
}

func TestStall(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("data: a\n\n"))
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	defer srv.Close()
	body, _, err := Send(context.Background(), HTTPRequest{Provider: "fake", Client: srv.Client(), URL: srv.URL, Body: map[string]any{}, Stream: true, Timeouts: Timeouts{Idle: 100 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	defer body.Close()
	s := NewSSEReader(body)
	if _, err := s.Next(); err != nil {
		t.Fatal(err)
	}
	_, err = s.Next()
	err = ReadError(context.Background(), "fake", err, true)
	if err == nil || !strings.Contains(err.Error(), "stalled") {
		t.Fatalf("got %v", err)
	}
}

func TestJoinURL(t *testing.T) {
	for in, want := range map[string]string{
		"https://api.openai.com":        "https://api.openai.com/v1/chat/completions",
		"https://api.openai.com/":       "https://api.openai.com/v1/chat/completions",
		"http://localhost:8080/v1":      "http://localhost:8080/v1/chat/completions",
		"https://openrouter.ai/api":     "https://openrouter.ai/api/v1/chat/completions",
		"https://openrouter.ai/api/v1/": "https://openrouter.ai/api/v1/chat/completions",
	} {
		if got := JoinURL(in, "/v1/chat/completions"); got != want {
			t.Errorf("JoinURL(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestBodyDropsNulls(t *testing.T) {
	c := Config{Settings: map[string]any{"model": "m", "seed": nil, "tool_choice": map[string]any{"type": "auto", "name": nil}, "stop": []any{"."}}}
	b := c.Body()
	if _, ok := b["seed"]; ok {
		t.Error("null seed kept")
	}
	if tc := b["tool_choice"].(map[string]any); len(tc) != 1 {
		t.Errorf("nested null kept: %v", tc)
	}
	b["stop"].([]any)[0] = "x"
	if c.Settings["stop"].([]any)[0] != "." {
		t.Error("Body shares memory with the settings")
	}
}
