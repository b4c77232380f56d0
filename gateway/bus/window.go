package bus

import "hash/maphash"

// Window remembers the last Size keys it was given, to tell a key seen
// before (a platform's message sent again, a reply already queued). It
// keeps a 64-bit hash of each key (with a seed of its own, random), not
// the key: two keys with one hash are one chance in 2^64 a pair. The
// hashes are in a ring, oldest first once full, and found through an
// open-addressed index of ring positions (4 bytes a slot, at most 3/4
// full, doubled as the ring fills): about 13-19 bytes a key in all,
// where a Go map of the hashes beside the ring took 40-45 (a 65,536-key
// window was 2.9 MB full, now 1.5 MB at most). A Window is not safe
// for concurrent use; the zero value with Size set is ready.
type Window struct {
	// Size is how many keys are remembered (at least 1).
	Size int

	seed maphash.Seed
	ring []uint64 // the hashes, oldest at next once full
	next int
	// slots index the ring: a ring position plus one (0: empty), at
	// the hash's home slot or after it (linear probing); n are in use.
	slots []uint32
	n     int
}

func (w *Window) hash(k string) uint64 { return maphash.String(w.seed, k) }

// find returns the slot of hash h, or the empty slot where it would go.
func (w *Window) find(h uint64) (slot int, found bool) {
	mask := len(w.slots) - 1
	for i := int(h) & mask; ; i = (i + 1) & mask {
		v := w.slots[i]
		if v == 0 {
			return i, false
		}
		if w.ring[v-1] == h {
			return i, true
		}
	}
}

// First records k and reports whether it was not in the window.
func (w *Window) First(k string) bool {
	size := max(w.Size, 1)
	if w.slots == nil {
		w.seed = maphash.MakeSeed()
		// The ring whole at once, at the first key (Seen or Forget
		// before it allocate nothing, so Size may be set as late as
		// here): a ring that doubled as it filled would hold the old
		// halves until the next collection. Its pages are touched only
		// as it fills.
		w.ring = make([]uint64, 0, size)
		w.slots = make([]uint32, 16)
	}
	h := w.hash(k)
	if _, dup := w.find(h); dup {
		return false
	}
	pos := len(w.ring)
	if pos < size {
		w.ring = append(w.ring, h)
	} else {
		pos = w.next
		w.evict(pos)
		w.ring[pos] = h
		w.next = (w.next + 1) % len(w.ring)
	}
	if (w.n+1)*4 > len(w.slots)*3 {
		w.grow()
	}
	slot, _ := w.find(h)
	w.slots[slot] = uint32(pos) + 1
	w.n++
	return true
}

// grow doubles the index.
func (w *Window) grow() {
	old := w.slots
	w.slots = make([]uint32, 2*len(old))
	mask := len(w.slots) - 1
	for _, v := range old {
		if v == 0 {
			continue
		}
		i := int(w.ring[v-1]) & mask
		for w.slots[i] != 0 {
			i = (i + 1) & mask
		}
		w.slots[i] = v
	}
}

// evict takes the ring's position pos out of the index, if it is there
// (a key forgotten is not).
func (w *Window) evict(pos int) {
	mask := len(w.slots) - 1
	for i := int(w.ring[pos]) & mask; w.slots[i] != 0; i = (i + 1) & mask {
		if int(w.slots[i])-1 == pos {
			w.remove(i)
			return
		}
	}
}

// remove empties slot i, moving back the entries after it that would no
// longer be found (linear probing leaves no tombstone).
func (w *Window) remove(i int) {
	mask := len(w.slots) - 1
	for j := (i + 1) & mask; w.slots[j] != 0; j = (j + 1) & mask {
		home := int(w.ring[w.slots[j]-1]) & mask
		// The entry at j may move to i when its home is not in (i, j]
		// (cyclically).
		if (j > i && (home <= i || home > j)) || (j < i && home <= i && home > j) {
			w.slots[i] = w.slots[j]
			i = j
		}
	}
	w.slots[i] = 0
	w.n--
}

// Seen reports whether k is in the window.
func (w *Window) Seen(k string) bool {
	if w.slots == nil {
		return false
	}
	_, ok := w.find(w.hash(k))
	return ok
}

// Forget takes k out of the window: given again, it is new.
func (w *Window) Forget(k string) {
	if w.slots == nil {
		return
	}
	if i, ok := w.find(w.hash(k)); ok {
		w.remove(i)
	}
}
