package dispatch

import (
	"context"
	"strings"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/nbots/nb/gateway/bus"
	"github.com/nbots/nb/gateway/channel"
	"github.com/nbots/nb/gateway/replica"
	"github.com/nbots/nb/internal/metric"
	"github.com/nbots/nb/internal/metric/metrictest"
)

// heldChannel holds every send until release is closed.
type heldChannel struct {
	release chan struct{}
	mu      sync.Mutex
	sent    int
}

func (h *heldChannel) Name() string                       { return "queuetest" }
func (h *heldChannel) Capabilities() channel.Capabilities { return channel.Capabilities{} }
func (h *heldChannel) Run(context.Context, channel.Inbox, func()) error {
	return nil
}
func (h *heldChannel) Send(ctx context.Context, m bus.Outbound) (string, error) {
	select {
	case <-h.release:
	case <-ctx.Done():
		return "", ctx.Err()
	}
	h.mu.Lock()
	h.sent++
	h.mu.Unlock()
	return "", nil
}

// The queue gauges read the bus's outbound queues by channel: every
// destination's messages waiting or being delivered, and the deepest
// destination's; once delivered, none.
func TestQueueDepthByChannel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := bus.NewLocal()
		defer b.Close()
		ch := &heldChannel{release: make(chan struct{})}
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		for _, chat := range []string{"a", "a", "a", "b", "b"} {
			if err := b.PublishOutbound(ctx, bus.Outbound{Kind: bus.Message, Channel: "queuetest", ChatID: chat, Content: "hi"}); err != nil {
				t.Fatal(err)
			}
		}
		d := &Dispatcher{Bus: b, Channels: []channel.Channel{ch}, Log: quiet(), Delivered: &replica.Local{}}
		done := make(chan error, 1)
		go func() { done <- d.Run(ctx) }()
		synctest.Wait() // the first message of each destination is being sent
		read := func() (float64, float64) {
			var w strings.Builder
			metric.Write(&w)
			s := metrictest.Parse(t, w.String())
			return s.Values[`nb_gateway_queue_depth{channel="queuetest"}`], s.Values[`nb_gateway_queue_depth_max{channel="queuetest"}`]
		}
		if total, deepest := read(); total != 5 || deepest != 3 {
			t.Errorf("while held: depth %v, deepest %v; want 5 and 3", total, deepest)
		}
		close(ch.release)
		synctest.Wait()
		if total, deepest := read(); total != 0 || deepest != 0 || ch.sent != 5 {
			t.Errorf("once delivered: depth %v, deepest %v, %d sent; want 0, 0, 5", total, deepest, ch.sent)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
}
