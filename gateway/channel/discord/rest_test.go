package discord

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nbots/nb/gateway/channel"
)

// TestGlobalRateLimit: a global 429 holds every route, not only its own.
func TestGlobalRateLimit(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			w.Header().Set("X-RateLimit-Global", "true")
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusTooManyRequests)
			w.Write([]byte(`{"message":"You are being rate limited.","retry_after":0.4,"global":true}`)) //nolint:errcheck // test
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	r := &rest{base: srv.URL, auth: "Bot x", hc: srv.Client()}
	ctx := context.Background()
	err := r.do(ctx, request{method: "POST", path: "/channels/1/typing", route: "POST /channels/{id}/typing", major: "1"}, nil)
	var rl *rateLimited
	if !errors.As(err, &rl) || !rl.Global || rl.After != 400*time.Millisecond {
		t.Fatalf("the 429: %v", err)
	}
	t0 := time.Now()
	if err := r.do(ctx, request{method: "POST", path: "/channels/2/typing", route: "POST /channels/{id}/typing", major: "2"}, nil); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(t0); d < 300*time.Millisecond {
		t.Errorf("another channel's request went after %s, during a global limit", d)
	}
}

// TestServerErrorNotUndeliverable: a 5xx may pass; it is not reported as
// undeliverable, and Discord's message is kept.
func TestServerErrorNotUndeliverable(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadGateway)
		w.Write([]byte(`{"message":"upstream","code":0}`)) //nolint:errcheck // test
	}))
	defer srv.Close()
	r := &rest{base: srv.URL, auth: "Bot x", hc: srv.Client()}
	err := deliveryError(r.do(context.Background(), request{method: "GET", path: "/users/@me", route: "GET /users/@me"}, nil))
	var ae *apiError
	if !errors.As(err, &ae) || ae.Status != http.StatusBadGateway || err.Error() != "discord: 502 upstream (code 0)" || channel.IsUndeliverable(err) {
		t.Errorf("%v", err)
	}
}

// TestRateLimitWaitsRead: a 429's retry_after cannot ask for more than
// maxRetryAfter (a huge count is not wrapped round to a negative wait),
// and without a body its Retry-After is read in either of RFC 9110's
// forms, an HTTP-date included.
func TestRateLimitWaitsRead(t *testing.T) {
	date := time.Now().Add(2 * time.Minute).UTC().Format(http.TimeFormat)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/channels/1/typing" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusTooManyRequests)
			w.Write([]byte(`{"message":"You are being rate limited.","retry_after":1e15,"global":false}`)) //nolint:errcheck // test
			return
		}
		w.Header().Set("Retry-After", date)
		w.WriteHeader(http.StatusTooManyRequests)
	}))
	defer srv.Close()
	r := &rest{base: srv.URL, auth: "Bot x", hc: srv.Client()}
	ctx := context.Background()
	var rl *rateLimited
	err := r.do(ctx, request{method: "POST", path: "/channels/1/typing", route: "POST /channels/{id}/typing", major: "1"}, nil)
	if !errors.As(err, &rl) || rl.After != maxRetryAfter {
		t.Errorf("retry_after 1e15: %v, want a wait of %v", err, maxRetryAfter)
	}
	err = r.do(ctx, request{method: "POST", path: "/channels/2/typing", route: "POST /channels/{id}/typing", major: "2"}, nil)
	if !errors.As(err, &rl) || rl.After < 110*time.Second || rl.After > 2*time.Minute {
		t.Errorf("Retry-After %s: %v, want about two minutes", date, err)
	}
}

// TestTurnsPruned: the lock of a route's channel lives while a request
// holds it or waits for it, not longer: after requests to many channels
// (several at once to each) none is left; a waiter that gives up leaves
// the lock to its holder; and the buckets whose window passed are swept
// out as more come.
func TestTurnsPruned(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-RateLimit-Remaining", "4")
		// A window that has passed once recorded (a millisecond's
		// depended on how many answers came within one: under load,
		// more than the bound).
		w.Header().Set("X-RateLimit-Reset-After", "0")
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	r := &rest{base: srv.URL, auth: "Bot x", hc: srv.Client()}
	size := func() (turns, buckets int) {
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.turns.Len(), len(r.buckets)
	}
	const channels, each = 300, 2
	var wg sync.WaitGroup
	for c := range channels {
		for range each {
			wg.Go(func() {
				id := strconv.Itoa(c)
				if err := r.do(context.Background(), request{method: "POST", path: "/channels/" + id + "/typing", route: "POST /channels/{id}/typing", major: id}, nil); err != nil {
					t.Error(err)
				}
			})
		}
	}
	wg.Wait()
	if n, _ := size(); n != 0 {
		t.Errorf("%d locks left after requests to %d channels, want 0", n, channels)
	}
	if _, n := size(); n > channels/2 {
		t.Errorf("%d buckets kept for %d channels whose windows keep passing", n, channels)
	}

	q := &request{route: "POST /channels/{id}/typing", major: "1"}
	release, err := r.take(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := r.take(ctx, q); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a second take of a held turn: %v, want it to wait until its context ends", err)
	}
	if n, _ := size(); n != 1 {
		t.Errorf("%d locks while one is held, want 1", n)
	}
	release()
	if n, _ := size(); n != 0 {
		t.Errorf("%d locks once released, want 0", n)
	}
}
