package handler

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/nbots/nb/pipeline/engine"
)

// Parallel is §4.8's handler with nb's choice D12: each outgoing edge is
// a branch that runs, on its own clone of the context, up to the fan-in
// node where the branches converge; at most max_parallel (default 4) run
// at once. The outcome follows join_policy (wait_all: SUCCESS when no
// branch failed, else PARTIAL_SUCCESS; first_success: SUCCESS when one
// branch succeeded, the others are cancelled, else FAIL), carries the
// branches' results as the context update parallel.results (branch
// contexts are discarded, §3.8), and sends traversal to the fan-in.
func Parallel(ctx context.Context, s *engine.Stage) (engine.Outcome, error) {
	edges := s.Graph.Outgoing(s.Node.ID)
	join, err := engine.FindJoin(s.Graph, s.Node.ID)
	if err != nil {
		return engine.Failf("%v", err), nil
	}
	policy := s.Node.Str("join_policy", "wait_all")
	if policy != "wait_all" && policy != "first_success" {
		return engine.Failf("join_policy %q of node %s: use wait_all or first_success", policy, s.Node.ID), nil
	}
	maxPar := s.Node.Int("max_parallel", 4)
	if maxPar < 1 {
		maxPar = 1
	}
	began := s.Now()
	s.Emit(engine.Event{Kind: engine.ParallelStarted, Name: s.Node.ID, BranchCount: len(edges)})
	results := make([]engine.BranchResult, len(edges))
	bctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sem := make(chan struct{}, maxPar)
	var wg sync.WaitGroup
	for i, e := range edges {
		select {
		case sem <- struct{}{}:
		case <-bctx.Done():
			results[i] = engine.BranchResult{ID: e.To, Status: engine.Fail, FailureReason: "cancelled before it started"}
			continue
		}
		wg.Add(1)
		go func(i int, start string) {
			defer wg.Done()
			defer func() { <-sem }()
			s.Emit(engine.Event{Kind: engine.ParallelBranchStarted, Name: s.Node.ID, Branch: start, Index: i})
			r := s.RunBranch(bctx, start, join, s.Context.Clone())
			results[i] = r
			ok := r.Status.OK()
			s.Emit(engine.Event{Kind: engine.ParallelBranchCompleted, Name: s.Node.ID, Branch: start, Index: i, Duration: r.DurationMS, Success: &ok, Status: r.Status})
			if policy == "first_success" && r.Status == engine.Success {
				cancel()
			}
		}(i, e.To)
	}
	wg.Wait()
	if ctx.Err() != nil {
		return engine.Outcome{}, ctx.Err()
	}
	var succeeded, failed int
	var tokens engine.Tokens
	for _, r := range results {
		s.AddCompleted(r.Nodes...)
		switch r.Status {
		case engine.Success:
			succeeded++
		case engine.Fail:
			failed++
		}
		if r.Tokens != nil {
			tokens.Add(*r.Tokens)
		}
	}
	d := s.Now().Sub(began)
	s.Emit(engine.Event{Kind: engine.ParallelCompleted, Name: s.Node.ID, Duration: float64(d.Microseconds()) / 1000, SuccessCount: succeeded, FailureCount: failed})
	o := engine.Outcome{Status: engine.Success, JumpTo: join,
		Notes:          fmt.Sprintf("%d branches: %d succeeded, %d failed", len(results), succeeded, failed),
		ContextUpdates: map[string]any{"parallel.results": jsonValue(results)}}
	switch policy {
	case "wait_all":
		if failed > 0 {
			o.Status = engine.PartialSuccess
		}
	case "first_success":
		if succeeded == 0 {
			o.Status, o.FailureReason = engine.Fail, "no branch succeeded (join_policy=first_success)"
		}
	}
	if tokens != (engine.Tokens{}) {
		o.Tokens = &tokens
	}
	return o, nil
}

// jsonValue is v as the JSON values a checkpoint holds.
func jsonValue(v any) any {
	data, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	var out any
	_ = json.Unmarshal(data, &out)
	return out
}

// FanIn is §4.9's handler: it picks the best of parallel.results. With a
// prompt and a backend, the model ranks the candidates (its outcome's
// preferred_label or first suggested id names the best); otherwise, or
// when the model names none, by status (SUCCESS, PARTIAL_SUCCESS, RETRY,
// FAIL), then higher score, then id. It fails when there are no results
// or when every candidate failed (D13).
type FanIn struct {
	Backend Backend
}

var rank = map[engine.Status]int{engine.Success: 0, engine.PartialSuccess: 1, engine.Retry: 2, engine.Fail: 3}

// Execute selects the best candidate.
func (f *FanIn) Execute(ctx context.Context, s *engine.Stage) (engine.Outcome, error) {
	raw, _ := s.Context.Get("parallel.results")
	var results []engine.BranchResult
	if raw != nil {
		data, _ := json.Marshal(raw)
		if err := json.Unmarshal(data, &results); err != nil {
			return engine.Failf("parallel.results cannot be read: %v", err), nil
		}
	}
	if len(results) == 0 {
		return engine.Failf("No parallel results to evaluate"), nil
	}
	allFailed := true
	for _, r := range results {
		if r.Status != engine.Fail {
			allFailed = false
		}
	}
	if allFailed {
		return engine.Failf("every parallel branch failed (%d candidates)", len(results)), nil
	}
	sorted := append([]engine.BranchResult(nil), results...)
	sort.SliceStable(sorted, func(i, j int) bool {
		a, b := sorted[i], sorted[j]
		if rank[a.Status] != rank[b.Status] {
			return rank[a.Status] < rank[b.Status]
		}
		if a.Score != b.Score {
			return a.Score > b.Score
		}
		return a.ID < b.ID
	})
	best := sorted[0]
	var tokens *engine.Tokens
	if s.Node.Has("prompt") && f.Backend != nil {
		var b strings.Builder
		b.WriteString(ExpandVars(s.Node.Str("prompt", ""), s.Graph.Goal(), s.Vars))
		b.WriteString("\n\nCandidates (report the best one's id as preferred_label with the outcome tool):\n")
		for _, r := range results {
			fmt.Fprintf(&b, "- id %s: %s; %s %s\n", r.ID, r.Status, r.Notes, truncate(r.LastResponse, 500))
		}
		reply, err := f.Backend.Run(ctx, s, b.String())
		if err != nil {
			return engine.Outcome{}, err
		}
		if reply.Tokens != (engine.Tokens{}) {
			tokens = &reply.Tokens
		}
		var pick []string
		if reply.Outcome != nil {
			pick = append([]string{reply.Outcome.PreferredLabel}, reply.Outcome.SuggestedNextIDs...)
		}
		pick = append(pick, strings.TrimSpace(reply.Text))
		for _, p := range pick {
			for _, r := range results {
				if p != "" && p == r.ID {
					best = r
					goto chosen
				}
			}
		}
	chosen:
	}
	return engine.Outcome{Status: engine.Success, Notes: "Selected best candidate: " + best.ID, Tokens: tokens,
		ContextUpdates: map[string]any{"parallel.fan_in.best_id": best.ID, "parallel.fan_in.best_outcome": string(best.Status)}}, nil
}
