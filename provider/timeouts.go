package provider

import (
	"fmt"
	"time"
)

// Timeouts bound how long a request may wait on the network. Language
// models are slow to start and then stream for minutes, so there is no
// limit on a whole request: each phase has its own. A zero field takes
// the default (DefaultTimeouts, or a provider's own default).
type Timeouts struct {
	// Connect bounds establishing the connection: DNS, TCP, a proxy's
	// CONNECT and the TLS handshake.
	Connect time.Duration
	// FirstByte bounds the wait from the request sent to the first byte
	// of the response. Streamed answers begin when the model produces its
	// first piece; a whole answer arrives at once, so its default is long.
	FirstByte time.Duration
	// Idle bounds the silence while the request is sent and between two
	// reads of the response. A model that streams steadily, however
	// slowly, is never cut.
	Idle time.Duration
}

// The default limits. A dead endpoint that accepts connections and never
// answers fails within DefaultFirstByte; retried once, within about two
// minutes.
const (
	DefaultConnect   = 10 * time.Second
	DefaultFirstByte = 60 * time.Second
	// DefaultFirstByteWhole is the first-byte limit of a request that is
	// not streamed, whose first byte comes with the whole answer.
	DefaultFirstByteWhole = 10 * time.Minute
	// DefaultIdle is generous: reasoning models may send nothing while
	// they think.
	DefaultIdle = 5 * time.Minute
)

// Or fills the zero fields of t from d.
func (t Timeouts) Or(d Timeouts) Timeouts {
	if t.Connect <= 0 {
		t.Connect = d.Connect
	}
	if t.FirstByte <= 0 {
		t.FirstByte = d.FirstByte
	}
	if t.Idle <= 0 {
		t.Idle = d.Idle
	}
	return t
}

// DefaultTimeouts returns the default limits for a streamed request, or
// one that is not.
func DefaultTimeouts(stream bool) Timeouts {
	t := Timeouts{Connect: DefaultConnect, FirstByte: DefaultFirstByte, Idle: DefaultIdle}
	if !stream {
		t.FirstByte = DefaultFirstByteWhole
	}
	return t
}

// The limits a TimeoutError names, as the cartridge spells them under
// provider.timeouts.
const (
	LimitConnect   = "connect"
	LimitFirstByte = "first-byte"
	LimitIdle      = "idle"
)

// TimeoutError says a time limit expired: which one, after how long, for
// which provider and address (with any password hidden).
type TimeoutError struct {
	Provider string
	// Limit is LimitConnect, LimitFirstByte or LimitIdle.
	Limit string
	// After is the limit that expired.
	After time.Duration
	// Address is the URL of the request, without secrets.
	Address string
	// Sending is true when the idle limit expired while the request was
	// being sent, not while the response was read.
	Sending bool
}

func (e *TimeoutError) Error() string { return e.Provider + ": " + e.message() }

func (e *TimeoutError) message() string {
	var what string
	switch {
	case e.Limit == LimitConnect:
		what = fmt.Sprintf("could not connect to %s within %s", e.Address, e.After)
	case e.Limit == LimitFirstByte:
		what = fmt.Sprintf("%s sent no response within %s of the request", e.Address, e.After)
	case e.Sending:
		what = fmt.Sprintf("sending the request to %s stalled: no progress for %s", e.Address, e.After)
	default:
		what = fmt.Sprintf("the response from %s stalled: no data for %s", e.Address, e.After)
	}
	return what + " (time limit provider.timeouts." + e.Limit + ")"
}

// Timeout reports true, as net.Error's method does.
func (e *TimeoutError) Timeout() bool { return true }
