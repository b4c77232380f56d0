// Package replica is what the replicas of one gateway agree on besides
// their messages: which replica runs a piece of work that must run once
// (a channel account's receive loop: an election) and which one takes a
// one-time event (a cron slot, a heartbeat: a claim). Local is the
// single-process case; package gateway/bus/jetstream implements both on
// a JetStream key-value bucket. Counters are sums the replicas add to
// together (the token budgets).
package replica

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"sync"
	"time"
)

// Elector runs work that must run on one replica at a time.
type Elector interface {
	// Lead runs fn while this replica leads key, and only then: fn's
	// context ends when leadership is lost (or ctx ends), and fn runs
	// again when it is won back. Lead returns when ctx ends. standby, if
	// not nil, is called each time another replica is found leading.
	Lead(ctx context.Context, key string, fn func(context.Context) error, standby func()) error
}

// Claims hands out one-time events.
type Claims interface {
	// Claim reports whether this replica is the first to claim key
	// (within the claims' memory, a day at least).
	Claim(ctx context.Context, key string) (bool, error)
}

// Stopper reaches the other replicas' turns of a session (/stop).
type Stopper interface {
	// Stop cancels the session's turns on the other replicas and says
	// how many there were.
	Stop(ctx context.Context, key string) (int, error)
}

// Counters are named sums shared by replicas: each key holds counts by
// name (a budget's "input" and "output" tokens) that any replica adds to.
type Counters interface {
	// Add adds delta to key's counts atomically (replicas adding at once
	// lose nothing) and returns the counts it made.
	Add(ctx context.Context, key string, delta map[string]int64) (Count, error)
	// Delete forgets key's counts.
	Delete(ctx context.Context, key string) error
	// Watch calls fn with every key's counts, first as they are, then
	// each time a replica changes them, until ctx ends. ready, if not
	// nil, is called once the counts as they were are reported.
	Watch(ctx context.Context, fn func(key string, c Count), ready func()) error
}

// Count is a key's counts as of a revision: a later change has a higher
// revision, so a reader keeps the newest of what Add and Watch report.
type Count struct {
	Values   map[string]int64
	Revision uint64
	// Deleted is true when the key was deleted.
	Deleted bool
}

// Local is one process alone: it always leads, and remembers the claims
// of the last 4,096 keys.
type Local struct {
	mu    sync.Mutex
	seen  map[string]bool
	order []string
}

// Lead implements Elector: fn runs at once; when it returns before ctx
// ends (a channel's final error), it is not run again.
func (l *Local) Lead(ctx context.Context, key string, fn func(context.Context) error, standby func()) error {
	return fn(ctx)
}

// Claim implements Claims.
func (l *Local) Claim(ctx context.Context, key string) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.seen == nil {
		l.seen = map[string]bool{}
	}
	if l.seen[key] {
		return false, nil
	}
	l.seen[key] = true
	l.order = append(l.order, key)
	if len(l.order) > 4096 {
		delete(l.seen, l.order[0])
		l.order = l.order[1:]
	}
	return true, nil
}

// Slot is the key of the interval slot holding t (the heartbeat's): the
// same on every replica for the same interval.
func Slot(prefix string, t time.Time, interval time.Duration) string {
	if interval <= 0 {
		interval = time.Second
	}
	return prefix + "." + t.Truncate(interval).UTC().Format("20060102T150405")
}

// AccountHash names a channel account among replicas (its receive loop's
// election, its receive position): a hash of the channel's name and of
// account, which may hold a bot token that must not leave the process.
func AccountHash(channel, account string) string {
	sum := sha256.Sum256([]byte(channel + "\x00" + account))
	return hex.EncodeToString(sum[:12])
}

// Stop implements Stopper: alone, no other replica runs a turn.
func (l *Local) Stop(context.Context, string) (int, error) { return 0, nil }

// Seen implements dispatch's record of delivered replies: alone, a reply
// is delivered by this process, whose dispatcher remembers its own.
func (l *Local) Seen(context.Context, string) (bool, error) { return false, nil }

// Record implements dispatch's record of delivered replies (see Seen).
func (l *Local) Record(context.Context, string) error { return nil }
