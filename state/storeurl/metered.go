package storeurl

import (
	"context"
	"errors"
	"time"

	"github.com/nbots/nb/internal/metric"
	"github.com/nbots/nb/state"
)

// metered counts the operations of a store set by URL
// (nb_store_op_duration_seconds and nb_store_op_errors_total, store
// "conversations"): the one seam every backend goes through.
//
// metered answers every optional capability (state.Enumerator,
// OutputLister, Backdater; TailBeginner has its own wrapper) because
// every backend a URL opens has them, as the assertions beside each
// backend hold at build time (state/enumerate.go, state/pgstore): a
// backend without one must gain a wrapper per capability, as
// TailBeginner has, or callers would take ErrUnsupported for an answer.
type metered struct {
	s       state.Store
	backend string
}

// failed is err unless it is an answer rather than a failure: a
// conversation another exchange holds, a caller that gave up.
func failed(err error) error {
	if errors.Is(err, state.ErrBusy) || errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

func (m metered) op(op string, start time.Time, err error) {
	metric.StoreOp("conversations", m.backend, op, start, failed(err))
}

func (m metered) Open(b state.Bot, endUser, key string) (state.Conversation, error) {
	c, err := m.s.Open(b, endUser, key)
	if err != nil {
		return nil, err
	}
	mc := &meteredConv{c: c, m: m}
	if tb, ok := c.(state.TailBeginner); ok {
		return &meteredTail{meteredConv: mc, tb: tb}, nil
	}
	return mc, nil
}

func (m metered) List(ctx context.Context, b state.Bot) (state.Listing, error) {
	start := time.Now()
	l, err := m.s.List(ctx, b)
	m.op("list", start, err)
	return l, err
}

func (m metered) Location(b state.Bot) (string, error) { return m.s.Location(b) }

// Bots implements state.Enumerator for the stores that do.
func (m metered) Bots(ctx context.Context) ([]state.Bot, error) {
	en, ok := m.s.(state.Enumerator)
	if !ok {
		return nil, errors.ErrUnsupported
	}
	start := time.Now()
	bots, err := en.Bots(ctx)
	m.op("bots", start, err)
	return bots, err
}

type meteredConv struct {
	c state.Conversation
	m metered
}

func (c *meteredConv) Begin(ctx context.Context, onBusy func()) (state.Turn, error) {
	start := time.Now()
	t, err := c.c.Begin(ctx, onBusy)
	c.m.op("begin", start, err)
	if err != nil {
		return nil, err
	}
	return &meteredTurn{t: t, m: c.m}, nil
}

func (c *meteredConv) History(ctx context.Context) ([]state.Event, error) {
	start := time.Now()
	h, err := c.c.History(ctx)
	c.m.op("history", start, err)
	return h, err
}

func (c *meteredConv) Output(ctx context.Context, id string) (string, error) {
	start := time.Now()
	o, err := c.c.Output(ctx, id)
	c.m.op("output", start, err)
	return o, err
}

func (c *meteredConv) Delete(ctx context.Context) (bool, error) {
	start := time.Now()
	existed, err := c.c.Delete(ctx)
	c.m.op("delete", start, err)
	return existed, err
}

func (c *meteredConv) Location() string        { return c.c.Location() }
func (c *meteredConv) HistoryLocation() string { return c.c.HistoryLocation() }

// Outputs implements state.OutputLister for the conversations that do.
func (c *meteredConv) Outputs(ctx context.Context) ([]string, error) {
	ol, ok := c.c.(state.OutputLister)
	if !ok {
		return nil, errors.ErrUnsupported
	}
	start := time.Now()
	o, err := ol.Outputs(ctx)
	c.m.op("outputs", start, err)
	return o, err
}

// SetLastActivity implements state.Backdater for the conversations that
// do.
func (c *meteredConv) SetLastActivity(ctx context.Context, at time.Time) error {
	bd, ok := c.c.(state.Backdater)
	if !ok {
		return errors.ErrUnsupported
	}
	start := time.Now()
	err := bd.SetLastActivity(ctx, at)
	c.m.op("set_last_activity", start, err)
	return err
}

// meteredTail is a conversation that begins after the first n events
// (state.TailBeginner), as its store's does.
type meteredTail struct {
	*meteredConv
	tb state.TailBeginner
}

func (c *meteredTail) BeginAfter(ctx context.Context, onBusy func(), n int) (state.Turn, int, error) {
	start := time.Now()
	t, total, err := c.tb.BeginAfter(ctx, onBusy, n)
	c.m.op("begin", start, err)
	if err != nil {
		return nil, total, err
	}
	return &meteredTurn{t: t, m: c.m}, total, nil
}

type meteredTurn struct {
	t state.Turn
	m metered
}

func (t *meteredTurn) History() []state.Event { return t.t.History() }

func (t *meteredTurn) Append(events ...state.Event) error {
	start := time.Now()
	err := t.t.Append(events...)
	t.m.op("append", start, err)
	return err
}

func (t *meteredTurn) KeepOutput(id, text string) (string, error) {
	start := time.Now()
	where, err := t.t.KeepOutput(id, text)
	t.m.op("keep_output", start, err)
	return where, err
}

func (t *meteredTurn) End() { t.t.End() }
