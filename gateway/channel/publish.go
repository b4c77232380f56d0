package channel

import (
	"context"
	"log/slog"
	"time"

	"github.com/nbots/nb/gateway/bus"
)

// Sleep waits d, or less if ctx ends first; it reports whether the wait
// was whole.
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// PublishDurably hands m to the inbox until the inbox takes it, waiting
// between tries from wait up to a minute: a receive loop must not move its
// platform position past a message the gateway does not hold. It reports
// false only when ctx ended first.
func PublishDurably(ctx context.Context, in Inbox, m bus.Inbound, log *slog.Logger, wait time.Duration) bool {
	for {
		err := in.Publish(ctx, m)
		if err == nil {
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		log.Warn(m.Channel+": publishing a message", "err", err, "message", m.ID, "retry_in", wait)
		if !Sleep(ctx, wait) {
			return false
		}
		wait = min(wait*2, time.Minute)
	}
}
