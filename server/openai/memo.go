package openai

import (
	"container/list"
	"sync"
	"time"
)

// memo is a store kept in memory, bounded in count and bytes, whose
// entries expire: the oldest go first. It is safe for concurrent use.
type memo[V any] struct {
	limits StoreLimits
	now    func() time.Time

	mu    sync.Mutex
	items map[string]*list.Element
	order list.List // oldest at the back
	bytes int64
}

type memoEntry[V any] struct {
	key     string
	value   V
	size    int64
	expires time.Time
}

func newMemo[V any](limits StoreLimits, now func() time.Time) *memo[V] {
	return &memo[V]{limits: limits, now: now, items: map[string]*list.Element{}}
}

// put keeps value under key, size bytes large, and reports whether it
// was kept: a value larger than the whole store is not.
func (m *memo[V]) put(key string, value V, size int64) bool {
	if size > m.limits.Bytes {
		return false
	}
	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	if el, ok := m.items[key]; ok {
		m.remove(el)
	}
	m.items[key] = m.order.PushFront(&memoEntry[V]{key: key, value: value, size: size, expires: now.Add(m.limits.TTL)})
	m.bytes += size
	for m.order.Len() > 0 {
		back := m.order.Back()
		e := back.Value.(*memoEntry[V])
		if m.order.Len() <= m.limits.Count && m.bytes <= m.limits.Bytes && now.Before(e.expires) {
			break
		}
		m.remove(back)
	}
	return true
}

// get returns the value under key, unless it is gone or expired.
func (m *memo[V]) get(key string) (V, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var zero V
	el, ok := m.items[key]
	if !ok {
		return zero, false
	}
	e := el.Value.(*memoEntry[V])
	if !m.now().Before(e.expires) {
		m.remove(el)
		return zero, false
	}
	return e.value, true
}

// delete removes key and reports whether it was there.
func (m *memo[V]) delete(key string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	el, ok := m.items[key]
	if ok {
		m.remove(el)
	}
	return ok
}

// stats returns the number of entries and their bytes.
func (m *memo[V]) stats() (int, int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.order.Len(), m.bytes
}

func (m *memo[V]) remove(el *list.Element) {
	e := m.order.Remove(el).(*memoEntry[V])
	delete(m.items, e.key)
	m.bytes -= e.size
}
