// Package keylock is a set of locks named by keys, each held by one
// holder at a time, taken with a context (a wait ends with it), and
// present only while some caller holds or waits for it: a process that
// has locked many keys over its life keeps none of them.
package keylock

import (
	"context"
	"sync"
)

// Map is the locks of the keys of type K. The zero Map is ready to use.
type Map[K comparable] struct {
	mu    sync.Mutex
	locks map[K]*entry
}

// entry is one key's lock: a token while held, and how many callers
// hold it or wait for it (guarded by Map.mu).
type entry struct {
	held  chan struct{}
	users int
}

// Lock takes key's lock, waiting until ctx ends; the function it
// returns releases it.
func (m *Map[K]) Lock(ctx context.Context, key K) (func(), error) {
	m.mu.Lock()
	if m.locks == nil {
		m.locks = map[K]*entry{}
	}
	e := m.locks[key]
	if e == nil {
		e = &entry{held: make(chan struct{}, 1)}
		m.locks[key] = e
	}
	e.users++
	m.mu.Unlock()
	done := func() {
		m.mu.Lock()
		if e.users--; e.users == 0 {
			delete(m.locks, key)
		}
		m.mu.Unlock()
	}
	select {
	case e.held <- struct{}{}:
		return func() { <-e.held; done() }, nil
	case <-ctx.Done():
		done()
		return nil, ctx.Err()
	}
}

// Len is how many keys have a holder or a waiter.
func (m *Map[K]) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.locks)
}
