package gcfloor

import (
	"runtime"
	"runtime/debug"
	"sync"
	"testing"
	"time"
)

func TestPercent(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		name             string
		percent          int
		floor, live, scn uint64
		want             int
	}{
		// 4 MiB live, 1 MiB of stacks and globals: a goal of 16 MiB is
		// 4 + 5 × 240% = 16.
		{"small live heap", 50, 16 * mib, 4 * mib, 1 * mib, 240},
		// 2 MiB live: 2 + 2 × 400% = 10 MiB, the most the floor asks.
		{"smaller live heap", 50, 16 * mib, 2 * mib, 0, maxPercent},
		// 12 MiB live: 12 + 12 × 50% = 18 MiB, above the floor.
		{"live heap past the floor's reach", 50, 16 * mib, 12 * mib, 0, 50},
		{"live heap above the floor", 50, 16 * mib, 20 * mib, 0, 50},
		{"nothing live yet", 50, 16 * mib, 0, 0, 50},
		{"almost nothing live", 50, 16 * mib, 1, 0, maxPercent},
		{"no floor", 50, 0, 4 * mib, 0, 50},
	} {
		if got := Percent(c.percent, c.floor, c.live, c.scn); got != c.want {
			t.Errorf("%s: Percent(%d, %d, %d, %d) = %d, want %d", c.name, c.percent, c.floor, c.live, c.scn, got, c.want)
		}
	}
}

// TestTunerRaisesGOGC: with a small live heap, the tuner raises GOGC
// after each collection so that the goal reaches the floor, the
// collector runs less often for the same garbage, and Stop sets the
// percentage back.
func TestTunerRaisesGOGC(t *testing.T) {
	old := debug.SetGCPercent(100)
	defer debug.SetGCPercent(old)

	// Collections for 64 MiB of garbage in 64 KiB pieces, without and
	// with a floor of 32 MiB (the test's live heap is a few MB).
	garbage := func() uint32 {
		var ms runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&ms)
		n := ms.NumGC
		var keep []byte
		for range 1024 {
			keep = make([]byte, 64<<10)
		}
		_ = keep
		runtime.ReadMemStats(&ms)
		return ms.NumGC - n
	}
	debug.SetGCPercent(50)
	without := garbage()

	tu := Start(50, 32<<20)
	deadline := time.Now().Add(5 * time.Second)
	for tu.GCPercent() <= 50 && time.Now().Before(deadline) {
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
	if p := tu.GCPercent(); p <= 50 {
		t.Fatalf("GOGC %d after %d collections close together with a small live heap, want above 50", p, tu.Cycles())
	}
	with := garbage()
	if with*2 > without {
		t.Errorf("%d collections for 64 MiB of garbage with a floor of 32 MiB, %d without: want at most half", with, without)
	}
	t.Logf("collections for 64 MiB of garbage: %d without a floor, %d with one (GOGC %d)", without, with, tu.GCPercent())
	tu.Stop()
	if p := debug.SetGCPercent(100); p != 50 {
		t.Errorf("GOGC %d after Stop, want 50", p)
	}
	runtime.GC()
	runtime.GC()
	time.Sleep(10 * time.Millisecond)
	if p := debug.SetGCPercent(100); p != 100 {
		t.Errorf("GOGC %d set after Stop", p)
	}
}

// TestTunerAtRest: collections further apart than Busy (a process at
// rest) leave the percentage alone; the first collection close after
// another brings the floor back.
func TestTunerAtRest(t *testing.T) {
	old := debug.SetGCPercent(100)
	defer debug.SetGCPercent(old)
	var mu sync.Mutex
	clock := time.Unix(0, 0)
	step := 2 * Busy
	tu := start(50, 32<<20, func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		clock = clock.Add(step)
		return clock
	})
	defer tu.Stop()
	// waitCycles runs collections until the tuner has seen n more.
	waitCycles := func(n int) {
		t.Helper()
		want := tu.Cycles() + n
		deadline := time.Now().Add(5 * time.Second)
		for tu.Cycles() < want && time.Now().Before(deadline) {
			runtime.GC()
			time.Sleep(time.Millisecond)
		}
		if tu.Cycles() < want {
			t.Fatalf("the tuner saw %d collections, want %d", tu.Cycles(), want)
		}
	}
	waitCycles(3)
	if p := tu.GCPercent(); p != 50 {
		t.Errorf("GOGC %d after collections %v apart, want 50", p, step)
	}
	mu.Lock()
	step = Busy / 10
	mu.Unlock()
	waitCycles(2)
	if p := tu.GCPercent(); p <= 50 {
		t.Errorf("GOGC %d after collections %v apart with a small live heap, want above 50", p, Busy/10)
	}
}
