package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/nbots/nb/pipeline"
)

// Stage is what a handler gets for one node: §4.1's (node, context,
// graph, logs_root) and what nb adds (the stage folder, the fidelity and
// thread the node runs with, the previous stage's outcome, events, and
// parallel branches).
type Stage struct {
	Node  *pipeline.Node
	Graph *pipeline.Graph
	// Context is the run's context (a branch's clone in a parallel
	// branch). Handlers return context_updates rather than setting it.
	Context *Context
	// LogsRoot is the run folder; Dir is the stage folder
	// ({logs_root}/{node id}), created before the handler runs.
	LogsRoot, Dir string
	// Type is the handler type the node resolved to.
	Type string
	// Attempt counts the executions of this stage (1 for the first).
	Attempt int
	// Fidelity is the resolved fidelity mode (§5.4: edge, node, graph,
	// compact; summary:high once after a resume that followed full) and
	// Thread the thread key of `full`.
	Fidelity, Thread string
	// Previous is the outcome of the stage that ran before this one (nil
	// for the first): a conditional node passes it through (D16).
	Previous *Outcome
	// Branch is the parallel node's id when the stage runs in a branch.
	Branch string
	// Vars are the run's --set variables.
	Vars map[string]string
	// RunID identifies the run.
	RunID string

	run         *run
	mu          sync.Mutex
	branchNodes []string
}

// newStage prepares the stage of node reached by incoming (nil at the
// start, after a jump, or on resume after a fan-in).
func (r *run) newStage(node *pipeline.Node, incoming *pipeline.Edge, prev *Outcome, branch, typ string, c *Context) *Stage {
	s := &Stage{Node: node, Graph: r.g, Context: c, LogsRoot: r.cfg.LogsRoot, Dir: filepath.Join(r.stageRoot(), node.ID),
		Type: typ, Previous: prev, Branch: branch, Vars: r.cfg.Vars, RunID: r.cfg.RunID, run: r}
	s.Fidelity = r.fidelity(node, incoming)
	if branch == "" && r.fidOnce != "" {
		s.Fidelity, r.fidOnce = r.fidOnce, ""
	}
	s.Thread = r.thread(node, incoming, prev)
	return s
}

// fidelity is §5.4's precedence: the incoming edge, the node, the
// graph's default_fidelity, compact.
func (r *run) fidelity(node *pipeline.Node, incoming *pipeline.Edge) string {
	if incoming != nil {
		if f := edgeStr(incoming, "fidelity"); f != "" {
			return f
		}
	}
	if f := nodeStr(node, "fidelity"); f != "" {
		return f
	}
	if f := graphStr(r.g, "default_fidelity"); f != "" {
		return f
	}
	return "compact"
}

// thread is §5.4's thread key: the node's thread_id, the incoming edge's,
// the graph's thread_id (nb's name for the "graph-level default thread",
// D20), the node's first class (its enclosing subgraph's), the previous
// node's id.
func (r *run) thread(node *pipeline.Node, incoming *pipeline.Edge, prev *Outcome) string {
	if t := nodeStr(node, "thread_id"); t != "" {
		return t
	}
	if incoming != nil {
		if t := edgeStr(incoming, "thread_id"); t != "" {
			return t
		}
	}
	if t := graphStr(r.g, "thread_id"); t != "" {
		return t
	}
	if cls := nodeClasses(node); len(cls) > 0 {
		return cls[0]
	}
	if incoming != nil {
		return incoming.From
	}
	if cur := r.cp.CurrentNode; cur != "" {
		return cur
	}
	return node.ID
}

// Artifacts is the run's artifact store (§5.5), shared by every stage
// and branch: a handler keeps a large output there and puts its id in
// its context_updates.
func (s *Stage) Artifacts() *Artifacts { return s.run.arts }

func (s *Stage) ctxSetRetry(key string, n int) { s.Context.Set(key, n) }

// Emit sends an event of the handler's (parallel, interview) to the
// run's observer.
func (s *Stage) Emit(ev Event) {
	if ev.Stage == "" && (ev.Kind == InterviewStarted || ev.Kind == InterviewTimeout) {
		ev.Stage = s.Node.ID
	}
	s.run.emit(ev)
}

// Progress reports a running stage's tokens so far (StageProgress).
func (s *Stage) Progress(t Tokens) {
	s.run.emit(Event{Kind: StageProgress, Name: s.Node.ID, Branch: s.Branch, Tokens: &t})
}

// Session returns the value kept for key in this run (a `full` thread's
// conversation), making it with mk the first time.
func (s *Stage) Session(key string, mk func() any) any {
	v, _ := s.run.threads.LoadOrStore(key, mk())
	return v
}

// Completed lists the nodes completed so far with their last status.
func (s *Stage) Completed() ([]string, map[string]Status) {
	return append([]string(nil), s.run.cp.CompletedNodes...), s.run.cp.Outcomes
}

// Preamble is the context carried into an LLM stage that does not run at
// `full` fidelity (§5.4, the runtime Preamble transform of §9.2).
func (s *Stage) Preamble() string {
	return buildPreamble(s.Fidelity, s.RunID, s.run.g, s.Context, s.run.cp.CompletedNodes, s.run.cp.Outcomes)
}

// budgets are summary:low/medium/high's sizes (~600/1500/3000 tokens at
// about four characters a token).
var budgets = map[string]int{"summary:low": 2400, "summary:medium": 6000, "summary:high": 12000, "compact": 4000}

func buildPreamble(fidelity, runID string, g *pipeline.Graph, c *Context, completed []string, outcomes map[string]Status) string {
	if fidelity == "full" {
		return ""
	}
	var b strings.Builder
	goal := c.GetString("graph.goal")
	if goal != "" {
		fmt.Fprintf(&b, "Goal: %s\n", goal)
	}
	if fidelity == "truncate" {
		fmt.Fprintf(&b, "Run: %s\n", runID)
		return b.String()
	}
	budget, ok := budgets[fidelity]
	if !ok {
		budget = budgets["compact"]
	}
	recent := tail(completed, 20)
	switch fidelity {
	case "summary:low":
		fmt.Fprintf(&b, "Stages completed so far: %d.\n", len(completed))
		recent = tail(completed, 3)
	case "summary:medium":
		recent = tail(completed, 8)
	}
	if len(recent) > 0 {
		b.WriteString("Completed stages:\n")
		for _, id := range recent {
			fmt.Fprintf(&b, "- %s: %s\n", id, outcomes[id])
		}
	}
	keys := c.Keys(func(k string) bool {
		return !strings.HasPrefix(k, "internal.") && !strings.HasPrefix(k, "graph.") && k != "current_node"
	})
	if len(keys) > 0 {
		b.WriteString("Context:\n")
		limit := 200
		if fidelity == "summary:high" {
			limit = 1000
		}
		for _, k := range keys {
			v := c.GetString(k)
			if len(v) > limit {
				v = v[:limit] + "…"
			}
			fmt.Fprintf(&b, "- %s: %s\n", k, v)
			if b.Len() > budget {
				break
			}
		}
	}
	out := b.String()
	if len(out) > budget {
		out = out[:budget] + "…\n"
	}
	return out
}

func tail(s []string, n int) []string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}

// BranchResult is one parallel branch's result, as parallel.results
// holds it.
type BranchResult struct {
	// ID is the branch's first node.
	ID            string `json:"id"`
	Status        Status `json:"outcome"`
	Notes         string `json:"notes,omitempty"`
	FailureReason string `json:"failure_reason,omitempty"`
	// Score is the branch context's `score` value when it is a number
	// (nb's definition, D13), else 0.
	Score float64 `json:"score,omitempty"`
	// Nodes are the branch's nodes in the order they ran.
	Nodes []string `json:"nodes"`
	// LastResponse is the branch's last_response (200 characters).
	LastResponse string  `json:"last_response,omitempty"`
	Tokens       *Tokens `json:"tokens,omitempty"`
	DurationMS   float64 `json:"duration_ms"`
}

// RunBranch runs a parallel branch from start until it reaches stop (the
// fan-in, not run), an exit node, or a node with no edge to take, with
// the branch's own context c. Its stages report events with Branch set;
// they are not checkpointed one by one (the parallel node is, once every
// branch has ended), and the handler adds them to completed_nodes
// (AddCompleted).
func (s *Stage) RunBranch(ctx context.Context, start, stop string, c *Context) BranchResult {
	r := s.run
	began := r.now()
	res := BranchResult{ID: start, Status: Success}
	node := r.g.ByID[start]
	var incoming *pipeline.Edge
	var prev *Outcome
	visits := map[string]int{}
	var tokens Tokens
	for node != nil && node.ID != stop && !r.isExit(node) {
		if max, src := r.visitCap(node); max > 0 && visits[node.ID] >= max {
			res.Status, res.FailureReason = Fail, fmt.Sprintf("node %s would run for the %d%s time in branch %s: %s is %d; raise it with max_node_visits=N", node.ID, max+1, ordinal(max+1), start, src, max)
			break
		}
		visits[node.ID]++
		out, st, interrupted := r.runStage(ctx, node, incoming, prev, s.Node.ID, c)
		if interrupted {
			res.Status, res.FailureReason = Fail, "interrupted"
			break
		}
		res.Nodes = append(res.Nodes, node.ID)
		res.Nodes = append(res.Nodes, st.branchNodes...)
		if out.Tokens != nil {
			tokens.Add(*out.Tokens)
		}
		if out.Status != Skipped {
			c.ApplyUpdates(out.ContextUpdates)
			c.Set("outcome", string(out.Status))
			if out.PreferredLabel != "" {
				c.Set("preferred_label", out.PreferredLabel)
			}
			res.Status, res.Notes, res.FailureReason = out.Status, out.Notes, out.FailureReason
		}
		if err := writeStatusFast(filepath.Join(r.stageRoot(), node.ID), out); err != nil {
			res.Status, res.FailureReason = Fail, err.Error()
			break
		}
		if out.JumpTo != "" {
			node, incoming, prev = r.g.ByID[out.JumpTo], nil, &out
			continue
		}
		e, err := r.selectEdgeIn(node, out, c)
		if err != nil {
			res.Status, res.FailureReason = Fail, err.Error()
			break
		}
		if e == nil {
			break
		}
		node, incoming, prev = r.g.ByID[e.To], e, &out
	}
	if v, ok := c.Get("score"); ok {
		if f, ok := v.(float64); ok {
			res.Score = f
		} else if i, ok := v.(int); ok {
			res.Score = float64(i)
		}
	}
	res.LastResponse = c.GetString("last_response")
	if tokens != (Tokens{}) {
		res.Tokens = &tokens
	}
	res.DurationMS = ms(r.now().Sub(began))
	return res
}

// AddCompleted records nodes a handler ran (a parallel node's branches,
// in branch order): they follow the stage's node in completed_nodes.
func (s *Stage) AddCompleted(ids ...string) {
	s.mu.Lock()
	s.branchNodes = append(s.branchNodes, ids...)
	s.mu.Unlock()
}

// Now is the run's clock.
func (s *Stage) Now() time.Time { return s.run.now() }

// FindJoin returns the fan-in node (shape tripleoctagon or type
// parallel.fan_in) where the branches of the parallel node id converge
// (D12): reachable from every branch, nearest by the longest of the
// branches' distances, then by id.
func FindJoin(g *pipeline.Graph, id string) (string, error) {
	out := g.Outgoing(id)
	if len(out) == 0 {
		return "", fmt.Errorf("parallel node %s has no outgoing edges: give it one edge per branch", id)
	}
	far := map[string]int{}
	count := map[string]int{}
	for _, e := range out {
		dist := map[string]int{e.To: 0}
		queue := []string{e.To}
		for len(queue) > 0 {
			cur := queue[0]
			queue = queue[1:]
			n := g.ByID[cur]
			if n != nil && isFanIn(n) {
				continue // a branch ends at the first fan-in it meets
			}
			for _, next := range g.Outgoing(cur) {
				if _, seen := dist[next.To]; !seen {
					dist[next.To] = dist[cur] + 1
					queue = append(queue, next.To)
				}
			}
		}
		for nid, d := range dist {
			if n := g.ByID[nid]; n != nil && isFanIn(n) {
				count[nid]++
				far[nid] = max(far[nid], d)
			}
		}
	}
	bestID, bestD := "", -1
	for nid, c := range count {
		if c != len(out) {
			continue
		}
		if bestD < 0 || far[nid] < bestD || (far[nid] == bestD && nid < bestID) {
			bestID, bestD = nid, far[nid]
		}
	}
	if bestID == "" {
		return "", fmt.Errorf("the branches of parallel node %s do not converge on a fan-in node (shape=tripleoctagon): join them there", id)
	}
	return bestID, nil
}

func isFanIn(n *pipeline.Node) bool {
	return nodeType(n) == "parallel.fan_in" || (nodeType(n) == "" && nodeShape(n) == "tripleoctagon")
}

// writeStatusFast writes a stage's status.json through a temporary file
// and a rename, without fsync: a crash never leaves it torn, and the
// checkpoint (which is synced) is what a resume trusts.
func writeStatusFast(dir string, o Outcome) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("write %s: %w", filepath.Join(dir, StatusFile), err)
	}
	data, err := json.MarshalIndent(o, "", "  ")
	if err != nil {
		return err
	}
	path := filepath.Join(dir, StatusFile)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
