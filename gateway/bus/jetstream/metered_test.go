package jetstream_test

import (
	"context"
	"testing"
	"time"

	"github.com/nbots/nb/gateway/bus"
	"github.com/nbots/nb/gateway/bus/bustest"
	"github.com/nbots/nb/gateway/bus/jetstream"
	"github.com/nbots/nb/internal/metric/metrictest"
	"github.com/nbots/nb/internal/natstest"
)

// The bus as nb gateway --bus uses it (bus.Metered around JetStream)
// counts each publish once, with its time to be durable, and a publish
// that fails as an error; it is still a conforming bus.
func TestMeteredBusCounts(t *testing.T) {
	s := natstest.Start(t)
	t.Run("Conformance", func(t *testing.T) {
		n := 0
		bustest.Run(t, func(t *testing.T) bus.Bus {
			n++
			return bus.Metered(dial(t, s.URL(), jetstream.Options{Namespace: "m" + string(rune('a'+n)), Retry: time.Millisecond, AckWait: time.Second}), "conformance")
		})
	})
	b := bus.Metered(dial(t, s.URL(), jetstream.Options{Namespace: "metered"}), "jetstream")
	ctx := context.Background()
	before := metrictest.Read(t)
	for _, id := range []string{"1", "2", "1"} { // the third is a duplicate: published, not queued
		if _, err := b.PublishInbound(ctx, bus.Inbound{Channel: "telegram", ID: id, ChatID: "c", Content: "hi"}); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		if err := b.PublishOutbound(ctx, bus.Outbound{Kind: bus.Message, Channel: "telegram", ChatID: "c", Content: "hello"}); err != nil {
			t.Fatal(err)
		}
	}
	s.Shutdown()
	s.WaitForShutdown()
	tctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if err := b.PublishOutbound(tctx, bus.Outbound{Kind: bus.Message, Channel: "telegram", ChatID: "c", Content: "lost"}); err == nil {
		t.Fatal("published with the server down")
	}
	after := metrictest.Read(t)
	for series, want := range map[string]float64{
		`nb_bus_op_duration_seconds_count{backend="jetstream",op="publish_inbound"}`:  3,
		`nb_bus_op_duration_seconds_count{backend="jetstream",op="publish_outbound"}`: 3,
		`nb_bus_op_errors_total{backend="jetstream",op="publish_inbound"}`:            0,
		`nb_bus_op_errors_total{backend="jetstream",op="publish_outbound"}`:           1,
	} {
		if got := metrictest.Delta(before, after, series); got != want {
			t.Errorf("%s: %v, want %v", series, got, want)
		}
	}
}
