// Package gcfloor gives the Go collector's heap goal a floor: the goal
// is the live heap grown by a percentage (GOGC), as usual, but never
// below a fixed size. While the live heap is small (a gateway with a
// few MB live between turns), a goal relative to it alone makes the
// collector run every few turns; with a floor it runs when the heap
// reaches the floor, and a large live heap keeps the relative goal.
//
// The floor holds while collections come close together (Busy): at rest
// the percentage alone applies. It is a GOGC recomputed after each
// collection from the heap that collection left live (runtime/metrics),
// not a memory limit (GOMEMLIMIT): a live heap above a limit makes the
// collector run without pause, above a floor the percentage applies.
package gcfloor

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"time"
)

// maxPercent bounds the GOGC the floor sets: a goal of five times the
// live heap at most. The percentage set after a collection applies to
// the heap the next one leaves live until the tuner runs again, which
// may be much larger (a gateway that starts, with 1 MB live, then takes
// 100 turns at once): with no bound, the 1,500% that makes a 16 MiB
// goal of 1 MB live let the heap grow to 160 MB before the first
// collection of the burst (gctrace).
const maxPercent = 400

// Percent is the GOGC whose heap goal is floor bytes, or percent when
// that goal is reached with percent already. live is the heap a
// collection left live, scan what the collector counts besides it in
// the goal's base (goroutine stacks and globals): Go's goal is live +
// (live + scan) × GOGC / 100.
func Percent(percent int, floor, live, scan uint64) int {
	base := live + scan
	if base == 0 || live >= floor {
		return percent
	}
	p := (floor - live) * 100 / base
	if p > maxPercent {
		p = maxPercent
	}
	return max(percent, int(p))
}

// Busy is how close together collections must come for the floor to
// hold: a collection later than this after the one before finds a
// gateway at rest (the runtime forces one every two minutes, the idle
// release one after a burst), and the percentage alone applies until
// the next one, so that what an idle process allocates (timers, a
// metrics scrape) does not grow a heap just given back to the system
// up to the floor.
const Busy = time.Second

// Tuner keeps the floor: started by Start, it sets GOGC after each
// collection.
type Tuner struct {
	percent int
	floor   uint64
	busy    time.Duration
	last    time.Time // the collection seen last
	now     func() time.Time
	stopped atomic.Bool
	set     atomic.Int64 // the GOGC set last
	cycles  atomic.Int64 // collections seen

	mu      sync.Mutex // one adjustment at a time
	samples []metrics.Sample
}

// sentinel is an object whose only use is to be collected: its cleanup
// tells the tuner that a collection ran.
type sentinel struct{ _ [16]byte }

// Start sets GOGC to percent and keeps the heap goal at floor bytes or
// above until Stop. The process should have one Tuner; a GOGC or a
// GOMEMLIMIT set by the user is theirs, and Start is then not called
// (the caller's choice).
func Start(percent int, floor uint64) *Tuner { return start(percent, floor, time.Now) }

// start is Start with a clock.
func start(percent int, floor uint64, now func() time.Time) *Tuner {
	t := &Tuner{percent: percent, floor: floor, busy: Busy, now: now, samples: []metrics.Sample{
		{Name: "/gc/heap/live:bytes"},
		{Name: "/gc/scan/stack:bytes"},
		{Name: "/gc/scan/globals:bytes"},
	}}
	t.set.Store(int64(percent))
	debug.SetGCPercent(percent)
	t.arm()
	return t
}

// arm leaves a sentinel for the next collection to find.
func (t *Tuner) arm() {
	runtime.AddCleanup(&sentinel{}, func(t *Tuner) {
		if t.stopped.Load() {
			return
		}
		t.cycles.Add(1)
		t.adjust()
		t.arm()
	}, t)
}

// adjust sets GOGC for the heap the last collection left live.
func (t *Tuner) adjust() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped.Load() {
		return
	}
	metrics.Read(t.samples)
	var v [3]uint64
	for i, s := range t.samples {
		if s.Value.Kind() == metrics.KindUint64 {
			v[i] = s.Value.Uint64()
		}
	}
	now := t.now()
	p := t.percent
	if !t.last.IsZero() && now.Sub(t.last) <= t.busy {
		p = Percent(t.percent, t.floor, v[0], v[1]+v[2])
	}
	t.last = now
	old := int(t.set.Load())
	// A change of a few percent moves the goal by less than the heap
	// moves between collections: not worth the heap lock it takes.
	if p == old || (p != t.percent && old != t.percent && p*16 > old*15 && p*15 < old*16) {
		return
	}
	t.set.Store(int64(p))
	debug.SetGCPercent(p)
}

// Stop ends the tuning and sets GOGC back to the percentage Start was
// given.
func (t *Tuner) Stop() {
	if t.stopped.Swap(true) {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.set.Store(int64(t.percent))
	debug.SetGCPercent(t.percent)
}

// GCPercent is the GOGC the tuner set last.
func (t *Tuner) GCPercent() int { return int(t.set.Load()) }

// Cycles is how many collections the tuner has seen since Start.
func (t *Tuner) Cycles() int { return int(t.cycles.Load()) }
