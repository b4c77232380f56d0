// Package dispatch delivers the assistant's outbound messages through the
// channels: paced per destination (never by a per-platform global cap),
// waiting out a platform's 429 for that destination only, retrying
// transient failures, never sending one turn's reply twice to one
// destination, and never dropping silently: every final reply is
// delivered or logged as undeliverable with the reason.
package dispatch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/nbots/nb/gateway/bus"
	"github.com/nbots/nb/gateway/channel"
	"github.com/nbots/nb/internal/metric"
)

// Dispatcher takes the bus's outbound queues to the channels.
type Dispatcher struct {
	Bus      bus.Bus
	Channels []channel.Channel
	Log      *slog.Logger
	// Progress and ToolHints say whether those kinds are delivered
	// (channels.sendProgress, channels.sendToolHints).
	Progress, ToolHints bool
	// MaxRetries bounds the retries of a failed send (sendMaxRetries).
	MaxRetries int
	// Backoff is the first retry's wait, doubled up to 4 times it (1 s).
	Backoff time.Duration
	// Interval is the least time between two messages to one
	// destination (0: none).
	Interval time.Duration
	// Undeliverable is told about a message that could not be delivered,
	// with the reason (the session records it); nil only logs it.
	Undeliverable func(m bus.Outbound, reason string)
	// Delivered is a record of delivered final replies shared with other
	// replicas (package gateway/bus/jetstream has one): a reply one
	// replica delivered is not delivered again by another that gets it
	// after a crash. A dispatcher alone takes replica.Local, which keeps
	// no record: this process remembers its own.
	Delivered Record
	// Fanout are the channels whose messages reach every replica (the
	// web chat's: its sockets live in one of them); one this replica
	// cannot deliver is another's, not an error.
	Fanout []string

	mu       sync.Mutex
	next     map[string]time.Time // destination -> when it may be sent to again
	nextKept int                  // len(next) after its last sweep
	sent     bus.Window           // turn+destination of delivered final replies
	progress map[string]string    // turn+destination -> id of the progress message to edit
}

// Record remembers which final replies, by (turn, destination), were
// delivered.
type Record interface {
	Seen(ctx context.Context, key string) (bool, error)
	Record(ctx context.Context, key string) error
}

// sentWindow is how many delivered (turn, destination) pairs are kept.
const sentWindow = 1 << 14

// Run delivers until ctx ends. When the bus knows its queues' depth
// (bus.Depther), nb_gateway_queue_depth and nb_gateway_queue_depth_max
// read it by channel.
func (d *Dispatcher) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	errs := make([]error, len(d.Channels))
	dp, depths := d.Bus.(bus.Depther)
	for i, ch := range d.Channels {
		if depths {
			name := ch.Name()
			metric.QueueFunc(name, func() (int, int) { return dp.OutboundDepth(name) })
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = d.Bus.Outbound(ctx, ch.Name(), func(ctx context.Context, m bus.Outbound) error {
				return d.Deliver(ctx, ch, m)
			})
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (d *Dispatcher) log() *slog.Logger {
	if d.Log != nil {
		return d.Log
	}
	return slog.Default()
}

func dest(m bus.Outbound) string { return m.Channel + "\x00" + m.ChatID }

// Deliver sends one message through ch; it returns an error only when ctx
// ended (the bus delivers it again).
func (d *Dispatcher) Deliver(ctx context.Context, ch channel.Channel, m bus.Outbound) error {
	switch m.Kind {
	case bus.Progress:
		if !d.Progress {
			return nil
		}
		if streamed, _ := m.Metadata[channel.MetaStreamed].(bool); streamed && !ch.Capabilities().Edits {
			return nil // the answer so far, for channels that edit it in place
		}
		if channel.Stale(m.Metadata, time.Now()) {
			return nil // a running tool's output, already followed by newer
		}
	case bus.ToolHint:
		if !d.ToolHints {
			return nil
		}
	}
	final := m.Kind == bus.Message || m.Kind == bus.Error || m.Kind == ""
	key := m.Turn + "\x00" + dest(m)
	if final && m.Turn != "" {
		d.mu.Lock()
		done := d.sent.Seen(key)
		d.mu.Unlock()
		if !done {
			seen, err := d.Delivered.Seen(ctx, key)
			if err != nil {
				// Delivering twice beats never delivering.
				d.log().Warn("delivered replies unknown, delivering", "channel", m.Channel, "chat", m.ChatID, "error", err)
			}
			done = seen
		}
		if done {
			return nil
		}
	}
	// Progress edits its previous message where the channel can edit.
	if m.Kind == bus.Progress && m.Turn != "" && ch.Capabilities().Edits {
		if ed, ok := ch.(channel.Editor); ok {
			d.mu.Lock()
			id := d.progress[key]
			d.mu.Unlock()
			if id != "" {
				if err := d.wait(ctx, m); err != nil {
					return err
				}
				if ed.Edit(ctx, m.ChatID, id, m.Content) == nil {
					return nil
				}
			}
		}
	}
	backoff := d.Backoff
	if backoff <= 0 {
		backoff = time.Second
	}
	failures, limited := 0, 0
	for {
		if err := d.wait(ctx, m); err != nil {
			return err
		}
		id, err := ch.Send(ctx, m)
		d.mark(m, 0)
		if err == nil {
			if final {
				metric.Delivered(m.Channel)
			}
			d.mu.Lock()
			if final && m.Turn != "" {
				d.sent.Size = sentWindow
				d.sent.First(key)
				delete(d.progress, key)
			} else if m.Kind == bus.Progress && id != "" {
				if d.progress == nil {
					d.progress = map[string]string{}
				}
				d.progress[key] = id
			}
			d.mu.Unlock()
			if final && m.Turn != "" {
				if err := d.Delivered.Record(context.WithoutCancel(ctx), key); err != nil {
					d.log().Warn("delivered reply not recorded", "channel", m.Channel, "chat", m.ChatID, "error", err)
				}
			}
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var ra *channel.RetryAfter
		switch {
		case errors.As(err, &ra):
			// The platform's own word for this destination: wait it out,
			// however often (bounded, so a broken platform cannot hold a
			// chat's queue forever).
			limited++
			if limited > 20 {
				d.undeliverable(m, fmt.Sprintf("still rate limited after %d waits: %v", limited-1, err))
				return nil
			}
			d.mark(m, ra.After)
			continue
		case channel.IsUndeliverable(err):
			d.undeliverable(m, err.Error())
			return nil
		}
		failures++
		if failures > d.MaxRetries {
			d.undeliverable(m, fmt.Sprintf("failed %d times, last: %v", failures, err))
			return nil
		}
		d.log().Warn("send failed, retrying", "channel", m.Channel, "chat", m.ChatID, "attempt", failures, "error", err)
		d.mark(m, min(backoff<<(failures-1), 4*backoff))
	}
}

// wait sleeps until the destination may be sent to.
func (d *Dispatcher) wait(ctx context.Context, m bus.Outbound) error {
	d.mu.Lock()
	at := d.next[dest(m)]
	d.mu.Unlock()
	if w := time.Until(at); w > 0 {
		t := time.NewTimer(w)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// mark sets when the destination may be sent to next: after the pacing
// interval, or after a wait the platform asked for.
func (d *Dispatcher) mark(m bus.Outbound, after time.Duration) {
	wait := max(after, d.Interval)
	if wait <= 0 {
		return
	}
	d.mu.Lock()
	if d.next == nil {
		d.next = map[string]time.Time{}
	}
	now := time.Now()
	if len(d.next) >= max(1024, 2*d.nextKept) {
		// Destinations that may be sent to already leave: the map holds
		// those still paced, not every chat ever answered.
		for k, at := range d.next {
			if !at.After(now) {
				delete(d.next, k)
			}
		}
		d.nextKept = len(d.next)
	}
	if at := now.Add(wait); at.After(d.next[dest(m)]) {
		d.next[dest(m)] = at
	}
	d.mu.Unlock()
}

func (d *Dispatcher) undeliverable(m bus.Outbound, reason string) {
	if slices.Contains(d.Fanout, m.Channel) {
		d.log().Debug("not for this replica", "channel", m.Channel, "chat", m.ChatID, "reason", reason)
		return
	}
	if m.Kind == bus.Progress || m.Kind == bus.ToolHint {
		d.log().Info("progress not delivered", "channel", m.Channel, "chat", m.ChatID, "reason", reason)
		return
	}
	d.log().Error("reply undeliverable", "channel", m.Channel, "chat", m.ChatID, "turn", m.Turn, "reason", reason)
	metric.Undeliverable(m.Channel, reason)
	if d.Undeliverable != nil {
		d.Undeliverable(m, reason)
	}
}
