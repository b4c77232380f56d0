package bus

import "hash/maphash"

// Window remembers the last Size keys it was given, to tell a key seen
// before (a platform's message sent again, a reply already queued). It
// keeps a 64-bit hash of each key (with a seed of its own, random), not
// the key: its memory is 8 bytes a key in a ring and a map entry, never
// more than Size of each, whatever the keys' length. Two keys with one
// hash are one chance in 2^64 a pair. A Window is not safe for
// concurrent use; the zero value with Size set is ready.
type Window struct {
	// Size is how many keys are remembered (at least 1).
	Size int

	seed maphash.Seed
	set  map[uint64]struct{}
	ring []uint64 // the hashes, oldest at next once full
	next int
}

func (w *Window) hash(k string) uint64 { return maphash.String(w.seed, k) }

// First records k and reports whether it was not in the window.
func (w *Window) First(k string) bool {
	if w.set == nil {
		w.seed = maphash.MakeSeed()
		w.set = map[uint64]struct{}{}
		// Whole at once, at the first key (Seen or Forget before it
		// allocate nothing, so Size may be set as late as here): a ring
		// that doubled as it filled would hold the old halves until the
		// next collection. Its pages are touched only as it fills.
		w.ring = make([]uint64, 0, max(w.Size, 1))
	}
	h := w.hash(k)
	if _, dup := w.set[h]; dup {
		return false
	}
	w.set[h] = struct{}{}
	if len(w.ring) < max(w.Size, 1) {
		w.ring = append(w.ring, h)
		return true
	}
	delete(w.set, w.ring[w.next])
	w.ring[w.next] = h
	w.next = (w.next + 1) % len(w.ring)
	return true
}

// Seen reports whether k is in the window.
func (w *Window) Seen(k string) bool {
	if w.set == nil {
		return false
	}
	_, ok := w.set[w.hash(k)]
	return ok
}

// Forget takes k out of the window: given again, it is new.
func (w *Window) Forget(k string) {
	if w.set != nil {
		delete(w.set, w.hash(k))
	}
}
