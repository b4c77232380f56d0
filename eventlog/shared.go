package eventlog

import (
	"context"
	"errors"
	"time"
)

// Shared keeps what a server's stores keep where every replica of the
// server reaches it (package eventlog/pglog keeps it in PostgreSQL), so
// that a poll, a continuation or a reconnection may come to any replica:
// the logs of exchanges, which the replica running an exchange publishes
// as they grow and any other follows, and values by kind and id. Like a
// Store, it gives an entry back only to the owner that put it. A server
// without one keeps everything in its own memory (Store).
type Shared interface {
	// Replica names this process among the replicas that share the store.
	Replica() string
	// Err says why the store cannot be used now (nil when it can): a
	// replica that cannot reach it takes no work, rather than answer from
	// what only its memory holds.
	Err() error
	// Publish copies the output and the state of l, the log of an
	// exchange that runs here, kept under id for owner, to the store as
	// it grows, until it ends; the store forgets it lim.TTL after it
	// ended, and keeps at most lim of the ended logs. lost, when not nil,
	// is called when the log can no longer be published because the
	// other replicas took this one for gone and failed it: the exchange
	// should stop. An error means nothing was published.
	Publish(ctx context.Context, id, owner string, l *Log, lim Limits, lost func(error)) error
	// Follow returns a copy of the log published under id for owner,
	// which follows the original until it ends, or until stop is called;
	// a nil log when there is none (or it is owner's but another's). A
	// copy whose original's replica is gone before it ended is failed
	// with a message that says so.
	Follow(ctx context.Context, id, owner string, maxBytes int64) (l *Log, stop func(), err error)
	// LastRead is when a replica last read the log id through a copy
	// (zero when none did): a log read elsewhere is not abandoned.
	LastRead(ctx context.Context, id string) (time.Time, error)
	// Put keeps value under kind and id for owner, within lim (TTL after
	// it was put; the oldest of the kind go first beyond Count or Bytes),
	// with sum, what List shows of it.
	Put(ctx context.Context, kind, id, owner string, value []byte, sum Summary, lim Limits) error
	// Get returns the value under kind and id for owner; ErrUnknown when
	// there is none, it expired, or it is another owner's.
	Get(ctx context.Context, kind, id, owner string) ([]byte, error)
	// List returns the values of kind of every owner, the most recently
	// put first, at most limit of them (1 to MaxList), without their
	// contents: their ids, owners, sizes and summaries. Expired values are
	// left out.
	List(ctx context.Context, kind string, limit int) ([]Entry, error)
	// Delete forgets the value under kind and id, if owner put it, and
	// reports whether it was there.
	Delete(ctx context.Context, kind, id, owner string) (bool, error)
	// Alive reports whether the replica named so still reaches the
	// store (it did lately).
	Alive(ctx context.Context, replica string) (bool, error)
}

// ErrUnknown is what Shared.Get says of an id it does not have.
var ErrUnknown = errors.New("unknown id")

// NewCopy returns an open log that repeats another (one another replica
// runs): it is written with WriteString and ended with End. started is
// when the original began.
func NewCopy(maxBytes int64, started time.Time) *Log {
	l := New(maxBytes)
	l.started = started
	return l
}

// End ends a copy as its original ended: with status (Finished or
// Failed, with msg), at finished, cut when the original's output was.
func (l *Log) End(status Status, msg string, finished time.Time, cut bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.status != Open || status == Open {
		return
	}
	l.status, l.finished, l.cut = status, finished, l.cut || cut
	if status == Failed {
		l.err = msg
	}
	for id, p := range l.asked {
		delete(l.asked, id)
		p.settle(Reply{}, ErrClosed)
	}
	l.notify()
}

// Peek returns the output from byte offset from and the state after it,
// as Output does, without counting as a read: for a program that copies
// the log elsewhere, not a reader.
func (l *Log) Peek(from int) (string, State) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.textLocked(min(max(from, 0), l.textLen), l.textLen), l.stateLocked()
}

// Idle is how long the log has gone unread and unwatched: 0 while a
// reader watches it.
func (l *Log) Idle() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.watchers > 0 {
		return 0
	}
	return time.Since(l.lastSeen)
}
