// Package sessiontest is the conformance suite of the gateway's session
// managers: the nanobot files and every state.Store (PostgreSQL shared by
// replicas) run Run from their tests and pass it, so that the gateway
// behaves the same on either.
package sessiontest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nbots/nb/agent"
	"github.com/nbots/nb/gateway/session"
	"github.com/nbots/nb/state"
)

// Replicas are two managers of one set of sessions, as two replicas (or
// a gateway and nb gateway chat) see them.
type Replicas struct {
	A, B *session.Manager
	// KillA makes A die as its process would, holding what it holds:
	// its hold on a session ends (the kernel closes a file lock; a
	// store's lease is no longer renewed and expires). Nil when it
	// cannot be done inside the test process (files: the kernel does it
	// when the process ends): the takeover tests are skipped.
	KillA func()
}

// Harness makes the managers the suite tests.
type Harness struct {
	// New makes a new, empty set of sessions and two managers of it;
	// the test closes them.
	New func(t *testing.T) Replicas
}

// Run runs the suite.
func Run(t *testing.T, h Harness) {
	tests := []struct {
		name string
		fn   func(*testing.T, Harness)
	}{
		{"AppendReload", testAppendReload},
		{"MetadataLastWins", testMetadataLastWins},
		{"New", testNew},
		{"LockExcludesReplica", testLockExcludes},
		{"WriteOutsideTurn", testWriteOutsideTurn},
		{"Takeover", testTakeover},
		{"LostStopsTurn", testLost},
		{"MaxToolResult", testMaxToolResult},
		{"ConcurrentSessions", testConcurrentSessions},
		{"OneSessionTwoReplicas", testOneSessionTwoReplicas},
		{"WaitingTurnOfOneReplica", testWaitingTurn},
		{"List", testList},
		{"Reread", testReread},
		{"Context", testContext},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, h) })
	}
}

// Get returns the session of key, failing the test on an error.
func Get(t *testing.T, m *session.Manager, key string) *session.Session {
	t.Helper()
	s, err := m.Get(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func lock(t *testing.T, s *session.Session) func() {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	unlock, err := s.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return unlock
}

func user(text string) state.Event {
	return state.Event{Who: state.RoleUser, Message: text, Input: &text}
}

func ai(text string) state.Event { return state.Event{Who: state.RoleAI, Message: text} }

// texts are the messages' texts of events.
func texts(events []state.Event) []string {
	out := make([]string, len(events))
	for i, ev := range events {
		out[i] = agent.Text(ev.Message)
	}
	return out
}

func same(a, b []string) bool {
	return strings.Join(a, "\x00") == strings.Join(b, "\x00") && len(a) == len(b)
}

// turn appends events under the session's lock, as a gateway turn does.
func turn(t *testing.T, s *session.Session, events ...state.Event) {
	t.Helper()
	unlock := lock(t, s)
	defer unlock()
	if err := s.Append(t.Context(), events...); err != nil {
		t.Fatal(err)
	}
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
}

// testAppendReload: a turn's messages (a call, its result, a partial
// answer left out) are read back the same by the other replica, with the
// same metadata, length and size.
func testAppendReload(t *testing.T, h Harness) {
	r := h.New(t)
	s := Get(t, r.A, "telegram:1")
	calls := state.Event{Who: state.RoleAI, ToolCalls: []state.ToolCall{{ID: "c1", Name: "exec", Arguments: `{"command":"date"}`}}}
	turn(t, s, user("what day?"), calls,
		state.Event{Who: state.RoleTool, Message: "Monday", Result: state.ToolResult{ID: "c1", Name: "exec"}},
		state.Event{Who: state.RoleAI, Message: "Mon", Partial: true}, ai("Monday."))
	want := []string{"what day?", "", "Monday", "Monday."}
	if got := texts(s.History()); !same(got, want) {
		t.Fatalf("history %q, want %q", got, want)
	}
	o := Get(t, r.B, "telegram:1")
	unlock := lock(t, o)
	h2 := o.History()
	unlock()
	if got := texts(h2); !same(got, want) {
		t.Fatalf("the other replica reads %q, want %q", got, want)
	}
	if len(h2[1].ToolCalls) != 1 || h2[1].ToolCalls[0].Arguments != `{"command":"date"}` || h2[2].Result.ID != "c1" || h2[2].Result.Name != "exec" {
		t.Fatalf("the call and its result: %+v", h2[1:3])
	}
	if o.Len() != s.Len() || o.Size() != s.Size() || o.Size() == 0 {
		t.Fatalf("len %d/%d, size %d/%d", o.Len(), s.Len(), o.Size(), s.Size())
	}
	if m1, m2 := s.Meta(), o.Meta(); m1.Key != "telegram:1" || m2.Key != m1.Key || m2.CreatedAt != m1.CreatedAt || m2.Type != "metadata" {
		t.Fatalf("metadata %+v / %+v", m1, m2)
	}
	msgs := o.Messages()
	if len(msgs) != 4 || msgs[1].ToolCalls[0].Function.Name != "exec" || msgs[0].Timestamp == "" {
		t.Fatalf("messages %+v", msgs)
	}
}

// testMetadataLastWins: last_consolidated moves forward only, the last
// record winning, and the history starts after it, on both replicas.
func testMetadataLastWins(t *testing.T, h Harness) {
	r := h.New(t)
	s := Get(t, r.A, "web:m")
	turn(t, s, user("1"), ai("2"), user("3"), ai("4"))
	for _, n := range []int{1, 3, 2, 99} {
		if err := s.SetConsolidated(t.Context(), n); err != nil {
			t.Fatal(err)
		}
	}
	if m := s.Meta(); m.LastConsolidated != 4 {
		t.Fatalf("last_consolidated %d, want 4 (never back, never past the messages)", m.LastConsolidated)
	}
	turn(t, s, user("5"))
	o := Get(t, r.B, "web:m")
	unlock := lock(t, o)
	defer unlock()
	if m := o.Meta(); m.LastConsolidated != 4 {
		t.Fatalf("the other replica reads last_consolidated %d", m.LastConsolidated)
	}
	if got := texts(o.History()); !same(got, []string{"5"}) || o.Len() != 5 {
		t.Fatalf("history %q (len %d)", got, o.Len())
	}
}

// testNew: /new starts the session afresh on every replica, keeping its
// metadata map; what follows is the new session's.
func testNew(t *testing.T, h Harness) {
	r := h.New(t)
	s := Get(t, r.A, "cli:direct")
	turn(t, s, user("old"), ai("old answer"))
	if err := s.SetConsolidated(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	before := s.Meta()
	unlock := lock(t, s)
	if err := s.Clear(t.Context()); err != nil {
		t.Fatal(err)
	}
	unlock()
	if s.Len() != 0 || len(s.History()) != 0 || s.Meta().LastConsolidated != 0 {
		t.Fatalf("not cleared: %d messages, %+v", s.Len(), s.Meta())
	}
	if s.Meta().Metadata == nil {
		t.Fatal("the metadata map was lost")
	}
	o := Get(t, r.B, "cli:direct")
	turn(t, o, user("new"))
	turn(t, s, ai("new answer"))
	for _, x := range []*session.Session{s, o} {
		unlock := lock(t, x)
		got := texts(x.History())
		unlock()
		if !same(got, []string{"new", "new answer"}) {
			t.Fatalf("after /new: %q", got)
		}
	}
	if o.Meta().CreatedAt < before.CreatedAt {
		t.Fatalf("created_at %q went back from %q", o.Meta().CreatedAt, before.CreatedAt)
	}
}

// testLockExcludes: while one replica holds a session, the other's Lock
// waits; it then sees what the first appended.
func testLockExcludes(t *testing.T, h Harness) {
	r := h.New(t)
	a, b := Get(t, r.A, "telegram:2"), Get(t, r.B, "telegram:2")
	unlock := lock(t, a)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	if un, err := b.Lock(ctx); err == nil {
		un()
		t.Fatal("the other replica took a held session")
	} else if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a Lock that gave up: %v, want the context's error", err)
	}
	cancel()
	got := make(chan []string, 1)
	go func() {
		unlock, err := b.Lock(context.Background())
		if err != nil {
			got <- []string{err.Error()}
			return
		}
		got <- texts(b.History())
		unlock()
	}()
	time.Sleep(100 * time.Millisecond)
	if err := a.Append(t.Context(), user("first"), ai("answer")); err != nil {
		t.Fatal(err)
	}
	if err := a.Sync(); err != nil {
		t.Fatal(err)
	}
	select {
	case g := <-got:
		t.Fatalf("the waiting Lock returned while the session was held: %q", g)
	case <-time.After(100 * time.Millisecond):
	}
	unlock()
	select {
	case g := <-got:
		if !same(g, []string{"first", "answer"}) {
			t.Fatalf("the second holder read %q", g)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the waiting Lock was never given the session")
	}
}

// testWriteOutsideTurn: a metadata write outside a turn (the heartbeat,
// memory consolidation) waits for the other replica's turn and keeps
// what it appended; the same write inside the turn of its own replica
// (/new's archival) does not wait for itself.
func testWriteOutsideTurn(t *testing.T, h Harness) {
	r := h.New(t)
	a, b := Get(t, r.A, "heartbeat"), Get(t, r.B, "heartbeat")
	turn(t, a, user("beat 1"), ai("ok"))
	unlock := lock(t, a)
	done := make(chan error, 1)
	go func() { done <- b.SetConsolidated(t.Context(), 2) }()
	if err := a.Append(t.Context(), user("beat 2")); err != nil {
		t.Fatal(err)
	}
	a.Sync()
	if err := a.SetConsolidated(t.Context(), 1); err != nil { // in its own turn
		t.Fatal(err)
	}
	unlock()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("SetConsolidated outside a turn never ran")
	}
	o := Get(t, r.A, "heartbeat")
	un := lock(t, o)
	defer un()
	if got := texts(o.History()); !same(got, []string{"beat 2"}) && !same(got, []string{"ok", "beat 2"}) {
		t.Fatalf("history %q", got)
	}
	if o.Len() != 3 {
		t.Fatalf("%d messages, want 3: a write outside the turn lost one", o.Len())
	}
}

// testTakeover: a replica that died holding a session does not hold it
// for ever: the other takes it over.
func testTakeover(t *testing.T, h Harness) {
	r := h.New(t)
	if r.KillA == nil {
		t.Skip("this backend's hold ends with its process (tested by the process tests)")
	}
	a, b := Get(t, r.A, "telegram:3"), Get(t, r.B, "telegram:3")
	turn(t, a, user("before"))
	lock(t, a) // never unlocked: A dies holding it
	r.KillA()
	start := time.Now()
	unlock := lock(t, b)
	defer unlock()
	t.Logf("taken over after %v", time.Since(start).Round(time.Millisecond))
	if got := texts(b.History()); !same(got, []string{"before"}) {
		t.Fatalf("history %q", got)
	}
}

// testLost: a turn whose hold was taken over stores nothing more: its
// append fails with state.ErrLost, and the history is the new holder's.
func testLost(t *testing.T, h Harness) {
	r := h.New(t)
	if r.KillA == nil {
		t.Skip("this backend's hold cannot be lost while its process lives")
	}
	a, b := Get(t, r.A, "telegram:4"), Get(t, r.B, "telegram:4")
	turn(t, a, user("one"))
	unlockA := lock(t, a)
	defer unlockA()
	r.KillA()
	unlock := lock(t, b)
	if err := b.Append(t.Context(), ai("from B")); err != nil {
		t.Fatal(err)
	}
	unlock()
	err := a.Append(t.Context(), ai("from the lost turn"))
	if !errors.Is(err, state.ErrLost) {
		t.Fatalf("append of a lost turn: %v, want ErrLost", err)
	}
	o := Get(t, r.B, "telegram:4")
	un := lock(t, o)
	defer un()
	if got := texts(o.History()); !same(got, []string{"one", "from B"}) {
		t.Fatalf("history %q", got)
	}
}

// testMaxToolResult: a large tool result is cut as nanobot cuts it.
func testMaxToolResult(t *testing.T, h Harness) {
	r := h.New(t)
	s := Get(t, r.A, "web:big")
	big := strings.Repeat("x", session.MaxToolResult+5000)
	turn(t, s, state.Event{Who: state.RoleAI, ToolCalls: []state.ToolCall{{ID: "c", Name: "read_file", Arguments: "{}"}}},
		state.Event{Who: state.RoleTool, Message: big, Result: state.ToolResult{ID: "c", Name: "read_file"}})
	o := Get(t, r.B, "web:big")
	unlock := lock(t, o)
	defer unlock()
	h2 := o.History()
	want := big[:session.MaxToolResult] + "\n... (truncated)"
	if len(h2) != 2 || agent.Text(h2[1].Message) != want {
		t.Fatalf("tool result of %d bytes kept, want %d", len(agent.Text(h2[len(h2)-1].Message)), len(want))
	}
}

// testConcurrentSessions: turns on many sessions at once, on both
// replicas, keep each session's messages in order.
func testConcurrentSessions(t *testing.T, h Harness) {
	r := h.New(t)
	const sessions, turns = 8, 5
	var wg sync.WaitGroup
	errs := make(chan error, sessions)
	for i := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := fmt.Sprintf("telegram:c%d", i)
			for j := range turns {
				m := r.A
				if j%2 == 1 {
					m = r.B
				}
				s, err := m.Get(t.Context(), key)
				if err == nil {
					var unlock func()
					if unlock, err = s.Lock(context.Background()); err == nil {
						err = s.Append(t.Context(), user(fmt.Sprintf("q%d", j)), ai(fmt.Sprintf("a%d", j)))
						if err == nil {
							err = s.Sync()
						}
						unlock()
					}
				}
				if err != nil {
					errs <- fmt.Errorf("%s turn %d: %w", key, j, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for i := range sessions {
		s := Get(t, r.A, fmt.Sprintf("telegram:c%d", i))
		unlock := lock(t, s)
		got := texts(s.History())
		unlock()
		var want []string
		for j := range turns {
			want = append(want, fmt.Sprintf("q%d", j), fmt.Sprintf("a%d", j))
		}
		if !same(got, want) {
			t.Fatalf("session %d: %q", i, got)
		}
	}
}

// testOneSessionTwoReplicas: turns on one session from both replicas at
// once, two of them from one replica, follow one another: none loses
// another's messages.
func testOneSessionTwoReplicas(t *testing.T, h Harness) {
	r := h.New(t)
	const turns = 6
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	// Two turns of one replica wait for each other too (the second
	// then reads the history with the first's messages in it).
	for i, m := range []*session.Manager{r.A, r.B, r.A} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := m.Get(t.Context(), "telegram:one")
			for j := 0; err == nil && j < turns; j++ {
				var unlock func()
				if unlock, err = s.Lock(context.Background()); err != nil {
					break
				}
				n := s.Len()
				err = s.Append(t.Context(), user(fmt.Sprintf("r%d-%d after %d", i, j, n)))
				unlock()
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	s := Get(t, r.A, "telegram:one")
	unlock := lock(t, s)
	defer unlock()
	got := texts(s.History())
	if len(got) != 3*turns {
		t.Fatalf("%d messages, want %d: %q", len(got), 3*turns, got)
	}
	for i, g := range got {
		if !strings.HasSuffix(g, fmt.Sprintf(" after %d", i)) {
			t.Fatalf("message %d %q: a turn did not see the one before it (%q)", i, g, got)
		}
	}
}

// testList: the sessions written are listed, most recent first, by
// either replica.
func testList(t *testing.T, h Harness) {
	r := h.New(t)
	for _, key := range []string{"telegram:l1", "web:l2", "cli:l3"} {
		turn(t, Get(t, r.A, key), user("hi "+key))
		time.Sleep(20 * time.Millisecond) // distinct times, files' too
	}
	infos, err := r.B.List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, in := range infos {
		keys = append(keys, in.Key)
		if in.UpdatedAt.IsZero() {
			t.Fatalf("%s: no time", in.Key)
		}
	}
	if !same(keys, []string{"cli:l3", "web:l2", "telegram:l1"}) {
		t.Fatalf("listed %q", keys)
	}
}

// testReread: /status's reread shows, without holding the session, what
// the other replica appended (a store); files are reread at the next
// Lock only.
func testReread(t *testing.T, h Harness) {
	r := h.New(t)
	b := Get(t, r.B, "telegram:rr")
	turn(t, Get(t, r.A, "telegram:rr"), user("hello"), ai("hi"))
	if err := b.Reread(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := 0
	if r.B.Stored() {
		want = 2
	}
	if b.Len() != want {
		t.Fatalf("%d messages after a reread, want %d", b.Len(), want)
	}
}

// testWaitingTurn: a turn that waits for another turn of its replica on
// the same session reads the history with that turn's messages once.
func testWaitingTurn(t *testing.T, h Harness) {
	r := h.New(t)
	s := Get(t, r.A, "telegram:wait")
	turn(t, s, user("before"))
	unlock := lock(t, s)
	got := make(chan []string, 1)
	go func() {
		un, err := s.Lock(context.Background())
		if err != nil {
			got <- []string{err.Error()}
			return
		}
		got <- texts(s.History())
		un()
	}()
	time.Sleep(200 * time.Millisecond) // the second turn waits
	if err := s.Append(t.Context(), ai("during")); err != nil {
		t.Fatal(err)
	}
	unlock()
	select {
	case g := <-got:
		if !same(g, []string{"before", "during"}) {
			t.Fatalf("the waiting turn read %q", g)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the waiting turn never got the session")
	}
}

// testContext: the context of a call reaches the sessions' store. Get
// and List with a context already cancelled fail with its error; a
// write outside a turn (Append, SetConsolidated, ConsolidateAll, Clear)
// waiting for the other replica's turn gives up when its context ends,
// and writes nothing.
func testContext(t *testing.T, h Harness) {
	r := h.New(t)
	turn(t, Get(t, r.A, "telegram:ctx"), user("kept"))
	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := r.B.Get(cancelled, "telegram:ctx"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Get with a cancelled context: %v, want context.Canceled", err)
	}
	if _, err := r.B.Get(cancelled, "telegram:other"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Get of a new session with a cancelled context: %v, want context.Canceled", err)
	}
	if _, err := r.B.List(cancelled); !errors.Is(err, context.Canceled) {
		t.Fatalf("List with a cancelled context: %v, want context.Canceled", err)
	}
	a, b := Get(t, r.A, "telegram:ctx"), Get(t, r.B, "telegram:ctx")
	unlock := lock(t, a)
	writes := map[string]func(context.Context) error{
		"Append":          func(ctx context.Context) error { return b.Append(ctx, user("not kept")) },
		"SetConsolidated": func(ctx context.Context) error { return b.SetConsolidated(ctx, 1) },
		"ConsolidateAll":  func(ctx context.Context) error { return b.ConsolidateAll(ctx) },
		"Clear":           func(ctx context.Context) error { return b.Clear(ctx) },
	}
	for name, write := range writes {
		ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
		err := write(ctx)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("%s while the other replica holds the session: %v, want context.DeadlineExceeded", name, err)
		}
	}
	unlock()
	o := Get(t, r.B, "telegram:ctx")
	unlock = lock(t, o)
	defer unlock()
	if got := texts(o.History()); !same(got, []string{"kept"}) || o.Meta().LastConsolidated != 0 {
		t.Fatalf("after the writes that gave up: %q, last_consolidated %d; want [kept], 0", got, o.Meta().LastConsolidated)
	}
}
