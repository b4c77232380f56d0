package bus_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nbots/nb/gateway/bus"
	"github.com/nbots/nb/gateway/bus/bustest"
)

func TestLocal(t *testing.T) {
	bustest.Run(t, func(t *testing.T) bus.Bus {
		b := bus.NewLocal()
		b.Retry = time.Millisecond
		return b
	})
}

// TestLocalMaxQueued: past MaxQueued messages of one session (waiting or
// being handled) PublishInbound refuses with *bus.QueueFull and queues
// nothing; other sessions are not affected; a refused message is not
// remembered as seen, and is queued when sent again after the queue
// drained.
func TestLocalMaxQueued(t *testing.T) {
	b := bus.NewLocal()
	b.MaxQueued = 2
	defer b.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	release := make(chan struct{})
	got := make(chan string, 10)
	go b.Inbound(ctx, func(ctx context.Context, m bus.Inbound) error { //nolint:errcheck // ends with ctx
		if m.ChatID == "1" {
			<-release
		}
		got <- m.ID
		return nil
	})
	pub := func(chat, id string) error {
		_, err := b.PublishInbound(ctx, bus.Inbound{Channel: "telegram", ChatID: chat, ID: id})
		return err
	}
	for _, id := range []string{"a", "b"} {
		if err := pub("1", id); err != nil {
			t.Fatal(err)
		}
	}
	var full *bus.QueueFull
	if err := pub("1", "c"); !errors.As(err, &full) || full.Limit != 2 || full.Session != "telegram:1" {
		t.Fatalf("the third message: %v", err)
	}
	if err := pub("2", "x"); err != nil {
		t.Fatalf("another chat: %v", err)
	}
	close(release)
	seen := map[string]bool{}
	for range 3 {
		seen[<-got] = true
	}
	if !seen["a"] || !seen["b"] || !seen["x"] {
		t.Fatal(seen)
	}
	if err := pub("1", "c"); err != nil {
		t.Fatalf("the refused message sent again: %v", err)
	}
	if id := <-got; id != "c" {
		t.Fatal(id)
	}
}
