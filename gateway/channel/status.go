package channel

import (
	"sync"
	"time"
)

// Connection names where a channel's connection to its platform is.
type Connection string

// The connection's states.
const (
	// Connecting: the channel has not connected yet, or lost its
	// connection and is trying again (Status.Reason says why).
	Connecting Connection = "connecting"
	// Connected: the channel receives now.
	Connected Connection = "connected"
)

// Status is a channel's connection as it reports it.
type Status struct {
	State Connection `json:"state"`
	// Reason is why the channel is not connected: the last failure,
	// in the user's words and without secrets ("" while it first
	// connects).
	Reason string `json:"reason,omitempty"`
	// Since is when the state began (zero before Run).
	Since time.Time `json:"since,omitzero"`
	// Lost is true while a channel that was connected tries to connect
	// again (Since is when it lost the connection); false while it
	// first connects.
	Lost bool `json:"lost,omitempty"`
}

// Reporter is implemented by channels that say where their connection is
// (every platform channel does): the gateway's /ready and nb gateway
// channels status read it.
type Reporter interface {
	Status() Status
}

// Conn holds a channel's connection state for its Status: the receive
// loop calls Up when it connects and Down when it loses the connection
// and tries again. The zero Conn is connecting; it is safe for
// concurrent use, and a nil *Conn records nothing.
type Conn struct {
	mu sync.Mutex
	st Status
}

// Up records that the channel connected.
func (l *Conn) Up() {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.st.State != Connected {
		l.st = Status{State: Connected, Since: time.Now()}
	}
}

// Down records that the channel is not connected, because of err, and
// is trying again. The reason's text must hold no secrets (the
// channels' errors never do).
func (l *Conn) Down(err error) {
	if l == nil {
		return
	}
	reason := "disconnected"
	if err != nil {
		reason = err.Error()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.st.State == Connected {
		l.st.Lost = true
	}
	if l.st.State == Connected || l.st.Since.IsZero() {
		l.st.Since = time.Now()
	}
	l.st.State, l.st.Reason = Connecting, reason
}

// Status is the connection now.
func (l *Conn) Status() Status {
	l.mu.Lock()
	defer l.mu.Unlock()
	st := l.st
	if st.State == "" {
		st.State = Connecting
	}
	return st
}
