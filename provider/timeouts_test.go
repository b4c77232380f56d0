package provider

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// silentServer accepts connections and reads what arrives, but never
// writes a byte: a provider that took the connection and hangs. It counts
// the connections.
func silentServer(t *testing.T) (addr string, conns *atomic.Int32) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	conns = &atomic.Int32{}
	done := make(chan struct{})
	t.Cleanup(func() { close(done); ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			go func() {
				defer c.Close()
				go io.Copy(io.Discard, c) //nolint:errcheck // drain until closed
				<-done
			}()
		}
	}()
	return ln.Addr().String(), conns
}

func timeoutOf(t *testing.T, err error) *TimeoutError {
	t.Helper()
	var te *TimeoutError
	if !errors.As(err, &te) {
		t.Fatalf("want a *TimeoutError, got %T %v", err, err)
	}
	return te
}

// A server that accepts the request and never answers fails at the
// first-byte limit, not after minutes, and the error says which limit,
// which provider and which address, without the password.
func TestFirstByteTimeout(t *testing.T) {
	addr, _ := silentServer(t)
	url := "http://user:s3cret@" + addr + "/v1/chat/completions"
	start := time.Now()
	_, _, err := Send(context.Background(), HTTPRequest{Provider: "openai", URL: url, Body: map[string]any{"x": 1}, Stream: true,
		Timeouts: Timeouts{FirstByte: 300 * time.Millisecond}})
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("took %v", d)
	}
	te := timeoutOf(t, err)
	if te.Limit != LimitFirstByte || te.After != 300*time.Millisecond || te.Provider != "openai" {
		t.Errorf("%+v", te)
	}
	msg := err.Error()
	for _, want := range []string{"openai: ", "http://user:xxxxx@" + addr + "/v1/chat/completions", "300ms", "provider.timeouts.first-byte"} {
		if !strings.Contains(msg, want) {
			t.Errorf("%q lacks %q", msg, want)
		}
	}
	if strings.Contains(msg, "s3cret") {
		t.Errorf("password in %q", msg)
	}
	if !IsRetryable(err) {
		t.Error("a timeout is worth one more try")
	}
}

// A TLS endpoint whose handshake never completes fails at the connect
// limit (the handshake is part of connecting).
func TestConnectTimeout(t *testing.T) {
	addr, _ := silentServer(t)
	_, _, err := Send(context.Background(), HTTPRequest{Provider: "anthropic", URL: "https://" + addr + "/v1/messages?key=k3y", Body: map[string]any{}, Stream: true,
		Timeouts: Timeouts{Connect: 300 * time.Millisecond, FirstByte: time.Minute}})
	te := timeoutOf(t, err)
	if te.Limit != LimitConnect {
		t.Fatalf("%+v", te)
	}
	if msg := err.Error(); !strings.Contains(msg, "could not connect to https://"+addr) || !strings.Contains(msg, "provider.timeouts.connect") || strings.Contains(msg, "k3y") {
		t.Errorf("%q", msg)
	}
}

// Headers then silence: the idle limit ends the wait, as a *TimeoutError
// from the body's Read.
func TestIdleTimeoutAfterHeaders(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	defer srv.Close()
	body, _, err := Send(context.Background(), HTTPRequest{Provider: "mistral", Client: srv.Client(), URL: srv.URL, Body: map[string]any{}, Stream: true,
		Timeouts: Timeouts{Idle: 200 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	defer body.Close()
	_, err = NewSSEReader(body).Next()
	te := timeoutOf(t, err)
	if te.Limit != LimitIdle || te.Sending {
		t.Fatalf("%+v", te)
	}
	err = ReadError(context.Background(), "mistral", err, false)
	if msg := err.Error(); !strings.Contains(msg, "the response from "+srv.URL+" stalled") || !strings.Contains(msg, "provider.timeouts.idle") || !IsRetryable(err) {
		t.Errorf("%q", msg)
	}
	if ReadError(context.Background(), "mistral", te, true).(*Error).Streamed != true {
		t.Error("a stall after data is marked streamed")
	}
}

// A model that streams slowly but steadily is never cut: the whole answer
// takes longer than both the first-byte and the idle limits.
func TestSlowSteadyStreamSucceeds(t *testing.T) {
	const pieces = 12
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range pieces {
			time.Sleep(100 * time.Millisecond)
			fmt.Fprintf(w, "data: %d\n\n", i)
			w.(http.Flusher).Flush()
		}
	}))
	defer srv.Close()
	start := time.Now()
	body, _, err := Send(context.Background(), HTTPRequest{Provider: "ollama", Client: srv.Client(), URL: srv.URL, Body: map[string]any{}, Stream: true,
		Timeouts: Timeouts{FirstByte: 400 * time.Millisecond, Idle: 400 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	defer body.Close()
	s := NewSSEReader(body)
	n := 0
	for {
		_, err := s.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("after %d events: %v", n, err)
		}
		n++
	}
	if n != pieces || time.Since(start) < 1200*time.Millisecond {
		t.Fatalf("%d events in %v", n, time.Since(start))
	}
}

// A server that never reads a large request body: sending it stalls and
// the idle limit ends it.
func TestSendStallTimeout(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan struct{})
	defer close(done)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		c.(*net.TCPConn).SetReadBuffer(4096) //nolint:errcheck // small buffers fill soon
		bufio.NewReader(c).ReadString('\n')  //nolint:errcheck // the request line, then nothing more
		<-done
	}()
	// Small socket buffers, so that a few megabytes fill them.
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err == nil {
			c.(*net.TCPConn).SetWriteBuffer(4096) //nolint:errcheck // best effort
		}
		return c, err
	}}}
	big := strings.Repeat("x", 4<<20)
	_, _, err = Send(context.Background(), HTTPRequest{Provider: "google", Client: client, URL: "http://" + ln.Addr().String() + "/v1", Body: map[string]any{"image": big}, Stream: true,
		Timeouts: Timeouts{Idle: 300 * time.Millisecond, FirstByte: time.Minute}})
	te := timeoutOf(t, err)
	if te.Limit != LimitIdle || !te.Sending || !strings.Contains(err.Error(), "sending the request to") {
		t.Fatalf("%+v %v", te, err)
	}
}

// The defaults suit language models: a dead endpoint fails within about
// two minutes with its one retry; a whole (not streamed) answer may take
// minutes before its first byte.
func TestDefaultTimeouts(t *testing.T) {
	s, w := DefaultTimeouts(true), DefaultTimeouts(false)
	if s.Connect != 10*time.Second || s.FirstByte != time.Minute || s.Idle != 5*time.Minute || w.FirstByte != 10*time.Minute {
		t.Fatalf("%+v %+v", s, w)
	}
	if got := (Timeouts{FirstByte: time.Second}).Or(s); got != (Timeouts{Connect: 10 * time.Second, FirstByte: time.Second, Idle: 5 * time.Minute}) {
		t.Fatalf("%+v", got)
	}
}

// silentProvider posts to a silent server with short limits.
type silentProvider struct {
	url string
}

func (p silentProvider) ID() string { return "silent" }
func (p silentProvider) Complete(ctx context.Context, req Request, onEvent func(Event)) (*Response, error) {
	_, _, err := Send(ctx, HTTPRequest{Provider: "silent", URL: p.url, Body: map[string]any{}, Stream: true, Timeouts: Timeouts{FirstByte: 150 * time.Millisecond}})
	return nil, err
}

// However many retries the policy allows, a request that timed out is
// tried again once only, and OnRetry reports that retry.
func TestTimeoutRetriedOnce(t *testing.T) {
	addr, conns := silentServer(t)
	policy := DefaultRetryPolicy()
	policy.MaxRetries = 5
	policy.Sleep = func(context.Context, time.Duration) error { return nil }
	var reports []string
	policy.OnRetry = func(err error, attempt int, delay time.Duration) {
		reports = append(reports, fmt.Sprintf("%d %v %v", attempt, delay > 0, errors.As(err, new(*TimeoutError))))
	}
	_, err := WithRetry(silentProvider{url: "http://" + addr + "/v1"}, policy).Complete(context.Background(), Request{}, nil)
	timeoutOf(t, err)
	if n := conns.Load(); n != 2 {
		t.Errorf("%d attempts, want 2", n)
	}
	if len(reports) != 1 || reports[0] != "1 true true" {
		t.Errorf("OnRetry calls %q", reports)
	}
}

// OnRetry hears of every retried failure: its error, the number of the
// retry, and the delay before it; nothing else.
func TestOnRetryReportsEachRetry(t *testing.T) {
	policy := DefaultRetryPolicy()
	policy.Jitter = false
	policy.Sleep = func(context.Context, time.Duration) error { return nil }
	type report struct {
		err     error
		attempt int
		delay   time.Duration
	}
	var got []report
	policy.OnRetry = func(err error, attempt int, delay time.Duration) { got = append(got, report{err, attempt, delay}) }
	e429 := &Error{Provider: "x", Status: 429, Retryable: true, RetryAfter: 3 * time.Second}
	e503 := &Error{Provider: "x", Status: 503, Retryable: true}
	f := &flaky{errs: []error{e429, e503}}
	if _, err := WithRetry(f, policy).Complete(context.Background(), Request{}, nil); err != nil {
		t.Fatal(err)
	}
	want := []report{{e429, 1, 3 * time.Second}, {e503, 2, 2 * time.Second}}
	if len(got) != len(want) {
		t.Fatalf("got %+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("retry %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
	// A failure after streamed data is not retried, and not reported.
	got = nil
	f = &flaky{errs: []error{e503}, emit: true}
	if _, err := WithRetry(f, policy).Complete(context.Background(), Request{}, func(Event) {}); !errors.Is(err, e503) || f.calls != 1 || got != nil {
		t.Errorf("err %v calls %d reports %+v", err, f.calls, got)
	}
}

// The proxy comes from the environment Getenv gives, never from the
// process's; NO_PROXY is honoured.
func TestClientForProxy(t *testing.T) {
	var proxied atomic.Int32
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		proxied.Add(1)
		if r.URL.Host != "model.example" { // a proxy gets the absolute URL
			http.Error(w, "bad proxy request "+r.URL.String(), 400)
			return
		}
		w.Write([]byte(`{}`))
	}))
	defer proxy.Close()
	env := map[string]string{"HTTP_PROXY": proxy.URL, "NO_PROXY": ".invalid"}
	c := ClientFor(func(k string) string { return env[k] })
	if c != ClientFor(func(k string) string { return env[k] }) {
		t.Error("clients with the same proxy are not shared")
	}
	body, _, err := Send(context.Background(), HTTPRequest{Provider: "x", Client: c, URL: "http://model.example/v1", Body: map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	body.Close()
	if proxied.Load() != 1 {
		t.Fatal("the request did not go through the proxy")
	}
	// NO_PROXY: direct, so the unresolvable name fails without the proxy.
	_, _, err = Send(context.Background(), HTTPRequest{Provider: "x", Client: c, URL: "http://direct.example.invalid/v1", Body: map[string]any{}})
	if err == nil || proxied.Load() != 1 {
		t.Fatalf("NO_PROXY ignored: %v, %d proxied", err, proxied.Load())
	}
	if ClientFor(nil).Transport.(*http.Transport).Proxy != nil {
		t.Error("no environment, yet a proxy")
	}
}

// A pooled connection keeps its buffers for as long as it lives, and a
// server keeps one connection per request in flight: the shared
// transport's stay at 4 KiB (a gateway with 100 turns at once held 100
// read buffers of 64 KiB, a third of its live heap), and an answer far
// larger than them still arrives whole.
func TestClientForSmallBuffers(t *testing.T) {
	tr := ClientFor(nil).Transport.(*http.Transport)
	if tr.ReadBufferSize > 4<<10 || tr.WriteBufferSize > 4<<10 {
		t.Errorf("connection buffers: read %d, write %d bytes (at most 4 KiB each)", tr.ReadBufferSize, tr.WriteBufferSize)
	}
	answer := strings.Repeat("0123456789abcdef", 1<<16) // 1 MiB
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		io.WriteString(w, answer)
	}))
	defer srv.Close()
	body, _, err := Send(context.Background(), HTTPRequest{Provider: "x", URL: srv.URL, Body: map[string]any{"big": answer[:100<<10]}})
	if err != nil {
		t.Fatal(err)
	}
	defer body.Close()
	got, err := io.ReadAll(body)
	if err != nil || string(got) != answer {
		t.Fatalf("read %d bytes of %d: %v", len(got), len(answer), err)
	}
}
