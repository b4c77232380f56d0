// Package eventlog keeps what one exchange says, in order, for the
// front-ends that show it: they subscribe to a Log, replay it from an
// offset after a reconnect, and a Store forgets it when it expires or
// when the logs together grow past their bytes. A question the exchange
// asks a person (may this tool call run?) is an event of the log too,
// and its answer comes back through the log. The package knows no
// transport: the HTTP APIs, the agent protocol and the gateway map it
// onto their own wire.
package eventlog

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
)

// Kind tells what an Event carries.
type Kind uint8

const (
	// Output is a piece of the text a front-end shows (Text). Consecutive
	// pieces are kept as one event.
	Output Kind = iota + 1
	// Ask is a question for a person (Question); Log.Answer answers it.
	Ask
	// Data is any other event of the exchange (Data), for front-ends that
	// show more than text.
	Data
)

// Event is one thing an exchange said.
type Event struct {
	Kind Kind
	// Text is the output (Output).
	Text string
	// Question is what is asked (Ask).
	Question *Question
	// Data is the event of an exchange as its producer describes it
	// (Data), with its Size an estimate of the memory it takes.
	Data any
	Size int64
}

// Status is where a log stands.
type Status uint8

const (
	// Open: the exchange still runs.
	Open Status = iota
	// Finished: the exchange ended well.
	Finished
	// Failed: the exchange ended with an error (State.Err).
	Failed
)

// DefaultMaxBytes bounds one log's bytes: as much as nb reads of one
// answer of a provider (provider.DefaultAnswerLimit).
const DefaultMaxBytes int64 = 64 << 20

// eventOverhead is what an event costs beyond its text, for the bounds.
const eventOverhead = 64

// pageSize is the size of the pages the output is kept in: appending
// never copies what is already kept, and a log takes little more memory
// than its text.
const pageSize = 64 << 10

// Log is the events of one exchange. Appends come from the exchange;
// any number of readers replay and follow it. It is safe for concurrent
// use.
type Log struct {
	id      string
	max     int64
	started time.Time

	mu       sync.Mutex
	status   Status
	err      string
	finished time.Time
	cut      bool
	events   []entry
	pages    [][]byte
	textLen  int
	used     int64 // bytes counted against max: the text and the other events
	size     int64 // bytes of memory taken
	clock    func() time.Time
	changed  chan struct{} // closed, and replaced, on a change after it was handed out
	handed   bool          // changed was handed out to a reader
	lastSeen time.Time
	watchers int
	onGrow   func(delta int64)
	grown    int64 // bytes not yet reported to onGrow
	asked    map[string]*Pending
	answered map[string]bool
	// sealed is the number of events a reader has been given: output
	// after them starts a new event instead of growing one it has read.
	sealed int
}

// entry is an event as the log keeps it: Output text lives in the pages,
// from byte start to end.
type entry struct {
	Event
	start, end int
}

// New returns an open log that keeps up to maxBytes (DefaultMaxBytes
// when <= 0): beyond them output is cut (State.Cut) and other events
// are dropped.
func New(maxBytes int64) *Log {
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBytes
	}
	now := time.Now()
	return &Log{max: maxBytes, started: now, lastSeen: now, changed: make(chan struct{}), clock: time.Now}
}

// EventLog returns l: a type that embeds a *Log is kept by a Store as
// the log it is.
func (l *Log) EventLog() *Log { return l }

// ID is the log's id in its Store ("" for a log outside a store).
func (l *Log) ID() string { return l.id }

// Write appends p as output (io.Writer); it never fails, the output of
// a full log is cut instead.
func (l *Log) Write(p []byte) (int, error) {
	l.WriteString(string(p))
	return len(p), nil
}

// WriteString appends s as output (io.StringWriter); see Write.
func (l *Log) WriteString(s string) (int, error) {
	if s == "" {
		return len(s), nil
	}
	l.mu.Lock()
	defer l.unlock()
	if l.status != Open || l.cut {
		return len(s), nil
	}
	text := s
	if room := l.max - l.used; int64(len(text)) > room {
		text = text[:max(room, 0)]
		l.cut = true
	}
	start := l.textLen
	for rest := text; rest != ""; {
		if len(l.pages) == 0 || len(l.pages[len(l.pages)-1]) == pageSize {
			l.pages = append(l.pages, make([]byte, 0, pageSize))
			l.grow(pageSize)
		}
		p := &l.pages[len(l.pages)-1]
		n := min(len(rest), pageSize-len(*p))
		*p = append(*p, rest[:n]...)
		rest = rest[n:]
	}
	l.textLen += len(text)
	l.used += int64(len(text))
	if n := len(l.events); n > l.sealed && l.events[n-1].Kind == Output {
		l.events[n-1].end = l.textLen
	} else {
		l.events = append(l.events, entry{Event: Event{Kind: Output}, start: start, end: l.textLen})
		l.used += eventOverhead
		l.grow(eventOverhead)
	}
	l.notify()
	return len(s), nil
}

// Append adds an event that is not output (use WriteString for that),
// and reports whether it was kept: not by a full or ended log.
func (l *Log) Append(ev Event) bool {
	if ev.Kind == Output {
		l.WriteString(ev.Text)
		return true
	}
	l.mu.Lock()
	defer l.unlock()
	return l.appendLocked(ev)
}

func (l *Log) appendLocked(ev Event) bool {
	size := eventOverhead + ev.Size + int64(len(ev.Text))
	if l.status != Open || l.used+size > l.max {
		if l.status == Open {
			l.cut = true
		}
		return false
	}
	l.events = append(l.events, entry{Event: ev})
	l.used += size
	l.grow(size)
	l.notify()
	return true
}

// grow counts delta more bytes; the caller holds mu, and reports them
// with unlock.
func (l *Log) grow(delta int64) {
	l.size += delta
	l.grown += delta
}

// unlock releases mu and then reports the growth to the store, which
// looks at its logs' states under its own lock.
func (l *Log) unlock() {
	d, f := l.grown, l.onGrow
	l.grown = 0
	l.mu.Unlock()
	if d != 0 && f != nil {
		f(d)
	}
}

// notify wakes the readers; the caller holds mu. A channel nobody was
// given is kept: an append costs no allocation while nobody waits.
func (l *Log) notify() {
	if l.handed {
		close(l.changed)
		l.changed = make(chan struct{})
		l.handed = false
	}
}

// Finish ends the log: Finished when err is nil, else Failed with err's
// message (msg when not empty: the message a client may see). A
// question still waiting is answered with ErrClosed.
func (l *Log) Finish(err error, msg string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.status != Open {
		return
	}
	l.finished = l.clock()
	l.status = Finished
	if err != nil {
		if msg == "" {
			msg = err.Error()
		}
		l.status, l.err = Failed, msg
	}
	for id, p := range l.asked {
		delete(l.asked, id)
		p.settle(Reply{}, ErrClosed)
	}
	l.notify()
}

// State is a log's state at one moment.
type State struct {
	Status   Status
	Err      string    // why it failed
	Started  time.Time // when the log began
	Finished time.Time // when it ended (zero while Open)
	// Cut says output or events were dropped: the log reached its bytes.
	Cut bool
	// Events is the number of events, TextLen the output's length in
	// bytes, Size the bytes of memory the log takes.
	Events, TextLen int
	Size            int64
	// Changed is closed at the next change.
	Changed <-chan struct{}
}

// State returns the log's state.
func (l *Log) State() State {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.stateLocked()
}

func (l *Log) stateLocked() State {
	l.handed = true
	return State{Status: l.status, Err: l.err, Started: l.started, Finished: l.finished, Cut: l.cut,
		Events: len(l.events), TextLen: l.textLen, Size: l.size, Changed: l.changed}
}

// Output returns the output from byte offset from (clamped to what
// there is) and the state after it: a client that has read from bytes
// replays the rest.
func (l *Log) Output(from int) (string, State) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lastSeen = time.Now()
	return l.textLocked(min(max(from, 0), l.textLen), l.textLen), l.stateLocked()
}

func (l *Log) textLocked(from, to int) string {
	if from >= to {
		return ""
	}
	var b strings.Builder // one copy of a long output, not two
	b.Grow(to - from)
	for i := from / pageSize; i < len(l.pages) && i*pageSize < to; i++ {
		p := l.pages[i]
		lo, hi := max(from-i*pageSize, 0), min(to-i*pageSize, len(p))
		b.Write(p[lo:hi])
	}
	return b.String()
}

// Events returns the events from number from (clamped), output with its
// text, and the state after them: the next read starts at State.Events.
// Output written after a read comes as a new event.
func (l *Log) Events(from int) ([]Event, State) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lastSeen = time.Now()
	l.sealed = len(l.events)
	from = min(max(from, 0), len(l.events))
	out := make([]Event, 0, len(l.events)-from)
	for _, e := range l.events[from:] {
		ev := e.Event
		if ev.Kind == Output {
			ev.Text = l.textLocked(e.start, e.end)
		}
		out = append(out, ev)
	}
	return out, l.stateLocked()
}

// Wait waits until the log has more than events events or more than
// textLen bytes of output, it ends, ctx is done or d passes (d <= 0: no
// limit), and returns the state then.
func (l *Log) Wait(ctx context.Context, events, textLen int, d time.Duration) State {
	var timeout <-chan time.Time
	if d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		timeout = t.C
	}
	for {
		st := l.State()
		if st.Status != Open || st.Events > events || st.TextLen > textLen {
			return st
		}
		select {
		case <-st.Changed:
		case <-timeout:
			return l.State()
		case <-ctx.Done():
			return l.State()
		}
	}
}

// Watch counts a reader that follows the log (an event stream), until
// the returned func is called: a watched log is never abandoned.
func (l *Log) Watch() (stop func()) {
	l.mu.Lock()
	l.watchers++
	l.lastSeen = time.Now()
	l.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			l.watchers--
			l.lastSeen = time.Now()
			l.mu.Unlock()
		})
	}
}

// Seen tells the log a reader looked at it now.
func (l *Log) Seen() {
	l.mu.Lock()
	l.lastSeen = time.Now()
	l.mu.Unlock()
}

// idle is how long an open log has gone unread and unwatched (0 when
// watched or ended).
func (l *Log) idle(now time.Time) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.status != Open || l.watchers > 0 {
		return 0
	}
	return now.Sub(l.lastSeen)
}

// ErrClosed answers a question of a log that ended first.
var ErrClosed = errors.New("the exchange ended before the question was answered")

// String names a status as the Nano Bots API does.
func (s Status) String() string {
	switch s {
	case Open:
		return "pending"
	case Finished:
		return "finished"
	case Failed:
		return "failed"
	}
	return fmt.Sprintf("status(%d)", uint8(s))
}
