package bus

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestLocalOrderPerSessionParallelAcross(t *testing.T) {
	b := NewLocal()
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
	go b.Inbound(ctx, func(ctx context.Context, m Inbound) error {
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
			if _, err := b.PublishInbound(ctx, Inbound{Channel: "web", ChatID: fmt.Sprint(i), Content: fmt.Sprint(j)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	wg.Wait()
	if perSession.Load() != 0 {
		t.Fatal("two messages of one session were handled at once")
	}
	if maxRunning.Load() < 2 {
		t.Fatal("sessions were not handled in parallel")
	}
	for k, list := range got {
		for j, c := range list {
			if c != fmt.Sprint(j) {
				t.Fatalf("%s out of order: %v", k, list)
			}
		}
	}
}

func TestLocalDedupAndRedelivery(t *testing.T) {
	b := NewLocal()
	b.Retry = time.Millisecond
	defer b.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	m := Inbound{Channel: "telegram", ID: "42", ChatID: "1", Content: "hi"}
	if dup, err := b.PublishInbound(ctx, m); dup || err != nil {
		t.Fatal(dup, err)
	}
	if dup, _ := b.PublishInbound(ctx, m); !dup {
		t.Fatal("the same (channel, id) was queued twice")
	}
	other := m
	other.Channel = "discord"
	if dup, _ := b.PublishInbound(ctx, other); dup {
		t.Fatal("the same id on another channel is another message")
	}
	var calls atomic.Int32
	done := make(chan Inbound, 4)
	go b.Inbound(ctx, func(ctx context.Context, m Inbound) error {
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
		case <-time.After(5 * time.Second):
			t.Fatal("not delivered")
		}
	}
	if calls.Load() != 3 || !seen["telegram"] || !seen["discord"] {
		t.Fatal(calls.Load(), seen)
	}
}

func TestLocalOutboundPerDestination(t *testing.T) {
	b := NewLocal()
	defer b.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	block := make(chan struct{})
	got := make(chan Outbound, 10)
	go b.Outbound(ctx, "telegram", func(ctx context.Context, m Outbound) error {
		if m.ChatID == "slow" {
			<-block
		}
		got <- m
		return nil
	})
	b.PublishOutbound(ctx, Outbound{Channel: "telegram", ChatID: "slow", Content: "1"})
	b.PublishOutbound(ctx, Outbound{Channel: "telegram", ChatID: "fast", Content: "2"})
	b.PublishOutbound(ctx, Outbound{Channel: "web", ChatID: "x", Content: "other channel"})
	select {
	case m := <-got:
		if m.ChatID != "fast" {
			t.Fatal(m)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a slow chat delayed another")
	}
	close(block)
	if m := <-got; m.ChatID != "slow" {
		t.Fatal(m)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := b.PublishInbound(ctx, Inbound{}); !errors.Is(err, ErrClosed) {
		t.Fatal(err)
	}
}
