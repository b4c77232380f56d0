package jetstream_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nbots/nb/gateway/bus"
	"github.com/nbots/nb/gateway/bus/jetstream"
	"github.com/nbots/nb/internal/metric"
	"github.com/nbots/nb/internal/metric/metrictest"
	"github.com/nbots/nb/internal/natstest"
)

// The JetStream bus knows its outbound queues' depth, through bus.Metered
// as nb gateway --bus takes it: the messages of a channel not yet
// delivered, over its destinations' partitions and in the deepest, as
// nb_gateway_queue_depth and _max read them (a broadcast channel queues
// nothing; another channel's messages are not counted); the depth falls
// to 0 as they are delivered, and is the last reading while the server
// is away.
func TestOutboundDepth(t *testing.T) {
	s := natstest.Start(t)
	b := bus.Metered(dial(t, s.URL(), jetstream.Options{Namespace: "depth", AckWait: time.Second}), "jetstream")
	d, ok := b.(bus.Depther)
	if !ok {
		t.Fatal("the metered JetStream bus does not know its queues' depth")
	}
	ctx := context.Background()
	// "a" and "b" hash to different partitions of the default 64.
	for i, m := range []bus.Outbound{
		{Channel: "telegram", ChatID: "a"}, {Channel: "telegram", ChatID: "a"}, {Channel: "telegram", ChatID: "a"},
		{Channel: "telegram", ChatID: "b"},
		{Channel: "slack", ChatID: "a"},
		{Channel: "web", ChatID: "a"},
	} {
		m.Kind, m.Content = bus.Message, fmt.Sprint(i)
		if err := b.PublishOutbound(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	for ch, want := range map[string][2]int{"telegram": {4, 3}, "slack": {1, 1}, "web": {0, 0}, "discord": {0, 0}} {
		if total, deepest := d.OutboundDepth(ch); total != want[0] || deepest != want[1] {
			t.Errorf("%s: depth %d, deepest %d; want %d, %d", ch, total, deepest, want[0], want[1])
		}
	}
	metric.QueueFunc("telegram", func() (int, int) { return d.OutboundDepth("telegram") })
	scrape := metrictest.Read(t)
	for series, want := range map[string]float64{`nb_gateway_queue_depth{channel="telegram"}`: 4, `nb_gateway_queue_depth_max{channel="telegram"}`: 3} {
		if got := scrape.Values[series]; got != want {
			t.Errorf("%s = %v, want %v", series, got, want)
		}
	}

	cctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- b.Outbound(cctx, "telegram", func(context.Context, bus.Outbound) error { return nil }) }()
	deadline := time.Now().Add(10 * time.Second)
	for total, _ := d.OutboundDepth("telegram"); total != 0; total, _ = d.OutboundDepth("telegram") {
		if time.Now().After(deadline) {
			t.Fatalf("%d messages still queued after delivery", total)
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	<-done

	s.Shutdown()
	s.WaitForShutdown()
	if total, deepest := d.OutboundDepth("slack"); total != 1 || deepest != 1 {
		t.Errorf("with the server away: %d, %d; want the last reading 1, 1", total, deepest)
	}
}
