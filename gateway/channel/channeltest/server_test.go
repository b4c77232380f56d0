package channeltest

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// A fault answers one request in the platform's words; LoseAnswer carries
// the request out and loses the answer; the log hides the secrets.
func TestLoopbackFaults(t *testing.T) {
	var f Faults
	var served atomic.Int32
	a := Answers{TooMany: func(w http.ResponseWriter) {
		w.WriteHeader(http.StatusTooManyRequests)
		io.WriteString(w, "slow down") //nolint:errcheck // test
	}}
	l, err := NewLoopback(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.Serve(w, r, "send", a, func(w http.ResponseWriter) {
			served.Add(1)
			io.WriteString(w, "ok") //nolint:errcheck // test
		})
	}), "s3cret")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	f.Inject("send", TooMany, BadGateway, LoseAnswer, Reset)
	get := func() (int, string, error) {
		// POST: the client does not retry it on a reset connection.
		resp, err := http.Post(l.URL+"/bots3cret/send", "text/plain", nil)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), nil
	}
	if code, body, err := get(); err != nil || code != 429 || body != "slow down" {
		t.Errorf("TooMany: %d %q %v", code, body, err)
	}
	if code, _, err := get(); err != nil || code != 502 {
		t.Errorf("BadGateway: %d %v", code, err)
	}
	if _, _, err := get(); err == nil || served.Load() != 1 {
		t.Errorf("LoseAnswer: err %v, served %d times, want an error and 1", err, served.Load())
	}
	if _, _, err := get(); err == nil || served.Load() != 1 {
		t.Errorf("Reset: err %v, served %d times, want an error and 1", err, served.Load())
	}
	if code, body, err := get(); err != nil || code != 200 || body != "ok" {
		t.Errorf("no fault: %d %q %v", code, body, err)
	}
	if n := f.Calls("send"); n != 5 {
		t.Errorf("Calls = %d, want 5", n)
	}
	reqs := l.Requests()
	if len(reqs) != 5 || reqs[0] != "POST /bot<secret>/send" || strings.Contains(strings.Join(reqs, "\n"), "s3cret") {
		t.Errorf("Requests = %q", reqs)
	}
	if err := f.WaitCalls(context.Background(), "send", 5); err != nil {
		t.Errorf("WaitCalls for requests made: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := f.WaitCalls(ctx, "send", 6); err == nil {
		t.Error("WaitCalls for a request never made returned nil")
	}
	go get() //nolint:errcheck // only that it arrives
	if err := f.WaitCalls(context.Background(), "send", 6); err != nil {
		t.Errorf("WaitCalls for a request on its way: %v", err)
	}
}
