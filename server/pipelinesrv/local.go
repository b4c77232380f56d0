package pipelinesrv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nbots/nb/admission"
	"github.com/nbots/nb/pipeline"
	"github.com/nbots/nb/pipeline/engine"
	"github.com/nbots/nb/pipeline/handler"
)

// DefaultKeep is how many ended runs a Local keeps in memory (their
// events included); older ones are only in their run folders.
const DefaultKeep = 100

// Local runs pipelines in this process. Each run has its run folder
// under Dir (named by its id: the specification's layout, plus
// events.jsonl with every event, and graph.dot when the graph came as
// text), so `nb pipeline resume DIR` continues a run the server stopped;
// its events and state are kept in memory for the routes, the Keep most
// recent ended runs' too.
type Local struct {
	// Dir holds the run folders.
	Dir string
	// Keep bounds the ended runs kept in memory (0: DefaultKeep); their
	// folders stay.
	Keep int
	// Log receives what goes wrong outside a request (an events file that
	// cannot be written); nil discards it.
	Log *slog.Logger

	mu     sync.Mutex
	runs   map[string]*localRun
	ended  []string // ended runs, oldest first
	wg     sync.WaitGroup
	closed bool
}

// Start starts a run of spec in a new run folder.
func (l *Local) Start(spec Spec) (Run, error) {
	if spec.Graph == nil || spec.Context == nil {
		return nil, errors.New("pipeline run: no graph or no context")
	}
	id := newID()
	dir := filepath.Join(l.Dir, id)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create the run folder: %w", err)
	}
	file := spec.File
	if file == "" {
		// The graph's text is kept beside the run, for resume.
		file = filepath.Join(dir, "graph.dot")
		if err := os.WriteFile(file, spec.Source, 0o600); err != nil {
			return nil, fmt.Errorf("keep the graph: %w", err)
		}
	}
	evf, err := os.OpenFile(filepath.Join(dir, "events.jsonl"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("create the events file: %w", err)
	}
	ctx, cancel := context.WithCancelCause(spec.Context)
	r := &localRun{id: id, owner: spec.Owner, dir: dir, g: spec.Graph, cancel: cancel, done: make(chan struct{}),
		wake: make(chan struct{}), status: StatusRunning, started: time.Now().UTC(), evf: evf, log: l.Log}
	r.gate = &gate{run: r}
	opts := spec.Handlers
	opts.Interviewer = r.gate
	cfg := engine.Config{Graph: spec.Graph, Source: spec.Source, File: file, LogsRoot: dir, Handlers: handler.NewRegistry(opts),
		Observer: r, Vars: spec.Vars, Cartridge: spec.Cartridge, MaxSteps: spec.MaxSteps, MaxTokens: spec.MaxTokens, RunID: id}

	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		cancel(nil)
		evf.Close()
		return nil, errors.New("the server is stopping: no new pipeline runs")
	}
	if l.runs == nil {
		l.runs = map[string]*localRun{}
	}
	l.runs[id] = r
	l.wg.Add(1)
	l.mu.Unlock()

	go func() {
		defer l.wg.Done()
		res, err := engine.Run(ctx, cfg)
		r.end(res, err, context.Cause(ctx))
		cancel(nil)
		if spec.Done != nil {
			spec.Done()
		}
		l.ended1(id)
	}()
	return r, nil
}

// ended1 records that run id ended, forgetting the oldest ended runs
// beyond Keep.
func (l *Local) ended1(id string) {
	keep := l.Keep
	if keep <= 0 {
		keep = DefaultKeep
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ended = append(l.ended, id)
	for len(l.ended) > keep {
		delete(l.runs, l.ended[0])
		l.ended = l.ended[1:]
	}
}

// Get returns the run id of owner.
func (l *Local) Get(_ context.Context, owner, id string) (Run, error) {
	l.mu.Lock()
	r := l.runs[id]
	l.mu.Unlock()
	if r == nil || r.owner != owner {
		return nil, ErrNotFound
	}
	return r, nil
}

// Close cancels the runs still going and waits for them to stop: each
// keeps the checkpoint of its last finished node.
func (l *Local) Close() error {
	l.mu.Lock()
	l.closed = true
	runs := make([]*localRun, 0, len(l.runs))
	for _, r := range l.runs {
		runs = append(runs, r)
	}
	l.mu.Unlock()
	for _, r := range runs {
		r.cancel(errShutdown)
	}
	l.wg.Wait()
	return nil
}

var errShutdown = errors.New("the server is shutting down")

func newID() string {
	var b [12]byte
	rand.Read(b[:]) //nolint:errcheck // never fails
	return hex.EncodeToString(b[:])
}

// localRun is one run of a Local: the engine's observer, its questions'
// interviewer, and what the routes read.
type localRun struct {
	id, owner, dir string
	g              *pipeline.Graph
	cancel         context.CancelCauseFunc
	done           chan struct{}
	gate           *gate
	log            *slog.Logger

	mu      sync.Mutex
	events  []Event
	wake    chan struct{} // closed and replaced when an event comes or the run ends
	status  string
	reason  string
	started time.Time
	endedAt *time.Time
	current string
	evf     *os.File
	evErr   error
}

func (r *localRun) ID() string             { return r.id }
func (r *localRun) Graph() *pipeline.Graph { return r.g }

// OnEvent keeps an event of the engine and wakes the followers.
func (r *localRun) OnEvent(ev engine.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := Event{Seq: int64(len(r.events) + 1), Event: ev}
	r.events = append(r.events, e)
	if ev.Kind == engine.StageStarted && ev.Branch == "" {
		r.current = ev.Name
	}
	if r.evErr == nil {
		data, err := json.Marshal(e)
		if err == nil {
			_, err = r.evf.Write(append(data, '\n'))
		}
		if err != nil {
			r.evErr = err
			if r.log != nil {
				r.log.Warn("pipeline events file: later events are kept in memory only", "run", r.id, "error", err)
			}
		}
	}
	close(r.wake)
	r.wake = make(chan struct{})
}

// end records how the run ended.
func (r *localRun) end(res *engine.Result, err error, cause error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now().UTC()
	r.endedAt = &now
	switch {
	case err != nil:
		r.status, r.reason = StatusFail, err.Error()
		// The engine refused before it started: the followers still get
		// an end.
		e := Event{Seq: int64(len(r.events) + 1), Event: engine.Event{Kind: engine.PipelineFailed, Time: now, RunID: r.id, Name: r.g.Name, Error: err.Error()}}
		r.events = append(r.events, e)
	case res.Interrupted && errors.Is(cause, errCancelled):
		r.status, r.reason = StatusCancelled, res.FailureReason
	case res.Interrupted:
		r.status, r.reason = StatusInterrupted, res.FailureReason
	case res.Status == engine.Success:
		r.status = StatusSuccess
	default:
		r.status, r.reason = StatusFail, res.FailureReason
	}
	r.evf.Close()
	if r.log != nil {
		r.log.Info("pipeline ended", "run", r.id, "pipeline", r.g.Name, "status", r.status, "reason", r.reason)
	}
	close(r.wake)
	r.wake = make(chan struct{})
	close(r.done)
}

// Info is the run's state: its status here, its path from the checkpoint.
func (r *localRun) Info() Info {
	r.mu.Lock()
	info := Info{ID: r.id, Name: r.g.Name, Goal: r.g.Str("goal", ""), Status: r.status, CurrentNode: r.current, FailureReason: r.reason,
		StartedAt: r.started, EndedAt: r.endedAt, Events: int64(len(r.events)), CompletedNodes: []string{}}
	r.mu.Unlock()
	info.Questions = len(r.gate.p.Questions())
	if info.Status == StatusRunning && info.Questions > 0 {
		info.Status = StatusWaiting
	}
	if cp, err := engine.LoadCheckpoint(r.dir); err == nil {
		info.CompletedNodes, info.Steps, info.Tokens = cp.CompletedNodes, cp.Steps, cp.Tokens
		if Ended(info.Status) || info.CurrentNode == "" {
			info.CurrentNode = cp.CurrentNode
		}
	}
	return info
}

// Follow gives the events after `after`, then the new ones, until the
// run has ended and every event was given.
func (r *localRun) Follow(ctx context.Context, after int64, fn func(Event) error) error {
	for {
		r.mu.Lock()
		var batch []Event
		if after < int64(len(r.events)) {
			batch = slices.Clone(r.events[max(after, 0):])
		}
		ended, wake := r.endedAt != nil, r.wake
		r.mu.Unlock()
		for _, e := range batch {
			if err := fn(e); err != nil {
				return err
			}
			after = e.Seq
		}
		if len(batch) > 0 {
			continue
		}
		if ended {
			return nil
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

// Questions are the questions waiting, oldest first.
func (r *localRun) Questions() []handler.Question {
	qs := r.gate.p.Questions()
	slices.SortFunc(qs, func(a, b handler.Question) int { return qseq(a.ID) - qseq(b.ID) })
	return qs
}

// qseq is the number at the end of a question id (stage-N).
func qseq(id string) int {
	n, _ := strconv.Atoi(id[strings.LastIndexByte(id, '-')+1:])
	return n
}

// Answer answers a waiting question. A MULTIPLE_CHOICE answer that
// names an option (its key or label) selects it; any other goes to the
// gate as it is (§4.6: it takes the first choice).
func (r *localRun) Answer(_ context.Context, qid string, a handler.Answer) error {
	for _, q := range r.gate.p.Questions() {
		if q.ID == qid && q.Type == handler.MultipleChoice && a.Selected == nil {
			if o, ok := handler.MatchOption(a.Value, q.Options); ok {
				a.Value, a.Selected = o.Key, &o
			}
		}
	}
	return r.gate.p.Answer(qid, a)
}

// Cancel stops the run and waits for it to stop.
func (r *localRun) Cancel(ctx context.Context) error {
	r.cancel(errCancelled)
	select {
	case <-r.done:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// Checkpoint is the run folder's checkpoint.json.
func (r *localRun) Checkpoint() ([]byte, error) {
	data, err := os.ReadFile(filepath.Join(r.dir, engine.CheckpointFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, ErrNoCheckpoint
	}
	return data, err
}

// gate is a run's interviewer: the questions wait in a Pending for
// /answer, with ids unique in the run (stage-N), and while one waits
// the run counts as waiting on its client rather than running (see
// admission.Run.Wait).
type gate struct {
	run *localRun
	p   handler.Pending
	n   atomic.Int64
}

// Ask waits for the answer.
func (g *gate) Ask(ctx context.Context, q handler.Question) (handler.Answer, error) {
	q.ID = q.Stage + "-" + strconv.FormatInt(g.n.Add(1), 10)
	resume := admission.Waiting(ctx)
	defer resume()
	return g.p.Ask(ctx, q)
}

// Inform does nothing: clients follow the events.
func (*gate) Inform(string, string) {}

// DefaultRunsDir is where nb serve keeps its pipeline runs:
// $XDG_STATE_HOME/nb/pipeline-runs, else ~/.local/state/nb/pipeline-runs
// (never a served folder, whose files would be served).
func DefaultRunsDir(getenv func(string) string) string {
	if d := getenv("XDG_STATE_HOME"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "nb", "pipeline-runs")
	}
	if h := getenv("HOME"); h != "" {
		return filepath.Join(h, ".local", "state", "nb", "pipeline-runs")
	}
	return "pipeline-runs"
}
