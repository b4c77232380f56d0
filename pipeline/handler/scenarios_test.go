package handler

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nbots/nb/pipeline/engine"
)

// smoke is §11.13's pipeline, verbatim.
const smoke = `digraph test_pipeline {
    graph [goal="Create a hello world Python script"]

    start       [shape=Mdiamond]
    plan        [shape=box, prompt="Plan how to create a hello world script for: $goal"]
    implement   [shape=box, prompt="Write the code based on the plan", goal_gate=true]
    review      [shape=box, prompt="Review the code for correctness"]
    done        [shape=Msquare]

    start -> plan
    plan -> implement
    implement -> review [condition="outcome=success"]
    implement -> plan   [condition="outcome=fail", label="Retry"]
    review -> done      [condition="outcome=success"]
    review -> implement [condition="outcome=fail", label="Fix"]
}
`

// S1: the smoke test, against the scripted fake (text answers) and with
// no backend.
func TestS1SmokeTest(t *testing.T) {
	g := load(t, smoke)
	if g.Goal() != "Create a hello world Python script" || len(g.Nodes) != 5 || len(g.Edges) != 6 {
		t.Fatalf("goal %q, %d nodes, %d edges", g.Goal(), len(g.Nodes), len(g.Edges))
	}
	fake := newFake(map[string][]string{"Plan how": {"text:1. write print"}, "Write the code": {"text:print('hello')"}, "Review": {"text:looks right"}})
	r := runFlow(t, smoke, Options{Backend: backendFor(t, fake)})
	r.want(t, engine.Success, "start,plan,implement,review,done")
	for _, id := range []string{"plan", "implement", "review"} {
		for _, f := range []string{"prompt.md", "response.md", "status.json"} {
			if _, err := os.Stat(filepath.Join(r.dir, id, f)); err != nil {
				t.Error(err)
			}
		}
		o, err := engine.ReadStatus(filepath.Join(r.dir, id))
		if err != nil || o.Status != engine.Success {
			t.Errorf("%s status.json: %+v %v", id, o, err)
		}
		if o.Tokens == nil || o.Tokens.Input == 0 {
			t.Errorf("%s status.json has no tokens: %+v", id, o.Tokens)
		}
	}
	if p := read(t, filepath.Join(r.dir, "plan", "prompt.md")); !strings.Contains(p, "for: Create a hello world Python script") {
		t.Errorf("plan/prompt.md: %s", p)
	}
	if got := read(t, filepath.Join(r.dir, "implement", "response.md")); got != "print('hello')" {
		t.Errorf("implement/response.md %q", got)
	}
	raw := map[string]any{}
	json.Unmarshal([]byte(read(t, filepath.Join(r.dir, "checkpoint.json"))), &raw)
	for _, k := range []string{"timestamp", "current_node", "completed_nodes", "node_retries", "context", "logs"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("checkpoint lacks %s", k)
		}
	}
	if raw["current_node"] != "done" {
		t.Errorf("current_node %v (D3)", raw["current_node"])
	}
	m, err := engine.LoadManifest(r.dir)
	if err != nil || m.Tokens.Total() == 0 {
		t.Errorf("manifest %+v %v", m, err)
	}
	if len(r.ev.of(engine.PipelineStarted)) != 1 || len(r.ev.of(engine.PipelineCompleted)) != 1 {
		t.Error("pipeline events")
	}
	for _, k := range []engine.Kind{engine.StageStarted, engine.StageCompleted, engine.CheckpointSaved} {
		var names []string
		for _, e := range r.ev.of(k) {
			names = append(names, e.Name+e.NodeID)
		}
		if strings.Join(names, ",") != "start,plan,implement,review,done" {
			t.Errorf("%s events for %v", k, names)
		}
	}
	if c := r.ev.of(engine.PipelineCompleted)[0]; c.Tokens == nil || c.Tokens.Total() != m.Tokens.Total() {
		t.Errorf("final event tokens %+v, manifest %+v", c.Tokens, m.Tokens)
	}

	sim := runFlow(t, smoke, Options{})
	sim.want(t, engine.Success, "start,plan,implement,review,done")
	if got := read(t, filepath.Join(sim.dir, "plan", "response.md")); got != "[Simulated] Response for stage: plan" {
		t.Errorf("simulated response %q", got)
	}
}

// S3: conditions, with a tool node (D16, D18).
func TestS3Conditions(t *testing.T) {
	flow := func(cmd, bWeight string) string {
		return `digraph S3 {
  start [shape=Mdiamond]
  exit [shape=Msquare]
  t [shape=parallelogram, tool_command="` + cmd + `"]
  g [shape=diamond]
  start -> t -> g
  g -> a [condition="context.tool.output=yes && context.nope!=x", weight=1]
  g -> b [condition="tool.output=\"yes\" && ", weight=` + bWeight + `]
  g -> c [condition="outcome=SUCCESS", weight=9]
  g -> d [condition="context.nope=\"\""]
  g -> exit
  a -> exit
  b -> exit
  c -> exit
  d -> exit
}`
	}
	for _, c := range []struct{ cmd, weight, next string }{
		{"printf yes", "2", "b"},
		{"printf yes", "1", "a"},
		{"echo yes", "2", "d"},
	} {
		r := runFlow(t, flow(c.cmd, c.weight), Options{})
		r.want(t, engine.Success, "start,t,g,"+c.next+",exit")
	}
}

// The tool handler: non-zero exit (D18), timeout, hooks, no command.
func TestToolHandler(t *testing.T) {
	flow := func(attrs string) string {
		return `digraph T {
  start [shape=Mdiamond]
  exit [shape=Msquare]
  t [shape=parallelogram, ` + attrs + `]
  start -> t
  t -> exit [condition="outcome!=fail"]
}`
	}
	r := runFlow(t, flow(`tool_command="echo oops >&2; exit 3"`), Options{})
	r.want(t, engine.Fail, "start,t")
	if !strings.Contains(r.res.FailureReason, "exit status 3: oops") {
		t.Errorf("%q", r.res.FailureReason)
	}
	began := time.Now()
	r = runFlow(t, flow(`tool_command="sleep 30", timeout="300ms"`), Options{})
	r.want(t, engine.Fail, "start,t")
	if !strings.Contains(r.res.FailureReason, "timed out") || time.Since(began) > 10*time.Second {
		t.Errorf("%q after %s", r.res.FailureReason, time.Since(began))
	}
	r = runFlow(t, flow(`tool_command=""`), Options{})
	if !strings.Contains(r.res.FailureReason, "No tool_command specified") {
		t.Errorf("%q", r.res.FailureReason)
	}
	// The environment is allow-listed.
	r = runFlow(t, flow(`tool_command="printf %s \"$SECRET_TOKEN\""`), Options{Environ: []string{"SECRET_TOKEN=s3cr3t", "PATH=" + os.Getenv("PATH")}})
	if cp := r.checkpoint(t); cp.Context["tool.output"] != "" {
		t.Errorf("a child saw SECRET_TOKEN: %q", cp.Context["tool.output"])
	}
	// A pre hook that fails skips the call; the post hook sees the output.
	dir := t.TempDir()
	log := filepath.Join(dir, "post.log")
	r = runFlow(t, `digraph H {
  graph [tool_hooks.post="cat >> `+log+`"]
  start [shape=Mdiamond]
  exit [shape=Msquare]
  t [shape=parallelogram, tool_command="printf ran"]
  u [shape=parallelogram, tool_command="printf never", tool_hooks.pre="exit 1"]
  start -> t -> u -> exit
}`, Options{Dir: dir})
	r.want(t, engine.Success, "start,t,exit")
	if got := read(t, log); !strings.Contains(got, `"hook":"post"`) || !strings.Contains(got, `"output":"ran"`) {
		t.Errorf("post hook got %s", got)
	}
	if s, _ := engine.ReadStatus(filepath.Join(r.dir, "u")); s.Status != engine.Skipped {
		t.Errorf("u: %+v", s)
	}
}

// branch is §2.13's Branch example, verbatim.
const branch = `digraph Branch {
    graph [goal="Implement and validate a feature"]
    rankdir=LR
    node [shape=box, timeout="900s"]

    start     [shape=Mdiamond, label="Start"]
    exit      [shape=Msquare, label="Exit"]
    plan      [label="Plan", prompt="Plan the implementation"]
    implement [label="Implement", prompt="Implement the plan"]
    validate  [label="Validate", prompt="Run tests"]
    gate      [shape=diamond, label="Tests passing?"]

    start -> plan -> implement -> validate -> gate
    gate -> exit      [label="Yes", condition="outcome=success"]
    gate -> implement [label="No", condition="outcome!=success"]
}
`

// S4: the Branch example loops once (D1, D16).
func TestS4BranchExample(t *testing.T) {
	fake := newFake(map[string][]string{"Run tests": {"FAIL", "SUCCESS"}})
	r := runFlow(t, branch, Options{Backend: backendFor(t, fake)})
	r.want(t, engine.Success, "start,plan,implement,validate,gate,implement,validate,gate,exit")
	if fake.count("Run tests") != 2 {
		t.Errorf("validate ran %d times", fake.count("Run tests"))
	}
}

// S5 through the LLM handler: the gate's retry at the exit.
func TestS5GoalGate(t *testing.T) {
	src := `digraph S5 {
  start [shape=Mdiamond]
  exit [shape=Msquare]
  plan [prompt="P plan"]
  impl [prompt="I impl", goal_gate=true, retry_target="plan"]
  review [prompt="R review"]
  start -> plan -> impl -> review -> exit
}`
	fake := newFake(map[string][]string{"I impl": {"FAIL", "SUCCESS"}})
	r := runFlow(t, src, Options{Backend: backendFor(t, fake)})
	r.want(t, engine.Success, "start,plan,impl,review,plan,impl,review,exit")
}

// S6 through the LLM handler: RETRY outcomes, a 429 retried, a 401 not.
func TestS6Retries(t *testing.T) {
	src := `digraph S6 {
  start [shape=Mdiamond]
  exit [shape=Msquare]
  w [prompt="W work", max_retries=2]
  start -> w
  w -> exit [condition="outcome!=fail"]
}`
	fake := newFake(map[string][]string{"W work": {"RETRY", "RETRY", "SUCCESS"}})
	r := runFlow(t, src, Options{Backend: backendFor(t, fake)})
	r.want(t, engine.Success, "start,w,exit")
	if fake.count("W work") != 3 {
		t.Errorf("%d calls", fake.count("W work"))
	}
	if cp := r.checkpoint(t); cp.NodeRetries["w"] != 2 {
		t.Errorf("node_retries %v", cp.NodeRetries)
	}
	fake = newFake(map[string][]string{"W work": {"http:429", "SUCCESS"}})
	runFlow(t, src, Options{Backend: backendFor(t, fake)}).want(t, engine.Success, "start,w,exit")
	fake = newFake(map[string][]string{"W work": {"http:401", "SUCCESS"}})
	r = runFlow(t, src, Options{Backend: backendFor(t, fake)})
	r.want(t, engine.Fail, "start,w")
	if fake.count("W work") != 1 || !strings.Contains(r.res.FailureReason, "401") {
		t.Errorf("401: %d calls, %s", fake.count("W work"), r.res.FailureReason)
	}
}

// The outcome tool: every field, the last call winning, and
// context_updates reaching later conditions.
func TestOutcomeTool(t *testing.T) {
	src := `digraph O {
  start [shape=Mdiamond]
  exit [shape=Msquare]
  n [prompt="N decide"]
  start -> n
  n -> x [condition="context.verdict=ship"]
  n -> y
  x -> exit
  y -> exit
}`
	fake := newFake(map[string][]string{"N decide": {`{"status":"partial_success","notes":"most of it","context_updates":{"verdict":"ship"}}`}})
	r := runFlow(t, src, Options{Backend: backendFor(t, fake)})
	r.want(t, engine.Success, "start,n,x,exit")
	o, _ := engine.ReadStatus(filepath.Join(r.dir, "n"))
	if o.Status != engine.PartialSuccess || o.Notes != "most of it" || o.ContextUpdates["last_stage"] != "n" {
		t.Errorf("status.json %+v", o)
	}
	fake = newFake(map[string][]string{"N decide": {`{"status":"bogus"}`}})
	r = runFlow(t, src, Options{Backend: backendFor(t, fake)})
	r.want(t, engine.Success, "start,n,y,exit") // an invalid call is refused to the model; no outcome: success
}

// review is §2.13's human gate example, verbatim.
const review = `digraph Review {
    rankdir=LR

    start [shape=Mdiamond, label="Start"]
    exit  [shape=Msquare, label="Exit"]

    review_gate [
        shape=hexagon,
        label="Review Changes",
        type="wait.human"
    ]

    start -> review_gate
    review_gate -> ship_it [label="[A] Approve"]
    review_gate -> fixes   [label="[F] Fix"]
    ship_it -> exit
    fixes -> review_gate
}
`

// The Review example through the Pending interviewer (what the HTTP mode
// and chat channels answer), and timeouts and skips (S7 without HTTP).
func TestHumanGate(t *testing.T) {
	p := &Pending{}
	asked := make(chan Question, 4)
	p.OnAsk = func(q Question) { asked <- q }
	go func() {
		for _, key := range []string{"F", "A"} {
			q := <-asked
			if q.Stage != "review_gate" || q.Text != "Review Changes" || q.Type != MultipleChoice || len(q.Options) != 2 ||
				q.Options[0] != (Option{"A", "[A] Approve"}) || q.Options[1] != (Option{"F", "[F] Fix"}) {
				t.Errorf("question %+v", q)
			}
			if len(p.Questions()) != 1 {
				t.Errorf("pending %v", p.Questions())
			}
			p.Answer(q.ID, Answer{Value: key})
		}
	}()
	r := runFlow(t, review, Options{Interviewer: p})
	r.want(t, engine.Success, "start,review_gate,fixes,review_gate,ship_it,exit")
	cp := r.checkpoint(t)
	if cp.Context["human.gate.selected"] != "A" || cp.Context["human.gate.label"] != "[A] Approve" {
		t.Errorf("context %v", cp.Context)
	}
	if len(r.ev.of(engine.InterviewStarted)) != 2 || len(r.ev.of(engine.InterviewCompleted)) != 2 {
		t.Error("interview events")
	}
	timed := strings.Replace(review, `type="wait.human"`, `type="wait.human", timeout="50ms", human.default_choice="ship_it"`, 1)
	r = runFlow(t, timed, Options{Interviewer: &Pending{}})
	r.want(t, engine.Success, "start,review_gate,ship_it,exit")
	if len(r.ev.of(engine.InterviewTimeout)) != 1 {
		t.Error("no InterviewTimeout")
	}
	// Without a default, a timeout is RETRY (exhausted: FAIL, which
	// follows the unconditional edges, D1; the visit cap ends the loop).
	noDefault := strings.Replace(review, `type="wait.human"`, `type="wait.human", timeout="20ms", max_retries=1, max_node_visits=1`, 1)
	r = runFlow(t, noDefault, Options{Interviewer: &Pending{}})
	r.want(t, engine.Fail, "start,review_gate,fixes")
	if f := r.ev.of(engine.StageFailed); len(f) != 2 || !f[0].WillRetry || f[0].Error != "human gate timeout, no default" ||
		f[1].Error != "max retries exceeded: human gate timeout, no default" || len(r.ev.of(engine.StageRetrying)) != 1 {
		t.Errorf("timeout without default: %+v", f)
	}
	once := strings.Replace(review, `type="wait.human"`, `type="wait.human", max_node_visits=1`, 1)
	r = runFlow(t, once, Options{Interviewer: &Queue{}})
	if f := r.ev.of(engine.StageFailed); r.res.Status != engine.Fail || len(f) == 0 || f[0].Error != "human skipped interaction" {
		t.Errorf("skipped: %+v", f)
	}
	r = runFlow(t, review, Options{Interviewer: &Queue{Answers: []Answer{{Value: "Z"}}}})
	r.want(t, engine.Success, "start,review_gate,ship_it,exit")
	if AcceleratorKey("Y) Yes") != "Y" || AcceleratorKey("Y - Yes") != "Y" || AcceleratorKey("Yes, deploy") != "Y" {
		t.Error("accelerator keys")
	}
}

// S8: parallel fan-out and fan-in (D12, D13).
func TestS8Parallel(t *testing.T) {
	if testing.Short() {
		t.Skip("runs for a few seconds")
	}
	flow := func(maxPar, bCmd string) string {
		return `digraph S8 {
  start [shape=Mdiamond]
  exit [shape=Msquare]
  fork [shape=component` + maxPar + `]
  a [shape=parallelogram, tool_command="sleep 1; printf X"]
  b [shape=parallelogram, tool_command="` + bCmd + `"]
  c [shape=parallelogram, tool_command="sleep 1; printf X"]
  join [shape=tripleoctagon]
  start -> fork
  fork -> a
  fork -> b
  fork -> c
  a -> join
  b -> join
  c -> join
  join -> exit
}`
	}
	// Wall-time bounds: the lower ones are exact; an upper one missed on
	// a loaded machine is measured once more before it fails.
	timed := func(src string) (*run, time.Duration) {
		began := time.Now()
		r := runFlow(t, src, Options{})
		return r, time.Since(began)
	}
	r, d := timed(flow(", max_parallel=2", "sleep 1; printf X"))
	if d >= 3*time.Second {
		r, d = timed(flow(", max_parallel=2", "sleep 1; printf X"))
	}
	r.want(t, engine.Success, "start,fork,a,b,c,join,exit")
	if d < 2*time.Second || d >= 3*time.Second {
		t.Errorf("max_parallel=2: %s", d)
	}
	if ps := r.ev.of(engine.ParallelStarted); len(ps) != 1 || ps[0].BranchCount != 3 {
		t.Errorf("ParallelStarted %+v", ps)
	}
	if pc := r.ev.of(engine.ParallelCompleted); len(pc) != 1 || pc[0].SuccessCount != 3 || pc[0].FailureCount != 0 {
		t.Errorf("ParallelCompleted %+v", pc)
	}
	if len(r.ev.of(engine.ParallelBranchStarted)) != 3 || len(r.ev.of(engine.ParallelBranchCompleted)) != 3 {
		t.Error("branch events")
	}
	cp := r.checkpoint(t)
	if cp.Context["parallel.fan_in.best_id"] != "a" {
		t.Errorf("best %v", cp.Context["parallel.fan_in.best_id"])
	}
	if _, ok := cp.Context["tool.output"]; ok {
		t.Error("a branch's tool.output reached the parent context")
	}
	if _, d = timed(flow("", "sleep 1; printf X")); d >= 1500*time.Millisecond {
		if _, d = timed(flow("", "sleep 1; printf X")); d >= 1500*time.Millisecond {
			t.Errorf("default max_parallel: %s", d)
		}
	}
	r = runFlow(t, flow("", "exit 3"), Options{})
	r.want(t, engine.Success, "")
	if o, _ := engine.ReadStatus(filepath.Join(r.dir, "fork")); o.Status != engine.PartialSuccess {
		t.Errorf("fork %+v", o.Status)
	}
	if cp := r.checkpoint(t); cp.Context["parallel.fan_in.best_id"] != "a" {
		t.Errorf("best %v", cp.Context["parallel.fan_in.best_id"])
	}
}

// Fan-in fails only when every candidate failed (D13).
func TestFanInAllFailed(t *testing.T) {
	r := runFlow(t, `digraph F {
  start [shape=Mdiamond]
  exit [shape=Msquare]
  fork [shape=component]
  a [shape=parallelogram, tool_command="exit 1"]
  b [shape=parallelogram, tool_command="exit 2"]
  join [shape=tripleoctagon]
  start -> fork
  fork -> a
  fork -> b
  a -> join
  b -> join
  join -> exit [condition="outcome=success"]
}`, Options{})
	r.want(t, engine.Fail, "start,fork,a,b,join")
	if !strings.Contains(r.res.FailureReason, "every parallel branch failed") {
		t.Error(r.res.FailureReason)
	}
}

// A fan-in with a prompt asks the model for the best candidate (§4.9).
func TestFanInRankedByModel(t *testing.T) {
	fake := newFake(map[string][]string{"Pick the best": {`{"status":"success","preferred_label":"b"}`}})
	r := runFlow(t, `digraph F {
  start [shape=Mdiamond]
  exit [shape=Msquare]
  fork [shape=component]
  a [shape=parallelogram, tool_command="printf A"]
  b [shape=parallelogram, tool_command="printf B"]
  join [shape=tripleoctagon, prompt="Pick the best"]
  start -> fork
  fork -> a
  fork -> b
  a -> join
  b -> join
  join -> exit
}`, Options{Backend: backendFor(t, fake)})
	r.want(t, engine.Success, "start,fork,a,b,join,exit")
	if cp := r.checkpoint(t); cp.Context["parallel.fan_in.best_id"] != "b" {
		t.Errorf("best %v", cp.Context["parallel.fan_in.best_id"])
	}
	if o, _ := engine.ReadStatus(filepath.Join(r.dir, "join")); o.Tokens == nil {
		t.Error("the fan-in's model tokens are not counted")
	}
}

// TestToolOutputArtifact: a stdout over 100 KB is stored whole as the
// artifact NODE.stdout (§5.5: large outputs do not belong in the
// context, which every checkpoint writes); tool.output keeps its last
// 100 KB.
func TestToolOutputArtifact(t *testing.T) {
	r := runFlow(t, `digraph T {
  start [shape=Mdiamond]
  exit [shape=Msquare]
  t [shape=parallelogram, tool_command="head -c 150000 /dev/zero | tr '\\0' x; printf END"]
  start -> t -> exit
}`, Options{Environ: []string{"PATH=" + os.Getenv("PATH")}})
	r.want(t, engine.Success, "start,t,exit")
	cp := r.checkpoint(t)
	out, _ := cp.Context["tool.output"].(string)
	if len(out) != engine.ArtifactThreshold || !strings.HasSuffix(out, "END") || cp.Context["tool.output_artifact"] != "t.stdout" || cp.Context["tool.output_bytes"] != float64(150003) {
		t.Fatalf("context: %d bytes, artifact %v, size %v", len(out), cp.Context["tool.output_artifact"], cp.Context["tool.output_bytes"])
	}
	var whole string
	data := read(t, filepath.Join(r.dir, "artifacts", "t.stdout.json"))
	if err := json.Unmarshal([]byte(data), &whole); err != nil || len(whole) != 150003 {
		t.Fatalf("artifact: %d bytes, %v", len(whole), err)
	}
	if n := r.ev.of(engine.PipelineCompleted)[0].ArtifactCount; n != 1 {
		t.Errorf("artifact_count %d", n)
	}
	// Up to the threshold, stdout stays whole in the context.
	r = runFlow(t, `digraph T {
  start [shape=Mdiamond]
  exit [shape=Msquare]
  t [shape=parallelogram, tool_command="head -c 102400 /dev/zero | tr '\\0' y"]
  start -> t -> exit
}`, Options{Environ: []string{"PATH=" + os.Getenv("PATH")}})
	if cp := r.checkpoint(t); len(cp.Context["tool.output"].(string)) != 102400 || cp.Context["tool.output_artifact"] != nil {
		t.Fatalf("at the threshold: %d bytes", len(cp.Context["tool.output"].(string)))
	}
}
