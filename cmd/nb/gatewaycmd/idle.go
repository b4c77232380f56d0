package gatewaycmd

import (
	"context"
	"runtime/debug"
	"runtime/metrics"
	"time"

	"github.com/nbots/nb/internal/metric"
	"github.com/nbots/nb/provider"
)

// idleRelease gives back to the system, once, the memory a burst of turns
// left behind, when the gateway has had no turn in flight and allocated
// next to nothing for a while: an assistant is idle most of its life.
//
// After a burst of 100 turns at once the heap's free pages, the stacks of
// the model connections kept for the next turns (two goroutines each,
// about 16 KiB of stack between them, for the transport's idle timeout of
// 90 s) and their buffers are 15-20 MiB that the runtime's background
// scavenger returns over tens of seconds, and the connections' share not
// before they time out. The release closes the idle model connections (a
// turn after it opens a new one, as it would after 90 s idle) and runs a
// collection that returns every free page (debug.FreeOSMemory; a few
// milliseconds with a live heap of a few MB). It runs once per burst: not
// again until the gateway has allocated burst bytes more, so a quiet chat
// of a turn now and then keeps its connection.
type idleRelease struct {
	tick  time.Duration // how often the gateway's activity is read
	quiet time.Duration // how long it must have been idle
	// idleBytes is what the gateway may allocate within a tick and still
	// count as idle (its timers, a metrics scrape: a turn is about 250 KB
	// through the instant fake); burst is what it must have allocated
	// since the last release for a release to be worth it.
	idleBytes, burst uint64
	// activity reads the turns in flight and the bytes allocated since
	// the process started.
	activity func() (inFlight int, allocated uint64)
	release  func()
}

// newIdleRelease is the gateway's: activity read every second, released
// after 3 s idle following at least 32 MiB allocated (about 130 turns).
func newIdleRelease() *idleRelease {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	return &idleRelease{
		tick:      time.Second,
		quiet:     3 * time.Second,
		idleBytes: 1 << 20,
		burst:     32 << 20,
		activity: func() (int, uint64) {
			metrics.Read(s)
			var a uint64
			if s[0].Value.Kind() == metrics.KindUint64 {
				a = s[0].Value.Uint64()
			}
			return metric.InFlightCount(), a
		},
		release: releaseMemory,
	}
}

// releaseMemory closes the idle model connections, lets their goroutines
// end, and returns the free memory to the system.
func releaseMemory() {
	provider.CloseIdleConnections()
	time.Sleep(100 * time.Millisecond) // the connections' goroutines end, their stacks are free
	debug.FreeOSMemory()
}

// run watches the gateway's activity until ctx ends.
func (r *idleRelease) run(ctx context.Context) {
	t := time.NewTicker(r.tick)
	defer t.Stop()
	_, last := r.activity()
	since := last        // allocated at the last release
	busyAt := time.Now() // the last tick that saw work
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		n, a := r.activity()
		now := time.Now()
		if n > 0 || a-last > r.idleBytes {
			busyAt = now
		}
		last = a
		if a-since >= r.burst && now.Sub(busyAt) >= r.quiet {
			r.release()
			_, since = r.activity()
			last = since
		}
	}
}
