package gateway

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/nbots/nb/state"
)

// lostRunner's first turn on "lost" fails as a turn whose session was
// taken over by another replica does; run again, it answers.
type lostRunner struct {
	echoRunner
	lost atomic.Int32
}

func (r *lostRunner) Run(ctx context.Context, t Turn) (Answer, error) {
	if t.Input == "lost" && r.lost.Add(1) == 1 {
		return Answer{}, fmt.Errorf("session telegram:1: %w", state.ErrLost)
	}
	return r.echoRunner.Run(ctx, t)
}

// TestLostTurnSendsNoReply: a turn that lost its session's hold sends
// nothing (no error reply, whose turn key would stand in for the answer)
// and hands the message back to the bus, which runs it again: one
// answer, in order.
func TestLostTurnSendsNoReply(t *testing.T) {
	r := &lostRunner{}
	h, _ := newHarnessWith(t, r)
	h.send(t, tg("lost"))
	h.send(t, tg("after"))
	for _, want := range []string{"echo: lost", "echo: after"} {
		if m := h.next(t); m.Content != want {
			t.Fatalf("reply %q (%s), want %q", m.Content, m.Kind, want)
		}
	}
	if n := r.lost.Load(); n != 2 {
		t.Fatalf("the lost turn ran %d times, want 2", n)
	}
}
