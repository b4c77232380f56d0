// Package bustest is the conformance suite of bus.Bus: the behaviour
// every bus shows, whether it lives in one process (bus.Local) or is
// shared by replicas (NATS JetStream). Each implementation's tests call
// Run with a function that opens a fresh, empty bus.
package bustest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nbots/nb/gateway/bus"
)

// Open returns a fresh, empty bus whose handler failures are delivered
// again after a short wait (milliseconds, not seconds). The suite closes it.
type Open func(t *testing.T) bus.Bus

// Run runs the suite.
func Run(t *testing.T, open Open) {
	t.Run("OrderPerSessionParallelAcross", func(t *testing.T) { orderPerSession(t, open) })
	t.Run("DedupAndRedelivery", func(t *testing.T) { dedupAndRedelivery(t, open) })
	t.Run("RedeliveryToAnotherConsumer", func(t *testing.T) { anotherConsumer(t, open) })
	t.Run("OutboundPerDestination", func(t *testing.T) { outboundPerDestination(t, open) })
}

func orderPerSession(t *testing.T, open Open) {
	b := open(t)
	defer b.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const sessions, each = 20, 50
	var mu sync.Mutex
	got := map[string][]string{}
	var running, maxRunning, perSession atomic.Int32
	inSession := map[string]*atomic.Int32{}
	for i := range sessions {
		inSession[fmt.Sprintf("web:%d", i)] = &atomic.Int32{}
	}
	var wg sync.WaitGroup
	wg.Add(sessions * each)
	go b.Inbound(ctx, func(ctx context.Context, m bus.Inbound) error { //nolint:errcheck // ends with ctx
		defer wg.Done()
		n := running.Add(1)
		defer running.Add(-1)
		for {
			old := maxRunning.Load()
			if n <= old || maxRunning.CompareAndSwap(old, n) {
				break
			}
		}
		if inSession[m.SessionKey()].Add(1) > 1 {
			perSession.Add(1)
		}
		time.Sleep(100 * time.Microsecond)
		inSession[m.SessionKey()].Add(-1)
		mu.Lock()
		got[m.SessionKey()] = append(got[m.SessionKey()], m.Content)
		mu.Unlock()
		return nil
	})
	for j := range each {
		for i := range sessions {
			if _, err := b.PublishInbound(ctx, bus.Inbound{Channel: "web", ChatID: fmt.Sprint(i), Content: fmt.Sprint(j)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if !waitGroup(&wg, 30*time.Second) {
		t.Fatal("not every message was delivered")
	}
	if perSession.Load() != 0 {
		t.Fatal("two messages of one session were handled at once")
	}
	if maxRunning.Load() < 2 {
		t.Fatal("sessions were not handled in parallel")
	}
	for k, list := range got {
		if len(list) != each {
			t.Fatalf("%s: %d messages, want %d", k, len(list), each)
		}
		for j, c := range list {
			if c != fmt.Sprint(j) {
				t.Fatalf("%s out of order: %v", k, list)
			}
		}
	}
}

func waitGroup(wg *sync.WaitGroup, d time.Duration) bool {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
	}
}

func dedupAndRedelivery(t *testing.T, open Open) {
	b := open(t)
	defer b.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	m := bus.Inbound{Channel: "telegram", ID: "42", ChatID: "1", Content: "hi"}
	if dup, err := b.PublishInbound(ctx, m); dup || err != nil {
		t.Fatal(dup, err)
	}
	if dup, err := b.PublishInbound(ctx, m); !dup || err != nil {
		t.Fatal("the same (channel, id) was queued twice", err)
	}
	other := m
	other.Channel = "discord"
	if dup, _ := b.PublishInbound(ctx, other); dup {
		t.Fatal("the same id on another channel is another message")
	}
	var calls atomic.Int32
	done := make(chan bus.Inbound, 4)
	go b.Inbound(ctx, func(ctx context.Context, m bus.Inbound) error { //nolint:errcheck // ends with ctx
		if m.Channel == "telegram" && calls.Add(1) < 3 {
			return errors.New("not now")
		}
		done <- m
		return nil
	})
	seen := map[string]bool{}
	for range 2 {
		select {
		case m := <-done:
			seen[m.Channel] = true
		case <-time.After(10 * time.Second):
			t.Fatal("not delivered")
		}
	}
	select {
	case m := <-done:
		t.Fatalf("delivered again after it was acknowledged: %+v", m)
	case <-time.After(300 * time.Millisecond):
	}
	if calls.Load() != 3 || !seen["telegram"] || !seen["discord"] {
		t.Fatal(calls.Load(), seen)
	}
}

// anotherConsumer: a consumer that stops in the middle of a message (a
// replica that shuts down or dies) leaves it to the next consumer, which
// gets it and the messages after it, in order.
func anotherConsumer(t *testing.T, open Open) {
	b := open(t)
	defer b.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for i := range 3 {
		if _, err := b.PublishInbound(ctx, bus.Inbound{Channel: "telegram", ID: fmt.Sprint(i), ChatID: "7", Content: fmt.Sprint(i)}); err != nil {
			t.Fatal(err)
		}
	}
	first, stop := context.WithCancel(ctx)
	started := make(chan string, 1)
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		b.Inbound(first, func(ctx context.Context, m bus.Inbound) error { //nolint:errcheck // ends with first
			select {
			case started <- m.Content:
			default:
			}
			<-ctx.Done()
			return ctx.Err()
		})
	}()
	select {
	case c := <-started:
		if c != "0" {
			t.Fatalf("first delivered %q, want 0", c)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("not delivered")
	}
	stop()
	<-ended
	got := make(chan string, 8)
	go b.Inbound(ctx, func(ctx context.Context, m bus.Inbound) error { //nolint:errcheck // ends with ctx
		got <- m.Content
		return nil
	})
	for want := range 3 {
		select {
		case c := <-got:
			if c != fmt.Sprint(want) {
				t.Fatalf("got %q, want %d", c, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("message %d not delivered again", want)
		}
	}
}

func outboundPerDestination(t *testing.T, open Open) {
	b := open(t)
	defer b.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	block := make(chan struct{})
	got := make(chan bus.Outbound, 10)
	go b.Outbound(ctx, "telegram", func(ctx context.Context, m bus.Outbound) error { //nolint:errcheck // ends with ctx
		if m.ChatID == "slow" {
			<-block
		}
		got <- m
		return nil
	})
	for _, m := range []bus.Outbound{
		{Channel: "telegram", ChatID: "slow", Content: "1"},
		{Channel: "telegram", ChatID: "fast", Content: "2"},
		{Channel: "web", ChatID: "x", Content: "other channel"},
	} {
		if err := b.PublishOutbound(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case m := <-got:
		if m.ChatID != "fast" {
			t.Fatal(m)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a slow chat delayed another")
	}
	close(block)
	select {
	case m := <-got:
		if m.ChatID != "slow" {
			t.Fatal(m)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the slow chat's message was not delivered")
	}
	// One final reply per (turn, destination), however often it is queued.
	reply := bus.Outbound{Kind: bus.Message, Channel: "telegram", ChatID: "fast", Content: "once", Turn: "t1"}
	for range 2 {
		if err := b.PublishOutbound(ctx, reply); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.PublishOutbound(ctx, bus.Outbound{Kind: bus.Message, Channel: "telegram", ChatID: "fast", Content: "after"}); err != nil {
		t.Fatal(err)
	}
	var contents []string
	for len(contents) < 2 {
		select {
		case m := <-got:
			contents = append(contents, m.Content)
		case <-time.After(10 * time.Second):
			t.Fatalf("replies: %q", contents)
		}
	}
	select {
	case m := <-got:
		contents = append(contents, m.Content)
	case <-time.After(300 * time.Millisecond):
	}
	if fmt.Sprint(contents) != "[once after]" {
		t.Fatalf("replies %q, want [once after]: a turn's final reply is queued once per destination", contents)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := b.PublishInbound(ctx, bus.Inbound{}); !errors.Is(err, bus.ErrClosed) {
		t.Fatal(err)
	}
}
