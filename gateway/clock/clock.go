// Package clock is the time of the gateway's timers (cron, heartbeat,
// budgets' resets): the system's in production, a Fake that tests move by
// hand, so that a day of beats or a daylight-saving change runs in
// milliseconds.
package clock

import (
	"sync"
	"time"
)

// Clock tells the time and wakes its caller after a while.
type Clock interface {
	Now() time.Time
	// After sends the time once d has passed.
	After(d time.Duration) <-chan time.Time
}

// System is the real time.
type System struct{}

// Now is time.Now.
func (System) Now() time.Time { return time.Now() }

// After is time.After.
func (System) After(d time.Duration) <-chan time.Time { return time.After(d) }

// Fake is a clock that moves only when told (Set, Advance). Its timers
// fire when the clock reaches their time.
type Fake struct {
	mu      sync.Mutex
	now     time.Time
	waiters []waiter
}

type waiter struct {
	at time.Time
	ch chan time.Time
}

// NewFake is a fake clock reading now.
func NewFake(now time.Time) *Fake { return &Fake{now: now} }

// Now is the fake time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// After fires when the fake time reaches now+d.
func (f *Fake) After(d time.Duration) <-chan time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	ch := make(chan time.Time, 1)
	at := f.now.Add(d)
	if d <= 0 {
		ch <- f.now
		return ch
	}
	f.waiters = append(f.waiters, waiter{at, ch})
	return ch
}

// Waiters is how many timers wait: a test advances the clock once the
// code under test sleeps.
func (f *Fake) Waiters() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.waiters)
}

// Set moves the clock to t and fires the timers due.
func (f *Fake) Set(t time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = t
	kept := f.waiters[:0]
	for _, w := range f.waiters {
		if w.at.After(t) {
			kept = append(kept, w)
			continue
		}
		w.ch <- t
	}
	f.waiters = kept
}

// Advance moves the clock by d.
func (f *Fake) Advance(d time.Duration) { f.Set(f.Now().Add(d)) }
