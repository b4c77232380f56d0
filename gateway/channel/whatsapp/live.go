package whatsapp

import (
	"context"
	"sync"
	"time"
)

// Live is the connection sends go through (the bridge's websocket, or
// whatsmeow's client in the native mode): the receive loop sets it, and
// a send waits for one while the channel connects. The zero Live has no
// connection.
type Live[T comparable] struct {
	mu  sync.Mutex
	cur T
	up  chan struct{} // closed, and replaced, each time cur changes
}

// Swap makes cur the connection, if old still is; a loop that set a
// connection swaps it for the zero T when it ends.
func (l *Live[T]) Swap(old, cur T) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cur != old {
		return
	}
	l.cur = cur
	if l.up != nil {
		close(l.up)
	}
	l.up = make(chan struct{})
}

// Current is the connection, the zero T while there is none.
func (l *Live[T]) Current() T {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cur
}

// Wait returns the connection, waiting up to d for one; past d it
// returns notUp.
func (l *Live[T]) Wait(ctx context.Context, d time.Duration, notUp error) (T, error) {
	var zero T
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		l.mu.Lock()
		if l.up == nil {
			l.up = make(chan struct{})
		}
		cur, up := l.cur, l.up
		l.mu.Unlock()
		if cur != zero {
			return cur, nil
		}
		select {
		case <-up:
		case <-t.C:
			return zero, notUp
		case <-ctx.Done():
			return zero, ctx.Err()
		}
	}
}
