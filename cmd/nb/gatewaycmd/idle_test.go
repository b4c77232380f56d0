package gatewaycmd

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/nbots/nb/internal/metric"
)

// fakeActivity is a gateway's activity as the test drives it.
type fakeActivity struct {
	mu        sync.Mutex
	inFlight  int
	allocated uint64
}

func (f *fakeActivity) read() (int, uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.inFlight, f.allocated
}

func (f *fakeActivity) set(inFlight int, more uint64) {
	f.mu.Lock()
	f.inFlight += inFlight
	f.allocated += more
	f.mu.Unlock()
}

// TestIdleReleaseOncePerBurst: the memory is released once after a burst,
// when the gateway has been idle for the quiet time; not while turns are
// in flight (even a turn that allocates nothing, waiting for its model),
// not while it allocates, not again while it stays idle, not after a turn
// now and then, and again after the next burst.
func TestIdleReleaseOncePerBurst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		act := &fakeActivity{}
		var mu sync.Mutex
		var released []time.Duration
		start := time.Now()
		r := &idleRelease{tick: time.Second, quiet: 5 * time.Second, idleBytes: 1 << 20, burst: 32 << 20,
			activity: act.read,
			release: func() {
				mu.Lock()
				released = append(released, time.Since(start))
				mu.Unlock()
			}}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { r.run(ctx); close(done) }()
		count := func() int {
			synctest.Wait()
			mu.Lock()
			defer mu.Unlock()
			return len(released)
		}
		step := func(d time.Duration) { time.Sleep(d); synctest.Wait() }

		// A burst: 20 s of turns, 8 MiB a second.
		act.set(100, 0)
		for range 20 {
			act.set(0, 8<<20)
			step(time.Second)
		}
		if n := count(); n != 0 {
			t.Fatalf("released %d times during the burst", n)
		}
		// The last turn waits 30 s for its model, allocating nothing.
		act.set(-99, 0)
		step(30 * time.Second)
		if n := count(); n != 0 {
			t.Fatalf("released %d times while a turn was in flight", n)
		}
		// Idle: not before the quiet time, then once.
		act.set(-1, 0)
		step(4 * time.Second)
		if n := count(); n != 0 {
			t.Fatalf("released %d times after 4 s idle (quiet time 5 s)", n)
		}
		step(3 * time.Second)
		if n := count(); n != 1 {
			t.Fatalf("released %d times after 7 s idle, want 1", n)
		}
		step(10 * time.Minute)
		if n := count(); n != 1 {
			t.Fatalf("released %d times after 10 min idle, want still 1", n)
		}
		// A turn now and then (300 KB each, a minute apart): no burst.
		for range 30 {
			act.set(1, 300<<10)
			step(2 * time.Second)
			act.set(-1, 0)
			step(time.Minute)
		}
		if n := count(); n != 1 {
			t.Fatalf("released %d times after 30 turns a minute apart, want still 1", n)
		}
		// Allocation without a turn counted in flight (a consolidation,
		// a webhook) is activity too: 2 MiB a second holds it off.
		for range 40 {
			act.set(0, 2<<20)
			step(time.Second)
		}
		if n := count(); n != 1 {
			t.Fatalf("released %d times while the gateway allocated 2 MiB a second, want still 1", n)
		}
		step(6 * time.Second)
		if n := count(); n != 2 {
			t.Fatalf("released %d times after a second burst and 6 s idle, want 2", n)
		}
		cancel()
		<-done
	})
}

var sink []byte

// TestIdleActivity: the gateway's activity counts the turns in flight
// and the bytes allocated.
func TestIdleActivity(t *testing.T) {
	r := newIdleRelease()
	n0, a0 := r.activity()
	end := metric.Turn("websocket", "chat")
	n1, _ := r.activity()
	end(nil)
	sink = make([]byte, 4<<20)
	n2, a2 := r.activity()
	if n1 != n0+1 || n2 != n0 {
		t.Errorf("turns in flight: %d, then %d with a turn, then %d after it", n0, n1, n2)
	}
	if a2 < a0+4<<20 {
		t.Errorf("allocated %d bytes, then %d after allocating 4 MiB", a0, a2)
	}
}
