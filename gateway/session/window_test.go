package session

import (
	"slices"
	"testing"

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
