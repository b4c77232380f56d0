package jetstream

import (
	"context"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nbots/nb/gateway/bus"
)

// depthTimeout bounds the question a scrape asks the server.
const depthTimeout = time.Second

// OutboundDepth implements bus.Depther: the messages of channel in the
// outbound stream, which with work-queue retention are those not yet
// acknowledged (waiting for delivery or being delivered), over all its
// partitions and in the deepest partition (the destinations whose chat
// hashes to it). It asks the server, for at most a second, once per call;
// when the server does not answer it is the last reading, and the first
// failure of a streak is logged. A broadcast channel (web, cli) queues
// nothing in the stream: 0.
func (b *Bus) OutboundDepth(channel string) (total, deepest int) {
	if slices.Contains(b.opt.Broadcast, channel) || b.outStream == nil {
		return 0, 0
	}
	ctx, cancel := context.WithTimeout(context.Background(), depthTimeout)
	defer cancel()
	info, err := b.outStream.Info(ctx, jetstream.WithSubjectFilter(b.opt.Namespace+".out."+token(channel)+".*"))
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.depths == nil {
		b.depths = map[string][2]int{}
	}
	if err != nil {
		if !b.depthFailing {
			b.depthFailing = true
			b.opt.Log.Warn("bus: the outbound queue's depth could not be read; the metric keeps the last reading", "channel", channel, "err", cleanErr(err))
		}
		last := b.depths[channel]
		return last[0], last[1]
	}
	b.depthFailing = false
	for _, n := range info.State.Subjects {
		total += int(n)
		deepest = max(deepest, int(n))
	}
	b.depths[channel] = [2]int{total, deepest}
	return total, deepest
}

var _ bus.Depther = (*Bus)(nil)
