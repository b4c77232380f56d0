package pipelinesrv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nbots/nb/admission"
	"github.com/nbots/nb/internal/atomicfile"
	"github.com/nbots/nb/pipeline"
	"github.com/nbots/nb/pipeline/engine"
	"github.com/nbots/nb/pipeline/handler"
	"github.com/nbots/nb/server"
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

// metaFile is what a Local keeps of a run beside the specification's
// files, so that it knows the run after a restart.
const metaFile = "nb-serve.json"

// runMeta is metaFile's content.
type runMeta struct {
	ID        string    `json:"id"`
	Owner     string    `json:"owner"`
	Name      string    `json:"name"`
	Path      string    `json:"path,omitempty"`
	Params    Params    `json:"params"`
	StartedAt time.Time `json:"started_at"`
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
	if spec.Path == "" {
		// The graph's text is kept beside the run, for resume.
		if err := os.WriteFile(filepath.Join(dir, "graph.dot"), spec.Source, 0o600); err != nil {
			return nil, fmt.Errorf("keep the graph: %w", err)
		}
	}
	meta := runMeta{ID: id, Owner: spec.Owner, Name: spec.Graph.Name, Path: spec.Path, Params: spec.Params, StartedAt: time.Now().UTC()}
	data, _ := json.MarshalIndent(meta, "", "  ")
	if err := atomicfile.WriteFile(filepath.Join(dir, metaFile), append(data, '\n'), 0o600); err != nil {
		return nil, fmt.Errorf("keep the run's parameters: %w", err)
	}
	r := &localRun{id: id, owner: spec.Owner, dir: dir, g: spec.Graph, meta: meta, started: meta.StartedAt, log: l.Log}
	return l.launch(r, spec, false)
}

// Resume continues a stopped run from its checkpoint (from its start
// when no node had finished), in its folder; its events go on from the
// last one's number.
func (l *Local) Resume(id string, spec Spec) (Run, error) {
	if spec.Graph == nil || spec.Context == nil {
		return nil, errors.New("pipeline run: no graph or no context")
	}
	l.mu.Lock()
	old := l.runs[id]
	l.mu.Unlock()
	if old == nil {
		return nil, ErrNotFound
	}
	old.mu.Lock()
	stopped := old.endedAt != nil && (old.status == StatusInterrupted || old.status == StatusCancelled) && !old.resumed
	if stopped {
		old.resumed = true
	}
	r := &localRun{id: id, owner: old.owner, dir: old.dir, g: spec.Graph, meta: old.meta, started: old.started, log: l.Log,
		events: slices.Clone(old.events)}
	old.mu.Unlock()
	if !stopped {
		return nil, ErrNotStopped
	}
	file := spec.Path
	if file == "" {
		file = filepath.Join(r.dir, "graph.dot")
	}
	if cp, err := engine.LoadCheckpoint(r.dir); err == nil {
		if err := cp.Verify(file, spec.Source); err != nil {
			old.mu.Lock()
			old.resumed = false
			old.mu.Unlock()
			return nil, server.Errorf(http.StatusConflict, "run %s cannot be resumed: %v", id, err)
		}
	}
	run, err := l.launch(r, spec, true)
	if err != nil {
		old.mu.Lock()
		old.resumed = false
		old.mu.Unlock()
	}
	return run, err
}

// launch runs r (a new run, or a resumed one) in the background.
func (l *Local) launch(r *localRun, spec Spec, resume bool) (Run, error) {
	evf, err := os.OpenFile(filepath.Join(r.dir, "events.jsonl"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open the events file: %w", err)
	}
	ctx, cancel := context.WithCancelCause(spec.Context)
	r.cancel, r.done, r.wake, r.status, r.evf = cancel, make(chan struct{}), make(chan struct{}), StatusRunning, evf
	r.gate = &gate{}
	opts := spec.Handlers
	opts.Interviewer = r.gate
	file := spec.Path
	if file == "" {
		file = filepath.Join(r.dir, "graph.dot")
	}
	p := spec.Params
	cfg := engine.Config{Graph: spec.Graph, Source: spec.Source, File: file, LogsRoot: r.dir, Handlers: handler.NewRegistry(opts),
		Observer: r, Vars: p.Vars, Cartridge: p.Cartridge, MaxSteps: p.MaxSteps, MaxTokens: p.MaxTokens, RunID: r.id}
	if _, err := os.Stat(filepath.Join(r.dir, engine.CheckpointFile)); err != nil {
		resume = false // stopped before its first node finished: from the start
	}

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
	l.runs[r.id] = r
	l.ended = slices.DeleteFunc(l.ended, func(id string) bool { return id == r.id })
	l.wg.Add(1)
	l.mu.Unlock()

	go func() {
		defer l.wg.Done()
		var res *engine.Result
		var err error
		if resume {
			res, err = engine.Resume(ctx, cfg)
		} else {
			res, err = engine.Run(ctx, cfg)
		}
		cause := context.Cause(ctx)
		cancel(nil)
		reportFailure(spec.Context, res, err)
		// The run's admission is given back before its end is told: a
		// client that sees it ended may start the next one at once.
		if spec.Done != nil {
			spec.Done()
		}
		r.end(res, err, cause)
		l.ended1(r.id)
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

// Get returns the run id of owner: from memory, else from its run
// folder (a run of the server's previous life, or one forgotten beyond
// Keep), as it ended.
func (l *Local) Get(_ context.Context, owner, id string) (Run, error) {
	l.mu.Lock()
	r := l.runs[id]
	l.mu.Unlock()
	if r == nil {
		var err error
		if r, err = l.load(id); err != nil {
			return nil, err
		}
	}
	if r.owner != owner {
		return nil, ErrNotFound
	}
	return r, nil
}

// List are owner's runs in memory (those going, and the Keep most
// recent ended ones), the most recently started first.
func (l *Local) List(_ context.Context, owner string) ([]Info, error) {
	l.mu.Lock()
	var runs []*localRun
	for _, r := range l.runs {
		if r.owner == owner {
			runs = append(runs, r)
		}
	}
	l.mu.Unlock()
	out := make([]Info, 0, len(runs))
	for _, r := range runs {
		out = append(out, r.Info())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].StartedAt.After(out[j].StartedAt) }) // not slices.SortFunc: bench/README.md, "Binary: sorts"
	return out, nil
}

// validID is the form of the ids newID makes.
var validID = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[0-9a-f]{24}$`) })

// load reads a run that is not in memory from its folder: its
// parameters, its events, its graph, and how it ended (its checkpoint:
// done with its status, else interrupted).
func (l *Local) load(id string) (*localRun, error) {
	if !validID().MatchString(id) {
		return nil, ErrNotFound
	}
	dir := filepath.Join(l.Dir, id)
	data, err := os.ReadFile(filepath.Join(dir, metaFile))
	if err != nil {
		return nil, ErrNotFound
	}
	var meta runMeta
	if err := json.Unmarshal(data, &meta); err != nil || meta.ID != id {
		return nil, fmt.Errorf("%s: %s does not parse (%v): the run folder is damaged", dir, metaFile, err)
	}
	r := &localRun{id: id, owner: meta.Owner, dir: dir, meta: meta, started: meta.StartedAt, log: l.Log,
		cancel: func(error) {}, done: make(chan struct{}), wake: make(chan struct{}), gate: &gate{}}
	close(r.done)
	src, err := r.Source()
	if err == nil {
		r.g, _, err = pipeline.LoadWith(filepath.Base(r.graphPath()), src, pipeline.LoadOptions{Vars: meta.Params.Vars})
	}
	if err != nil || r.g == nil {
		return nil, fmt.Errorf("run %s: its graph %s does not load: %v", id, r.graphPath(), err)
	}
	if f, err := os.Open(filepath.Join(dir, "events.jsonl")); err == nil {
		dec := json.NewDecoder(f)
		for {
			var e struct {
				Seq int64 `json:"seq"`
				engine.Event
			}
			if dec.Decode(&e) != nil {
				break // the end, or a line cut by a crash
			}
			r.events = append(r.events, Event{Seq: int64(len(r.events) + 1), Event: e.Event})
		}
		f.Close()
	}
	r.status, r.reason = StatusInterrupted, "the server stopped it: POST /pipelines/"+id+"/resume continues it"
	if cp, err := engine.LoadCheckpoint(dir); err == nil {
		r.current = cp.CurrentNode
		if cp.Done {
			r.status, r.reason = StatusFail, cp.FailureReason
			if cp.Status == engine.Success {
				r.status = StatusSuccess
			}
		}
	}
	ended := meta.StartedAt
	if m, err := engine.LoadManifest(dir); err == nil && m.EndTime != nil {
		ended = *m.EndTime
	}
	r.endedAt = &ended

	l.mu.Lock()
	defer l.mu.Unlock()
	if cur := l.runs[id]; cur != nil {
		return cur, nil
	}
	if l.runs == nil {
		l.runs = map[string]*localRun{}
	}
	l.runs[id] = r
	l.ended = append(l.ended, id)
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
	meta           runMeta
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
	resumed bool // a resume took over
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
		r.status, r.reason = StatusCancelled, "cancelled: POST /pipelines/"+r.id+"/resume continues it"
	case res.Interrupted:
		r.status, r.reason = StatusInterrupted, fmt.Sprintf("stopped (%v): POST /pipelines/%s/resume continues it", cause, r.id)
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
func (r *localRun) Questions() []handler.Question { return r.gate.questions() }

// Answer answers a waiting question (gate.answer).
func (r *localRun) Answer(_ context.Context, qid string, a handler.Answer) error {
	return r.gate.answer(qid, a)
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

// Params are what the run was started with.
func (r *localRun) Params() Params { return r.meta.Params }

// graphPath is where the run's graph is read from: the served file, or
// graph.dot in the run folder.
func (r *localRun) graphPath() string {
	if r.meta.Path != "" {
		return r.meta.Path
	}
	return filepath.Join(r.dir, "graph.dot")
}

// Source is the graph's text, read again.
func (r *localRun) Source() ([]byte, error) {
	data, err := os.ReadFile(r.graphPath())
	if err != nil {
		return nil, fmt.Errorf("run %s: read its graph: %w", r.id, err)
	}
	return data, nil
}

// Artifacts is the run's artifact store as its checkpoint left it (an
// empty one before the first node finished).
func (r *localRun) Artifacts() (*engine.Artifacts, error) {
	cp, err := engine.LoadCheckpoint(r.dir)
	if err != nil {
		if _, statErr := os.Stat(filepath.Join(r.dir, engine.CheckpointFile)); errors.Is(statErr, os.ErrNotExist) {
			return engine.RunArtifacts(r.dir, nil), nil
		}
		return nil, err
	}
	return engine.RunArtifacts(r.dir, cp), nil
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
	p handler.Pending
	n atomic.Int64
	// changed, when not nil (newRelayedGate), is told each time the
	// questions waiting change: a question is asked, or answered or
	// given up.
	changed chan struct{}
}

// newRelayedGate is a gate whose changes are told on changed (Stored's
// relay publishes its questions then, instead of looking at them on
// every tick).
func newRelayedGate() *gate {
	g := &gate{changed: make(chan struct{}, 1)}
	g.p.OnAsk = func(handler.Question) { g.change() }
	return g
}

// change tells changed, without waiting (changes while one is pending
// are merged).
func (g *gate) change() {
	if g.changed == nil {
		return
	}
	select {
	case g.changed <- struct{}{}:
	default:
	}
}

// Ask waits for the answer.
func (g *gate) Ask(ctx context.Context, q handler.Question) (handler.Answer, error) {
	defer g.change() // after Pending.Ask removed the question
	q.ID = q.Stage + "-" + strconv.FormatInt(g.n.Add(1), 10)
	resume := admission.Waiting(ctx)
	defer resume()
	return g.p.Ask(ctx, q)
}

// Inform does nothing: clients follow the events.
func (*gate) Inform(string, string) {}

// questions are the questions waiting, oldest first.
func (g *gate) questions() []handler.Question {
	qs := g.p.Questions()
	sort.Slice(qs, func(i, j int) bool { return qseq(qs[i].ID) < qseq(qs[j].ID) })
	return qs
}

// qseq is the number at the end of a question id (stage-N).
func qseq(id string) int {
	n, _ := strconv.Atoi(id[strings.LastIndexByte(id, '-')+1:])
	return n
}

// answer answers a waiting question. A MULTIPLE_CHOICE answer that
// names an option (its key or label) selects it; any other goes to the
// gate as it is (§4.6: it takes the first choice).
func (g *gate) answer(qid string, a handler.Answer) error {
	for _, q := range g.p.Questions() {
		if q.ID == qid && q.Type == handler.MultipleChoice && a.Selected == nil {
			if o, ok := handler.MatchOption(a.Value, q.Options); ok {
				a.Value, a.Selected = o.Key, &o
			}
		}
	}
	return g.p.Answer(qid, a)
}

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
