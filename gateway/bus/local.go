package bus

import (
	"context"
	"errors"
	"sync"
	"time"
)

// ErrClosed is returned by a closed bus.
var ErrClosed = errors.New("the message bus is closed")

// Local is the in-process Bus of a single gateway: queues in memory, one
// per session (inbound) and per destination (outbound), each delivered in
// order and one message at a time, the queues in parallel. What is durable
// is the session file the agent appends to; a message still queued when
// the process dies is lost with the process, as nanobot's asyncio queues
// lose it (the channels' platform offsets, advanced only once a message
// was published, make the platform send it again).
type Local struct {
	// Retry is the wait before a message whose handler failed is delivered
	// again (doubling up to 30 times it); 0 is 200 ms.
	Retry time.Duration
	// MaxQueued bounds the inbound messages of one session held in
	// memory, waiting or being handled (0: no bound): past it
	// PublishInbound refuses with *QueueFull, so that one chat's flood
	// cannot grow the process without end.
	MaxQueued int

	in   *lanes[Inbound]
	outs sync.Map // channel name -> *lanes[Outbound]

	mu     sync.Mutex
	seen   Window // guarded by mu
	closed bool
}

// dedupWindow is how many (channel, id) pairs and final replies a Local
// remembers.
const dedupWindow = 1 << 16

// NewLocal returns an empty in-process bus.
func NewLocal() *Local {
	b := &Local{seen: Window{Size: dedupWindow}}
	b.in = newLanes[Inbound](b)
	return b
}

func (b *Local) retry() time.Duration {
	if b.Retry > 0 {
		return b.Retry
	}
	return 200 * time.Millisecond
}

// PublishInbound implements Bus.
func (b *Local) PublishInbound(ctx context.Context, m Inbound) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return false, ErrClosed
	}
	key := "in\x00" + m.Channel + "\x00" + m.ID
	if m.ID != "" && !b.seen.First(key) {
		b.mu.Unlock()
		return true, nil
	}
	b.mu.Unlock()
	if !b.in.pushBounded(m.SessionKey(), m, b.MaxQueued) {
		if m.ID != "" {
			// Not queued: the same message sent again later is new.
			b.mu.Lock()
			b.seen.Forget(key)
			b.mu.Unlock()
		}
		return false, &QueueFull{Session: m.SessionKey(), Limit: b.MaxQueued}
	}
	return false, nil
}

// Inbound implements Bus.
func (b *Local) Inbound(ctx context.Context, fn func(context.Context, Inbound) error) error {
	return b.in.consume(ctx, fn)
}

func (b *Local) out(channel string) *lanes[Outbound] {
	if l, ok := b.outs.Load(channel); ok {
		return l.(*lanes[Outbound])
	}
	l, _ := b.outs.LoadOrStore(channel, newLanes[Outbound](b))
	return l.(*lanes[Outbound])
}

// PublishOutbound implements Bus.
func (b *Local) PublishOutbound(ctx context.Context, m Outbound) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return ErrClosed
	}
	first := true
	if k, ok := FinalKey(m); ok {
		first = b.seen.First("out\x00" + k)
	}
	b.mu.Unlock()
	if !first {
		return nil
	}
	b.out(m.Channel).push(m.ChatID, m)
	return nil
}

// Outbound implements Bus.
func (b *Local) Outbound(ctx context.Context, channel string, fn func(context.Context, Outbound) error) error {
	return b.out(channel).consume(ctx, fn)
}

// OutboundDepth implements Depther: the messages of channel waiting for
// delivery or being delivered, over all its destinations and at its
// deepest.
func (b *Local) OutboundDepth(channel string) (total, deepest int) {
	l, ok := b.outs.Load(channel)
	if !ok {
		return 0, 0
	}
	return l.(*lanes[Outbound]).depth()
}

// Close implements Bus: consumers return, publishing fails, and Close
// waits for the handlers still running (their contexts should be
// cancelled first), so that what they use can be closed after it.
func (b *Local) Close() error {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	b.in.close()
	b.outs.Range(func(_, v any) bool { v.(*lanes[Outbound]).close(); return true })
	b.in.running.Wait()
	b.outs.Range(func(_, v any) bool { v.(*lanes[Outbound]).running.Wait(); return true })
	return nil
}

// lanes are FIFO queues by key, each drained by at most one goroutine.
type lanes[T any] struct {
	b        *Local
	mu       sync.Mutex
	queues   map[string]*lane[T]
	consumer *consumer[T]
	done     chan struct{}
	closed   bool
	running  sync.WaitGroup // drain goroutines
}

type lane[T any] struct {
	items []T
	busy  bool
}

type consumer[T any] struct {
	ctx context.Context
	fn  func(context.Context, T) error
}

func newLanes[T any](b *Local) *lanes[T] {
	return &lanes[T]{b: b, queues: map[string]*lane[T]{}, done: make(chan struct{})}
}

func (l *lanes[T]) push(key string, m T) { l.pushBounded(key, m, 0) }

// pushBounded queues m unless key's queue already holds max messages
// (0: no bound); it reports whether it queued.
func (l *lanes[T]) pushBounded(key string, m T, max int) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	q := l.queues[key]
	if q == nil {
		q = &lane[T]{}
		l.queues[key] = q
	}
	if max > 0 && len(q.items) >= max {
		return false
	}
	q.items = append(q.items, m)
	l.startLocked(key, q)
	return true
}

// startLocked starts draining q when a consumer is there and nobody
// drains it yet.
func (l *lanes[T]) startLocked(key string, q *lane[T]) {
	if l.consumer == nil || q.busy || len(q.items) == 0 || l.closed {
		return
	}
	q.busy = true
	l.running.Add(1)
	go l.drain(l.consumer, key, q)
}

func (l *lanes[T]) consume(ctx context.Context, fn func(context.Context, T) error) error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return ErrClosed
	}
	c := &consumer[T]{ctx: ctx, fn: fn}
	l.consumer = c
	for k, q := range l.queues {
		l.startLocked(k, q)
	}
	l.mu.Unlock()
	select {
	case <-ctx.Done():
	case <-l.done:
	}
	l.mu.Lock()
	if l.consumer == c {
		l.consumer = nil
	}
	l.mu.Unlock()
	return nil
}

// drain delivers q's messages in order until it is empty; a message whose
// handler fails is delivered again after a growing wait.
func (l *lanes[T]) drain(c *consumer[T], key string, q *lane[T]) {
	defer l.running.Done()
	wait := l.b.retry()
	for {
		l.mu.Lock()
		if len(q.items) == 0 || l.closed || c.ctx.Err() != nil {
			q.busy = false
			if len(q.items) == 0 {
				delete(l.queues, key)
			} else if l.consumer != nil && l.consumer != c {
				l.startLocked(key, q) // a new consumer took over
			}
			l.mu.Unlock()
			return
		}
		m := q.items[0]
		l.mu.Unlock()
		if err := c.fn(c.ctx, m); err != nil {
			select {
			case <-time.After(wait):
			case <-c.ctx.Done():
			case <-l.done:
			}
			wait = min(wait*2, 30*l.b.retry())
			continue
		}
		wait = l.b.retry()
		l.mu.Lock()
		var zero T
		q.items[0] = zero
		q.items = q.items[1:]
		l.mu.Unlock()
	}
}

// depth is the messages queued in all lanes, and in the longest.
func (l *lanes[T]) depth() (total, deepest int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, q := range l.queues {
		total += len(q.items)
		deepest = max(deepest, len(q.items))
	}
	return total, deepest
}

func (l *lanes[T]) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.closed {
		l.closed = true
		close(l.done)
	}
}

var _ Bus = (*Local)(nil)
