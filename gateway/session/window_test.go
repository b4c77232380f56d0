package session

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	sjson "github.com/segmentio/encoding/json"

	"github.com/nbots/nb/agent"
	"github.com/nbots/nb/state"
)

// A turn's history is the last window messages not consolidated, from
// the first user's message among them, as nanobot up to v0.1.4.post4
// sends get_history(max_messages=memoryWindow); what the turn appends is
// read too, and a consolidation during the turn moves the start on.
func TestConversationWindow(t *testing.T) {
	m := newManager(t)
	s, err := m.Get(t.Context(), "web:w")
	if err != nil {
		t.Fatal(err)
	}
	unlock, err := s.Lock(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	u := func(text string) state.Event { return state.Event{Who: state.RoleUser, Message: text, Input: &text} }
	a := func(text string) state.Event { return state.Event{Who: state.RoleAI, Message: text} }
	texts := func(h []state.Event) []string {
		var out []string
		for _, ev := range h {
			out = append(out, agent.Text(ev.Message))
		}
		return out
	}
	// u0 a0 u1 a1 a1b a1c u2 a2: 8 messages
	if err := s.Conversation(t.Context(), 0).Append(u("u0"), a("a0"), u("u1"), a("a1"), a("a1b"), a("a1c"), u("u2"), a("a2")); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		window int
		want   []string
	}{
		{0, []string{"u0", "a0", "u1", "a1", "a1b", "a1c", "u2", "a2"}}, // no window
		{8, []string{"u0", "a0", "u1", "a1", "a1b", "a1c", "u2", "a2"}}, // the tail fits
		{5, []string{"u2", "a2"}}, // a1 a1b a1c u2 a2, from the user's message
		{6, []string{"u1", "a1", "a1b", "a1c", "u2", "a2"}},
		{1, []string{"a2"}}, // no user's message among them: all of them
	} {
		if got := texts(s.Conversation(t.Context(), c.window).History()); !slices.Equal(got, c.want) {
			t.Errorf("window %d: %q, want %q", c.window, got, c.want)
		}
	}
	conv := s.Conversation(t.Context(), 5)
	if err := conv.Append(u("u3"), a("a3")); err != nil {
		t.Fatal(err)
	}
	if got, want := texts(conv.History()), []string{"u2", "a2", "u3", "a3"}; !slices.Equal(got, want) {
		t.Errorf("after the turn's appends: %q, want %q", got, want)
	}
	if err := s.SetConsolidated(t.Context(), 8); err != nil {
		t.Fatal(err)
	}
	if got, want := texts(conv.History()), []string{"u3", "a3"}; !slices.Equal(got, want) {
		t.Errorf("after a consolidation past the window's start: %q, want %q", got, want)
	}
}

// TestReadBackBoundedByTheWindow: a session that leaves memory between
// its turns (KeepBytes passed) is read back for its next turn from the
// start of the last window of messages its turns read, not from its
// first message not consolidated: when consolidation falls behind (a
// model that never calls save_memory), what a turn reads back stays the
// window's, whatever the lag (issue 36). The turn's history is the
// same, and a read of the messages before the window (consolidation's)
// still finds them.
func TestReadBackBoundedByTheWindow(t *testing.T) {
	m := newManager(t)
	m.KeepBytes = -1 // every session leaves memory when released
	const window = 20
	conv := func(s *Session, text string) []state.Event {
		unlock, err := s.Lock(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		defer unlock()
		c := s.Conversation(t.Context(), window)
		h := c.History()
		if err := c.Append(state.Event{Who: state.RoleUser, Message: text, Input: &text}, state.Event{Who: state.RoleAI, Message: "echo: " + text}); err != nil {
			t.Fatal(err)
		}
		if err := s.Sync(); err != nil {
			t.Fatal(err)
		}
		return h
	}
	s, err := m.Get(t.Context(), "web:lag")
	if err != nil {
		t.Fatal(err)
	}
	perTurn := func(turns int) int64 {
		before := m.readBack.Load()
		for i := range turns {
			conv(s, fmt.Sprintf("turn %04d", i))
		}
		return (m.readBack.Load() - before) / int64(turns)
	}
	perTurn(window) // the tail passes the window
	short := perTurn(20)
	perTurn(400) // the tail grows to 880 messages: nothing consolidated
	long := perTurn(20)
	if short == 0 || long > short+short/10 {
		t.Errorf("bytes read back a turn: %d with a tail of 80 messages, %d with one of 880: want the same (the window's %d messages)", short, long, window)
	}
	// The history is the window's, from a user's message.
	h := conv(s, "last")
	if len(h) != window || h[0].Who != state.RoleUser || agent.Text(h[len(h)-2].Message) != "turn 0019" {
		t.Errorf("the history of a turn read back: %d messages from %s ending with %q, want %d from the user's", len(h), h[0].Who, agent.Text(h[len(h)-2].Message), window)
	}
	// What consolidation reads (from its cursor) is read back whole.
	all := s.EventsFrom(0)
	if len(all) != 2*(window+20+400+20+1) || agent.Text(all[0].Message) != "turn 0000" {
		t.Errorf("EventsFrom(0): %d messages, the first %q", len(all), agent.Text(all[0].Message))
	}
	if err := s.SetConsolidated(t.Context(), 100); err != nil {
		t.Fatal(err)
	}
	if got := s.EventsFrom(100); len(got) != len(all)-100 || agent.Text(got[0].Message) != agent.Text(all[100].Message) {
		t.Errorf("EventsFrom(100) after the cursor moved: %d messages", len(got))
	}
}

// TestTallyKeptUpToDate: a tally of the messages not consolidated (what
// memory consolidation estimates after each turn) passes each message
// to its function once, not the whole tail at every turn, nor reads it
// back from the file when the session left memory; it is made again
// when its start moves (a consolidation) or messages go (/stop, /new).
func TestTallyKeptUpToDate(t *testing.T) {
	m := newManager(t)
	m.KeepBytes = -1
	var seen int
	count := func(evs []state.Event) int { seen += len(evs); return len(evs) }
	s := turn(t, m, "web:tally", "first")
	for i := range 100 {
		// As the gateway's AfterTurn: at the end of the turn, which
		// holds the session; it leaves memory after each (KeepBytes).
		unlock, err := s.Lock(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		text := fmt.Sprint("turn ", i)
		if err := s.Conversation(t.Context(), 20).Append(state.Event{Who: state.RoleUser, Message: text, Input: &text}, state.Event{Who: state.RoleAI, Message: "echo"}); err != nil {
			t.Fatal(err)
		}
		from := s.Meta().LastConsolidated
		before := m.readBack.Load()
		if got, want := s.Tally(from, count), s.Len()-from; got != want {
			t.Fatalf("turn %d: tally %d, want %d", i, got, want)
		}
		if i > 0 && m.readBack.Load() != before {
			t.Fatalf("turn %d: the tally read %d bytes back", i, m.readBack.Load()-before)
		}
		unlock()
	}
	if seen != s.Len() {
		t.Errorf("the tally's function saw %d messages over 100 turns, want each of the %d once", seen, s.Len())
	}
	if err := s.SetConsolidated(t.Context(), 150); err != nil {
		t.Fatal(err)
	}
	if got := s.Tally(150, count); got != s.Len()-150 {
		t.Errorf("after a consolidation: %d, want %d", got, s.Len()-150)
	}
	unlock, err := s.Lock(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	mark := s.Mark()
	turnText := "stopped"
	s.Append(t.Context(), state.Event{Who: state.RoleUser, Message: turnText, Input: &turnText})
	if got := s.Tally(150, count); got != s.Len()-150 {
		t.Errorf("during a turn: %d, want %d", got, s.Len()-150)
	}
	s.Rollback(mark)
	s.Append(t.Context(), state.Event{Who: state.RoleAI, Message: "other"})
	unlock()
	if got := s.Tally(150, count); got != s.Len()-150 {
		t.Errorf("after a rollback and another message: %d, want %d", got, s.Len()-150)
	}
	if err := s.Clear(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := s.Tally(0, count); got != 0 {
		t.Errorf("after /new: %d, want 0", got)
	}
}

// TestReadBackAllocations: reading a session back for a turn allocates
// per message what the message keeps (its text, its event), not a
// decoding record each nor lists grown by doubling.
func TestReadBackAllocations(t *testing.T) {
	m := newManager(t)
	m.KeepBytes = -1
	s, err := m.Get(t.Context(), "web:allocs")
	if err != nil {
		t.Fatal(err)
	}
	const window = 100
	cycle := func() {
		unlock, err := s.Lock(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		s.Conversation(t.Context(), window)
		unlock()
	}
	unlock, _ := s.Lock(t.Context())
	c := s.Conversation(t.Context(), window)
	for i := range 2 * window {
		text := fmt.Sprint("message ", i)
		c.Append(state.Event{Who: state.RoleUser, Message: text, Input: &text})
	}
	unlock()
	cycle()
	per := testing.AllocsPerRun(20, cycle) / window
	if per > 7.5 && !raceEnabled {
		t.Errorf("%.2f allocations a message read back, want at most 7.5 (its text, its event, its timestamp and role)", per)
	}
}

// TestPlainStringAsDecoder: a message's text taken without the decoder
// is the decoder's, and anything with an escape, a control character
// or bytes that are not UTF-8 goes through the decoder.
func TestPlainStringAsDecoder(t *testing.T) {
	for _, in := range []string{`""`, `"hello"`, `"héllo ✓ 😀"`, `"a\"b"`, `"a\\b"`, `"a\nb"`, `"\u00e9"`, "\"a\tb\"", "\"\xff\xfe\"", "\"caf\xc3\"", `"</script>"`} {
		var want string
		werr := sjson.Unmarshal([]byte(in), &want)
		got, ok := plainString([]byte(in))
		if ok && (werr != nil || got != want) {
			t.Errorf("%q: plain %q, the decoder %q (%v)", in, got, want, werr)
		}
		if !ok && werr == nil && !strings.ContainsAny(in[1:len(in)-1], "\\\"\t") && utf8.ValidString(in) {
			t.Errorf("%q: not taken as plain", in)
		}
	}
}
