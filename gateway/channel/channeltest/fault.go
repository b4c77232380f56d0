package channeltest

import (
	"net"
	"net/http"
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
