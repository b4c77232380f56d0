package session

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nbots/nb/state"
)

// TestTurnCost: what a gateway turn does with its session file (Lock,
// Append, Sync, unlock) opens the lock file and the session file as
// bare descriptors, not as *os.File (whose open costs four fcntl, an
// epoll_ctl and a finalizer more, at each turn): the whole cycle stays
// within a few allocations, and the lines are durable and whole.
func TestTurnCost(t *testing.T) {
	m := newManager(t)
	ctx := context.Background()
	s, err := m.Get(ctx, "web:cost")
	if err != nil {
		t.Fatal(err)
	}
	text := "hello"
	ev := state.Event{Who: state.RoleUser, Message: text, Input: &text}
	turn := func() {
		unlock, err := s.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Append(ctx, ev); err != nil {
			t.Fatal(err)
		}
		if err := s.Sync(); err != nil {
			t.Fatal(err)
		}
		unlock()
	}
	turn()
	// The Stat of the file (a change by another process), the line's
	// encoding and timestamp, the event kept, the unlock's closure (the
	// race detector's build allocates more).
	if n := testing.AllocsPerRun(50, turn); n > 12 && !raceEnabled {
		t.Errorf("a turn's session cycle: %.0f allocations, want at most 12 (16 with *os.File)", n)
	}
	data, err := os.ReadFile(filepath.Join(m.Dir, FileName("web:cost")))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(string(data), `"content":"hello"`); got != 52 {
		t.Errorf("%d lines written, want 52", got)
	}
}
