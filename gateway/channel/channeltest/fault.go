package channeltest

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sync"
)

// Fault is a failure a platform fake answers one request with; each fake
// answers it in its platform's own form.
type Fault int

// Faults.
const (
	// Reset closes the connection without an answer.
	Reset Fault = iota + 1
	// BadGateway answers 502, as a proxy in front of the platform does.
	BadGateway
	// Hang answers nothing until the client gives up.
	Hang
	// TooMany answers the platform's 429 with a wait of one second.
	TooMany
	// LoseAnswer carries the request out, then closes the connection
	// without the answer (only where the fake says it supports it).
	LoseAnswer
)

// ResetConnection closes the request's connection at once, with a TCP
// reset where it can; it reports false when w cannot be taken over.
func ResetConnection(w http.ResponseWriter) bool {
	hj, ok := w.(http.Hijacker)
	if !ok {
		return false
	}
	c, _, err := hj.Hijack()
	if err != nil {
		return false
	}
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetLinger(0) //nolint:errcheck // best effort: a reset, not a clean close
	}
	c.Close()
	return true
}

// Faults counts a fake's requests by endpoint and holds the faults
// injected for the next ones. Its zero value is ready; it is safe for
// concurrent use. Fakes embed it.
type Faults struct {
	mu      sync.Mutex
	calls   map[string]int
	queued  map[string][]Fault
	changed chan struct{} // closed on the next request; nil: nobody waits
}

// Inject queues faults for the next requests to the endpoint.
func (f *Faults) Inject(endpoint string, faults ...Fault) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.queued == nil {
		f.queued = map[string][]Fault{}
	}
	f.queued[endpoint] = append(f.queued[endpoint], faults...)
}

// Calls is how many requests the endpoint received.
func (f *Faults) Calls(endpoint string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[endpoint]
}

// Next counts a request to the endpoint and returns the fault to answer
// it with (0: none).
func (f *Faults) Next(endpoint string) Fault {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.calls == nil {
		f.calls = map[string]int{}
	}
	f.calls[endpoint]++
	if f.changed != nil {
		close(f.changed)
		f.changed = nil
	}
	q := f.queued[endpoint]
	if len(q) == 0 {
		return 0
	}
	f.queued[endpoint] = q[1:]
	return q[0]
}

// WaitCalls waits until the endpoint has received n requests, or ctx
// ends: a test knows a request is in the fake's hands without sleeping.
func (f *Faults) WaitCalls(ctx context.Context, endpoint string, n int) error {
	for {
		f.mu.Lock()
		got := f.calls[endpoint]
		if got < n && f.changed == nil {
			f.changed = make(chan struct{})
		}
		ch := f.changed
		f.mu.Unlock()
		if got >= n {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("%s: %d of %d requests: %w", endpoint, got, n, ctx.Err())
		}
	}
}
