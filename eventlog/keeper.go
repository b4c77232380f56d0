package eventlog

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Keeper keeps the values of one kind for their owners, as a Store does:
// in this process's memory, or, given a Shared store, there (encoded),
// so that every replica of a server finds them.
type Keeper[V any] struct {
	kind   string
	lim    Limits
	mem    *Store[V]
	shared Shared
	encode func(V) ([]byte, error)
	decode func([]byte) (V, error)
	// summarize, when set, is what List shows of a value.
	summarize func(V) Summary
}

// NewKeeper returns a keeper of values of kind within lim: in shared
// when it is not nil, with encode and decode turning a value into bytes
// and back, else in memory with now as the clock (nil: time.Now).
func NewKeeper[V any](kind string, lim Limits, now func() time.Time, shared Shared, encode func(V) ([]byte, error), decode func([]byte) (V, error)) *Keeper[V] {
	k := &Keeper[V]{kind: kind, lim: lim, shared: shared, encode: encode, decode: decode}
	if shared == nil {
		k.mem = NewStore[V](lim, now, nil)
	}
	return k
}

// Summarized makes f what List shows of each value (f must not read
// more than the value: it runs at each Put with a shared store, at each
// List in memory), and returns k. Call it before the keeper is used.
func (k *Keeper[V]) Summarized(f func(V) Summary) *Keeper[V] {
	k.summarize = f
	return k
}

func (k *Keeper[V]) summary(v V) Summary {
	if k.summarize == nil {
		return Summary{}
	}
	return k.summarize(v)
}

// List returns the values of every owner, the most recently put first,
// at most limit of them (1 to MaxList), without their contents (see
// Summarized). Its errors are the shared store's.
func (k *Keeper[V]) List(ctx context.Context, limit int) ([]Entry, error) {
	if k.mem != nil {
		return k.mem.List(limit, k.summarize), nil
	}
	return k.shared.List(ctx, k.kind, listLimit(limit))
}

// Memory is the store in memory (nil with a shared store).
func (k *Keeper[V]) Memory() *Store[V] { return k.mem }

// Put keeps v under id for owner, size bytes large, and reports whether
// it was kept: not when it is larger than the whole store. Its errors
// are the shared store's.
func (k *Keeper[V]) Put(ctx context.Context, id, owner string, v V, size int64) (bool, error) {
	if k.mem != nil {
		return k.mem.Put(id, owner, v, size), nil
	}
	if size > k.lim.Bytes {
		return false, nil
	}
	b, err := k.encode(v)
	if err != nil {
		return false, fmt.Errorf("encode a %s: %w", k.kind, err)
	}
	if err := k.shared.Put(ctx, k.kind, id, owner, b, k.summary(v), k.lim); err != nil {
		return false, err
	}
	return true, nil
}

// Get returns the value under id for owner, false when there is none
// (gone, expired, another owner's).
func (k *Keeper[V]) Get(ctx context.Context, id, owner string) (V, bool, error) {
	if k.mem != nil {
		v, ok := k.mem.Get(id, owner)
		return v, ok, nil
	}
	var zero V
	b, err := k.shared.Get(ctx, k.kind, id, owner)
	if errors.Is(err, ErrUnknown) {
		return zero, false, nil
	}
	if err != nil {
		return zero, false, err
	}
	v, err := k.decode(b)
	if err != nil {
		return zero, false, fmt.Errorf("a %s kept in the shared store cannot be read: %w", k.kind, err)
	}
	return v, true, nil
}

// Delete forgets id, if owner put it, and reports whether it was there.
func (k *Keeper[V]) Delete(ctx context.Context, id, owner string) (bool, error) {
	if k.mem != nil {
		return k.mem.Delete(id, owner), nil
	}
	return k.shared.Delete(ctx, k.kind, id, owner)
}
