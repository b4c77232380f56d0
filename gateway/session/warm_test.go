package session

import (
	"bytes"
	"fmt"
	"os"
	"testing"

	"github.com/nbots/nb/agent"
	"github.com/nbots/nb/state"
)

// turn runs one turn on key: Lock, the user's message and the answer
// appended, Sync, release.
func turn(t *testing.T, m *Manager, key, text string) *Session {
	t.Helper()
	s, err := m.Get(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	unlock, err := s.Lock(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	if err := s.Conversation(t.Context(), 0).Append(state.Event{Who: state.RoleUser, Message: text, Input: &text},
		state.Event{Who: state.RoleAI, Message: "echo: " + text}); err != nil {
		t.Fatal(err)
	}
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestIdleSessionsLeaveMemory: past the Manager's KeepBytes, the
// sessions no turn holds drop their messages, least recently used first,
// and read them back from their files for their next turn, the same;
// the messages the warm sessions keep stay within KeepBytes (issue 36).
func TestIdleSessionsLeaveMemory(t *testing.T) {
	m := newManager(t)
	m.KeepBytes = 64 << 10
	for i := range 20 {
		for k := range 30 {
			turn(t, m, fmt.Sprint("web:c", k), fmt.Sprint("message ", i))
		}
	}
	m.warmMu.Lock()
	warm, bytes := m.warm.Len(), m.warmBytes
	m.warmMu.Unlock()
	if bytes > m.KeepBytes || warm == 0 || warm >= 30 {
		t.Fatalf("%d warm sessions keep %d bytes of messages, want some of the 30 and at most %d bytes", warm, bytes, m.KeepBytes)
	}
	s, _ := m.Get(t.Context(), "web:c0") // released long ago: cold
	s.mu.Lock()
	loaded, held := s.loaded, len(s.events)
	s.mu.Unlock()
	if loaded || held != 0 {
		t.Fatalf("the least recently used session keeps %d messages in memory (loaded %v), want none", held, loaded)
	}
	// Outside a turn, the file answers.
	if n := s.Len(); n != 40 {
		t.Fatalf("Len of a cold session = %d, want 40", n)
	}
	if msgs := s.Messages(); len(msgs) != 40 || msgs[39].Content != "echo: message 19" {
		t.Fatalf("Messages of a cold session: %d, last %+v", len(msgs), msgs[len(msgs)-1])
	}
	// A turn reads them back, whole, and goes on.
	s = turn(t, m, "web:c0", "again")
	h := s.History()
	if len(h) != 42 || agent.Text(h[0].Message) != "message 0" || agent.Text(h[41].Message) != "echo: again" {
		t.Fatalf("history after the turn: %d messages, first %v, last %v", len(h), h[0].Message, h[len(h)-1].Message)
	}
	// Consolidated messages are not read back for a turn: it starts at
	// the first one not consolidated.
	if err := s.SetConsolidated(t.Context(), 40); err != nil {
		t.Fatal(err)
	}
	for k := range 30 {
		turn(t, m, fmt.Sprint("web:c", k+1), "push c0 out")
	}
	s = turn(t, m, "web:c0", "after consolidation")
	s.mu.Lock()
	skip, inMemory := s.skip, len(s.events)
	s.mu.Unlock()
	if h := s.History(); len(h) != 4 || agent.Text(h[0].Message) != "again" || agent.Text(h[3].Message) != "echo: after consolidation" {
		t.Fatalf("history after consolidation: %d messages, first %v", len(h), h[0].Message)
	}
	if skip != 40 || inMemory != 4 || s.Len() != 44 || len(s.Events()) != 44 {
		t.Fatalf("after consolidation, a turn read %d messages and skipped %d, want 4 and 40 (Len %d, Events %d, want 44)", inMemory, skip, s.Len(), len(s.Events()))
	}
	// Without KeepBytes, a released session keeps nothing.
	m.KeepBytes = -1
	s = turn(t, m, "web:c1", "once more")
	s.mu.Lock()
	loaded = s.loaded
	s.mu.Unlock()
	if loaded {
		t.Fatal("with KeepBytes -1, a released session keeps its messages")
	}
	if h := s.History(); len(h) != 44 {
		t.Fatalf("history read back: %d messages, want 44", len(h))
	}
}

// TestEventsFromMemory: in a turn that read back only the messages not
// consolidated, EventsFrom answers from memory for an index among them
// (what runs after each turn asks for those), without reading the file
// back: here the file is gone, and nothing is warned.
func TestEventsFromMemory(t *testing.T) {
	m := newManager(t)
	m.KeepBytes = -1 // a released session keeps nothing
	for i := range 3 {
		turn(t, m, "web:c", fmt.Sprint("message ", i))
	}
	s, err := m.Get(t.Context(), "web:c")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SetConsolidated(t.Context(), 4); err != nil {
		t.Fatal(err)
	}
	unlock, err := s.Lock(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	m.Warn = func(msg string) { t.Errorf("warned %q: the file was read", msg) }
	if err := os.Remove(s.Path); err != nil {
		t.Fatal(err)
	}
	if ev := s.EventsFrom(4); len(ev) != 2 || agent.Text(ev[0].Message) != "message 2" {
		t.Fatalf("EventsFrom(4) = %d messages, want the 2 not consolidated", len(ev))
	}
	if ev := s.EventsFrom(5); len(ev) != 1 || agent.Text(ev[0].Message) != "echo: message 2" {
		t.Fatalf("EventsFrom(5) = %d messages, want the last one", len(ev))
	}
}

// checkBytes fails when what s counts its messages as taking in memory
// is not the sum over its messages in memory.
func checkBytes(t *testing.T, s *Session, when string) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var n int64
	for _, ev := range s.events {
		n += eventBytes(ev)
	}
	if s.evBytes != n {
		t.Fatalf("%s: the session counts %d bytes of messages, its %d messages take %d", when, s.evBytes, len(s.events), n)
	}
}

// TestCountsKeptUpToDate: the size of the messages in memory and the
// number of messages are kept up to date by every change (load, append,
// stop, /new, leaving memory, read back), so that releasing a session
// sums nothing and counting the messages of a session that left memory
// reads nothing: here its file is gone, and Len still answers, with no
// warning (issue 36). EventsFrom of a session out of memory reads its
// file from the first message not consolidated: the consolidated lines,
// blanked here, are not read.
func TestCountsKeptUpToDate(t *testing.T) {
	m := newManager(t)
	for i := range 3 {
		s := turn(t, m, "web:c", fmt.Sprint("message ", i))
		checkBytes(t, s, "after a turn")
	}
	// Forgotten and read again from its file.
	m.mu.Lock()
	m.sweepLocked(m.now().Add(DefaultIdleAfter * 2))
	m.mu.Unlock()
	s := turn(t, m, "web:c", "message 3")
	checkBytes(t, s, "read from its file, then a turn")
	// A stopped turn's messages are forgotten.
	unlock, err := s.Lock(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	mark := s.Mark()
	text := "stopped"
	if err := s.Append(t.Context(), state.Event{Who: state.RoleUser, Message: text, Input: &text}); err != nil {
		t.Fatal(err)
	}
	if err := s.Rollback(mark); err != nil {
		t.Fatal(err)
	}
	unlock()
	checkBytes(t, s, "after a stopped turn")
	m.warmMu.Lock()
	warm := s.warmBytes
	m.warmMu.Unlock()
	if s.evBytes == 0 || warm != s.evBytes {
		t.Fatalf("the warm session counts %d bytes, its messages %d", warm, s.evBytes)
	}
	if err := s.Clear(t.Context()); err != nil {
		t.Fatal(err)
	}
	checkBytes(t, s, "after /new")
	for i := range 5 {
		s = turn(t, m, "web:c", fmt.Sprint("message ", i))
	}
	checkBytes(t, s, "after /new and turns")
	if err := s.SetConsolidated(t.Context(), 6); err != nil {
		t.Fatal(err)
	}
	// Out of memory: counted, not read.
	m.KeepBytes = -1
	s = turn(t, m, "web:c", "message 4")
	s.mu.Lock()
	loaded := s.loaded
	s.mu.Unlock()
	if loaded || s.Len() != 12 {
		t.Fatalf("a session out of memory (loaded %v) counts %d messages, want 12", loaded, s.Len())
	}
	// The consolidated lines blanked in place (the file's size the
	// same): a reading from the start would see 6 messages, not 12.
	data, err := os.ReadFile(s.Path)
	if err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	cut := s.resumeOff
	s.mu.Unlock()
	for i := 1 + bytes.IndexByte(data, '\n'); i < int(cut); i++ { // the metadata record stays
		if data[i] != '\n' {
			data[i] = ' '
		}
	}
	f, err := os.OpenFile(s.Path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(data, 0); err != nil {
		t.Fatal(err)
	}
	f.Close()
	m.Warn = func(msg string) { t.Errorf("warned %q", msg) }
	if ev := s.EventsFrom(6); len(ev) != 6 || agent.Text(ev[0].Message) != "message 3" {
		t.Fatalf("EventsFrom(6) of a session out of memory = %d messages, want the 6 not consolidated", len(ev))
	}
	if err := os.Remove(s.Path); err != nil {
		t.Fatal(err)
	}
	if n := s.Len(); n != 12 {
		t.Fatalf("Len of a session out of memory, its file gone = %d, want 12", n)
	}
}
