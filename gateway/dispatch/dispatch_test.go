package dispatch

import (
	"context"
	"errors"
	"github.com/nbots/nb/gateway/replica"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/nbots/nb/gateway/bus"
	"github.com/nbots/nb/gateway/channel"
)

// fakeChannel records sends and answers with scripted errors.
type fakeChannel struct {
	mu     sync.Mutex
	sends  []bus.Outbound
	at     []time.Time
	errs   map[string][]error // chat -> errors of the next sends
	edits  int
	block  chan struct{}
	edits2 bool
}

func (f *fakeChannel) Name() string { return "fake" }
func (f *fakeChannel) Capabilities() channel.Capabilities {
	return channel.Capabilities{Edits: f.edits2}
}
func (f *fakeChannel) Run(ctx context.Context, in channel.Inbox, ready func()) error { return nil }
func (f *fakeChannel) Send(ctx context.Context, m bus.Outbound) (string, error) {
	if m.ChatID == "slow" && f.block != nil {
		<-f.block
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if errs := f.errs[m.ChatID]; len(errs) > 0 {
		f.errs[m.ChatID] = errs[1:]
		return "", errs[0]
	}
	f.sends = append(f.sends, m)
	f.at = append(f.at, time.Now())
	return "id1", nil
}
func (f *fakeChannel) Edit(ctx context.Context, chat, id, content string) error {
	f.mu.Lock()
	f.edits++
	f.mu.Unlock()
	return nil
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func TestRetryAfterAndRetries(t *testing.T) {
	ch := &fakeChannel{errs: map[string][]error{
		"a": {&channel.RetryAfter{After: 150 * time.Millisecond, Err: errors.New("429")}},
		"b": {errors.New("reset"), errors.New("reset")},
		"c": {&channel.Undeliverable{Reason: "bot was blocked by the user"}},
		"d": {errors.New("x"), errors.New("x"), errors.New("x")},
	}}
	var undelivered []string
	d := &Dispatcher{Log: quiet(), Delivered: &replica.Local{}, MaxRetries: 2, Backoff: time.Millisecond, Undeliverable: func(m bus.Outbound, reason string) {
		undelivered = append(undelivered, m.ChatID+": "+reason)
	}}
	ctx := context.Background()
	start := time.Now()
	if err := d.Deliver(ctx, ch, bus.Outbound{Kind: bus.Message, Channel: "fake", ChatID: "a", Content: "hi", Turn: "t1"}); err != nil {
		t.Fatal(err)
	}
	if time.Since(start) < 150*time.Millisecond || len(ch.sends) != 1 {
		t.Fatalf("retry_after not waited: %v, %d sends", time.Since(start), len(ch.sends))
	}
	// The same turn's reply to the same destination is not sent twice.
	d.Deliver(ctx, ch, bus.Outbound{Kind: bus.Message, Channel: "fake", ChatID: "a", Content: "hi", Turn: "t1"})
	if len(ch.sends) != 1 {
		t.Fatal("sent twice")
	}
	d.Deliver(ctx, ch, bus.Outbound{Kind: bus.Message, Channel: "fake", ChatID: "b", Content: "hi", Turn: "t1"})
	d.Deliver(ctx, ch, bus.Outbound{Kind: bus.Message, Channel: "fake", ChatID: "c", Content: "hi", Turn: "t1"})
	d.Deliver(ctx, ch, bus.Outbound{Kind: bus.Message, Channel: "fake", ChatID: "d", Content: "hi", Turn: "t1"})
	if len(ch.sends) != 2 || ch.sends[1].ChatID != "b" {
		t.Fatalf("%+v", ch.sends)
	}
	if len(undelivered) != 2 || undelivered[0] != "c: undeliverable: bot was blocked by the user" || undelivered[1] != "d: failed 3 times, last: x" {
		t.Fatalf("%q", undelivered)
	}
}

func TestKindsAndEdits(t *testing.T) {
	ch := &fakeChannel{edits2: true}
	d := &Dispatcher{Log: quiet(), Delivered: &replica.Local{}, Progress: true}
	ctx := context.Background()
	d.Deliver(ctx, ch, bus.Outbound{Kind: bus.ToolHint, ChatID: "a", Content: "exec(ls)", Turn: "t"})
	d.Deliver(ctx, ch, bus.Outbound{Kind: bus.Progress, ChatID: "a", Content: "Hel", Turn: "t"})
	d.Deliver(ctx, ch, bus.Outbound{Kind: bus.Progress, ChatID: "a", Content: "Hello", Turn: "t"})
	d.Deliver(ctx, ch, bus.Outbound{Kind: bus.Message, ChatID: "a", Content: "Hello!", Turn: "t"})
	if len(ch.sends) != 2 || ch.edits != 1 || ch.sends[1].Content != "Hello!" {
		t.Fatalf("sends %+v edits %d (tool hints are off, the second progress edits the first)", ch.sends, ch.edits)
	}
}

// TestStaleLiveOutput: a running tool's output that waited past
// channel.LiveStale for its turn is left out (a newer one follows): the
// edits keep the platform's pace instead of queueing behind it.
func TestStaleLiveOutput(t *testing.T) {
	ch := &fakeChannel{edits2: true}
	d := &Dispatcher{Log: quiet(), Delivered: &replica.Local{}, Progress: true}
	ctx := context.Background()
	live := func(content string, age time.Duration) bus.Outbound {
		// Through a bus the number is a float64, as JSON decodes it.
		return bus.Outbound{Kind: bus.Progress, ChatID: "a", Content: content, Turn: "t",
			Metadata: map[string]any{channel.MetaStreamed: true, channel.MetaLiveAt: float64(time.Now().Add(-age).UnixMilli())}}
	}
	d.Deliver(ctx, ch, live("fresh", 0))
	d.Deliver(ctx, ch, live("stale", 3*time.Second))
	d.Deliver(ctx, ch, live("fresh again", 500*time.Millisecond))
	if len(ch.sends) != 1 || ch.sends[0].Content != "fresh" || ch.edits != 1 {
		t.Fatalf("sends %+v, %d edits: want the fresh one posted and the last edited", ch.sends, ch.edits)
	}
}

// TestPacedPerDestination: a slow chat and pacing of one chat never delay
// another chat, through the bus.
func TestPacedPerDestination(t *testing.T) {
	ch := &fakeChannel{block: make(chan struct{})}
	b := bus.NewLocal()
	defer b.Close()
	d := &Dispatcher{Bus: b, Channels: []channel.Channel{ch}, Log: quiet(), Delivered: &replica.Local{}, Interval: 100 * time.Millisecond}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go d.Run(ctx)
	b.PublishOutbound(ctx, bus.Outbound{Kind: bus.Message, Channel: "fake", ChatID: "slow", Content: "1"})
	start := time.Now()
	for i := range 3 {
		b.PublishOutbound(ctx, bus.Outbound{Kind: bus.Message, Channel: "fake", ChatID: "x", Content: string(rune('a' + i))})
		b.PublishOutbound(ctx, bus.Outbound{Kind: bus.Message, Channel: "fake", ChatID: "y", Content: string(rune('a' + i))})
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		ch.mu.Lock()
		n := len(ch.sends)
		ch.mu.Unlock()
		if n == 6 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d sends while one chat is stuck", n)
		}
		time.Sleep(5 * time.Millisecond)
	}
	took := time.Since(start)
	if took < 200*time.Millisecond || took > 2*time.Second {
		t.Fatalf("3 messages to each of 2 chats paced at 100 ms took %v (want ~200 ms, in parallel)", took)
	}
	ch.mu.Lock()
	for i := 2; i < len(ch.sends); i++ {
		if ch.sends[i].ChatID == ch.sends[i-2].ChatID && ch.at[i].Sub(ch.at[i-2]) < 90*time.Millisecond && ch.sends[i-1].ChatID != ch.sends[i].ChatID {
			t.Fatalf("pacing not kept for %s", ch.sends[i].ChatID)
		}
	}
	ch.mu.Unlock()
	close(ch.block)
}

// sharedRecord is a Record two dispatchers share, as replicas share the
// bus's.
type sharedRecord struct {
	mu   sync.Mutex
	keys map[string]bool
}

func (r *sharedRecord) Seen(_ context.Context, key string) (bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.keys[key], nil
}

func (r *sharedRecord) Record(_ context.Context, key string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.keys[key] = true
	return nil
}

// A final reply one replica delivered is not delivered by another that
// gets it again (its first replica died before acknowledging it).
func TestDeliveredAcrossReplicas(t *testing.T) {
	ch := &fakeChannel{}
	rec := &sharedRecord{keys: map[string]bool{}}
	a := &Dispatcher{Log: quiet(), Delivered: rec}
	b := &Dispatcher{Log: quiet(), Delivered: rec}
	m := bus.Outbound{Kind: bus.Message, Channel: "fake", ChatID: "a", Content: "hi", Turn: "t1"}
	ctx := context.Background()
	if err := a.Deliver(ctx, ch, m); err != nil {
		t.Fatal(err)
	}
	if err := b.Deliver(ctx, ch, m); err != nil {
		t.Fatal(err)
	}
	m.ChatID = "b"
	if err := b.Deliver(ctx, ch, m); err != nil {
		t.Fatal(err)
	}
	if len(ch.sends) != 2 {
		t.Fatalf("%d sends, want 2 (one per destination)", len(ch.sends))
	}
}

// A fan-out channel's message this replica cannot deliver (the web chat
// is open on another replica) is not reported undeliverable.
func TestFanoutNotForThisReplica(t *testing.T) {
	ch := &fakeChannel{errs: map[string][]error{"a": {&channel.Undeliverable{Reason: "no web chat is open on chat a"}}}}
	var reported int
	d := &Dispatcher{Log: quiet(), Delivered: &replica.Local{}, Fanout: []string{"fake"}, Undeliverable: func(bus.Outbound, string) { reported++ }}
	if err := d.Deliver(context.Background(), ch, bus.Outbound{Kind: bus.Message, Channel: "fake", ChatID: "a", Content: "hi", Turn: "t1"}); err != nil {
		t.Fatal(err)
	}
	if reported != 0 {
		t.Fatal("reported undeliverable")
	}
}
