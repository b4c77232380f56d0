package eventlog

import (
	"container/list"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"sync"
	"time"
)

// Limits bound a Store: beyond Count entries or Bytes bytes the oldest
// go first, and each is forgotten TTL after it ended (a log) or was put
// (any other value).
type Limits struct {
	Count int
	Bytes int64
	TTL   time.Duration
}

// ErrEvicted fails a log its Store forgot while it was open, to keep
// within the store's bytes or count.
var ErrEvicted = errors.New("the server forgot this exchange's output to stay within its memory limit for kept output")

// Store keeps values by id for the owner that put them (another owner's
// id is unknown), bounded in count and bytes, forgetting the oldest
// first and each when it expires. A *Log value is counted as it grows;
// it does not expire while open, and open logs are forgotten only after
// every ended entry (they are failed with ErrEvicted). It is safe for
// concurrent use. A value is a log when it has an EventLog method (a
// *Log, or a type that embeds one).
type Store[V any] struct {
	limits Limits
	now    func() time.Time
	// onEvict, when set, hears of each open log forgotten.
	onEvict func(id string, v V)

	mu    sync.Mutex
	items map[string]*list.Element
	order list.List // oldest at the back
	bytes int64
}

type item[V any] struct {
	id, owner string
	value     V
	log       *Log // value, when it is a log
	size      int64
	put       time.Time
	expires   time.Time // zero for a log: see expired
}

// NewStore returns a store within limits; now is its clock (nil:
// time.Now). onEvict, when not nil, is called for each open log the
// store forgets, to stop the exchange that writes it.
func NewStore[V any](limits Limits, now func() time.Time, onEvict func(id string, v V)) *Store[V] {
	if now == nil {
		now = time.Now
	}
	return &Store[V]{limits: limits, now: now, onEvict: onEvict, items: map[string]*list.Element{}}
}

// NewID returns a new random id (128 bits, hex).
func NewID() string {
	var b [16]byte
	rand.Read(b[:]) //nolint:errcheck // never fails
	return hex.EncodeToString(b[:])
}

// Put keeps v under id for owner, size bytes large, and reports whether
// it was kept: a value larger than the whole store is not. A log is put
// before it is written; its growth is counted from then on, and the
// store's id becomes its ID.
func (s *Store[V]) Put(id, owner string, v V, size int64) bool {
	if size > s.limits.Bytes {
		return false
	}
	it := &item[V]{id: id, owner: owner, value: v, size: size, put: s.now()}
	if lv, ok := any(v).(interface{ EventLog() *Log }); ok && lv.EventLog() != nil {
		l := lv.EventLog()
		it.log = l
		l.mu.Lock()
		l.id = id
		l.clock = s.now
		it.size += l.size
		l.grown = 0
		l.onGrow = func(delta int64) { s.grew(it, delta) }
		l.mu.Unlock()
	} else {
		it.expires = s.now().Add(s.limits.TTL)
	}
	s.mu.Lock()
	if el, ok := s.items[id]; ok {
		s.removeLocked(el)
	}
	s.items[id] = s.order.PushFront(it)
	s.bytes += it.size
	evicted := s.trimLocked()
	s.mu.Unlock()
	s.evicted(evicted)
	return true
}

// grew counts a log's growth.
func (s *Store[V]) grew(it *item[V], delta int64) {
	s.mu.Lock()
	if el, ok := s.items[it.id]; !ok || el.Value != it {
		s.mu.Unlock()
		return
	}
	it.size += delta
	s.bytes += delta
	var evicted []*item[V]
	if s.bytes > s.limits.Bytes {
		evicted = s.trimLocked()
	}
	s.mu.Unlock()
	s.evicted(evicted)
}

// Get returns the value under id, unless it is gone, expired, or
// owner's is not the owner that put it.
func (s *Store[V]) Get(id, owner string) (V, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var zero V
	el, ok := s.items[id]
	if !ok {
		return zero, false
	}
	it := el.Value.(*item[V])
	if it.owner != owner {
		return zero, false
	}
	if s.expired(it, s.now()) {
		s.removeLocked(el)
		return zero, false
	}
	return it.value, true
}

// Delete forgets id, if owner put it, and reports whether it was there.
func (s *Store[V]) Delete(id, owner string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	el, ok := s.items[id]
	if !ok || el.Value.(*item[V]).owner != owner {
		return false
	}
	s.removeLocked(el)
	return true
}

// List returns the entries of every owner, the most recently put first,
// at most limit of them (1 to MaxList), with summarize's summary of each
// (nil: none). Expired entries are left out.
func (s *Store[V]) List(limit int, summarize func(V) Summary) []Entry {
	limit = listLimit(limit)
	now := s.now()
	s.mu.Lock()
	type found struct {
		e Entry
		v V
	}
	var out []found
	for el := s.order.Front(); el != nil && len(out) < limit; el = el.Next() {
		it := el.Value.(*item[V])
		if s.expired(it, now) {
			continue
		}
		out = append(out, found{Entry{ID: it.id, Owner: it.owner, Put: it.put, Size: it.size}, it.value})
	}
	s.mu.Unlock()
	entries := make([]Entry, len(out))
	for i, f := range out {
		entries[i] = f.e
		if summarize != nil {
			entries[i].Summary = summarize(f.v)
		}
	}
	return entries
}

// Stats returns the number of entries and their bytes.
func (s *Store[V]) Stats() (int, int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.order.Len(), s.bytes
}

// Sweep forgets the expired entries and returns the open logs nobody
// read or watched for idle (none when idle <= 0): the caller decides
// whether to stop their exchanges.
func (s *Store[V]) Sweep(idle time.Duration) (abandoned []V) {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for el := s.order.Back(); el != nil; {
		prev := el.Prev()
		it := el.Value.(*item[V])
		switch {
		case s.expired(it, now):
			s.removeLocked(el)
		case it.log != nil && idle > 0 && it.log.idle(now) > idle:
			abandoned = append(abandoned, it.value)
		}
		el = prev
	}
	return abandoned
}

// expired tells whether it is past its time: a log TTL after it ended.
func (s *Store[V]) expired(it *item[V], now time.Time) bool {
	if it.log == nil {
		return !now.Before(it.expires)
	}
	st := it.log.State()
	return st.Status != Open && now.Sub(st.Finished) >= s.limits.TTL
}

// trimLocked forgets the expired values, then entries until the store
// is within its limits: the oldest ended ones, then the oldest open
// logs, which it returns.
func (s *Store[V]) trimLocked() (evicted []*item[V]) {
	// Values other than logs expire in the order they were put.
	now := s.now()
	for el := s.order.Back(); el != nil; el = s.order.Back() {
		if it := el.Value.(*item[V]); it.log != nil || now.Before(it.expires) {
			break
		}
		s.removeLocked(el)
	}
	over := func() bool { return s.order.Len() > s.limits.Count || s.bytes > s.limits.Bytes }
	if !over() {
		return nil
	}
	for pass := 0; pass < 2 && over(); pass++ {
		for el := s.order.Back(); el != nil && over(); {
			prev := el.Prev()
			it := el.Value.(*item[V])
			open := it.log != nil && it.log.State().Status == Open
			switch {
			case pass == 0 && !open:
				s.removeLocked(el)
			case pass == 1:
				s.removeLocked(el)
				if open {
					evicted = append(evicted, it)
				}
			}
			el = prev
		}
	}
	return evicted
}

// evicted fails the open logs forgotten and tells onEvict.
func (s *Store[V]) evicted(items []*item[V]) {
	for _, it := range items {
		it.log.Finish(ErrEvicted, "")
		if s.onEvict != nil {
			s.onEvict(it.id, it.value)
		}
	}
}

func (s *Store[V]) removeLocked(el *list.Element) {
	it := s.order.Remove(el).(*item[V])
	delete(s.items, it.id)
	s.bytes -= it.size
	if it.log != nil {
		it.log.mu.Lock()
		it.log.onGrow = nil
		it.log.mu.Unlock()
	}
}
