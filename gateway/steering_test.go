package gateway

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nbots/nb/agent"
	"github.com/nbots/nb/gateway/access"
	"github.com/nbots/nb/gateway/bus"
	"github.com/nbots/nb/gateway/session"
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

func steeringHarness(t *testing.T, opts ...func(*Gateway)) (*harness, *steeringRunner) {
	r := &steeringRunner{started: make(chan string, 10), proceed: make(chan struct{})}
	h := newHarness(t, append([]func(*Gateway){func(g *Gateway) { g.Runner = r }}, opts...)...)
	return h, r
}

func tgID(id, text string) bus.Inbound {
	m := tg(text)
	m.ID = id
	return m
}

// A message that arrives while its session's turn runs is given to that
// turn after its current tool round, and is not answered a second time
// when the bus delivers it: alone, and with replicas that share steering
// (the offer goes through them, and so does the record of what the
// completed turn took).
func TestSteeringIntoTheRunningTurn(t *testing.T) {
	for _, replicas := range []bool{false, true} {
		t.Run(map[bool]string{false: "alone", true: "replicas"}[replicas], func(t *testing.T) {
			sh := &memSteering{}
			var opts []func(*Gateway)
			if replicas {
				opts = append(opts, func(g *Gateway) { g.Others, g.Steer = stopNone{}, sh })
			}
			h, r := steeringHarness(t, opts...)
			if replicas {
				sh.waitSubscribed(t)
			}
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
			sh.mu.Lock()
			defer sh.mu.Unlock()
			if replicas && (!sh.taken["telegram\x00m2"] || len(sh.taken) != 1 || sh.asked < 3) {
				t.Errorf("recorded %v after %d questions", sh.taken, sh.asked)
			}
		})
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
	h, r := steeringHarness(t, func(g *Gateway) { g.Others, g.Steer = stopNone{}, NoSteering{} })
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

// memSteering is a SharedSteering of replicas in one process: offers go
// to every subscriber, records to one set.
type memSteering struct {
	mu    sync.Mutex
	subs  []func(bus.Inbound)
	taken map[string]bool
	asked int
}

func (s *memSteering) Offer(_ context.Context, m bus.Inbound) error {
	s.mu.Lock()
	subs := append([]func(bus.Inbound){}, s.subs...)
	s.mu.Unlock()
	for _, fn := range subs {
		fn(m)
	}
	return nil
}

func (s *memSteering) Offers(ctx context.Context, fn func(bus.Inbound)) error {
	s.mu.Lock()
	s.subs = append(s.subs, fn)
	s.mu.Unlock()
	<-ctx.Done()
	return nil
}

func (s *memSteering) Took(_ context.Context, keys []string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.taken == nil {
		s.taken = map[string]bool{}
	}
	for _, k := range keys {
		s.taken[k] = true
	}
	return nil
}

func (s *memSteering) Taken(_ context.Context, key string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.asked++
	return s.taken[key], nil
}

// waitSubscribed waits for a gateway to take the offers.
func (s *memSteering) waitSubscribed(t *testing.T) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		s.mu.Lock()
		n := len(s.subs)
		s.mu.Unlock()
		if n > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the gateway does not take the replicas' offers")
		}
	}
}

// An offer that arrives late (after the turn of its own message started,
// or after that message was answered by a turn of its own) is not taken:
// a turn is steered by later messages only.
func TestSteeringTakesNeitherItsOwnNorOlderMessages(t *testing.T) {
	h, r := steeringHarness(t)
	at := time.Now()
	m1 := tgID("m1", "work")
	m1.Timestamp = at
	h.send(t, m1)
	<-r.started
	older := tgID("m0", "an older message")
	older.Timestamp = at.Add(-time.Second)
	h.g.offer(t.Context(), m1)    // its own message, offered late
	h.g.offer(t.Context(), older) // answered already
	later := tgID("m2", "use metric units")
	later.Timestamp = at.Add(time.Second)
	h.send(t, later)
	close(r.proceed)
	if m := h.next(t); m.Content != "done: work + use metric units" {
		t.Fatalf("answer %q", m.Content)
	}
}

// endedSteering records when its Offers returned.
type endedSteering struct {
	memSteering
	ended chan struct{}
}

func (s *endedSteering) Offers(ctx context.Context, fn func(bus.Inbound)) error {
	defer close(s.ended)
	err := s.memSteering.Offers(ctx, fn)
	time.Sleep(20 * time.Millisecond) // a slow unsubscribe: Run must still wait for it
	return err
}

// TestRunJoinsTheSteeringOffers: when Run returns, the goroutine taking
// the replicas' offers has ended too (it was left running before).
func TestRunJoinsTheSteeringOffers(t *testing.T) {
	dir := t.TempDir()
	sm, err := session.NewManager(dir + "/sessions")
	if err != nil {
		t.Fatal(err)
	}
	defer sm.Close()
	b := bus.NewLocal()
	defer b.Close()
	st := &endedSteering{ended: make(chan struct{})}
	g := &Gateway{Bus: b, Sessions: sm, Runner: &echoRunner{}, Steer: st, Others: stopNone{},
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Access: &access.Checker{Pairings: &access.FilePairings{Path: dir + "/pairing.json"}}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx) }()
	st.waitSubscribed(t)
	cancel()
	<-done
	select {
	case <-st.ended:
	default:
		t.Error("Run returned while the steering offers were still being received")
	}
}
