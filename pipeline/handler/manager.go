package handler

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/nbots/nb/pipeline"
	"github.com/nbots/nb/pipeline/condition"
	"github.com/nbots/nb/pipeline/engine"
)

// ManagerLoop is §4.11's handler: it runs the child pipeline of the
// graph's stack.child_dotfile (relative to the flow's folder) in the
// stage folder's child/ (unless stack.child_autostart=false, when it
// watches the run folder named by the node's stack.child_logs), and
// each cycle observes it, steers it, and checks whether it ended or
// manager.stop_condition holds, then waits manager.poll_interval.
// Observing sets, in the context it returns, stack.child.status
// (running, completed, failed), stack.child.outcome, stack.child.current_node
// and stack.child.completed (D20: the keys are stack.child.*, which
// context.stack.child.* conditions find too). Steering writes the node's
// manager.steer text to the child's current stage folder as steer.md.
type ManagerLoop struct {
	// Handlers run the child's nodes (the parent's registry).
	Handlers *engine.Registry
}

// Execute supervises the child.
func (m *ManagerLoop) Execute(ctx context.Context, s *engine.Stage) (engine.Outcome, error) {
	n := s.Node
	poll := n.Duration("manager.poll_interval", 45*time.Second)
	maxCycles := n.Int("manager.max_cycles", 1000)
	actions := strings.Split(n.Str("manager.actions", "observe,wait"), ",")
	for i := range actions {
		actions[i] = strings.TrimSpace(actions[i])
	}
	var stop condition.Expr
	if src := n.Str("manager.stop_condition", ""); src != "" {
		x, err := condition.Parse(src)
		if err != nil {
			return engine.Failf("manager.stop_condition %q: %v", src, err), nil
		}
		stop = x
	}
	childDir := n.Str("stack.child_logs", "")
	childCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var done chan struct{}
	if n.Bool("stack.child_autostart", true) {
		file := s.Graph.Str("stack.child_dotfile", "")
		if file == "" {
			return engine.Failf("manager node %s: the graph has no stack.child_dotfile", n.ID), nil
		}
		if !filepath.IsAbs(file) && s.Graph.File != "" {
			file = filepath.Join(filepath.Dir(s.Graph.File), file)
		}
		src, err := os.ReadFile(file)
		if err != nil {
			return engine.Failf("manager node %s: read the child pipeline: %v", n.ID, err), nil
		}
		g, diags, err := pipeline.LoadWith(file, src, pipeline.LoadOptions{Vars: s.Vars})
		if err != nil || pipeline.HasErrors(diags) {
			return engine.Failf("manager node %s: the child pipeline %s does not check (nb pipeline check %s): %v", n.ID, file, file, err), nil
		}
		childDir = filepath.Join(s.Dir, "child")
		os.RemoveAll(childDir) // a revisit starts its child afresh
		cfg := engine.Config{Graph: g, Source: src, File: file, LogsRoot: childDir, Handlers: m.Handlers, Vars: s.Vars,
			Observer: engine.ObserverFunc(func(ev engine.Event) {
				if ev.Kind != engine.PipelineStarted { // the parent's own
					ev.Branch = n.ID
					s.Emit(ev)
				}
			})}
		done = make(chan struct{})
		go func() {
			defer close(done)
			engine.Run(childCtx, cfg) //nolint:errcheck // observed through its checkpoint
		}()
		defer func() { cancel(); <-done }()
	}
	if childDir == "" {
		return engine.Failf("manager node %s: stack.child_autostart=false needs stack.child_logs, the child run's folder", n.ID), nil
	}
	c := s.Context.Clone()
	updates := map[string]any{}
	observe := func() {
		cp, err := engine.LoadCheckpoint(childDir)
		st := map[string]any{"stack.child.status": "running"}
		if err == nil {
			st["stack.child.current_node"] = cp.CurrentNode
			st["stack.child.completed"] = len(cp.CompletedNodes)
			if cp.Done {
				st["stack.child.outcome"] = string(cp.Status)
				st["stack.child.status"] = map[bool]string{true: "completed", false: "failed"}[cp.Status == engine.Success]
			}
		}
		for k, v := range st {
			updates[k] = v
		}
		c.ApplyUpdates(st)
	}
	for cycle := 1; cycle <= maxCycles; cycle++ {
		if slices.Contains(actions, "observe") {
			observe()
		}
		if slices.Contains(actions, "steer") {
			if text := n.Str("manager.steer", ""); text != "" {
				if cur := c.GetString("stack.child.current_node"); cur != "" {
					_ = os.WriteFile(filepath.Join(childDir, cur, "steer.md"), []byte(text), 0o644)
				}
			}
		}
		childEnded := false
		if done != nil {
			select {
			case <-done:
				childEnded = true
			default:
			}
		}
		switch c.GetString("stack.child.status") {
		case "completed":
			return engine.Outcome{Status: engine.Success, Notes: "Child completed", ContextUpdates: updates}, nil
		case "failed":
			return engine.Outcome{Status: engine.Fail, FailureReason: "Child failed", ContextUpdates: updates}, nil
		}
		if childEnded && slices.Contains(actions, "observe") {
			return engine.Outcome{Status: engine.Fail, FailureReason: "Child failed: it ended without a final checkpoint", ContextUpdates: updates}, nil
		}
		if len(stop.Clauses) > 0 && stop.Eval("", "", c.Lookup) {
			return engine.Outcome{Status: engine.Success, Notes: "Stop condition satisfied", ContextUpdates: updates}, nil
		}
		if slices.Contains(actions, "wait") {
			t := time.NewTimer(poll)
			select {
			case <-ctx.Done():
				t.Stop()
				return engine.Outcome{}, ctx.Err()
			case <-done:
				t.Stop()
			case <-t.C:
			}
		}
	}
	return engine.Outcome{Status: engine.Fail, FailureReason: "Max cycles exceeded", ContextUpdates: updates}, nil
}
