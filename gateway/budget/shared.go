package budget

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"time"

	"github.com/nbots/nb/gateway/replica"
)

// Replicas that share the gateway's work share its budgets: with
// Ledger.Shared set, each replica adds its counts to the shared sums (at
// most PushEvery late) and checks the budgets against the sums of all,
// which every replica watches. A budget may be overrun by what the
// replicas spent within PushEvery of each other, as one gateway may
// overrun it by the call that crosses it.

// PushEvery is how often a replica adds its counts to the shared sums.
const PushEvery = 500 * time.Millisecond

// dayKey is the shared key of a day's counts of one source.
func dayKey(day string, src Source) string { return "day." + day + "." + string(src) }

// sessionKey is the shared key of a session's counts: a hash, as the
// session's name (a chat id) need not be a valid key nor leave the
// process.
func sessionKey(session string) string {
	sum := sha256.Sum256([]byte(session))
	return "session." + hex.EncodeToString(sum[:16])
}

func toUsage(c replica.Count) Usage {
	return Usage{Input: int(c.Values["input"]), Output: int(c.Values["output"])}
}

func plus(a, b Usage) Usage { return Usage{a.Input + b.Input, a.Output + b.Output} }

// sharedState is the ledger's view of the shared sums.
type sharedState struct {
	sums     map[string]replica.Count // as last seen (Add or Watch), newest revision
	pending  map[string]Usage         // counted here, not yet added
	inflight map[string]Usage         // being added
	deletes  map[string]bool          // sessions started anew, to delete
}

func (s *sharedState) init() {
	if s.sums == nil {
		s.sums, s.pending, s.inflight, s.deletes = map[string]replica.Count{}, map[string]Usage{}, map[string]Usage{}, map[string]bool{}
	}
}

// used is key's count: the shared sum and what this replica has not
// added yet.
func (s *sharedState) used(key string) Usage {
	return plus(toUsage(s.sums[key]), plus(s.pending[key], s.inflight[key]))
}

// seen keeps c when it is newer than what is known of key.
func (s *sharedState) seen(key string, c replica.Count) {
	if old, ok := s.sums[key]; ok && old.Revision >= c.Revision {
		return
	}
	s.sums[key] = c
}

// Run watches the shared sums and adds this replica's counts to them
// every PushEvery, until ctx ends (then once more); it writes the sums
// to Path at most once a second, so that `nb gateway status` on any
// replica's machine shows every replica's counts. Without Shared it
// returns at once.
func (l *Ledger) Run(ctx context.Context) error { return l.counts().run(ctx) }

// runShared is Run with Shared.
func (l *Ledger) runShared(ctx context.Context) error {
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		l.watch(ctx)
	}()
	tick := time.NewTicker(PushEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			pctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			l.push(pctx) //nolint:errcheck // reported by push
			<-watched
			return nil
		case <-tick.C:
			l.push(ctx) //nolint:errcheck // reported by push, tried again on the next tick
			l.mu.Lock()
			if now := l.now(); now.Sub(l.flushed) >= time.Second {
				l.roll(now)
				l.flushLocked(now) //nolint:errcheck // the next tick tries again
			}
			l.mu.Unlock()
		}
	}
}

// watch keeps the view of the shared sums current until ctx ends,
// watching again (after a second) when a watch ends before: the bus's
// connection was closed or lost.
func (l *Ledger) watch(ctx context.Context) {
	for ctx.Err() == nil {
		err := l.Shared.Watch(ctx, func(key string, c replica.Count) {
			l.mu.Lock()
			l.sh.init()
			l.sh.seen(key, c)
			l.dirty = true // the file shows the sums too
			if strings.HasPrefix(key, "gate.") {
				l.wakeLocked() // another replica's call settled, perhaps
			}
			l.mu.Unlock()
		}, nil)
		if ctx.Err() != nil {
			return
		}
		if err != nil && l.Warn != nil {
			l.Warn("budget: the shared counts cannot be watched (watching again): " + err.Error())
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// push adds the counts this replica made since the last push to the
// shared sums; what fails is added on the next one.
func (l *Ledger) push(ctx context.Context) error {
	l.mu.Lock()
	l.sh.init()
	deletes := l.sh.deletes
	l.sh.deletes = map[string]bool{}
	batch := l.sh.pending
	l.sh.pending = map[string]Usage{}
	for k, u := range batch {
		l.sh.inflight[k] = u
	}
	l.mu.Unlock()
	var firstErr error
	for k := range deletes {
		if err := l.Shared.Delete(ctx, k); err != nil && firstErr == nil {
			firstErr = err
		}
	}
	for k, u := range batch {
		c, err := l.Shared.Add(ctx, k, map[string]int64{"input": int64(u.Input), "output": int64(u.Output)})
		l.mu.Lock()
		delete(l.sh.inflight, k)
		if err != nil {
			l.sh.pending[k] = plus(l.sh.pending[k], u)
			if firstErr == nil {
				firstErr = err
			}
		} else {
			l.sh.seen(k, c)
		}
		l.mu.Unlock()
	}
	if firstErr != nil && l.Warn != nil {
		l.Warn("budget: adding to the shared counts: " + firstErr.Error() + " (tried again)")
	}
	return firstErr
}
