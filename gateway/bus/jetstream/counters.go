package jetstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nbots/nb/gateway/replica"
)

// countersTTL is how long a key of the counters lives after its last
// change: longer than a month of days (the budgets keep 31 past days).
const countersTTL = 35 * 24 * time.Hour

// Counters is replica.Counters on the bucket <namespace>_<name>: a key's
// counts are a JSON object; Add reads it and writes it back at the
// revision it read (Create for a new key), again on a conflict, so that
// replicas adding at once lose nothing.
type Counters struct {
	kv   jetstream.KeyValue
	name string
}

// Counters returns the bus's counters called name ("budget").
func (b *Bus) Counters(ctx context.Context, name string) (*Counters, error) {
	kv, err := b.bucket(ctx, name, countersTTL)
	if err != nil {
		return nil, err
	}
	return &Counters{kv: kv, name: name}, nil
}

// Add implements replica.Counters.
func (c *Counters) Add(ctx context.Context, key string, delta map[string]int64) (replica.Count, error) {
	k := kvKey(key)
	for attempt := 0; ; attempt++ {
		counts := map[string]int64{}
		var rev uint64
		e, err := c.kv.Get(ctx, k)
		switch {
		case err == nil:
			rev = e.Revision()
			if len(e.Value()) > 0 {
				if err := json.Unmarshal(e.Value(), &counts); err != nil {
					return replica.Count{}, fmt.Errorf("%s %s: %w", c.name, key, err)
				}
			}
		case errors.Is(err, jetstream.ErrKeyNotFound):
		default:
			return replica.Count{}, fmt.Errorf("%s %s: %w", c.name, key, cleanErr(err))
		}
		for n, d := range delta {
			counts[n] += d
		}
		v, _ := json.Marshal(counts)
		var next uint64
		if rev == 0 {
			next, err = c.kv.Create(ctx, k, v)
		} else {
			next, err = c.kv.Update(ctx, k, v, rev)
		}
		if err == nil {
			return replica.Count{Values: counts, Revision: next}, nil
		}
		if !isConflict(err) || attempt >= 100 {
			return replica.Count{}, fmt.Errorf("%s %s: %w", c.name, key, cleanErr(err))
		}
		// Another replica wrote in between: read it again.
	}
}

// isConflict tells a write that lost a race (Create of a key that
// exists, Update at a revision that moved: code 10071, or 10164 on a
// replicated bucket) from a failure.
func isConflict(err error) bool {
	return errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch)
}

// Delete implements replica.Counters.
func (c *Counters) Delete(ctx context.Context, key string) error {
	if err := c.kv.Delete(ctx, kvKey(key)); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("%s %s: %w", c.name, key, cleanErr(err))
	}
	return nil
}

// Watch implements replica.Counters. Keys that are not valid bucket keys
// are reported by their hash (as Add stores them): callers use keys
// made of letters, digits, '-', '_', '=' and '.'.
func (c *Counters) Watch(ctx context.Context, fn func(key string, c replica.Count), ready func()) error {
	w, err := c.kv.WatchAll(ctx)
	if err != nil {
		return fmt.Errorf("%s: watch: %w", c.name, cleanErr(err))
	}
	defer w.Stop() //nolint:errcheck // ends with ctx
	for {
		select {
		case <-ctx.Done():
			return nil
		case e, ok := <-w.Updates():
			if !ok {
				return nil
			}
			if e == nil { // the values as they were are all reported
				if ready != nil {
					ready()
					ready = nil
				}
				continue
			}
			if e.Operation() != jetstream.KeyValuePut {
				fn(e.Key(), replica.Count{Revision: e.Revision(), Deleted: true})
				continue
			}
			counts := map[string]int64{}
			if json.Unmarshal(e.Value(), &counts) == nil {
				fn(e.Key(), replica.Count{Values: counts, Revision: e.Revision()})
			}
		}
	}
}

var _ replica.Counters = (*Counters)(nil)
