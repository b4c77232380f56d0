package channel

import (
	"context"
	"sync"
	"time"
)

// Pacer spaces deliveries per destination (a chat, a channel, a room):
// each destination has its own next free moment, so a slow or throttled
// chat never delays another. It is how a channel honours a platform's
// per-chat limits and its 429s: the zero value paces nothing until told
// to wait.
type Pacer struct {
	// Interval is the least time between two deliveries to one
	// destination (nil or 0: none).
	Interval func(key string) time.Duration

	mu   sync.Mutex
	next map[string]time.Time
}

// Wait takes the destination's next slot, sleeping until it comes or ctx
// ends.
func (p *Pacer) Wait(ctx context.Context, key string) error {
	now := time.Now()
	p.mu.Lock()
	if p.next == nil {
		p.next = map[string]time.Time{}
	}
	at := p.next[key]
	if at.Before(now) {
		at = now
	}
	var gap time.Duration
	if p.Interval != nil {
		gap = p.Interval(key)
	}
	if gap > 0 || at.After(now) {
		p.next[key] = at.Add(gap)
	} else {
		delete(p.next, key)
	}
	if len(p.next) > 4096 {
		p.prune(now)
	}
	p.mu.Unlock()
	d := at.Sub(now)
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Defer keeps the destination waiting for d from now (the platform's
// retry_after), unless it already waits longer.
func (p *Pacer) Defer(key string, d time.Duration) {
	at := time.Now().Add(d)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.next == nil {
		p.next = map[string]time.Time{}
	}
	if at.After(p.next[key]) {
		p.next[key] = at
	}
}

// prune forgets destinations whose slot has passed, so the map holds
// only the ones that wait.
func (p *Pacer) prune(now time.Time) {
	for k, at := range p.next {
		if at.Before(now) {
			delete(p.next, k)
		}
	}
}
