package bus

import (
	"context"
	"errors"
	"time"

	"github.com/nbots/nb/internal/metric"
)

// Metered counts the operations of b, a bus kept by backend (nb gateway's
// --bus: "jetstream"): the time each publish takes to be durable
// (nb_bus_op_duration_seconds) and the publishes and consumers that fail
// (nb_bus_op_errors_total). A duplicate, a full queue, a closed bus or a
// caller that gave up is not a failure. When b knows its queues' depth
// (Depther), so does the bus Metered returns.
func Metered(b Bus, backend string) Bus {
	m := metered{b, backend}
	if d, ok := b.(Depther); ok {
		return meteredDepther{m, d}
	}
	return m
}

type metered struct {
	Bus
	backend string
}

type meteredDepther struct {
	metered
	Depther
}

func failed(err error) error {
	var full *QueueFull
	if errors.Is(err, context.Canceled) || errors.Is(err, ErrClosed) || errors.As(err, &full) {
		return nil
	}
	return err
}

func (m metered) PublishInbound(ctx context.Context, msg Inbound) (bool, error) {
	start := time.Now()
	dup, err := m.Bus.PublishInbound(ctx, msg)
	metric.BusOp(m.backend, "publish_inbound", start, failed(err))
	return dup, err
}

func (m metered) PublishOutbound(ctx context.Context, msg Outbound) error {
	start := time.Now()
	err := m.Bus.PublishOutbound(ctx, msg)
	metric.BusOp(m.backend, "publish_outbound", start, failed(err))
	return err
}

func (m metered) Inbound(ctx context.Context, fn func(context.Context, Inbound) error) error {
	err := m.Bus.Inbound(ctx, fn)
	if ctx.Err() == nil {
		metric.BusOp(m.backend, "consume_inbound", time.Time{}, failed(err))
	}
	return err
}

func (m metered) Outbound(ctx context.Context, channel string, fn func(context.Context, Outbound) error) error {
	err := m.Bus.Outbound(ctx, channel, fn)
	if ctx.Err() == nil {
		metric.BusOp(m.backend, "consume_outbound", time.Time{}, failed(err))
	}
	return err
}
