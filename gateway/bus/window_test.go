package bus

import (
	"fmt"
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
	if len(w.set) > 3 || len(w.ring) > 3 {
		t.Fatalf("the window holds %d hashes in its set and %d in its ring, want 3 at most", len(w.set), len(w.ring))
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
