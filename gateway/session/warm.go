package session

import (
	"container/list"
	"fmt"

	"github.com/nbots/nb/state"
)

// A session file's messages stay in memory while a turn holds the
// session and, after it, only while the sessions released last fit in
// the Manager's KeepBytes: the least recently released lose their
// messages first, and read them back from the file at their next turn
// (Lock) or when asked for them. What the process holds for the
// conversations is bounded by KeepBytes and by the sessions turns hold
// at once, not by their length nor by their number: a gateway that
// answers for months keeps the same memory (issue 36). Sessions in a
// store keep their messages (they read only what others appended).

// DefaultKeepBytes is the Manager's default KeepBytes: the messages of
// a few busy chats (about 2,000 short messages), not of every chat.
const DefaultKeepBytes = 1 << 20

// keepBytes is m.KeepBytes with its default.
func (m *Manager) keepBytes() int64 {
	switch {
	case m.KeepBytes < 0:
		return 0
	case m.KeepBytes == 0:
		return DefaultKeepBytes
	}
	return m.KeepBytes
}

// keepWarm records that s, whose messages take about n bytes, was
// released (or read) now: the most recently used. Sessions released
// before it lose their messages while the warm ones take more than
// keepBytes. It takes m.warmMu, and after it each victim's s.mu (so that
// a victim busy reading its file holds up no other release): callers
// hold neither s.mu nor m.warmMu (m.mu may be held). A victim released
// again between the two keeps its place and loses its messages: it
// reads them back at its next turn, and the count errs on the safe side
// until it leaves the list.
func (m *Manager) keepWarm(s *Session, n int64) {
	var victims []*Session
	m.warmMu.Lock()
	if m.warm == nil {
		m.warm = list.New()
	}
	m.unwarmLocked(s)
	s.warm, s.warmBytes = m.warm.PushFront(s), n
	m.warmBytes += n
	for m.warmBytes > m.keepBytes() && m.warm.Len() > 0 {
		v := m.warm.Back().Value.(*Session)
		m.unwarmLocked(v)
		victims = append(victims, v)
	}
	m.warmMu.Unlock()
	for _, v := range victims {
		v.mu.Lock()
		v.dropLocked()
		v.mu.Unlock()
	}
}

// forgetWarm takes s out of the warm sessions (forgotten by the
// Manager), its messages dropped.
func (m *Manager) forgetWarm(s *Session) {
	m.warmMu.Lock()
	m.unwarmLocked(s)
	m.warmMu.Unlock()
	s.mu.Lock()
	s.dropLocked()
	s.mu.Unlock()
}

func (m *Manager) unwarmLocked(s *Session) {
	if s.warm != nil {
		m.warm.Remove(s.warm)
		m.warmBytes -= s.warmBytes
		s.warm, s.warmBytes = nil, 0
	}
}

// dropLocked forgets the messages of a session no turn holds: the file
// has them. It notes where its first message not consolidated starts,
// and where the last window of messages its last turn read starts
// (Conversation), so that the next turn reads back only those.
func (s *Session) dropLocked() {
	if s.holds || s.conv != nil || !s.loaded {
		return
	}
	if len(s.offs) == len(s.events) {
		if i := s.meta.LastConsolidated - s.skip; i >= 0 && i < len(s.offs) {
			s.resumeIdx, s.resumeOff = s.meta.LastConsolidated, s.offs[i]
		}
		if s.window > 0 && len(s.offs) > 0 {
			i := max(len(s.offs)-s.window, 0)
			s.winIdx, s.winOff = s.skip+i, s.offs[i]
		}
	}
	s.count = s.skip + len(s.events)
	s.events, s.offs, s.skip, s.loaded, s.evBytes = nil, nil, 0, false, 0
}

// release marks the session released by a turn (or a write outside
// one): still warm, its messages counted (kept up to date by every
// change: releasing costs nothing per message).
func (s *Session) release() {
	s.mu.Lock()
	n := s.evBytes
	keep := s.loaded && s.conv == nil
	s.mu.Unlock()
	if keep {
		s.m.keepWarm(s, n)
	}
}

// eventBytes estimates what an event takes in memory: the struct and
// its texts.
func eventBytes(ev state.Event) int64 {
	n := 320 + len(ev.At) + len(ev.Reasoning)
	if t, ok := ev.Message.(string); ok {
		n += len(t) // a user event's Input shares its text
	} else if ev.Message != nil {
		n += 256
	}
	for _, c := range ev.ToolCalls {
		n += 64 + len(c.ID) + len(c.Name) + len(c.Arguments)
	}
	if ev.Extra != nil {
		n += 256
	}
	return int64(n)
}

// countLocked is the number of messages, consolidated ones included:
// counted when the messages left memory, never read back for it.
func (s *Session) countLocked() int {
	if s.loaded {
		return s.skip + len(s.events)
	}
	return s.count
}

// allEventsLocked are every message of the session: those in memory
// when they are all there, or else read back from the file whole (and
// left to the caller). An unreadable file is reported to Warn and reads
// as no message.
func (s *Session) allEventsLocked() []state.Event {
	if s.loaded && s.skip == 0 {
		return s.events
	}
	fresh, err := s.rereadLocked(0, s.countLocked())
	if err != nil {
		s.m.warn(err.Error())
		return nil
	}
	return fresh.events
}

// readBackLocked reads the messages from index i on back from the file
// for a session whose messages (or those before i) are not in memory:
// from the line of the last window's start or of its first message not
// consolidated when i is not before it, else all. The events returned
// start at message skip; they are left to the caller.
func (s *Session) readBackLocked(i int) (events []state.Event, skip int) {
	if from, idx, ok := s.resumeFrom(i); ok {
		if fresh, err := s.rereadLocked(from, s.countLocked()-idx); err == nil {
			return fresh.events, idx
		}
	}
	return s.allEventsLocked(), 0
}

// resumeFrom is the latest known line (its offset and message index) a
// read back of the messages from index i on may start at: the last
// window's start or the first message not consolidated, whichever is
// later and not after i.
func (s *Session) resumeFrom(i int) (from int64, idx int, ok bool) {
	if off := s.resumeOff; off > 0 && i >= s.resumeIdx && s.resumeIdx <= s.meta.LastConsolidated && off <= s.size {
		from, idx, ok = off, s.resumeIdx, true
	}
	if off := s.winOff; off > 0 && i >= s.winIdx && s.winIdx > idx && s.winIdx <= s.countLocked() && off <= s.size {
		from, idx, ok = off, s.winIdx, true
	}
	return from, idx, ok
}

// loadForTurnLocked reads the messages a turn needs back from the file,
// which this process last wrote (refresh rereads what others changed):
// from the start of the last window of messages the session's turns
// read (Conversation: nanobot's memoryWindow), else from the first one
// not consolidated when known, else all. A consolidation, which reads
// from its cursor on, reads what is not in memory back then (rarer).
func (s *Session) loadForTurnLocked() error {
	want := s.meta.LastConsolidated
	if s.window > 0 {
		want = max(want, s.countLocked()-s.window)
	}
	from, idx, ok := s.resumeFrom(want)
	if !ok {
		from, idx = 0, 0
	}
	fresh, err := s.rereadLocked(from, s.countLocked()-idx)
	if err != nil {
		return err
	}
	s.events, s.offs, s.skip, s.loaded, s.evBytes = fresh.events, fresh.offs, idx, true, fresh.evBytes
	return nil
}

// rereadLocked reads the session's file from offset from on, into a
// session of its own; n is how many messages it holds, about (the
// lists are made that long at once).
func (s *Session) rereadLocked(from int64, n int) (*Session, error) {
	fresh := &Session{Key: s.Key, Path: s.Path, m: s.m, quiet: true}
	if n = min(max(n, 0), 1<<16); n > 0 {
		fresh.events, fresh.offs = make([]state.Event, 0, n), make([]int64, 0, n)
	}
	good, torn, err := fresh.readFileFrom(from)
	if err != nil {
		return nil, err
	}
	if torn != nil || good != s.size {
		return nil, fmt.Errorf("session %s: changed while its messages were read back (%d bytes, %d expected)", s.Path, good, s.size)
	}
	s.m.readBack.Add(good - from)
	return fresh, nil
}
