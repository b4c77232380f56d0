package engine

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nbots/nb/provider"
)

// S2: §3.3's five steps, one row each.
func TestSelectEdgeLadder(t *testing.T) {
	base := []string{"node start shape=Mdiamond", "node exit shape=Msquare", "edge start->n",
		"edge n->zeta condition=outcome=success", "edge n->yank condition=context.flag=on,weight=9"}
	unconditional := []string{"edge n->fix label=[F] Fix", "edge n->sugg", "edge n->heavy weight=5", "edge n->alpha"}
	targets := []string{"edge zeta->exit", "edge yank->exit", "edge fix->exit", "edge sugg->exit", "edge heavy->exit", "edge alpha->exit"}
	cases := []struct {
		name  string
		out   Outcome
		drop  string // an unconditional edge left out
		onlyC bool
		next  string // "" means the run ends at n
	}{
		{"condition beats label and suggestions", Outcome{Status: Success, PreferredLabel: "Fix", SuggestedNextIDs: []string{"sugg"}}, "", false, "zeta"},
		{"context condition", Outcome{Status: Success, ContextUpdates: map[string]any{"flag": "on"}}, "", false, "yank"},
		{"preferred label normalised", Outcome{Status: PartialSuccess, PreferredLabel: "  FIX "}, "", false, "fix"},
		{"suggested ids in order", Outcome{Status: PartialSuccess, PreferredLabel: "x", SuggestedNextIDs: []string{"ghost", "sugg"}}, "", false, "sugg"},
		{"weight", Outcome{Status: PartialSuccess}, "", false, "heavy"},
		{"lexical", Outcome{Status: PartialSuccess}, "heavy", false, "alpha"},
		{"only false conditions: ends short of exit (D15)", Outcome{Status: PartialSuccess}, "", true, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			stmts := slices.Clone(base)
			if !c.onlyC {
				for _, u := range unconditional {
					if c.drop == "" || !strings.Contains(u, "->"+c.drop) {
						stmts = append(stmts, u)
					}
				}
			}
			stmts = append(stmts, targets...)
			g, src := graphOf(t, stmts...)
			res, rec, _ := runWith(t, g, src, newScript().on("n", out(c.out)))
			if c.next == "" {
				must(t, res, Success, "start,n")
				if res.ReachedExit {
					t.Error("ReachedExit set")
				}
				if len(rec.kinds(PipelineWarning)) != 1 {
					t.Error("no PipelineWarning for a run ended short of the exit (D15)")
				}
				return
			}
			must(t, res, Success, "start,n,"+c.next+",exit")
		})
	}
}

func TestNormalizeLabel(t *testing.T) {
	for in, want := range map[string]string{"[Y] Yes, deploy": "yes, deploy", "Y) Yes": "yes", "Y - Yes": "yes", "  FIX ": "fix", "Fix": "fix", "[F] Fix": "fix"} {
		if got := NormalizeLabel(in); got != want {
			t.Errorf("NormalizeLabel(%q) = %q, want %q", in, got, want)
		}
	}
}

// S6: retries, backoff, presets (D7), D2.
func TestRetries(t *testing.T) {
	linear := func(extra ...string) []string {
		return append([]string{"node start shape=Mdiamond", "node exit shape=Msquare", "edge start->w", "edge w->exit condition=outcome!=fail"}, extra...)
	}
	t.Run("retry then success", func(t *testing.T) {
		g, src := graphOf(t, linear("node w max_retries=2")...)
		sc := newScript().on("w", st(Retry), st(Retry), ok())
		res, rec, cfg := runWith(t, g, src, sc)
		must(t, res, Success, "start,w,exit")
		if sc.callCount("w") != 3 {
			t.Errorf("%d calls", sc.callCount("w"))
		}
		r := rec.kinds(StageRetrying)
		if len(r) != 2 || r[0].Attempt != 1 || r[0].Delay < 100 || r[0].Delay > 300 || r[1].Delay < 200 || r[1].Delay > 600 {
			t.Errorf("StageRetrying events %+v", r)
		}
		if f := rec.kinds(StageFailed); len(f) != 2 || !f[0].WillRetry || !f[1].WillRetry {
			t.Errorf("StageFailed events %+v, want two with will_retry", f)
		}
		cp, err := LoadCheckpoint(cfg.LogsRoot)
		if err != nil {
			t.Fatal(err)
		}
		if cp.NodeRetries["w"] != 2 {
			t.Errorf("node_retries %v", cp.NodeRetries)
		}
	})
	t.Run("exhausted", func(t *testing.T) {
		g, src := graphOf(t, linear("node w max_retries=2")...)
		res, _, _ := runWith(t, g, src, newScript().on("w", st(Retry), st(Retry), st(Retry)))
		must(t, res, Fail, "start,w")
		if !strings.Contains(res.FailureReason, "max retries exceeded") {
			t.Error(res.FailureReason)
		}
	})
	t.Run("exhausted allow_partial", func(t *testing.T) {
		g, src := graphOf(t, linear("node w max_retries=2,allow_partial=true")...)
		res, _, cfg := runWith(t, g, src, newScript().on("w", st(Retry), st(Retry), st(Retry)))
		must(t, res, Success, "start,w,exit")
		o, _ := ReadStatus(filepath.Join(cfg.LogsRoot, "w"))
		if o.Status != PartialSuccess || o.Notes != "retries exhausted, partial accepted" {
			t.Errorf("status.json %+v", o)
		}
	})
	t.Run("FAIL is not retried (D2)", func(t *testing.T) {
		g, src := graphOf(t, linear("node w max_retries=2")...)
		sc := newScript().on("w", fail("no"))
		res, _, _ := runWith(t, g, src, sc)
		must(t, res, Fail, "start,w")
		if sc.callCount("w") != 1 {
			t.Errorf("%d calls", sc.callCount("w"))
		}
	})
	t.Run("default_max_retry alias and node max_retries=0 wins", func(t *testing.T) {
		g, src := graphOf(t, "graph default_max_retry=1", "node start shape=Mdiamond", "node exit shape=Msquare", "node z max_retries=0", "edge start->w->z->exit")
		sc := newScript().on("w", st(Retry), ok()).on("z", st(Retry), ok())
		runWith(t, g, src, sc)
		if sc.callCount("w") != 2 || sc.callCount("z") != 1 {
			t.Errorf("w ran %d times (want 2), z %d (want 1)", sc.callCount("w"), sc.callCount("z"))
		}
	})
	t.Run("401 not retried, 429 retried", func(t *testing.T) {
		g, src := graphOf(t, linear("node w max_retries=3")...)
		sc := newScript().on("w", fails(&provider.Error{Provider: "openai", Status: 401, Message: "bad key"}))
		res, _, _ := runWith(t, g, src, sc)
		must(t, res, Fail, "start,w")
		if sc.callCount("w") != 1 {
			t.Errorf("401: %d calls", sc.callCount("w"))
		}
		sc = newScript().on("w", fails(&provider.Error{Provider: "openai", Status: 429}), ok())
		res, _, _ = runWith(t, g, src, sc)
		must(t, res, Success, "start,w,exit")
		if sc.callCount("w") != 2 {
			t.Errorf("429: %d calls", sc.callCount("w"))
		}
	})
	t.Run("retry_policy preset (D7)", func(t *testing.T) {
		g, src := graphOf(t, linear("node w retry_policy=linear")...)
		sc := newScript().on("w", st(Retry), st(Retry), st(Retry), ok())
		res, rec, _ := runWith(t, g, src, sc)
		must(t, res, Fail, "start,w")
		if sc.callCount("w") != 3 {
			t.Errorf("linear: %d executions, want 3 (attempts are total executions)", sc.callCount("w"))
		}
		for _, e := range rec.kinds(StageRetrying) {
			if e.Delay < 250 || e.Delay > 750 {
				t.Errorf("linear delay %v ms", e.Delay)
			}
		}
	})
}

func TestBackoff(t *testing.T) {
	b := DefaultBackoff
	b.Jitter = false
	for i, want := range []time.Duration{200, 400, 800, 1600, 3200} {
		if got := b.Delay(i+1, nil); got != want*time.Millisecond {
			t.Errorf("attempt %d: %v", i+1, got)
		}
	}
	if got := b.Delay(30, nil); got != 60*time.Second {
		t.Errorf("cap: %v", got)
	}
	b.Jitter = true
	if got := b.Delay(30, func() float64 { return 0.99 }); got != 60*time.Second {
		t.Errorf("jitter over the cap: %v (D20 caps it)", got)
	}
	if got := Presets["patient"].Backoff; got.Initial != 2*time.Second || got.Factor != 3 || Presets["patient"].MaxAttempts != 3 {
		t.Errorf("patient %+v", got)
	}
}

// S5: goal gates (§3.4, D3, D14).
func TestGoalGates(t *testing.T) {
	base := []string{"node start shape=Mdiamond", "node exit shape=Msquare", "edge start->plan->impl->review->exit"}
	t.Run("jump at the exit", func(t *testing.T) {
		g, src := graphOf(t, append(base, "node impl goal_gate=true,retry_target=plan")...)
		res, _, cfg := runWith(t, g, src, newScript().on("impl", fail("x"), ok()))
		// impl FAILs; its only edge is unconditional, so review runs (D1)
		must(t, res, Success, "start,plan,impl,review,plan,impl,review,exit")
		cp, _ := LoadCheckpoint(cfg.LogsRoot)
		if cp.CurrentNode != "exit" {
			t.Errorf("current_node %q, want exit (D3)", cp.CurrentNode)
		}
	})
	t.Run("graph retry_target", func(t *testing.T) {
		g, src := graphOf(t, append(base, "node impl goal_gate=true", "graph retry_target=plan")...)
		res, _, _ := runWith(t, g, src, newScript().on("impl", fail("x"), ok()))
		must(t, res, Success, "start,plan,impl,review,plan,impl,review,exit")
	})
	t.Run("no target", func(t *testing.T) {
		g, src := graphOf(t, append(base, "node impl goal_gate=true")...)
		res, rec, _ := runWith(t, g, src, newScript().on("impl", fail("x")))
		must(t, res, Fail, "start,plan,impl,review")
		if !strings.Contains(res.FailureReason, "Goal gate unsatisfied and no retry target") || len(rec.kinds(PipelineFailed)) != 1 {
			t.Errorf("%q", res.FailureReason)
		}
	})
	t.Run("partial passes", func(t *testing.T) {
		g, src := graphOf(t, append(base, "node impl goal_gate=true")...)
		res, _, _ := runWith(t, g, src, newScript().on("impl", st(PartialSuccess)))
		must(t, res, Success, "start,plan,impl,review,exit")
	})
	t.Run("two failed gates: the first completed's target (D14)", func(t *testing.T) {
		g, src := graphOf(t, append(base, "node plan goal_gate=true,retry_target=start2", "node impl goal_gate=true,retry_target=review", "node start2", "edge start2->exit")...)
		res, _, _ := runWith(t, g, src, newScript().on("plan", fail("p"), ok()).on("impl", fail("i")))
		// plan completed first: its target start2 runs, then the exit
		// finds impl still failed and jumps to review.
		if !strings.HasPrefix(path(res), "start,plan,impl,review,start2") {
			t.Errorf("path %s", path(res))
		}
	})
	t.Run("always failing gate is stopped by the visit cap", func(t *testing.T) {
		g, src := graphOf(t, append(base, "node impl goal_gate=true,retry_target=plan", "graph max_node_visits=3")...)
		sc := newScript()
		for range 10 {
			sc.on("impl", fail("never"))
		}
		res, _, _ := runWith(t, g, src, sc)
		if res.Status != Fail || !strings.Contains(res.FailureReason, "max_node_visits") || !strings.Contains(res.FailureReason, "plan") {
			t.Errorf("%s: %s", res.Status, res.FailureReason)
		}
	})
}

// D1: a FAIL follows select_edge; failure routing (§3.7) only when no
// edge can be taken.
func TestFailureRouting(t *testing.T) {
	base := []string{"node start shape=Mdiamond", "node exit shape=Msquare", "edge start->w"}
	t.Run("fail edge", func(t *testing.T) {
		g, src := graphOf(t, append(base, "edge w->exit condition=outcome=success", "edge w->fix condition=outcome=fail", "edge fix->exit")...)
		res, _, _ := runWith(t, g, src, newScript().on("w", fail("x")))
		must(t, res, Success, "start,w,fix,exit")
	})
	t.Run("retry_target then fallback", func(t *testing.T) {
		g, src := graphOf(t, append(base, "edge w->exit condition=outcome=success", "node w retry_target=r1", "edge r1->w", "node w2 fallback_retry_target=r2")...)
		res, _, _ := runWith(t, g, src, newScript().on("w", fail("x"), ok()))
		must(t, res, Success, "start,w,r1,w,exit")
	})
	t.Run("terminate with the stage's reason", func(t *testing.T) {
		g, src := graphOf(t, append(base, "edge w->exit condition=outcome=success")...)
		res, _, _ := runWith(t, g, src, newScript().on("w", fail("disk full")))
		must(t, res, Fail, "start,w")
		if !strings.Contains(res.FailureReason, "disk full") {
			t.Error(res.FailureReason)
		}
	})
	t.Run("a panic fails the stage", func(t *testing.T) {
		g, src := graphOf(t, append(base, "edge w->exit condition=outcome=success")...)
		res, _, _ := runWith(t, g, src, newScript().on("w", play{panic: true}))
		must(t, res, Fail, "start,w")
		if !strings.Contains(res.FailureReason, "panicked") {
			t.Error(res.FailureReason)
		}
	})
}

// Caps and budgets end the run naming the cap, the node and the fix.
func TestCaps(t *testing.T) {
	loop := []string{"node start shape=Mdiamond", "node exit shape=Msquare", "edge start->a->b", "edge b->a condition=outcome=success", "edge b->exit condition=outcome=fail"}
	t.Run("default visit cap 20", func(t *testing.T) {
		g, src := graphOf(t, loop...)
		res, _, _ := runWith(t, g, src, newScript())
		if res.Status != Fail || !strings.Contains(res.FailureReason, "node a would run for the 21st time") || !strings.Contains(res.FailureReason, "max_node_visits") {
			t.Errorf("%s", res.FailureReason)
		}
	})
	t.Run("node cap", func(t *testing.T) {
		g, src := graphOf(t, append(loop, "node b max_node_visits=2")...)
		res, _, _ := runWith(t, g, src, newScript())
		if !strings.Contains(res.FailureReason, "node b would run for the 3rd time: the node's max_node_visits is 2") {
			t.Errorf("%s", res.FailureReason)
		}
	})
	t.Run("max steps", func(t *testing.T) {
		g, src := graphOf(t, loop...)
		res, _, _ := runWith(t, g, src, newScript(), func(c *Config) { c.MaxSteps, c.Advice.MaxSteps = 5, "--max-steps N" }) // as nb pipeline words it
		if !strings.Contains(res.FailureReason, "max_steps is 5") || !strings.Contains(res.FailureReason, "--max-steps") || len(res.CompletedNodes) != 5 {
			t.Errorf("%s %v", res.FailureReason, res.CompletedNodes)
		}
	})
	t.Run("graph max_tokens", func(t *testing.T) {
		g, src := graphOf(t, append(loop, "graph max_tokens=250")...)
		sc := newScript()
		for range 10 {
			sc.on("a", withTokens(ok(), 60, 40))
		}
		res, rec, cfg := runWith(t, g, src, sc)
		if !strings.Contains(res.FailureReason, "token budget exceeded after node a") || res.Tokens.Total() != 300 {
			t.Errorf("%s (%d tokens)", res.FailureReason, res.Tokens.Total())
		}
		o, _ := ReadStatus(filepath.Join(cfg.LogsRoot, "a"))
		if o.Tokens == nil || o.Tokens.Input != 60 {
			t.Errorf("status.json tokens %+v", o.Tokens)
		}
		m, _ := LoadManifest(cfg.LogsRoot)
		if m.Tokens.Total() != 300 || m.Status != "fail" {
			t.Errorf("manifest %+v", m)
		}
		f := rec.kinds(PipelineFailed)
		if len(f) != 1 || f[0].Tokens == nil || f[0].Tokens.Total() != 300 {
			t.Errorf("final event %+v", f)
		}
	})
}

// S1's checks that do not need the handlers: the run folder, the
// checkpoint's keys, the events.
func TestRunFolderAndEvents(t *testing.T) {
	g, src := graphOf(t, "graph goal=hello", "node start shape=Mdiamond", "node done shape=Msquare", "edge start->plan->done")
	res, rec, cfg := runWith(t, g, src, newScript())
	must(t, res, Success, "start,plan,done")
	data, err := os.ReadFile(filepath.Join(cfg.LogsRoot, CheckpointFile))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"timestamp", "current_node", "completed_nodes", "node_retries", "context", "logs"} {
		if _, ok := m[k]; !ok {
			t.Errorf("checkpoint lacks %s", k)
		}
	}
	if m["current_node"] != "done" {
		t.Errorf("current_node %v", m["current_node"])
	}
	if ctx := m["context"].(map[string]any); ctx["graph.goal"] != "hello" || ctx["outcome"] != "success" {
		t.Errorf("context %v", ctx)
	}
	man, err := LoadManifest(cfg.LogsRoot)
	if err != nil || man.Goal != "hello" || man.Name != "G" || man.StartTime.IsZero() {
		t.Errorf("manifest %+v %v", man, err)
	}
	if _, err := os.Stat(filepath.Join(cfg.LogsRoot, "artifacts")); err != nil {
		t.Error(err)
	}
	for _, k := range []Kind{StageStarted, StageCompleted, CheckpointSaved} {
		if n := len(rec.kinds(k)); n != 3 {
			t.Errorf("%d %s events, want 3", n, k)
		}
	}
	if len(rec.kinds(PipelineStarted)) != 1 || len(rec.kinds(PipelineCompleted)) != 1 {
		t.Error("pipeline events")
	}
	// JSON lines carry the spec's names.
	var b strings.Builder
	jl := NewJSONLines(&b)
	for _, e := range rec.events {
		jl.OnEvent(e)
	}
	first := strings.SplitN(b.String(), "\n", 2)[0]
	if !strings.Contains(first, `"event":"PipelineStarted"`) {
		t.Errorf("first line %s", first)
	}
}

// A resume runs no finished node again, and refuses a foreign or
// damaged checkpoint.
func TestResume(t *testing.T) {
	g, src := graphOf(t, "node start shape=Mdiamond", "node exit shape=Msquare", "edge start->a->b->c->exit")
	sc := newScript().on("a", out(Outcome{Status: Success, ContextUpdates: map[string]any{"k": "v"}})).on("b", play{block: true})
	reg := NewRegistry()
	reg.Default = sc
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	cfg := Config{Graph: g, Source: src, File: "f.dot", LogsRoot: dir, Handlers: reg}
	go func() {
		for sc.callCount("b") == 0 {
			time.Sleep(time.Millisecond)
		}
		cancel()
	}()
	res, err := Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Interrupted || path(res) != "start,a" {
		t.Fatalf("%+v", res)
	}
	if _, err := Run(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "resume") {
		t.Errorf("a second run in the same folder: %v", err)
	}
	res, err = Resume(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	must(t, res, Success, "start,a,b,c,exit")
	if sc.callCount("a") != 1 || sc.callCount("start") != 1 {
		t.Errorf("calls %v", sc.calls)
	}
	cp, _ := LoadCheckpoint(dir)
	if cp.Context["k"] != "v" {
		t.Errorf("context_updates lost: %v", cp.Context)
	}
	res, err = Resume(context.Background(), cfg)
	if err != nil || !res.AlreadyDone {
		t.Errorf("resume of a finished run: %+v %v", res, err)
	}
	other := cfg
	other.Source = append([]byte("x"), src...)
	if _, err := Resume(context.Background(), other); err == nil || !strings.Contains(err.Error(), "another graph") {
		t.Errorf("foreign graph: %v", err)
	}
	os.WriteFile(filepath.Join(dir, CheckpointFile), []byte(`{"current_node": "a", `), 0o644)
	if _, err := Resume(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "does not parse") {
		t.Errorf("corrupt checkpoint: %v", err)
	}
}

// §5.4 fidelity and thread precedence, and §5.3's degraded hop after a
// resume that followed a `full` node.
func TestFidelityAndThreads(t *testing.T) {
	g, src := graphOf(t, "graph default_fidelity=truncate", "node start shape=Mdiamond", "node exit shape=Msquare",
		"edge start->a", "edge a->b fidelity=full,thread_id=t1", "edge b->c", "node c fidelity=summary:low,thread_id=own", "edge c->d", "edge d->exit")
	g.ByID["d"].SubgraphClass = "loop-a"
	sc := newScript()
	runWith(t, g, src, sc)
	want := map[string][2]string{"a": {"truncate", "start"}, "b": {"full", "t1"}, "c": {"summary:low", "own"}, "d": {"truncate", "loop-a"}}
	for id, w := range want {
		s := sc.seen[id][0]
		if s.Fidelity != w[0] || s.Thread != w[1] {
			t.Errorf("%s: fidelity %s thread %s, want %v", id, s.Fidelity, s.Thread, w)
		}
	}
	// resume after b (full): c runs at summary:high once.
	sc = newScript().on("c", play{block: true})
	reg := NewRegistry()
	reg.Default = sc
	cfg := Config{Graph: g, Source: src, File: "f.dot", LogsRoot: t.TempDir(), Handlers: reg}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for sc.callCount("c") == 0 {
			time.Sleep(time.Millisecond)
		}
		cancel()
	}()
	Run(ctx, cfg)
	sc2 := newScript()
	reg.Default = sc2
	if _, err := Resume(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	if f := sc2.seen["c"][0].Fidelity; f != "summary:high" {
		t.Errorf("first node after a resume that followed full: %s", f)
	}
	if f := sc2.seen["d"][0].Fidelity; f != "truncate" {
		t.Errorf("second node: %s", f)
	}
}

func TestLoopRestart(t *testing.T) {
	g, src := graphOf(t, "node start shape=Mdiamond", "node exit shape=Msquare", "edge start->a->b", "edge b->a loop_restart=true,condition=outcome=fail", "edge b->exit condition=outcome=success")
	sc := newScript().on("a", out(Outcome{Status: Success, ContextUpdates: map[string]any{"mark": "1"}})).on("b", fail("again"), ok())
	res, _, cfg := runWith(t, g, src, sc)
	must(t, res, Success, "start,a,b,a,b,exit")
	if _, err := os.Stat(filepath.Join(cfg.LogsRoot, "restart-1", "a", StatusFile)); err != nil {
		t.Error(err)
	}
	if sc.seen["a"][1].Context.GetString("mark") != "" {
		t.Error("the context survived loop_restart")
	}
}

// An unknown retry_policy fails the stage naming the presets (D7).
func TestUnknownRetryPolicy(t *testing.T) {
	g, src := graphOf(t, "node start shape=Mdiamond", "node exit shape=Msquare", "node w retry_policy=forever", "edge start->w", "edge w->exit condition=outcome=success")
	res, _, _ := runWith(t, g, src, newScript())
	must(t, res, Fail, "start,w")
	if !strings.Contains(res.FailureReason, `retry_policy "forever" is not a preset: use one of none, standard, aggressive, linear, patient`) {
		t.Error(res.FailureReason)
	}
}
