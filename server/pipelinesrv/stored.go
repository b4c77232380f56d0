package pipelinesrv

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/nbots/nb/pipeline"
	"github.com/nbots/nb/pipeline/engine"
	"github.com/nbots/nb/pipeline/handler"
	"github.com/nbots/nb/pipeline/runstore"
	"github.com/nbots/nb/server"
)

// Stored keeps the runs in a run store that several replicas of nb
// serve share (nb serve --store postgres://…): each run's description,
// checkpoint and events live there, so that any replica answers its
// state, checkpoint and events, and a run whose replica died (its lease
// expired) is taken over by another one (Handler.Adopt), from its last
// checkpoint. The replica that holds a run runs it and publishes its
// human gates' questions in the store, where answers given on other
// replicas are left for it (relay); /cancel is done there. Stage folders
// and manifests stay in Dir on the replica that ran each stage.
type Stored struct {
	Store runstore.Store
	// Dir holds this replica's run folders.
	Dir string
	// Log receives what goes wrong outside a request; nil discards it.
	Log *slog.Logger

	mu     sync.Mutex
	held   map[string]*heldRun
	wg     sync.WaitGroup
	closed bool
}

// storedMeta is what a Stored keeps in runstore.Info.Extra.
type storedMeta struct {
	Owner  string `json:"owner"`
	Params Params `json:"params"`
}

// heldRun is a run this replica runs.
type heldRun struct {
	cancel context.CancelCauseFunc
	done   chan struct{}
	gate   *gate
}

// cancelledReason marks, in an ended checkpoint, a run /cancel stopped.
const cancelledReason = "cancelled by POST /pipelines/{id}/cancel"

func (s *Stored) logger() *slog.Logger {
	if s.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return s.Log
}

// Start creates the run in the store, holding its lease, and runs it.
func (s *Stored) Start(spec Spec) (Run, error) {
	if spec.Graph == nil || spec.Context == nil {
		return nil, errors.New("pipeline run: no graph or no context")
	}
	extra, err := json.Marshal(storedMeta{Owner: spec.Owner, Params: spec.Params})
	if err != nil {
		return nil, err
	}
	file := spec.Path
	if file == "" {
		file = "pipeline.dot"
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(spec.Context), 30*time.Second)
	defer cancel()
	info := runstore.Info{ID: newID(), Name: spec.Graph.Name, File: file, Source: spec.Source, Vars: spec.Params.Vars,
		Cartridge: spec.Params.Cartridge, Extra: extra}
	sr, err := s.Store.Create(ctx, info)
	if err != nil {
		return nil, err
	}
	if err := s.launch(sr, spec); err != nil {
		sr.Release() //nolint:errcheck // refused before it ran
		return nil, err
	}
	return s.Get(ctx, spec.Owner, info.ID)
}

// launch runs the held run sr (new, or taken over) in the background:
// from its start when it has no checkpoint, else from it.
func (s *Stored) launch(sr runstore.Run, spec Spec) error {
	id := sr.Info().ID
	ctx, cancel := context.WithCancelCause(spec.Context)
	h := &heldRun{cancel: cancel, done: make(chan struct{}), gate: newRelayedGate()}
	opts := spec.Handlers
	opts.Interviewer = h.gate
	p := spec.Params
	cfg := engine.Config{Graph: spec.Graph, Source: spec.Source, File: sr.Info().File, LogsRoot: filepath.Join(s.Dir, id),
		Handlers: handler.NewRegistry(opts), Vars: p.Vars, Cartridge: p.Cartridge, MaxSteps: p.MaxSteps, MaxTokens: p.MaxTokens,
		RunID: id, Stored: sr}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		cancel(nil)
		return errors.New("the server is stopping: no new pipeline runs")
	}
	if s.held == nil {
		s.held = map[string]*heldRun{}
	}
	s.held[id] = h
	s.wg.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		rctx, stopRelay := context.WithCancel(ctx)
		relayed := make(chan struct{})
		go func() {
			defer close(relayed)
			s.relay(rctx, sr, h.gate)
		}()
		var res *engine.Result
		var err error
		if sr.Checkpoint() == nil {
			res, err = engine.Run(ctx, cfg)
		} else {
			res, err = engine.Resume(ctx, cfg)
		}
		stopRelay()
		<-relayed
		cause := context.Cause(ctx)
		switch {
		case err != nil:
			s.end(sr, spec.Graph.Name, err.Error())
		case res.Lost:
			s.logger().Warn("pipeline run lost: another replica may have taken it over", "run", id, "reason", res.FailureReason)
		case res.Interrupted && errors.Is(cause, errCancelled):
			s.end(sr, "", cancelledReason)
		case res.Interrupted:
			// The server stops: released below, another replica takes
			// the run over at once.
			s.logger().Info("pipeline run stopped: another replica takes it over", "run", id, "cause", fmt.Sprint(cause))
		default:
			s.logger().Info("pipeline ended", "run", id, "pipeline", spec.Graph.Name, "status", res.Status, "reason", res.FailureReason)
		}
		if err := sr.Release(); err != nil {
			s.logger().Warn("pipeline run: release its lease", "run", id, "error", err)
		}
		cancel(nil)
		reportFailure(spec.Context, res, err)
		if spec.Done != nil {
			spec.Done()
		}
		s.mu.Lock()
		delete(s.held, id)
		s.mu.Unlock()
		close(h.done)
	}()
	return nil
}

// publishRetry is how long the relay waits before it publishes again
// questions the store refused (out of reach, say).
const publishRetry = time.Second

// relayAnswer is an answer given on another replica, as the store keeps
// it.
type relayAnswer struct {
	QID    string         `json:"qid"`
	Answer handler.Answer `json:"answer"`
}

// relay publishes the questions of g waiting in the held run sr (so that
// every replica lists them) when they change, and while some wait
// answers them with what other replicas left in the store, when the
// store tells it some were left (sr.Answered), until ctx ends; then it
// withdraws them. It wakes for nothing else: a question asked, answered
// here or given up (its timeout, the run's end) is a change of g.
func (s *Stored) relay(ctx context.Context, sr runstore.Run, g *gate) {
	id := sr.Info().ID
	var last []byte // nothing published yet: a run taken over replaces its last holder's
	answered := sr.Answered()
	for {
		qs := g.questions()
		data, _ := json.Marshal(qs)
		var retry <-chan time.Time
		if last == nil || !bytes.Equal(data, last) {
			if err := sr.SetQuestions(data); err != nil {
				s.logger().Warn("pipeline run: publish its questions", "run", id, "error", err)
				retry = time.After(publishRetry)
			} else {
				last = data
			}
		}
		if len(qs) > 0 {
			answers, err := sr.Answers(ctx)
			if err != nil && ctx.Err() == nil {
				s.logger().Warn("pipeline run: read the answers other replicas left", "run", id, "error", err)
			}
			for _, data := range answers {
				var a relayAnswer
				if err := json.Unmarshal(data, &a); err != nil {
					s.logger().Warn("pipeline run: an answer left by another replica does not parse", "run", id, "error", err)
					continue
				}
				if err := g.answer(a.QID, a.Answer); err != nil {
					s.logger().Info("pipeline run: an answer left by another replica came too late", "run", id, "question", a.QID, "error", err)
				}
			}
		}
		select {
		case <-ctx.Done():
			if last != nil && string(last) != "[]" {
				sr.SetQuestions([]byte("[]")) //nolint:errcheck // a lost lease: the next holder replaces them
			}
			return
		case <-g.changed:
		case <-answered:
		case <-retry:
		}
	}
}

// end ends the held run sr for good (it is never taken over again): its
// last checkpoint, marked done with reason; with name, a PipelineFailed
// event first tells its followers (a run that never started).
func (s *Stored) end(sr runstore.Run, name, reason string) {
	id := sr.Info().ID
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	data, err := s.Store.Checkpoint(ctx, id)
	cp := &engine.Checkpoint{RunID: id, CompletedNodes: []string{}}
	if err == nil && data != nil {
		if parsed, perr := engine.ParseCheckpoint("run "+id, data); perr == nil {
			cp = parsed
		}
	}
	cp.Done, cp.Status, cp.FailureReason = true, engine.Fail, reason
	if name != "" {
		ev, _ := json.Marshal(engine.Event{Kind: engine.PipelineFailed, Time: time.Now().UTC(), RunID: id, Name: name, Error: reason})
		sr.Append(ev) //nolint:errcheck // Save says it
	}
	if data, err = cp.Marshal(); err == nil {
		err = sr.Save(runstore.Checkpoint{Data: data, Node: cp.CurrentNode, Done: true, Status: string(engine.Fail)})
	}
	if err != nil {
		s.logger().Warn("pipeline run: mark it ended", "run", id, "error", err)
		return
	}
	s.logger().Info("pipeline ended", "run", id, "status", "fail", "reason", reason)
}

// adopt goes on with run sr that this replica took over; spec builds
// what the run needs here (its handlers, its admission) for the owner
// and parameters it was started with. A run that cannot go on is ended;
// one refused for now (the server is busy) is released for later.
func (s *Stored) adopt(sr runstore.Run, spec func(owner string, p Params, g *pipeline.Graph, src []byte) (Spec, error)) {
	info := sr.Info()
	fail := func(err error) {
		s.logger().Warn("pipeline run taken over, but it cannot go on: it is ended", "run", info.ID, "error", err)
		s.end(sr, info.Name, "taken over by another replica, but it cannot go on: "+err.Error())
		sr.Release() //nolint:errcheck // ended
	}
	var meta storedMeta
	if err := json.Unmarshal(info.Extra, &meta); err != nil {
		fail(fmt.Errorf("its parameters do not parse: %w", err))
		return
	}
	g, diags, err := pipeline.LoadWith(info.File, info.Source, pipeline.LoadOptions{Vars: info.Vars})
	if err == nil && pipeline.HasErrors(diags) {
		err = fmt.Errorf("%s has errors", info.File)
	}
	if err != nil {
		fail(err)
		return
	}
	sp, err := spec(meta.Owner, meta.Params, g, info.Source)
	var se *server.Error
	if errors.As(err, &se) && (se.Status == http.StatusTooManyRequests || se.Status == http.StatusServiceUnavailable) {
		s.logger().Info("pipeline run not taken over now: this replica is busy", "run", info.ID, "error", err)
		sr.Release() //nolint:errcheck // another round, or replica, takes it
		return
	}
	if err != nil {
		fail(err)
		return
	}
	if err := s.launch(sr, sp); err != nil {
		sp.Done()
		sr.Release() //nolint:errcheck // the server stops: another replica takes it
		return
	}
	s.logger().Info("pipeline run taken over from a replica that stopped", "run", info.ID, "pipeline", info.Name, "node", info.Node)
}

// Get returns run id of owner, whichever replica runs it.
func (s *Stored) Get(ctx context.Context, owner, id string) (Run, error) {
	if !validID().MatchString(id) {
		return nil, ErrNotFound
	}
	info, err := s.Store.Get(ctx, id)
	if errors.Is(err, runstore.ErrUnknown) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	var meta storedMeta
	if json.Unmarshal(info.Extra, &meta) != nil || meta.Owner != owner {
		return nil, ErrNotFound
	}
	r := &storedRun{s: s, info: info, meta: meta}
	r.g, _, _ = pipeline.LoadWith(info.File, info.Source, pipeline.LoadOptions{Vars: info.Vars})
	if r.g == nil {
		return nil, fmt.Errorf("run %s: its graph does not load", id)
	}
	return r, nil
}

// List are owner's runs that this replica runs, the most recent first.
func (s *Stored) List(ctx context.Context, owner string) ([]Info, error) {
	s.mu.Lock()
	ids := make([]string, 0, len(s.held))
	for id := range s.held {
		ids = append(ids, id)
	}
	s.mu.Unlock()
	var out []Info
	for _, id := range ids {
		if r, err := s.Get(ctx, owner, id); err == nil {
			out = append(out, r.Info())
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].StartedAt.After(out[j].StartedAt) }) // not slices.SortFunc: bench/README.md, "Binary: sorts"
	if out == nil {
		out = []Info{}
	}
	return out, nil
}

// Resume is refused: a run its replica stopped is taken over by another
// replica at once, and a cancelled one has ended.
func (s *Stored) Resume(id string, _ Spec) (Run, error) {
	return nil, server.Errorf(http.StatusConflict, "run %s is kept in the replicas' shared store: a run its replica stopped is taken over by another replica by itself, and a cancelled one has ended (start it again)", id)
}

// Close stops the runs this replica runs and releases them (another
// replica takes them over), and waits for them.
func (s *Stored) Close() error {
	s.mu.Lock()
	s.closed = true
	held := make([]*heldRun, 0, len(s.held))
	for _, h := range s.held {
		held = append(held, h)
	}
	s.mu.Unlock()
	for _, h := range held {
		h.cancel(errShutdown)
	}
	s.wg.Wait()
	return nil
}

func (s *Stored) local(id string) *heldRun {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.held[id]
}

// storedRun is a run of a Stored, seen from this replica.
type storedRun struct {
	s    *Stored
	info runstore.Info // as Get found it
	meta storedMeta
	g    *pipeline.Graph
}

func (r *storedRun) ID() string             { return r.info.ID }
func (r *storedRun) Graph() *pipeline.Graph { return r.g }
func (r *storedRun) Params() Params         { return r.meta.Params }
func (r *storedRun) Source() ([]byte, error) {
	return r.info.Source, nil
}

// Info is the run's state in the store now.
func (r *storedRun) Info() Info {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	info := Info{ID: r.info.ID, Name: r.info.Name, Goal: r.g.Str("goal", ""), Status: StatusRunning, StartedAt: r.info.Created,
		CompletedNodes: []string{}, Events: r.info.Events}
	si, err := r.s.Store.Get(ctx, r.info.ID)
	if err != nil {
		info.FailureReason = err.Error()
		return info
	}
	info.Events, info.CurrentNode = si.Events, si.Node
	if data, err := r.s.Store.Checkpoint(ctx, r.info.ID); err == nil && data != nil {
		// Read as it is: a run ended before its first node finished has
		// a checkpoint that only says how it ended.
		var cp engine.Checkpoint
		if json.Unmarshal(data, &cp) == nil {
			if cp.CompletedNodes == nil {
				cp.CompletedNodes = []string{}
			}
			info.CompletedNodes, info.Steps, info.Tokens, info.CurrentNode = cp.CompletedNodes, cp.Steps, cp.Tokens, cp.CurrentNode
			if si.Done {
				info.FailureReason = cp.FailureReason
				switch {
				case cp.Status == engine.Success:
					info.Status = StatusSuccess
				case cp.FailureReason == cancelledReason:
					info.Status = StatusCancelled
				default:
					info.Status = StatusFail
				}
			}
		}
	}
	if si.Done && !Ended(info.Status) {
		info.Status = StatusFail
	}
	if !si.Done {
		info.Questions = len(r.questions(ctx))
		if info.Questions > 0 {
			info.Status = StatusWaiting
		}
	}
	return info
}

// Follow reads the run's events from the store until it has ended and
// every event was given: a run stopped on one replica and taken over by
// another goes on (a second PipelineStarted).
func (r *storedRun) Follow(ctx context.Context, after int64, fn func(Event) error) error {
	id := r.info.ID
	var ferr error
	err := runstore.Follow(ctx, r.s.Store, id, after, func(rec runstore.Record) bool {
		var ev engine.Event
		if err := json.Unmarshal(rec.Data, &ev); err != nil {
			ferr = fmt.Errorf("run %s: event %d does not parse: %w", id, rec.Seq, err)
			return false
		}
		ferr = fn(Event{Seq: rec.Seq, Event: ev})
		return ferr == nil
	})
	switch {
	case ferr != nil:
		return ferr
	case err != nil && ctx.Err() != nil:
		return context.Cause(ctx)
	}
	return err
}

// elsewhere says that the run is not run by this replica.
func (r *storedRun) elsewhere(what string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	info, err := r.s.Store.Get(ctx, r.info.ID)
	switch {
	case err != nil:
		return err
	case info.Done:
		return server.Errorf(http.StatusConflict, "run %s has ended", r.info.ID)
	case info.Holder == "":
		return server.Errorf(http.StatusServiceUnavailable, "run %s is between two replicas (the one that ran it stopped): %s in a few seconds, on the replica that takes it over", r.info.ID, what)
	}
	return server.Errorf(http.StatusConflict, "run %s runs on another replica (%s): %s there", r.info.ID, info.Holder, what)
}

// Questions are the questions of the run's gates waiting, on this
// replica or, as it published them in the store, on the one that runs
// it.
func (r *storedRun) Questions() []handler.Question {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return r.questions(ctx)
}

func (r *storedRun) questions(ctx context.Context) []handler.Question {
	if h := r.s.local(r.info.ID); h != nil {
		return h.gate.questions()
	}
	var qs []handler.Question
	if data, err := r.s.Store.Questions(ctx, r.info.ID); err == nil && data != nil {
		json.Unmarshal(data, &qs) //nolint:errcheck // none readable: none listed
	}
	if qs == nil {
		qs = []handler.Question{}
	}
	return qs
}

// Answer answers a question waiting on this replica, or leaves the
// answer in the store for the replica that runs the run, which the store
// wakes to take it (runstore.Run.Answered).
func (r *storedRun) Answer(ctx context.Context, qid string, a handler.Answer) error {
	if h := r.s.local(r.info.ID); h != nil {
		return h.gate.answer(qid, a)
	}
	if !slices.ContainsFunc(r.questions(ctx), func(q handler.Question) bool { return q.ID == qid }) {
		info, err := r.s.Store.Get(ctx, r.info.ID)
		switch {
		case err != nil:
			return err
		case !info.Done && info.Holder == "":
			return r.elsewhere("answer its questions")
		}
		return fmt.Errorf("question %s: %w", qid, ErrNoQuestion)
	}
	data, err := json.Marshal(relayAnswer{QID: qid, Answer: a})
	if err != nil {
		return err
	}
	err = r.s.Store.Answer(ctx, r.info.ID, data)
	if errors.Is(err, runstore.ErrDone) {
		return server.Errorf(http.StatusConflict, "run %s has ended", r.info.ID)
	}
	return err
}

// Cancel stops the run held here, and ends it (no replica takes it
// over); 409 when another replica runs it.
func (r *storedRun) Cancel(ctx context.Context) error {
	h := r.s.local(r.info.ID)
	if h == nil {
		return r.elsewhere("cancel it")
	}
	h.cancel(errCancelled)
	select {
	case <-h.done:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// Checkpoint is the run's last checkpoint in the store.
func (r *storedRun) Checkpoint() ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	data, err := r.s.Store.Checkpoint(ctx, r.info.ID)
	if err != nil {
		return nil, err
	}
	if data == nil {
		return nil, ErrNoCheckpoint
	}
	return data, nil
}

// Artifacts are the run's artifacts as its checkpoint lists them; those
// kept in files are in the run folder of the replica that stored them.
func (r *storedRun) Artifacts() (*engine.Artifacts, error) {
	dir := filepath.Join(r.s.Dir, r.info.ID)
	data, err := r.Checkpoint()
	if errors.Is(err, ErrNoCheckpoint) {
		return engine.RunArtifacts(dir, nil), nil
	}
	if err != nil {
		return nil, err
	}
	cp, err := engine.ParseCheckpoint("run "+r.info.ID, data)
	if err != nil {
		return nil, err
	}
	return engine.RunArtifacts(dir, cp), nil
}
