package gateway

import (
	"context"
	"fmt"
	"testing"

	"github.com/nbots/nb/state"
)

// lostRunner's turn on "lost" fails as a turn whose session was taken
// over by another replica does.
type lostRunner struct{ echoRunner }

func (r *lostRunner) Run(ctx context.Context, t Turn) (Answer, error) {
	if t.Input == "lost" {
		return Answer{}, fmt.Errorf("session telegram:1: %w", state.ErrLost)
	}
	return r.echoRunner.Run(ctx, t)
}

// TestLostTurnSendsNoReply: a turn that lost its session's hold sends
// nothing (the replica that took the session over answers): no error
// reply, whose turn key would stand in for that answer.
func TestLostTurnSendsNoReply(t *testing.T) {
	h, _ := newHarnessWith(t, &lostRunner{})
	h.send(t, tg("lost"))
	h.send(t, tg("after"))
	if m := h.next(t); m.Content != "echo: after" {
		t.Fatalf("reply %q (%s), want only the next turn's answer", m.Content, m.Kind)
	}
}
