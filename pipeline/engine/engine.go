// Package engine runs attractor pipelines (attractor-spec.md at
// fb57a55, §3 and §5): it traverses a checked graph from its start node,
// runs each node's handler with retries, selects edges, enforces goal
// gates, writes the run folder (manifest, checkpoint after every node,
// stage folders) and reports events to an observer. The handlers
// themselves live in pipeline/handler; nothing here talks to a model.
package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/nbots/nb/pipeline"
	"github.com/nbots/nb/pipeline/runstore"
	"github.com/nbots/nb/tracing"
)

// DefaultMaxNodeVisits is the per-node visit cap when neither the node
// nor the graph sets max_node_visits (nb's extension).
const DefaultMaxNodeVisits = 20

// Config is what a run needs.
type Config struct {
	// Graph is the checked graph (pipeline.Load with no error
	// diagnostics); Source is its text and File its path, kept in the
	// checkpoint (a resume refuses another graph).
	Graph  *pipeline.Graph
	Source []byte
	File   string
	// LogsRoot is the run folder; it is created.
	LogsRoot string
	// Handlers resolves node handlers.
	Handlers *Registry
	// Observer receives the run's events; nil drops them.
	Observer Observer
	// Vars are the --set variables (kept in the checkpoint for resume).
	Vars map[string]string
	// Cartridge is the --cartridge of the run (kept for resume).
	Cartridge string
	// MaxSteps and MaxTokens are run budgets (0: the graph's max_steps
	// and max_tokens attributes, else none).
	MaxSteps, MaxTokens int
	// Advice words the ways on that a run's end names, for the command
	// that runs it (the engine knows no flag).
	Advice Advice
	// RunID names the run; "" makes one.
	RunID string
	// Sleep waits between retries; nil waits for real (tests pass a
	// recorder). Rand is the jitter's source; nil is math/rand.
	Sleep func(ctx context.Context, d time.Duration) error
	Rand  func() float64
	// Now is the clock; nil is time.Now.
	Now func() time.Time
	// Stored, when set, is the run's place in a run store (package
	// runstore), whose lease this process holds: the checkpoint is saved
	// there instead of LogsRoot/checkpoint.json (each save checked
	// against the lease), every event is appended to its log, Resume
	// reads the checkpoint from it, and the run stops as soon as the
	// lease is lost (Result.Lost), writing nothing more. LogsRoot still
	// holds the stage folders and the manifest. The caller releases it.
	Stored runstore.Run
}

// Result is how a run ended.
type Result struct {
	RunID string
	// Status is Success or Fail.
	Status        Status
	FailureReason string
	// CompletedNodes are the nodes run, in order (the checkpoint's).
	CompletedNodes []string
	// ReachedExit is false when a successful run stopped short of the
	// exit node because no edge could be taken (D15).
	ReachedExit bool
	// Interrupted says the run stopped because its context ended
	// (Ctrl-C): the checkpoint lets `resume` go on.
	Interrupted bool
	// AlreadyDone says a resumed run had already ended.
	AlreadyDone bool
	// Lost says the run stopped because its lease in Config.Stored was
	// lost: another process may have taken it over; this one wrote
	// nothing after it learnt so.
	Lost     bool
	Tokens   Tokens
	Steps    int
	Duration time.Duration
}

// run is one run's state.
type run struct {
	cfg Config
	// jr is the run folder's checkpoint journal (without Stored).
	jr      *journal
	g       *pipeline.Graph
	obs     Observer
	now     func() time.Time
	start   time.Time
	ctx     *Context
	cp      *Checkpoint
	man     *Manifest
	mu      sync.Mutex // guards emit
	conds   *conditions
	fidOnce string // fidelity forced on the next LLM stage (resume after full)
	// threads keep the conversations of `full` fidelity by thread key.
	threads sync.Map
	gates   []string // goal-gate nodes in first-completion order (D14)
	arts    *Artifacts
}

// Advice says how the command that runs a pipeline sets what a run's
// end tells its user to change; an empty field leaves the way out.
type Advice struct {
	// MaxSteps and MaxTokens set Config.MaxSteps and MaxTokens
	// ("--max-steps N").
	MaxSteps, MaxTokens string
	// ResumeStored resumes a stored run (%s is its id): "continue
	// with" it.
	ResumeStored string
}

// raise says how to raise a budget: by name, or by the graph's attribute.
func raise(name, attr string) string {
	if name == "" {
		return "raise the graph attribute " + attr
	}
	return "raise it with " + name + " (or the graph attribute " + attr + ")"
}

// RunExistsError is Run's refusal of a folder that already holds a run
// (its checkpoint.json). The command that named the folder may say how
// to name another.
type RunExistsError struct {
	// Dir is the run's folder (Config.LogsRoot).
	Dir string
}

func (e *RunExistsError) Error() string {
	return fmt.Sprintf("%s already holds a run (checkpoint.json): continue it with nb pipeline resume %s, or choose another folder", e.Dir, e.Dir)
}

// Run runs cfg.Graph from its start node (a *RunExistsError when
// cfg.LogsRoot holds a run already).
func Run(ctx context.Context, cfg Config) (*Result, error) {
	r, err := newRun(cfg)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(cfg.LogsRoot, "artifacts"), 0o755); err != nil {
		return nil, fmt.Errorf("create the run folder: %w", err)
	}
	if cfg.Stored != nil {
		if cfg.Stored.Checkpoint() != nil {
			return nil, fmt.Errorf("run %s already has a checkpoint: resume it instead", cfg.Stored.Info().ID)
		}
	} else if _, err := os.Stat(filepath.Join(cfg.LogsRoot, CheckpointFile)); err == nil {
		return nil, &RunExistsError{Dir: cfg.LogsRoot}
	}
	r.ctx = NewContext()
	r.mirror()
	// The checkpoint names the flow by its absolute path: a resume from
	// another folder finds it.
	graphFile := cfg.File
	if abs, err := filepath.Abs(cfg.File); err == nil && cfg.File != "" {
		graphFile = abs
	}
	r.cp = &Checkpoint{GraphHash: HashGraph(cfg.Source), GraphFile: graphFile, RunID: r.cfg.RunID, NodeRetries: map[string]int{},
		Outcomes: map[string]Status{}, Visits: map[string]int{}, Vars: cfg.Vars, Cartridge: cfg.Cartridge, CompletedNodes: []string{}, Statuses: []Status{}}
	r.man = &Manifest{Name: r.g.Name, Goal: graphStr(r.g, "goal"), StartTime: r.start, RunID: r.cfg.RunID, GraphFile: graphFile, GraphHash: r.cp.GraphHash, Status: "running"}
	if err := r.man.Save(cfg.LogsRoot); err != nil {
		return nil, err
	}
	startNode := r.g.StartNode()
	if startNode == nil {
		return nil, fmt.Errorf("%s: the graph has no start node (shape=Mdiamond, or an id start or Start): run nb pipeline check %s", cfg.File, cfg.File)
	}
	r.emit(Event{Kind: PipelineStarted, Name: r.g.Name})
	return r.guarded(ctx, func(ctx context.Context) *Result { return r.loop(ctx, startNode, nil, nil) }), nil
}

// guarded runs loop under a context that ends when the lease of
// cfg.Stored is lost, and reports the loss.
func (r *run) guarded(ctx context.Context, loop func(context.Context) *Result) *Result {
	st := r.cfg.Stored
	if st == nil {
		defer r.jr.close()
		return loop(ctx)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-st.Lost():
			cancel()
		case <-ctx.Done():
		}
	}()
	res := loop(ctx)
	if err := st.Err(); err != nil {
		res.Lost, res.Interrupted = true, true
		res.Status, res.FailureReason = Fail, err.Error()
	}
	return res
}

// Resume continues the run in cfg.LogsRoot from its checkpoint: it
// refuses a checkpoint that does not parse or was written for another
// graph, and runs no node the checkpoint lists as completed again.
// cfg.Vars and cfg.Cartridge, when empty, are the run's own.
func Resume(ctx context.Context, cfg Config) (*Result, error) {
	var cp *Checkpoint
	var err error
	if cfg.Stored != nil {
		data := cfg.Stored.Checkpoint()
		if data == nil {
			return nil, fmt.Errorf("run %s has no checkpoint yet: no node finished before it stopped; start it again", cfg.Stored.Info().ID)
		}
		cp, err = ParseCheckpoint("run "+cfg.Stored.Info().ID, data)
	} else {
		cp, err = LoadCheckpoint(cfg.LogsRoot)
	}
	if err != nil {
		return nil, err
	}
	if err := cp.Verify(cfg.File, cfg.Source); err != nil {
		return nil, err
	}
	if cfg.RunID == "" {
		cfg.RunID = cp.RunID
	}
	r, err := newRun(cfg)
	if err != nil {
		return nil, err
	}
	r.cp = cp
	r.ctx = &Context{values: cp.Context, logs: cp.Logs}
	if cfg.Stored != nil {
		// Another process may resume it: its run folder may be new.
		if err := os.MkdirAll(filepath.Join(cfg.LogsRoot, "artifacts"), 0o755); err != nil {
			return nil, fmt.Errorf("create the run folder: %w", err)
		}
	}
	r.arts.restore(cp.Artifacts)
	r.man, err = LoadManifest(cfg.LogsRoot)
	if err != nil {
		r.man = &Manifest{Name: r.g.Name, Goal: graphStr(r.g, "goal"), StartTime: r.start, RunID: cfg.RunID, GraphFile: cfg.File, GraphHash: cp.GraphHash}
	}
	if cp.Done {
		return &Result{RunID: cp.RunID, Status: cp.Status, FailureReason: cp.FailureReason, CompletedNodes: cp.CompletedNodes,
			ReachedExit: r.isExit(r.g.ByID[cp.CurrentNode]), AlreadyDone: true, Tokens: cp.Tokens, Steps: cp.Steps}, nil
	}
	r.man.Resumes++
	r.man.Status = "running"
	if err := r.man.Save(cfg.LogsRoot); err != nil {
		return nil, err
	}
	node := r.g.ByID[cp.CurrentNode]
	if node == nil || cp.LastOutcome == nil {
		return nil, fmt.Errorf("%s: the checkpoint's current node %q is not in the graph or has no outcome: the checkpoint is damaged; start the run again", filepath.Join(cfg.LogsRoot, CheckpointFile), cp.CurrentNode)
	}
	for _, id := range cp.CompletedNodes {
		if n := r.g.ByID[id]; n != nil && nodeBool(n, "goal_gate") && !slices.Contains(r.gates, id) {
			r.gates = append(r.gates, id)
		}
	}
	if cp.LastFidelity == "full" {
		r.fidOnce = "summary:high" // §5.3: the thread's conversation was not kept
	}
	r.emit(Event{Kind: PipelineStarted, Name: r.g.Name})
	return r.guarded(ctx, func(ctx context.Context) *Result { return r.loop(ctx, nil, node, cp.LastOutcome) }), nil
}

func newRun(cfg Config) (*run, error) {
	if cfg.Graph == nil {
		return nil, errors.New("pipeline run: no graph")
	}
	if cfg.Handlers == nil {
		return nil, errors.New("pipeline run: no handlers")
	}
	if cfg.LogsRoot == "" {
		return nil, errors.New("pipeline run: no run folder")
	}
	if cfg.Stored != nil && cfg.RunID == "" {
		cfg.RunID = cfg.Stored.Info().ID
	}
	r := &run{cfg: cfg, g: cfg.Graph, obs: cfg.Observer, now: cfg.Now, arts: NewArtifacts(cfg.LogsRoot), jr: &journal{dir: cfg.LogsRoot}}
	if r.now == nil {
		r.now = time.Now
	}
	r.start = r.now()
	if r.cfg.RunID == "" {
		r.cfg.RunID = r.start.UTC().Format("20060102T150405.000000000Z")
	}
	r.conds = newConditions()
	return r, nil
}

// mirror sets the graph's attributes into the context (graph.goal, …)
// and the --set variables.
func (r *run) mirror() {
	for k, v := range graphAttrs(r.g) {
		r.ctx.Set("graph."+k, v)
	}
	if _, ok := r.ctx.Get("graph.goal"); !ok {
		r.ctx.Set("graph.goal", "")
	}
	for k, v := range r.cfg.Vars {
		r.ctx.Set("vars."+k, v)
	}
}

func (r *run) emit(ev Event) {
	if r.obs == nil && r.cfg.Stored == nil {
		return
	}
	ev.Time = r.now()
	ev.RunID = r.cfg.RunID
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cfg.Stored != nil {
		if data, err := json.Marshal(ev); err == nil {
			_ = r.cfg.Stored.Append(data) // a failed append loses the lease, which stops the run
		}
	}
	if r.obs != nil {
		r.obs.OnEvent(ev)
	}
}

func (r *run) isExit(n *pipeline.Node) bool {
	if n == nil {
		return false
	}
	if nodeShape(n) == "Msquare" {
		return true
	}
	e := r.g.ExitNode()
	return e != nil && e.ID == n.ID
}

// stageRoot is where stage folders go: the run folder, or restart-N/
// after N loop restarts.
func (r *run) stageRoot() string {
	if r.cp.Restarts == 0 {
		return r.cfg.LogsRoot
	}
	return filepath.Join(r.cfg.LogsRoot, "restart-"+strconv.Itoa(r.cp.Restarts))
}

func (r *run) maxSteps() int {
	if r.cfg.MaxSteps > 0 {
		return r.cfg.MaxSteps
	}
	return graphInt(r.g, "max_steps", 0)
}

func (r *run) maxTokens() int {
	if r.cfg.MaxTokens > 0 {
		return r.cfg.MaxTokens
	}
	return graphInt(r.g, "max_tokens", 0)
}

func (r *run) visitCap(n *pipeline.Node) (int, string) {
	if v, ok := nodeIntOK(n, "max_node_visits"); ok {
		return v, "the node's max_node_visits"
	}
	if v, ok := graphIntOK(r.g, "max_node_visits"); ok {
		return v, "the graph's max_node_visits"
	}
	return DefaultMaxNodeVisits, "the default max_node_visits"
}

// loop is §3.2's traversal. It starts at start (a new run) or selects
// the edge after last/lastOut (a resume).
func (r *run) loop(ctx context.Context, start, last *pipeline.Node, lastOut *Outcome) *Result {
	var (
		node     = start
		incoming *pipeline.Edge
		prev     *Outcome
		prevNode string
	)
	if last != nil {
		var end *Result
		node, incoming, end = r.next(ctx, last, *lastOut)
		if end != nil {
			return end
		}
		prev, prevNode = lastOut, last.ID
	}
	for {
		if err := ctx.Err(); err != nil {
			return r.interrupted(prevNode)
		}
		if r.isExit(node) {
			if target, failed, ok := r.checkGates(); !ok {
				if target == "" {
					return r.finish(Fail, fmt.Sprintf("Goal gate unsatisfied and no retry target (goal gate %s did not succeed; give it a retry_target, or the graph one)", failed), false)
				}
				node, incoming = r.g.ByID[target], nil
				continue
			}
		}
		if end := r.checkCaps(node); end != nil {
			return end
		}
		out, st, interrupted := r.runStage(ctx, node, incoming, prev, "", r.ctx)
		if interrupted {
			return r.interrupted(node.ID)
		}
		if err := r.record(node, out, st); err != nil {
			return r.finish(Fail, err.Error(), false)
		}
		if r.isExit(node) {
			return r.finish(Success, "", true)
		}
		if max := r.maxTokens(); max > 0 && r.cp.Tokens.Total() > max {
			return r.finish(Fail, fmt.Sprintf("token budget exceeded after node %s: the run has used %d tokens, max_tokens is %d; %s and resume", node.ID, r.cp.Tokens.Total(), max, raise(r.cfg.Advice.MaxTokens, "max_tokens")), false)
		}
		var end *Result
		prev, prevNode = &out, node.ID
		node, incoming, end = r.next(ctx, node, out)
		if end != nil {
			return end
		}
	}
}

// next selects where traversal goes after node ended with out: the
// parallel handler's jump (D12), else select_edge, else failure routing
// for a FAIL (D1: §3.7 steps 2–4 only when select_edge finds nothing),
// else the run ends. A loop_restart edge starts afresh at its target.
func (r *run) next(ctx context.Context, node *pipeline.Node, out Outcome) (*pipeline.Node, *pipeline.Edge, *Result) {
	if out.JumpTo != "" {
		if n := r.g.ByID[out.JumpTo]; n != nil {
			r.emit(Event{Kind: EdgeSelected, From: node.ID, To: n.ID, Label: "fan-in"})
			return n, nil, nil
		}
	}
	edge, err := r.selectEdge(node, out)
	if err != nil {
		return nil, nil, r.finish(Fail, err.Error(), false)
	}
	if edge == nil {
		if out.Status == Fail {
			for _, key := range []string{"retry_target", "fallback_retry_target"} {
				if t := nodeStr(node, key); t != "" {
					if n := r.g.ByID[t]; n != nil {
						r.emit(Event{Kind: EdgeSelected, From: node.ID, To: n.ID, Label: key})
						return n, nil, nil
					}
				}
			}
			reason := out.FailureReason
			if reason == "" {
				reason = "stage " + node.ID + " failed"
			}
			return nil, nil, r.finish(Fail, fmt.Sprintf("stage %s failed: %s", node.ID, reason), false)
		}
		return nil, nil, r.finish(Success, "", false)
	}
	r.emit(Event{Kind: EdgeSelected, From: node.ID, To: edge.To, Label: edgeStr(edge, "label")})
	if edgeBool(edge, "loop_restart") {
		r.restart()
	}
	return r.g.ByID[edge.To], edge, nil
}

// restart is loop_restart: a fresh context and goal-gate record, stage
// folders in a fresh restart-N/ folder. Visits, steps and tokens carry
// on, so that the caps still bound a restarting loop.
func (r *run) restart() {
	r.cp.Restarts++
	r.ctx = NewContext()
	r.mirror()
	r.cp.Outcomes = map[string]Status{}
	r.cp.RestartAt = len(r.cp.CompletedNodes)
	r.gates = nil
}

// checkGates is §3.4 in completion order (D14): the first goal gate
// whose last outcome is not SUCCESS or PARTIAL_SUCCESS blocks the exit;
// its retry target (node retry_target, node fallback_retry_target,
// graph retry_target, graph fallback_retry_target) is where to go.
func (r *run) checkGates() (target, failed string, ok bool) {
	for _, id := range r.gates {
		st := r.cp.Outcomes[id]
		if st.OK() {
			continue
		}
		n := r.g.ByID[id]
		for _, t := range []string{nodeStr(n, "retry_target"), nodeStr(n, "fallback_retry_target"), graphStr(r.g, "retry_target"), graphStr(r.g, "fallback_retry_target")} {
			if t != "" && r.g.ByID[t] != nil {
				return t, id, false
			}
		}
		return "", id, false
	}
	return "", "", true
}

// checkCaps stops a run that would go past its caps before node runs.
func (r *run) checkCaps(node *pipeline.Node) *Result {
	if max, src := r.visitCap(node); max > 0 && r.cp.Visits[node.ID] >= max {
		return r.finish(Fail, fmt.Sprintf("node %s would run for the %d%s time: %s is %d; raise it with max_node_visits=N on the node or the graph (0 lifts the cap), or change the graph so that the loop ends", node.ID, max+1, ordinal(max+1), src, max), false)
	}
	if max := r.maxSteps(); max > 0 && r.cp.Steps >= max {
		return r.finish(Fail, fmt.Sprintf("step budget exhausted before node %s: the run has run %d stages, max_steps is %d; %s and resume", node.ID, r.cp.Steps, max, raise(r.cfg.Advice.MaxSteps, "max_steps")), false)
	}
	return nil
}

func ordinal(n int) string {
	switch {
	case n%100 >= 11 && n%100 <= 13:
		return "th"
	case n%10 == 1:
		return "st"
	case n%10 == 2:
		return "nd"
	case n%10 == 3:
		return "rd"
	}
	return "th"
}

// record is §3.2 steps 3–5: the completion, the context updates, the
// stage's status.json and the checkpoint.
func (r *run) record(node *pipeline.Node, out Outcome, s *Stage) error {
	if out.Status != Skipped {
		r.cp.CompletedNodes = append(r.cp.CompletedNodes, node.ID)
		r.cp.Statuses = append(r.cp.Statuses, out.Status)
		for _, id := range s.branchNodes {
			r.cp.CompletedNodes = append(r.cp.CompletedNodes, id)
			r.cp.Statuses = append(r.cp.Statuses, "")
		}
		r.cp.Outcomes[node.ID] = out.Status
		if nodeBool(node, "goal_gate") && !slices.Contains(r.gates, node.ID) {
			r.gates = append(r.gates, node.ID)
		}
		r.ctx.ApplyUpdates(out.ContextUpdates)
		r.ctx.Set("outcome", string(out.Status))
		if out.PreferredLabel != "" {
			r.ctx.Set("preferred_label", out.PreferredLabel)
		}
	}
	if out.Tokens != nil {
		r.cp.Tokens.Add(*out.Tokens)
	}
	if err := writeStatusFast(filepath.Join(r.stageRoot(), node.ID), out); err != nil {
		return err
	}
	r.cp.CurrentNode = node.ID
	r.cp.LastOutcome = &out
	r.cp.LastFidelity = s.Fidelity
	return r.save(node.ID, true)
}

// save writes the checkpoint; announce sends CheckpointSaved (the final
// save, which only marks the run done, is silent).
func (r *run) save(nodeID string, announce bool) error {
	r.cp.Timestamp = r.now().UTC()
	r.cp.Saves++
	// The context is marshalled in place, under its lock: no handler
	// writes it between stages, and a deep copy per save would cost more
	// than the save.
	r.ctx.mu.RLock()
	r.cp.Context, r.cp.Logs = r.ctx.values, r.ctx.logs
	r.cp.Artifacts = r.arts.snapshot()
	if r.cp.Logs == nil {
		r.cp.Logs = []string{}
	}
	var err error
	if r.cfg.Stored != nil {
		var data []byte
		if data, err = r.cp.Marshal(); err == nil {
			err = r.cfg.Stored.Save(runstore.Checkpoint{Data: data, Node: r.cp.CurrentNode, Done: r.cp.Done, Status: string(r.cp.Status)})
		}
	} else {
		var data []byte
		if data, err = r.cp.Marshal(); err == nil {
			err = r.jr.save(data)
		}
	}
	r.ctx.mu.RUnlock()
	if err != nil {
		return err
	}
	if announce {
		r.emit(Event{Kind: CheckpointSaved, NodeID: nodeID})
	}
	return nil
}

// finish ends the run: the final checkpoint (marked done), the manifest
// with the totals, and the final event.
func (r *run) finish(st Status, reason string, reachedExit bool) *Result {
	d := r.now().Sub(r.start)
	r.cp.Done, r.cp.Status, r.cp.FailureReason = true, st, reason
	res := &Result{RunID: r.cfg.RunID, Status: st, FailureReason: reason, CompletedNodes: slices.Clone(r.cp.CompletedNodes),
		ReachedExit: reachedExit, Tokens: r.cp.Tokens, Steps: r.cp.Steps, Duration: d}
	var saveErr error
	if r.cp.CurrentNode != "" {
		saveErr = r.save(r.cp.CurrentNode, false)
	}
	r.saveManifest(string(st), reason)
	if saveErr != nil && st == Success {
		st, reason = Fail, saveErr.Error()
		res.Status, res.FailureReason = st, reason
	}
	tokens := r.cp.Tokens
	if st == Success {
		if !reachedExit {
			r.emit(Event{Kind: PipelineWarning, Notes: fmt.Sprintf("the run ended at %s, short of the exit node: no edge from it could be taken (every remaining edge's condition is false); the specification counts this as a success (D15)", r.cp.CurrentNode)})
		}
		r.emit(Event{Kind: PipelineCompleted, Name: r.g.Name, Duration: ms(d), ArtifactCount: r.artifactCount(), Tokens: &tokens})
	} else {
		r.emit(Event{Kind: PipelineFailed, Name: r.g.Name, Error: reason, Duration: ms(d), Tokens: &tokens})
	}
	return res
}

// interrupted ends a run whose context ended: the checkpoint of the last
// finished node stays as it is, for resume.
func (r *run) interrupted(at string) *Result {
	d := r.now().Sub(r.start)
	reason := "interrupted"
	if at != "" {
		reason = "interrupted at node " + at
	}
	if r.cfg.Stored != nil {
		if how := r.cfg.Advice.ResumeStored; how != "" {
			reason += ": continue with " + fmt.Sprintf(how, r.cfg.RunID)
		} else {
			reason += fmt.Sprintf(": resume run %s to continue", r.cfg.RunID)
		}
	} else {
		reason += fmt.Sprintf(": continue with nb pipeline resume %s", r.cfg.LogsRoot)
	}
	r.saveManifest("interrupted", reason)
	tokens := r.cp.Tokens
	r.emit(Event{Kind: PipelineFailed, Name: r.g.Name, Error: reason, Duration: ms(d), Tokens: &tokens})
	return &Result{RunID: r.cfg.RunID, Status: Fail, FailureReason: reason, CompletedNodes: slices.Clone(r.cp.CompletedNodes),
		Interrupted: true, Tokens: r.cp.Tokens, Steps: r.cp.Steps, Duration: d}
}

func (r *run) saveManifest(status, reason string) {
	end := r.now().UTC()
	r.man.Status, r.man.FailureReason, r.man.EndTime = status, reason, &end
	r.man.Steps, r.man.Tokens = r.cp.Steps, r.cp.Tokens
	_ = r.man.Save(r.cfg.LogsRoot) // the checkpoint is what resume reads; a manifest write error must not hide the run's end
}

func (r *run) artifactCount() int { return r.arts.Len() }

// runStage runs node with retries (§3.5) and returns its outcome and the
// fidelity it ran at. branch is the parallel node of a branch's stage.
func (r *run) runStage(ctx context.Context, node *pipeline.Node, incoming *pipeline.Edge, prev *Outcome, branch string, c *Context) (Outcome, *Stage, bool) {
	h, typ := r.cfg.Handlers.Resolve(node)
	s := r.newStage(node, incoming, prev, branch, typ, c)
	if branch == "" {
		r.cp.Visits[node.ID]++
		r.cp.Steps++
	}
	c.Set("current_node", node.ID)
	if err := os.MkdirAll(s.Dir, 0o755); err != nil {
		return Failf("create the stage folder: %v", err), s, false
	}
	index := r.cp.Steps
	r.emit(Event{Kind: StageStarted, Name: node.ID, Index: index, Branch: branch})
	began := r.now()
	policy, err := r.policy(node)
	if err != nil {
		out := Failf("node %s: %v", node.ID, err)
		r.emit(Event{Kind: StageFailed, Name: node.ID, Index: index, Branch: branch, Error: out.FailureReason, Status: Fail})
		return out, s, false
	}
	var tokens Tokens
	retryKey := "internal.retry_count." + node.ID
	var out Outcome
	for attempt := 1; ; attempt++ {
		s.Attempt = attempt
		o, err := r.execute(ctx, h, s)
		if o.Tokens != nil {
			tokens.Add(*o.Tokens)
		}
		if ctx.Err() != nil {
			return Outcome{}, s, true
		}
		last := attempt >= policy.MaxAttempts
		if err != nil {
			if ShouldRetry(err) && !last {
				r.emit(Event{Kind: StageFailed, Name: node.ID, Index: index, Branch: branch, Error: err.Error(), WillRetry: true})
				if !r.backoff(ctx, s, policy, attempt, index, branch) {
					return Outcome{}, s, true
				}
				continue
			}
			out = Outcome{Status: Fail, FailureReason: err.Error()}
			break
		}
		if o.Status == "" {
			o.Status = Success
		}
		if o.Status == Retry {
			if !last {
				reason := o.FailureReason
				if reason == "" {
					reason = "the stage asked to be run again"
				}
				r.emit(Event{Kind: StageFailed, Name: node.ID, Index: index, Branch: branch, Error: reason, WillRetry: true, Status: Retry})
				s.ctxSetRetry(retryKey, attempt)
				r.bumpRetries(node.ID)
				if !r.backoff(ctx, s, policy, attempt, index, branch) {
					return Outcome{}, s, true
				}
				continue
			}
			if nodeBool(node, "allow_partial") {
				out = Outcome{Status: PartialSuccess, Notes: "retries exhausted, partial accepted", ContextUpdates: o.ContextUpdates}
			} else {
				reason := "max retries exceeded"
				if o.FailureReason != "" {
					reason += ": " + o.FailureReason
				}
				out = Outcome{Status: Fail, FailureReason: reason, ContextUpdates: o.ContextUpdates}
			}
			break
		}
		if _, retried := s.Context.Get(retryKey); retried && o.Status.OK() {
			s.ctxSetRetry(retryKey, 0) // §3.5's reset; a node never retried gets no key
		}
		out = o
		break
	}
	if tokens != (Tokens{}) {
		out.Tokens = &tokens
	} else {
		out.Tokens = nil
	}
	d := r.now().Sub(began)
	switch out.Status {
	case Fail:
		r.emit(Event{Kind: StageFailed, Name: node.ID, Index: index, Branch: branch, Error: out.FailureReason, Duration: ms(d), Status: out.Status, Tokens: out.Tokens})
	default:
		r.emit(Event{Kind: StageCompleted, Name: node.ID, Index: index, Branch: branch, Duration: ms(d), Status: out.Status, Notes: out.Notes, Tokens: out.Tokens})
	}
	return out, s, false
}

// bumpRetries counts a retry in node_retries (the run's total for the
// node; the context's internal.retry_count is §3.5's counter, reset by a
// success).
func (r *run) bumpRetries(id string) {
	r.mu.Lock()
	r.cp.NodeRetries[id]++
	r.mu.Unlock()
}

func (r *run) backoff(ctx context.Context, s *Stage, p RetryPolicy, attempt, index int, branch string) bool {
	d := p.Backoff.Delay(attempt, r.cfg.Rand)
	r.emit(Event{Kind: StageRetrying, Name: s.Node.ID, Index: index, Branch: branch, Attempt: attempt, Delay: ms(d)})
	sl := r.cfg.Sleep
	if sl == nil {
		sl = sleep
	}
	return sl(ctx, d) == nil && ctx.Err() == nil
}

// execute runs one attempt; a panic fails it (§4.12).
func (r *run) execute(ctx context.Context, h Handler, s *Stage) (o Outcome, err error) {
	ctx, span := tracing.StartNode(ctx, s.Graph.Name, s.Node.ID, s.Type)
	defer func() {
		failed := err
		if failed == nil && o.Status == Fail {
			failed = errors.New(o.FailureReason)
		}
		tracing.End(span, failed)
	}()
	defer func() {
		if p := recover(); p != nil {
			o, err = Outcome{Status: Fail, FailureReason: fmt.Sprintf("handler of node %s panicked (an nb bug, please report it): %v", s.Node.ID, p)}, nil
			s.run.ctxLog(fmt.Sprintf("panic in %s: %v\n%s", s.Node.ID, p, debug.Stack()))
		}
	}()
	if h == nil {
		return Failf("no handler for node %s (type %q)", s.Node.ID, s.Type), nil
	}
	return h.Execute(ctx, s)
}

func (r *run) ctxLog(entry string) { r.ctx.AppendLog(entry) }

// policy is the node's retry policy (§3.5, D7): node max_retries, else
// node retry_policy, else graph default_max_retries (alias
// default_max_retry), else graph retry_policy, else no retries. The
// backoff is the node's preset's, else the graph's, else §3.6's
// defaults.
func (r *run) policy(n *pipeline.Node) (RetryPolicy, error) {
	p := RetryPolicy{MaxAttempts: 1, Backoff: DefaultBackoff}
	for _, name := range []string{nodeStr(n, "retry_policy"), graphStr(r.g, "retry_policy")} {
		if _, ok := Presets[name]; name != "" && !ok {
			return p, fmt.Errorf("retry_policy %q is not a preset: use one of %s", name, presetNames())
		}
	}
	nodePreset, nodeHas := Presets[nodeStr(n, "retry_policy")]
	graphPreset, graphHas := Presets[graphStr(r.g, "retry_policy")]
	switch {
	case nodeHas:
		p.Backoff = nodePreset.Backoff
	case graphHas:
		p.Backoff = graphPreset.Backoff
	}
	if v, ok := nodeIntOK(n, "max_retries"); ok {
		p.MaxAttempts = v + 1
	} else if nodeHas {
		p.MaxAttempts, p.Name = nodePreset.MaxAttempts, nodePreset.Name
	} else if v, ok := graphIntOK(r.g, "default_max_retries"); ok {
		p.MaxAttempts = v + 1
	} else if v, ok := graphIntOK(r.g, "default_max_retry"); ok {
		p.MaxAttempts = v + 1
	} else if graphHas {
		p.MaxAttempts, p.Name = graphPreset.MaxAttempts, graphPreset.Name
	}
	if p.MaxAttempts < 1 {
		p.MaxAttempts = 1
	}
	return p, nil
}
