package runsurl

import (
	"context"
	"errors"
	"time"

	"github.com/nbots/nb/internal/metric"
	"github.com/nbots/nb/pipeline/runstore"
)

// metered counts the operations of a run store set by URL
// (nb_store_op_duration_seconds and nb_store_op_errors_total, store
// "runs"): the one seam both backends go through.
type metered struct {
	s       runstore.Store
	backend string
}

// failed is err unless it is an answer rather than a failure: a run
// another process holds, one that ended or never was, a caller that gave
// up.
func failed(err error) error {
	for _, answer := range []error{runstore.ErrBusy, runstore.ErrDone, runstore.ErrUnknown, runstore.ErrExists, context.Canceled} {
		if errors.Is(err, answer) {
			return nil
		}
	}
	return err
}

func (m metered) op(op string, start time.Time, err error) {
	metric.StoreOp("runs", m.backend, op, start, failed(err))
}

func (m metered) run(r runstore.Run, err error) (runstore.Run, error) {
	if err != nil {
		return nil, err
	}
	return &meteredRun{r: r, m: m}, nil
}

func (m metered) Create(ctx context.Context, info runstore.Info) (runstore.Run, error) {
	start := time.Now()
	r, err := m.s.Create(ctx, info)
	m.op("create", start, err)
	return m.run(r, err)
}

func (m metered) Take(ctx context.Context, id string) (runstore.Run, error) {
	start := time.Now()
	r, err := m.s.Take(ctx, id)
	m.op("take", start, err)
	return m.run(r, err)
}

func (m metered) Get(ctx context.Context, id string) (runstore.Info, error) {
	start := time.Now()
	info, err := m.s.Get(ctx, id)
	m.op("get", start, err)
	return info, err
}

func (m metered) Checkpoint(ctx context.Context, id string) ([]byte, error) {
	start := time.Now()
	cp, err := m.s.Checkpoint(ctx, id)
	m.op("checkpoint", start, err)
	return cp, err
}

func (m metered) Events(ctx context.Context, id string, after int64, limit int) ([]runstore.Record, error) {
	start := time.Now()
	recs, err := m.s.Events(ctx, id, after, limit)
	m.op("events", start, err)
	return recs, err
}

// Wait waits for news, which takes as long as the run is quiet: it is
// not timed.
func (m metered) Wait(ctx context.Context, id string, after int64) error {
	return m.s.Wait(ctx, id, after)
}

func (m metered) Orphans(ctx context.Context) ([]string, error) {
	start := time.Now()
	ids, err := m.s.Orphans(ctx)
	m.op("orphans", start, err)
	return ids, err
}

func (m metered) Questions(ctx context.Context, id string) ([]byte, error) {
	start := time.Now()
	q, err := m.s.Questions(ctx, id)
	m.op("questions", start, err)
	return q, err
}

func (m metered) Answer(ctx context.Context, id string, data []byte) error {
	start := time.Now()
	err := m.s.Answer(ctx, id, data)
	m.op("answer", start, err)
	return err
}

type meteredRun struct {
	r runstore.Run
	m metered
}

func (r *meteredRun) Info() runstore.Info   { return r.r.Info() }
func (r *meteredRun) Checkpoint() []byte    { return r.r.Checkpoint() }
func (r *meteredRun) Lost() <-chan struct{} { return r.r.Lost() }

// Answered is a wake-up, not an operation: it is not timed.
func (r *meteredRun) Answered() <-chan struct{} { return r.r.Answered() }
func (r *meteredRun) Err() error                { return r.r.Err() }

func (r *meteredRun) Save(cp runstore.Checkpoint) error {
	start := time.Now()
	err := r.r.Save(cp)
	r.m.op("save", start, err)
	return err
}

func (r *meteredRun) Append(events ...[]byte) error {
	start := time.Now()
	err := r.r.Append(events...)
	r.m.op("append", start, err)
	return err
}

func (r *meteredRun) SetQuestions(data []byte) error {
	start := time.Now()
	err := r.r.SetQuestions(data)
	r.m.op("set_questions", start, err)
	return err
}

func (r *meteredRun) Answers(ctx context.Context) ([][]byte, error) {
	start := time.Now()
	a, err := r.r.Answers(ctx)
	r.m.op("answers", start, err)
	return a, err
}

func (r *meteredRun) Release() error {
	start := time.Now()
	err := r.r.Release()
	r.m.op("release", start, err)
	return err
}
