package bus

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
)

// TestWindow: a key is new once, seen while among the last Size keys,
// new again after Size others or once forgotten; the window never holds
// more than Size hashes.
func TestWindow(t *testing.T) {
	w := Window{Size: 3}
	if !w.First("a") || w.First("a") || !w.Seen("a") {
		t.Fatal("a is new once, then seen")
	}
	for _, k := range []string{"b", "c"} {
		if !w.First(k) {
			t.Fatalf("%s is new", k)
		}
	}
	if !w.Seen("a") {
		t.Fatal("a is still among the last 3")
	}
	w.First("d") // a leaves
	if w.Seen("a") || !w.Seen("b") || !w.Seen("d") {
		t.Fatal("a left the window of 3 after d; b and d are in it")
	}
	w.Forget("b")
	if w.Seen("b") || !w.First("b") {
		t.Fatal("b, forgotten, is new again")
	}
	for i := range 1000 {
		w.First(fmt.Sprint(i))
	}
	if w.n > 3 || len(w.ring) > 3 {
		t.Fatalf("the window holds %d hashes in its index and %d in its ring, want 3 at most", w.n, len(w.ring))
	}
}

// TestWindowRingWhole: a Window asked (Seen) before its first key, as the
// dispatcher asks before it sets Size, still takes its ring whole, of
// Size, at its first key.
func TestWindowRingWhole(t *testing.T) {
	var w Window
	if w.Seen("a") {
		t.Fatal("an empty window has seen a")
	}
	w.Size = 64
	w.First("a")
	if cap(w.ring) != 64 {
		t.Fatalf("ring of %d, want 64 at once", cap(w.ring))
	}
}

// TestWindowAgainstModel: a long random run of First, Seen and Forget
// (few distinct keys, so keys come back, are forgotten and evicted)
// answers as the plain model does: the last Size keys given to First,
// less those forgotten since.
func TestWindowAgainstModel(t *testing.T) {
	for _, size := range []int{1, 2, 7, 64, 1000} {
		w := Window{Size: size}
		var order []string     // every key First took, oldest first
		in := map[string]int{} // key -> its latest position in order
		seen := func(k string) bool {
			i, ok := in[k]
			return ok && i >= len(order)-size
		}
		r := rand.New(rand.NewPCG(1, uint64(size)))
		for step := range 200_000 {
			k := fmt.Sprint(r.IntN(3 * size))
			switch r.IntN(8) {
			case 0:
				if got, want := w.Seen(k), seen(k); got != want {
					t.Fatalf("size %d, step %d: Seen(%s) = %v, want %v", size, step, k, got, want)
				}
			case 1:
				w.Forget(k)
				delete(in, k)
			default:
				want := !seen(k)
				if got := w.First(k); got != want {
					t.Fatalf("size %d, step %d: First(%s) = %v, want %v", size, step, k, got, want)
				}
				if want {
					in[k] = len(order)
					order = append(order, k)
				}
			}
		}
		if w.n > size {
			t.Fatalf("size %d: %d keys indexed", size, w.n)
		}
	}
}

// TestWindowBytesPerKey: a window of 65,536 keys (the bus's), full and
// turned over twice, holds at most 1.1 MB live (ring 512 KiB, index 512
// KiB); a Go map of the hashes beside the ring held 2.9 MB.
func TestWindowBytesPerKey(t *testing.T) {
	live := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	keys := make([]string, 3<<16)
	for i := range keys {
		keys[i] = fmt.Sprint("in\x00web\x00", i)
	}
	before := live()
	w := &Window{Size: 1 << 16}
	for _, k := range keys {
		w.First(k)
	}
	got := live() - before
	runtime.KeepAlive(w)
	runtime.KeepAlive(keys)
	if got > 1_100_000 {
		t.Fatalf("a full window of %d keys holds %d bytes, want 1.1 MB at most", w.Size, got)
	}
	t.Logf("%d bytes, %.1f a key", got, float64(got)/float64(w.Size))
}
