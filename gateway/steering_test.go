package gateway

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nbots/nb/agent"
	"github.com/nbots/nb/gateway/bus"
	"github.com/nbots/nb/state"
)

// steeringRunner plays a turn with one round of tool calls: it says it
// started, waits for proceed, then (unless the input is "no steering")
// asks for the messages sent meanwhile, as the agent does after a tool
// round, and answers with what it got.
type steeringRunner struct {
	started chan string
	proceed chan struct{}
	mu      sync.Mutex
	inputs  []string
}

func (r *steeringRunner) Model() string { return "fake/steering" }

func (r *steeringRunner) Run(ctx context.Context, t Turn) (Answer, error) {
	in := t.Input
	r.mu.Lock()
	r.inputs = append(r.inputs, in)
	r.mu.Unlock()
	t.Conversation.Append(state.Event{Who: "user", Message: in, Input: &in})
	r.started <- in
	if in == "work" || in == "no steering" {
		<-r.proceed
	}
	var steered []string
	if in != "no steering" && t.Steering != nil {
		steered = t.Steering()
	}
	answer := "done: " + in
	if len(steered) > 0 {
		answer += " + " + strings.Join(steered, " + ")
	}
	t.Conversation.Append(state.Event{Who: "AI", Message: answer})
	return Answer{Text: answer}, nil
}

func steeringHarness(t *testing.T) (*harness, *steeringRunner) {
	h := newHarness(t)
	r := &steeringRunner{started: make(chan string, 10), proceed: make(chan struct{})}
	h.g.Runner = r
	return h, r
}

func tgID(id, text string) bus.Inbound {
	m := tg(text)
	m.ID = id
	return m
}

// A message that arrives while its session's turn runs is given to that
// turn after its current tool round, and is not answered a second time
// when the bus delivers it.
func TestSteeringIntoTheRunningTurn(t *testing.T) {
	h, r := steeringHarness(t)
	h.send(t, tgID("m1", "work"))
	<-r.started
	h.send(t, tgID("m2", "use metric units"))
	close(r.proceed)
	if m := h.next(t); m.Content != "done: work + use metric units" {
		t.Fatalf("answer %q", m.Content)
	}
	// The bus delivers m2 after the turn: it is not run again.
	h.send(t, tgID("m3", "next"))
	if in := <-r.started; in != "next" {
		t.Fatalf("the next turn ran %q, want the next message", in)
	}
	if m := h.next(t); m.Content != "done: next" {
		t.Fatalf("answer %q", m.Content)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if strings.Join(r.inputs, "|") != "work|next" {
		t.Errorf("turns run: %q", r.inputs)
	}
}

// A message offered to a turn that ends before its next steering point
// becomes the next turn: never lost.
func TestSteeringAfterTheLastRoundIsTheNextTurn(t *testing.T) {
	h, r := steeringHarness(t)
	h.send(t, tgID("m1", "no steering"))
	<-r.started
	h.send(t, tgID("m2", "are you there?"))
	close(r.proceed)
	if m := h.next(t); m.Content != "done: no steering" {
		t.Fatalf("answer %q", m.Content)
	}
	select {
	case in := <-r.started:
		if in != "are you there?" {
			t.Fatalf("the next turn ran %q", in)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the message that came during the turn was lost")
	}
	if m := h.next(t); m.Content != "done: are you there?" {
		t.Fatalf("answer %q", m.Content)
	}
}

// contextRunner reports a request's size, as the agent's RoundStart does.
type contextRunner struct{ echoRunner }

func (r *contextRunner) Run(ctx context.Context, t Turn) (Answer, error) {
	t.OnEvent(agent.Event{Kind: agent.RoundStart, Round: 1, ContextTokens: 120_000, ContextBudget: 150_000})
	return r.echoRunner.Run(ctx, t)
}

// /status shows the session's last request against the context budget.
func TestStatusShowsTheContext(t *testing.T) {
	h := newHarness(t)
	h.g.Runner = &contextRunner{}
	h.send(t, tg("hello"))
	h.next(t)
	h.send(t, tg("/status"))
	if m := h.next(t); !strings.Contains(m.Content, "Context: ~120000 of 150000 estimated tokens (80%)") {
		t.Fatal(m.Content)
	}
}

// stopNone is a replica.Stopper of other replicas that run nothing.
type stopNone struct{}

func (stopNone) Stop(context.Context, string) (int, error) { return 0, nil }

// With other replicas on the bus, a message that arrives while its
// session's turn runs is not given to that turn: the bus's copy could
// reach another replica, which would answer it a second time. It is the
// next turn.
func TestSteeringOffWithReplicas(t *testing.T) {
	h, r := steeringHarness(t)
	h.g.Others = stopNone{}
	h.send(t, tgID("m1", "work"))
	<-r.started
	h.send(t, tgID("m2", "use metric units"))
	close(r.proceed)
	if m := h.next(t); m.Content != "done: work" {
		t.Fatalf("answer %q, want the turn without the second message", m.Content)
	}
	if in := <-r.started; in != "use metric units" {
		t.Fatalf("the next turn ran %q, want the second message", in)
	}
	if m := h.next(t); m.Content != "done: use metric units" {
		t.Fatalf("answer %q", m.Content)
	}
}
