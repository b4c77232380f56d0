// Package wakeup keeps the goroutines waiting for news of an id (a
// PostgreSQL notification, say) and wakes them: each waiter has its own
// channel of one, so a wake is never lost and never blocks the waker.
package wakeup

import "sync"

// Set is the waiters by id. The zero Set is ready to use.
type Set struct {
	mu      sync.Mutex
	waiters map[string]map[chan struct{}]bool
}

// Register adds a waiter for id: ch receives once per wake (wakes while
// one is pending are merged); unregister removes it.
func (s *Set) Register(id string) (ch chan struct{}, unregister func()) {
	ch = make(chan struct{}, 1)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.waiters == nil {
		s.waiters = map[string]map[chan struct{}]bool{}
	}
	if s.waiters[id] == nil {
		s.waiters[id] = map[chan struct{}]bool{}
	}
	s.waiters[id][ch] = true
	return ch, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		delete(s.waiters[id], ch)
		if len(s.waiters[id]) == 0 {
			delete(s.waiters, id)
		}
	}
}

// Wake tells every waiter of id, without waiting for any.
func (s *Set) Wake(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for ch := range s.waiters[id] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// WakeAll tells every waiter of every id (news may have been missed: a
// lost connection, say), without waiting for any.
func (s *Set) WakeAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, chans := range s.waiters {
		for ch := range chans {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}
}
