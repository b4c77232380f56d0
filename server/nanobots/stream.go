package nanobots

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"sort"
	"sync"
	"time"
)

// Stream states, as the reference names them.
const (
	statePending  = "pending"
	stateFinished = "finished"
	stateFailed   = "failed"
	stateUnknown  = "unknown"
)

// stream is one evaluation clients follow by polling or with server-sent
// events. Its output only grows: the editor plugins insert the part of
// each answer they have not seen.
type stream struct {
	id      string
	started time.Time
	cancel  context.CancelCauseFunc

	mu       sync.Mutex
	state    string
	finished time.Time
	output   []byte
	errMsg   string
	changed  chan struct{} // closed, and replaced, on every change
	served   int           // output length the last poll answered with
	lastSeen time.Time     // last poll, or now while an SSE client reads
	watchers int           // SSE clients reading it
}

func newStreamID() string {
	var b [16]byte
	rand.Read(b[:]) //nolint:errcheck // never fails
	return hex.EncodeToString(b[:])
}

// WriteString appends text to the output.
func (s *stream) WriteString(text string) (int, error) {
	if text == "" {
		return 0, nil
	}
	s.mu.Lock()
	s.output = append(s.output, text...)
	s.notify()
	s.mu.Unlock()
	return len(text), nil
}

// finish ends the stream: finished, or failed with msg.
func (s *stream) finish(err error, msg string) {
	s.mu.Lock()
	s.finished = time.Now()
	if err != nil {
		s.state, s.errMsg = stateFailed, msg
	} else {
		s.state = stateFinished
	}
	s.notify()
	s.mu.Unlock()
}

// notify wakes the waiting polls and SSE clients; the caller holds mu.
func (s *stream) notify() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// snapshot is the stream as a poll answers it.
type snapshot struct {
	id       string
	started  time.Time
	finished time.Time
	state    string
	output   string
	errMsg   string
}

func (s *stream) snapshot() snapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.snapshotLocked()
}

func (s *stream) snapshotLocked() snapshot {
	return snapshot{id: s.id, started: s.started, finished: s.finished, state: s.state, output: string(s.output), errMsg: s.errMsg}
}

// poll answers one poll. While the stream is pending and its output has
// not grown since the last poll, it waits up to hold for a change: the
// plugins poll in a tight loop, so this turns hundreds of empty answers a
// second into a few, and delivers a change as soon as it comes.
func (s *stream) poll(ctx context.Context, hold time.Duration) snapshot {
	s.mu.Lock()
	s.lastSeen = time.Now()
	if hold > 0 && s.state == statePending && len(s.output) == s.served {
		ch := s.changed
		s.mu.Unlock()
		t := time.NewTimer(hold)
		select {
		case <-ch:
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
		s.mu.Lock()
	}
	s.served = len(s.output)
	s.lastSeen = time.Now()
	snap := s.snapshotLocked()
	s.mu.Unlock()
	return snap
}

// streams holds the streams by id, forgetting finished ones after a
// while so memory stays bounded.
type streams struct {
	ttl     time.Duration // how long a finished stream stays readable
	abandon time.Duration // a pending stream nobody reads for this long is cancelled
	max     int           // streams kept at most

	mu   sync.Mutex
	byID map[string]*stream
}

func (ss *streams) add(s *stream) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if len(ss.byID) >= ss.max {
		ss.evictLocked(len(ss.byID) - ss.max + 1)
	}
	ss.byID[s.id] = s
}

func (ss *streams) get(id string) *stream {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.byID[id]
}

func (ss *streams) len() int {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return len(ss.byID)
}

// evictLocked forgets the n streams that finished first.
func (ss *streams) evictLocked(n int) {
	type done struct {
		id string
		at time.Time
	}
	var list []done
	for id, s := range ss.byID {
		s.mu.Lock()
		if s.state != statePending {
			list = append(list, done{id, s.finished})
		}
		s.mu.Unlock()
	}
	sort.Slice(list, func(i, j int) bool { return list[i].at.Before(list[j].at) })
	for i := 0; i < n && i < len(list); i++ {
		delete(ss.byID, list[i].id)
	}
}

// sweep forgets expired streams and cancels abandoned ones.
func (ss *streams) sweep(now time.Time, onAbandon func(*stream)) {
	ss.mu.Lock()
	var abandoned []*stream
	for id, s := range ss.byID {
		s.mu.Lock()
		switch {
		case s.state != statePending && now.Sub(s.finished) > ss.ttl:
			delete(ss.byID, id)
		case s.state == statePending && s.watchers == 0 && ss.abandon > 0 && now.Sub(s.lastSeen) > ss.abandon:
			abandoned = append(abandoned, s)
		}
		s.mu.Unlock()
	}
	ss.mu.Unlock()
	for _, s := range abandoned {
		onAbandon(s)
	}
}
