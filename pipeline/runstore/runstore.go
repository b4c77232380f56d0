// Package runstore is where a pipeline run lives beyond the process that
// runs it: its checkpoint (the engine's checkpoint.json, kept as the
// engine wrote it), its event log, and a lease that says which process
// runs it. A process that holds a run's lease renews it as it goes (its
// heartbeat); when the process dies, the lease expires and another
// process (another replica of nb serve) takes the run over and resumes it
// from its last checkpoint. Every write is checked against the lease, so
// a process that lost its lease (paused, cut off) can never overwrite
// what the one that took over wrote: no finished node runs twice and no
// context update is lost.
//
// Package fileruns keeps runs in folders on one machine, package pgruns
// in PostgreSQL for replicas on many; package runstoretest is the
// conformance suite both pass.
package runstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Errors of a Store and a Run.
var (
	// ErrUnknown: no run has this id.
	ErrUnknown = errors.New("no such pipeline run")
	// ErrExists: Create was given the id of a run that exists.
	ErrExists = errors.New("a pipeline run with this id exists")
	// ErrBusy: another process holds the run's lease, and it has not
	// expired.
	ErrBusy = errors.New("the pipeline run is held by another process")
	// ErrDone: the run has ended; there is nothing to take over.
	ErrDone = errors.New("the pipeline run has ended")
	// ErrLost: this process no longer holds the run's lease (it expired,
	// or another process took the run over): it must stop the run
	// without writing anything more.
	ErrLost = errors.New("the pipeline run's lease was lost: another process may have taken the run over; this one stops it")
)

// Info describes a run: what Create was given, and where it is.
type Info struct {
	ID string `json:"id"`
	// Name is the graph's name.
	Name string `json:"name"`
	// File is where the graph was read from (for messages); Source is
	// its text, so that a process on another machine can resume the run.
	File   string `json:"file"`
	Source []byte `json:"source"`
	// Vars and Cartridge are the run's --set variables and cartridge.
	Vars      map[string]string `json:"vars,omitempty"`
	Cartridge string            `json:"cartridge,omitempty"`
	// Extra is what the program that created the run keeps with it, as
	// JSON (nb serve: the run's owner and parameters); stores keep it as
	// it is.
	Extra json.RawMessage `json:"extra,omitempty"`
	// Created is when Create stored it.
	Created time.Time `json:"created"`

	// The rest is the store's view, filled by Get and by Take.

	// Node is the current node of the last checkpoint ("" before the
	// first), Done whether the run has ended, Status how (the engine's
	// status: success, fail).
	Node   string `json:"-"`
	Done   bool   `json:"-"`
	Status string `json:"-"`
	// Holder is the process holding the lease ("" when none does);
	// Expires is when its lease ends unless renewed.
	Holder  string    `json:"-"`
	Expires time.Time `json:"-"`
	// Events is the number of events in the log.
	Events int64 `json:"-"`
}

// Checkpoint is one save of a run's checkpoint.
type Checkpoint struct {
	// Data is the checkpoint as the engine encodes it (JSON).
	Data []byte
	// Node is its current node; Done says the run ended, Status how.
	Node   string
	Done   bool
	Status string
}

// Record is one event of a run's log: its JSON and its place in the log
// (1 for the first).
type Record struct {
	Seq  int64
	Data []byte
}

// Store keeps pipeline runs. Implementations are safe for concurrent use.
type Store interface {
	// Create stores a new run (info.ID must be valid: ValidID) and holds
	// its lease.
	Create(ctx context.Context, info Info) (Run, error)
	// Take takes over the run id when nobody holds it or its holder's
	// lease expired: ErrBusy when another holds it, ErrDone when it
	// ended, ErrUnknown when there is none.
	Take(ctx context.Context, id string) (Run, error)
	// Get describes the run id (ErrUnknown when there is none).
	Get(ctx context.Context, id string) (Info, error)
	// Checkpoint is the run's last checkpoint (nil before the first).
	Checkpoint(ctx context.Context, id string) ([]byte, error)
	// Events returns the run's events after the first after, at most
	// limit of them (limit ≤ 0: all).
	Events(ctx context.Context, id string, after int64, limit int) ([]Record, error)
	// Wait returns when the run id may have more than after events, or
	// after a while (a second or so): callers read Events again. It
	// returns ctx's error when ctx ends.
	Wait(ctx context.Context, id string, after int64) error
	// Orphans lists the runs that have not ended and that nobody holds
	// (their holder died): the runs another process should take over.
	Orphans(ctx context.Context) ([]string, error)
	// Questions is what the process holding run id published of its
	// waiting questions (Run.SetQuestions; nil when none was).
	Questions(ctx context.Context, id string) ([]byte, error)
	// Answer leaves data for the process holding run id (Run.Answers):
	// nb serve's answer to a question of a run another replica runs. Any
	// process may, without the lease: ErrUnknown when there is no such
	// run, ErrDone when it ended.
	Answer(ctx context.Context, id string, data []byte) error
}

// Run is a run whose lease this process holds, renewed in the background
// until Release.
type Run interface {
	// Info describes the run as it was when the lease was taken.
	Info() Info
	// Checkpoint is the last checkpoint when the lease was taken (nil for
	// a new run).
	Checkpoint() []byte
	// Save replaces the checkpoint, after writing the events appended
	// before it, in one atomic step checked against the lease: ErrLost
	// when the lease is gone (nothing is written).
	Save(cp Checkpoint) error
	// Append adds events to the log, in order, checked against the lease.
	// It may write them later (before the next Save or Release at the
	// latest): a write that fails loses the lease.
	Append(events ...[]byte) error
	// SetQuestions publishes the run's waiting questions (JSON, as the
	// program chooses) for the other processes (Store.Questions).
	SetQuestions(data []byte) error
	// Answers returns the answers left for the run (Store.Answer) since
	// the last call, oldest first, and forgets them.
	Answers(ctx context.Context) ([][]byte, error)
	// Answered receives when answers may have been left for the run
	// since it last received (Store.Answer, through any handle of the
	// store, in this process or another): the holder then calls Answers,
	// rather than calling it on a timer. A store tells it at once where
	// it can be told (a PostgreSQL notification, an answer given in this
	// process) and looks now and then for answers it cannot be told of;
	// so it may also receive when there is nothing to take. It never
	// blocks the one who answers: wakes while one is pending are merged.
	// It is meant for one receiver at a time.
	Answered() <-chan struct{}
	// Lost is closed when the lease is lost; Err then says why.
	Lost() <-chan struct{}
	Err() error
	// Release writes the events not yet written, stops the renewals and
	// frees the lease, so that another process may take the run over at
	// once (when it has not ended).
	Release() error
}

// ValidID checks a run id: 1 to 128 letters, digits, '.', '_' or '-',
// not starting with '.' (it names a folder in package fileruns).
func ValidID(id string) error {
	if id == "" || len(id) > 128 || id[0] == '.' {
		return fmt.Errorf("pipeline run id %q: want 1 to 128 letters, digits, '.', '_' or '-', not starting with '.'", id)
	}
	for _, c := range id {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("pipeline run id %q: %q is not allowed: want letters, digits, '.', '_' or '-'", id, c)
		}
	}
	return nil
}

// Follow calls fn with each event of run id after the first after, in
// order, as they come, until fn returns false, the run has ended and
// every event was given (nil), ctx ends (its error is returned) or
// reading fails. It may run in any process that reaches the store,
// whichever holds the run; a run that stopped in one process and is
// taken over by another goes on.
func Follow(ctx context.Context, s Store, id string, after int64, fn func(Record) bool) error {
	for {
		recs, err := s.Events(ctx, id, after, 1000)
		if err != nil {
			return err
		}
		for _, r := range recs {
			if !fn(r) {
				return nil
			}
			after = r.Seq
		}
		if len(recs) > 0 {
			continue
		}
		info, err := s.Get(ctx, id)
		if err != nil {
			return err
		}
		// The last events of a run that ended are written when its
		// process releases it (or its lease expires).
		if info.Done && info.Holder == "" && info.Events <= after {
			return nil
		}
		if err := s.Wait(ctx, id, after); err != nil {
			return err
		}
	}
}

// Adopt takes over, every interval until ctx ends, the runs whose holder
// died (Store.Orphans), and calls resume with each one it took (in a
// goroutine of its own; resume must Release the run when it is done with
// it). Two processes adopting at once take each run once: the lease
// decides. A run resume cannot go on with (its flow no longer loads)
// should be ended (Save with Done) rather than released, or it is
// adopted again on the next round. Errors of the store are passed to logErr (nil: ignored) and
// the next round tries again.
func Adopt(ctx context.Context, s Store, interval time.Duration, resume func(Run), logErr func(error)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		ids, err := s.Orphans(ctx)
		if err != nil && logErr != nil && ctx.Err() == nil {
			logErr(err)
		}
		for _, id := range ids {
			run, err := s.Take(ctx, id)
			switch {
			case err == nil:
				go resume(run)
			case errors.Is(err, ErrBusy), errors.Is(err, ErrDone), errors.Is(err, ErrUnknown):
				// another process was quicker, or it ended meanwhile
			case logErr != nil && ctx.Err() == nil:
				logErr(err)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
