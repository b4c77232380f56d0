package pipelinesrv

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nbots/nb/pipeline"
	"github.com/nbots/nb/pipeline/engine"
	"github.com/nbots/nb/pipeline/handler"
	"github.com/nbots/nb/server"
)

// TestS7ReviewOverHTTP is the reference page's scenario S7: §2.13's
// Review example, verbatim (its ship_it and fixes exist only in edges),
// its gate answered over HTTP.
func TestS7ReviewOverHTTP(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	id := f.start(map[string]any{"dot": review, "cartridge": "coder"})
	stream := f.follow(id)

	q1 := f.question(id)
	if q1.Stage != "review_gate" || q1.Text != "Review Changes" || q1.Type != handler.MultipleChoice {
		t.Fatalf("question %+v", q1)
	}
	want := []handler.Option{{Key: "A", Label: "[A] Approve"}, {Key: "F", Label: "[F] Fix"}}
	if !slices.Equal(q1.Options, want) {
		t.Fatalf("options %+v; want %+v", q1.Options, want)
	}
	if info := f.info(id); info.Status != StatusWaiting || info.Questions != 1 {
		t.Fatalf("while asking: %+v", info)
	}
	f.json("POST", "/pipelines/"+id+"/questions/"+q1.ID+"/answer", map[string]any{"value": "F"}, http.StatusOK, nil)
	// An answered question cannot be answered again.
	f.json("POST", "/pipelines/"+id+"/questions/"+q1.ID+"/answer", map[string]any{"value": "A"}, http.StatusNotFound, nil)

	q2 := f.question(id, q1.ID)
	if q2.ID == q1.ID || q2.Stage != "review_gate" {
		t.Fatalf("second question %+v", q2)
	}
	f.json("POST", "/pipelines/"+id+"/questions/"+q2.ID+"/answer", map[string]any{"value": "A"}, http.StatusOK, nil)

	info := f.wait(id)
	if info.Status != StatusSuccess || strings.Join(info.CompletedNodes, ",") != "start,review_gate,fixes,review_gate,ship_it,exit" {
		t.Fatalf("run %+v", info)
	}
	var ctx struct{ Context map[string]any }
	f.json("GET", "/pipelines/"+id+"/context", nil, http.StatusOK, &ctx)
	if ctx.Context["human.gate.selected"] != "A" || ctx.Context["human.gate.label"] != "[A] Approve" {
		t.Fatalf("context %v", ctx.Context)
	}
	evs := stream.wait(t)
	if count(evs, "InterviewStarted") != 2 || count(evs, "InterviewCompleted") != 2 || count(evs, "PipelineCompleted") != 1 {
		t.Fatalf("events %v", kinds(evs))
	}
	for i, e := range evs {
		if e.ID != int64(i+1) || e.Data["event"] != e.Event || e.Data["seq"] != float64(e.ID) {
			t.Fatalf("event %d: %+v", i, e)
		}
	}
	if evs[0].Event != "PipelineStarted" || evs[0].Data["run_id"] != id {
		t.Fatalf("first event %+v", evs[0])
	}
	// The checkpoint is §5.3's.
	var cp map[string]any
	f.json("GET", "/pipelines/"+id+"/checkpoint", nil, http.StatusOK, &cp)
	for _, k := range []string{"timestamp", "current_node", "completed_nodes", "node_retries", "context", "logs"} {
		if _, ok := cp[k]; !ok {
			t.Errorf("checkpoint has no %s", k)
		}
	}
	if cp["current_node"] != "exit" {
		t.Errorf("current_node %v", cp["current_node"])
	}
	// The LLM nodes ran the served cartridge.
	if n := len(f.fake.Recorder.Bodies()); n != 2 {
		t.Errorf("%d provider requests; want 2 (fixes, ship_it)", n)
	}
}

func kinds(evs []sseEvent) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.Event)
	}
	return out
}

// TestS7Answers is S7's other answers: a timeout with a default, a
// timeout without (RETRY), SKIPPED (FAIL), an answer naming no option
// (the first edge), and a cancel while waiting.
func TestS7Answers(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	gate := func(attrs string) string {
		return strings.Replace(review, `type="wait.human"`, `type="wait.human", `+attrs, 1)
	}
	t.Run("timeout takes the default", func(t *testing.T) {
		id := f.start(map[string]any{"dot": gate(`timeout="2s", human.default_choice="ship_it"`), "cartridge": "coder"})
		info := f.wait(id)
		if info.Status != StatusSuccess || strings.Join(info.CompletedNodes, ",") != "start,review_gate,ship_it,exit" {
			t.Fatalf("run %+v", info)
		}
		_, evs := f.stream(id, 0)
		if count(evs, "InterviewTimeout") != 1 {
			t.Fatalf("events %v", kinds(evs))
		}
	})
	t.Run("timeout without a default is RETRY", func(t *testing.T) {
		id := f.start(map[string]any{"dot": gate(`timeout="2s", max_retries=1`), "cartridge": "coder"})
		q1 := f.question(id)
		q2 := f.question(id, q1.ID) // asked again after the timeout's RETRY
		f.json("POST", "/pipelines/"+id+"/questions/"+q2.ID+"/answer", map[string]any{"answer": "A"}, http.StatusOK, nil)
		f.wait(id)
		_, evs := f.stream(id, 0)
		if count(evs, "InterviewTimeout") != 1 || count(evs, "StageRetrying") != 1 {
			t.Fatalf("events %v", kinds(evs))
		}
	})
	t.Run("SKIPPED fails the gate", func(t *testing.T) {
		id := f.start(map[string]any{"dot": review, "cartridge": "coder"})
		q := f.question(id)
		f.json("POST", "/pipelines/"+id+"/questions/"+q.ID+"/answer", map[string]any{"value": "SKIPPED"}, http.StatusOK, nil)
		q2 := f.question(id, q.ID) // D1: the failed gate's edges are still taken (fixes), and it asks again
		f.json("POST", "/pipelines/"+id+"/cancel", nil, http.StatusOK, nil)
		_ = q2
		_, evs := f.stream(id, 0)
		failed := false
		for _, e := range evs {
			if e.Event == "StageFailed" && e.Data["name"] == "review_gate" && strings.Contains(e.Data["error"].(string), "skipped") {
				failed = true
			}
		}
		if !failed {
			t.Fatalf("no StageFailed for the skip: %v", kinds(evs))
		}
	})
	t.Run("an answer naming no option takes the first edge", func(t *testing.T) {
		id := f.start(map[string]any{"dot": review, "cartridge": "coder"})
		q := f.question(id)
		f.json("POST", "/pipelines/"+id+"/questions/"+q.ID+"/answer", map[string]any{"value": "Z"}, http.StatusOK, nil)
		if info := f.wait(id); strings.Join(info.CompletedNodes, ",") != "start,review_gate,ship_it,exit" {
			t.Fatalf("run %+v", info)
		}
	})
	t.Run("cancel while waiting", func(t *testing.T) {
		id := f.start(map[string]any{"dot": review, "cartridge": "coder"})
		stream := f.follow(id)
		f.question(id)
		var info Info
		f.json("POST", "/pipelines/"+id+"/cancel", nil, http.StatusOK, &info)
		if info.Status != StatusCancelled {
			t.Fatalf("after cancel: %+v", info)
		}
		evs := stream.wait(t)
		if last := evs[len(evs)-1]; last.Event != "PipelineFailed" {
			t.Fatalf("events %v", kinds(evs))
		}
		// Cancelling again answers the same.
		f.json("POST", "/pipelines/"+id+"/cancel", nil, http.StatusOK, &info)
	})
}

// TestEventsResume: Last-Event-ID replays what follows it; a stream of
// an ended run with nothing after it is 204 (an EventSource stops).
func TestEventsResume(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	id := f.start(map[string]any{"dot": strings.Replace(review, `type="wait.human"`, `type="wait.human", timeout="50ms", human.default_choice="ship_it"`, 1), "cartridge": "coder"})
	info := f.wait(id)
	_, all := f.stream(id, 0)
	if int64(len(all)) != info.Events || len(all) < 10 {
		t.Fatalf("%d events, info says %d", len(all), info.Events)
	}
	_, rest := f.stream(id, 5)
	if len(rest) != len(all)-5 || rest[0].ID != 6 {
		t.Fatalf("after 5: %d events from %d", len(rest), rest[0].ID)
	}
	if status, _ := f.stream(id, info.Events); status != http.StatusNoContent {
		t.Fatalf("status %d after the last event; want 204", status)
	}
	if status, body := f.do("GET", "/pipelines/"+id+"/events?after=x", nil); status != http.StatusBadRequest {
		t.Fatalf("?after=x: %d %s", status, body)
	}
	// The run folder keeps every event.
	data, err := os.ReadFile(filepath.Join(f.runs, id, "events.jsonl"))
	if err != nil || strings.Count(string(data), "\n") != len(all) {
		t.Fatalf("events.jsonl: %v, %d lines", err, strings.Count(string(data), "\n"))
	}
}

// TestCreateRefusals: the body, the graph's errors, commands in a graph
// sent as text, files outside the served folders, unknown cartridges.
func TestCreateRefusals(t *testing.T) {
	f := newFixture(t, fixtureOpts{files: map[string]string{"flows/review.dot": review, ".hidden.dot": review}})
	outside := filepath.Join(t.TempDir(), "outside.dot")
	if err := os.WriteFile(outside, []byte(review), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(f.dir, "link.dot")); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		body   any
		status int
		want   string
	}{
		{"not JSON", "dot", 400, "JSON object"},
		{"unknown field", map[string]any{"dot": review, "vars": map[string]string{}}, 400, "vars"},
		{"neither", map[string]any{"cartridge": "coder"}, 400, "either"},
		{"both", map[string]any{"dot": review, "file": "flows/review.dot"}, 400, "either"},
		{"syntax", map[string]any{"dot": "digraph X { a -- b }"}, 422, "pipeline.dot:1:"},
		{"lint", map[string]any{"dot": "digraph X { start [shape=Mdiamond] }"}, 422, "terminal_node"},
		{"tool node", map[string]any{"dot": "digraph X { start [shape=Mdiamond]; exit [shape=Msquare]; t [shape=parallelogram, tool_command=\"id\"]; start -> t -> exit }"}, 403, "tool node t"},
		{"hook", map[string]any{"dot": "digraph X { graph [tool_hooks.pre=\"id\"]; start [shape=Mdiamond]; exit [shape=Msquare]; start -> exit }"}, 403, "tool_hooks.pre"},
		{"manager", map[string]any{"dot": "digraph X { graph [stack.child_dotfile=\"/etc/x.dot\"]; start [shape=Mdiamond]; exit [shape=Msquare]; m [shape=house]; start -> m -> exit }"}, 403, "manager loop m"},
		{"dot dot", map[string]any{"file": "../review.dot"}, 400, "inside a served folder"},
		{"absolute", map[string]any{"file": "/etc/passwd.dot"}, 400, "inside a served folder"},
		{"not .dot", map[string]any{"file": "coder.yml"}, 400, ".dot"},
		{"hidden", map[string]any{"file": ".hidden.dot"}, 400, "hidden"},
		{"missing", map[string]any{"file": "nosuch.dot"}, 404, "no served folder"},
		{"link out", map[string]any{"file": "link.dot"}, 404, "no served folder"},
		{"cartridge", map[string]any{"file": "flows/review.dot", "cartridge": "nosuch"}, 404, "no cartridge"},
	} {
		t.Run(c.name, func(t *testing.T) {
			status, body := f.do("POST", "/pipelines", c.body)
			if status != c.status || !strings.Contains(string(body), c.want) {
				t.Fatalf("%d %s; want %d with %q", status, body, c.status, c.want)
			}
		})
	}
	// The lint refusal lists the diagnostics.
	_, body := f.do("POST", "/pipelines", map[string]any{"dot": "digraph X { start [shape=Mdiamond] }"})
	var refusal struct {
		Diagnostics []diagnosticJSON
	}
	if err := json.Unmarshal(body, &refusal); err != nil || len(refusal.Diagnostics) == 0 || refusal.Diagnostics[0].Severity != "error" {
		t.Fatalf("%s", body)
	}
	// Unknown runs.
	f.json("GET", "/pipelines/nosuch", nil, http.StatusNotFound, nil)
	f.json("GET", "/pipelines/nosuch/events", nil, http.StatusNotFound, nil)
}

// TestServedFile: a flow of a served folder may run commands (the
// operator wrote it), and its variables and cartridge apply.
func TestServedFile(t *testing.T) {
	flow := `digraph T {
    graph [goal="say $who"]
    start [shape=Mdiamond]
    exit  [shape=Msquare]
    t [shape=parallelogram, tool_command="printf hi"]
    ask [prompt="Please $goal"]
    big [shape=parallelogram, tool_command="head -c 150000 /dev/zero | tr '\\0' x"]
    start -> t -> ask -> big -> exit
}
`
	f := newFixture(t, fixtureOpts{files: map[string]string{"flows/t.dot": flow}})
	id := f.start(map[string]any{"file": "flows/t.dot", "cartridge": "coder", "set": map[string]string{"who": "hello"}})
	info := f.wait(id)
	if info.Status != StatusSuccess || info.Goal != "say $who" { // variables expand in prompts only
		t.Fatalf("run %+v", info)
	}
	var ctx struct{ Context map[string]any }
	f.json("GET", "/pipelines/"+id+"/context", nil, http.StatusOK, &ctx)
	if ctx.Context["tool.output_artifact"] != "big.stdout" {
		t.Fatalf("context %v", ctx.Context["tool.output_artifact"])
	}
	// The artifacts: big's whole stdout.
	var arts struct{ Artifacts []engine.ArtifactInfo }
	f.json("GET", "/pipelines/"+id+"/artifacts", nil, http.StatusOK, &arts)
	if len(arts.Artifacts) != 1 || arts.Artifacts[0].ID != "big.stdout" || !arts.Artifacts[0].FileBacked {
		t.Fatalf("artifacts %+v", arts)
	}
	var whole string
	f.json("GET", "/pipelines/"+id+"/artifacts/big.stdout", nil, http.StatusOK, &whole)
	if len(whole) != 150000 {
		t.Fatalf("artifact of %d bytes", len(whole))
	}
	f.json("GET", "/pipelines/"+id+"/artifacts/nosuch", nil, http.StatusNotFound, nil)
	reqs := f.fake.Recorder.Bodies()
	if len(reqs) != 1 || !strings.Contains(string(reqs[0]), "Please say hello") {
		t.Fatalf("provider requests %d", len(reqs))
	}
	// The text drawing marks the path; the DOT one is Graphviz's.
	status, body := f.do("GET", "/pipelines/"+id+"/graph?format=text", nil)
	if status != 200 || !strings.Contains(string(body), "✓") {
		t.Fatalf("%d %s", status, body)
	}
	if status, body := f.do("GET", "/pipelines/"+id+"/graph?format=dot", nil); status != 200 || !strings.HasPrefix(string(body), "digraph") {
		t.Fatalf("%d %s", status, body)
	}
	if _, err := exec.LookPath("dot"); err == nil {
		if status, body := f.do("GET", "/pipelines/"+id+"/graph", nil); status != 200 || !strings.Contains(string(body), "<svg") {
			t.Fatalf("%d %.200s", status, body)
		}
	}
}

// TestTokensAndBrowsers: the routes are behind the server's tokens, a
// run is its token's only, and a server without tokens refuses other
// sites' pages.
func TestTokensAndBrowsers(t *testing.T) {
	a, _ := server.NewToken("a", "a-secret-0123456789abcdef")
	b, _ := server.NewToken("b", "b-secret-0123456789abcdef")
	f := newFixture(t, fixtureOpts{tokens: []*server.Token{a, b}})
	f.json("POST", "/pipelines", map[string]any{"dot": review}, http.StatusUnauthorized, nil)
	f.tok = "a-secret-0123456789abcdef"
	id := f.start(map[string]any{"dot": review, "cartridge": "coder"})
	f.question(id)
	var list struct{ Pipelines []Info }
	f.json("GET", "/pipelines", nil, http.StatusOK, &list)
	if len(list.Pipelines) != 1 || list.Pipelines[0].ID != id || list.Pipelines[0].Status != StatusWaiting {
		t.Fatalf("a's runs: %+v", list)
	}
	f.tok = "b-secret-0123456789abcdef"
	f.json("GET", "/pipelines", nil, http.StatusOK, &list)
	if len(list.Pipelines) != 0 {
		t.Fatalf("b sees a's runs: %+v", list)
	}
	for _, p := range []string{"", "/events", "/questions", "/checkpoint", "/context", "/graph"} {
		f.json("GET", "/pipelines/"+id+p, nil, http.StatusNotFound, nil)
	}
	f.json("POST", "/pipelines/"+id+"/cancel", nil, http.StatusNotFound, nil)
	f.tok = "a-secret-0123456789abcdef"
	f.json("POST", "/pipelines/"+id+"/cancel", nil, http.StatusOK, nil)

	open := newFixture(t, fixtureOpts{})
	status, body := open.do("POST", "/pipelines", map[string]any{"dot": review}, "Origin", "https://evil.example")
	if status != http.StatusForbidden {
		t.Fatalf("a page of another site: %d %s", status, body)
	}
	status, body = open.do("POST", "/pipelines", map[string]any{"dot": review}, "Host", "evil.example")
	if status != http.StatusForbidden {
		t.Fatalf("a rebound name: %d %s", status, body)
	}
}

// TestShutdownLeavesCheckpoint: the server's shutdown stops a run
// waiting at a gate once the grace period is over; its checkpoint is
// kept, and a resume goes on from it without running a finished node
// again.
func TestShutdownLeavesCheckpoint(t *testing.T) {
	f := newFixture(t, fixtureOpts{grace: 100 * time.Millisecond})
	id := f.start(map[string]any{"dot": review, "cartridge": "coder"})
	stream := f.follow(id)
	q := f.question(id)
	f.json("POST", "/pipelines/"+id+"/questions/"+q.ID+"/answer", map[string]any{"value": "F"}, http.StatusOK, nil)
	f.question(id, q.ID) // fixes ran; the gate asks again
	f.shutdown()
	evs := stream.wait(t)
	if last := evs[len(evs)-1]; last.Event != "PipelineFailed" || !strings.Contains(last.Data["error"].(string), "interrupted") {
		t.Fatalf("last event %+v", last)
	}
	dir := filepath.Join(f.runs, id)
	cp, err := engine.LoadCheckpoint(dir)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(cp.CompletedNodes, ",") != "start,review_gate,fixes" || cp.Done {
		t.Fatalf("checkpoint %v done=%v", cp.CompletedNodes, cp.Done)
	}
	// Resume, as nb pipeline resume DIR does, from the graph kept beside it.
	src, err := os.ReadFile(filepath.Join(dir, "graph.dot"))
	if err != nil {
		t.Fatal(err)
	}
	g, _, err := pipeline.Load(cp.GraphFile, src)
	if err != nil {
		t.Fatal(err)
	}
	res, err := engine.Resume(context.Background(), engine.Config{Graph: g, Source: src, File: cp.GraphFile, LogsRoot: dir,
		Handlers: handler.NewRegistry(handler.Options{Interviewer: &handler.Queue{Answers: []handler.Answer{{Value: "A"}}}})})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != engine.Success || strings.Join(res.CompletedNodes, ",") != "start,review_gate,fixes,review_gate,ship_it,exit" {
		t.Fatalf("resumed: %s %v", res.Status, res.CompletedNodes)
	}
}

// TestNodeClient answers the Review example's gate from a client written
// by others: Node's fetch reading the event stream.
func TestNodeClient(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("SKIPPING: node is not installed (scripts/fetch-npm installs Debian's nodejs)")
	}
	f := newFixture(t, fixtureOpts{})
	script, _ := filepath.Abs(filepath.Join("testdata", "review-client.mjs"))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, script)
	cmd.Env = []string{"NB_URL=" + f.url, "NB_DOT=" + review, "PATH=" + os.Getenv("PATH")}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	var got struct {
		Events    []string
		LastID    int64
		Status    string
		Completed []string
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if got.Status != StatusSuccess || strings.Join(got.Completed, ",") != "start,review_gate,fixes,review_gate,ship_it,exit" ||
		got.Events[0] != "PipelineStarted" || got.Events[len(got.Events)-1] != "PipelineCompleted" || int(got.LastID) != len(got.Events) {
		t.Fatalf("%s", out)
	}
}

// TestServedModelOverrides: in a served run a node may change its
// served cartridge's model, but not its provider, whose credentials
// would be the server's.
func TestServedModelOverrides(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	flow := func(attrs string) string {
		return "digraph M {\n start [shape=Mdiamond]\n exit [shape=Msquare]\n ask [prompt=\"hello\", " + attrs + "]\n start -> ask -> exit\n}\n"
	}
	id := f.start(map[string]any{"dot": flow(`llm_model="other-model"`), "cartridge": "coder"})
	if info := f.wait(id); info.Status != StatusSuccess {
		t.Fatalf("run %+v", info)
	}
	bodies := f.fake.Recorder.Bodies()
	if len(bodies) != 1 || !strings.Contains(string(bodies[0]), `"model":"other-model"`) {
		t.Fatalf("provider requests: %d", len(bodies))
	}
	// The stage fails (D1: its unconditional edge is still taken).
	stageError := func(id string) string {
		f.wait(id)
		_, evs := f.stream(id, 0)
		for _, e := range evs {
			if e.Event == "StageFailed" && e.Data["name"] == "ask" {
				return e.Data["error"].(string)
			}
		}
		return ""
	}
	id = f.start(map[string]any{"dot": flow(`llm_provider="anthropic"`), "cartridge": "coder"})
	if msg := stageError(id); !strings.Contains(msg, "may not change its cartridge's provider") {
		t.Fatalf("stage error %q", msg)
	}
	if n := len(f.fake.Recorder.Bodies()); n != 1 {
		t.Errorf("%d provider requests", n)
	}
	// A node's cartridge attribute is a served cartridge, never a file.
	id = f.start(map[string]any{"dot": flow(`cartridge="/etc/passwd"`), "cartridge": "coder"})
	if msg := stageError(id); !strings.Contains(msg, "no cartridge") {
		t.Fatalf("stage error %q", msg)
	}
}

// TestLocalKeep: a Local keeps the Keep most recent ended runs in
// memory; an older one is read again from its folder when asked for.
func TestLocalKeep(t *testing.T) {
	l := &Local{Dir: t.TempDir(), Keep: 2}
	src := []byte("digraph K { start [shape=Mdiamond]; exit [shape=Msquare]; start -> exit }")
	g, _, err := pipeline.Load("k.dot", src)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for range 3 {
		done := make(chan struct{})
		r, err := l.Start(Spec{Context: context.Background(), Owner: "me", Graph: g, Source: src, Done: func() { close(done) }})
		if err != nil {
			t.Fatal(err)
		}
		<-done
		ids = append(ids, r.ID())
	}
	l.Close() // waits for the runs' goroutines, which record their end
	l.mu.Lock()
	_, kept := l.runs[ids[0]]
	n := len(l.runs)
	l.mu.Unlock()
	if kept || n != 2 {
		t.Errorf("%d runs in memory, the oldest among them: %v", n, kept)
	}
	for _, id := range ids {
		r, err := l.Get(context.Background(), "me", id)
		if err != nil || r.Info().Status != StatusSuccess || len(r.Info().CompletedNodes) != 2 {
			t.Fatalf("run %s: %v", id, err)
		}
	}
	if _, err := l.Get(context.Background(), "someone", ids[2]); err != ErrNotFound {
		t.Errorf("another owner's run: %v", err)
	}
	if _, err := l.Get(context.Background(), "me", "../"+filepath.Base(l.Dir)); err != ErrNotFound {
		t.Errorf("a path as an id: %v", err)
	}
}

// TestAdmission: a pipeline is one of its token's runs (a second one
// past the token's concurrent runs is 429), and a token limited to some
// cartridges may not run others.
func TestAdmission(t *testing.T) {
	one, _ := server.NewToken("one", "one-secret-0123456789abcdef")
	one.MaxRuns = 1
	one.Cartridges = []string{"coder"}
	f := newFixture(t, fixtureOpts{tokens: []*server.Token{one}})
	f.tok = "one-secret-0123456789abcdef"
	id := f.start(map[string]any{"dot": review, "cartridge": "coder"})
	f.question(id)
	status, body := f.do("POST", "/pipelines", map[string]any{"dot": review, "cartridge": "coder"})
	if status != http.StatusTooManyRequests {
		t.Fatalf("a second run: %d %s", status, body)
	}
	f.json("POST", "/pipelines/"+id+"/cancel", nil, http.StatusOK, nil)
	f.wait(id)
	if status, body := f.do("POST", "/pipelines", map[string]any{"dot": review}); status != http.StatusForbidden {
		t.Fatalf("the default cartridge: %d %s", status, body)
	}
	f.start(map[string]any{"dot": review, "cartridge": "coder"}) // the slot is free again
}

// TestClientGoesAway: a run goes on when its event stream's client
// disconnects.
func TestClientGoesAway(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	id := f.start(map[string]any{"dot": review, "cartridge": "coder"})
	req, _ := http.NewRequest("GET", f.url+"/pipelines/"+id+"/events", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	if _, err := resp.Body.Read(buf); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	q := f.question(id)
	f.json("POST", "/pipelines/"+id+"/questions/"+q.ID+"/answer", map[string]any{"key": "A"}, http.StatusOK, nil)
	if info := f.wait(id); info.Status != StatusSuccess {
		t.Fatalf("run %+v", info)
	}
}

// TestResumeOverHTTP: a run the server's shutdown stopped is known to
// the next server from its folder (its state and events) and goes on
// with POST /resume, running no finished node again; a cancelled run
// too; a run that ended is not resumed.
func TestResumeOverHTTP(t *testing.T) {
	f := newFixture(t, fixtureOpts{files: map[string]string{"review.dot": review}})
	id := f.start(map[string]any{"file": "review.dot", "cartridge": "coder"})
	q := f.question(id)
	f.json("POST", "/pipelines/"+id+"/questions/"+q.ID+"/answer", map[string]any{"value": "F"}, http.StatusOK, nil)
	f.question(id, q.ID)
	f.shutdown()
	before, _ := os.ReadFile(filepath.Join(f.runs, id, "events.jsonl"))

	g := newFixture(t, fixtureOpts{dir: f.dir, runs: f.runs})
	info := g.info(id)
	if info.Status != StatusInterrupted || strings.Join(info.CompletedNodes, ",") != "start,review_gate,fixes" || info.Events != int64(strings.Count(string(before), "\n")) {
		t.Fatalf("after the restart: %+v", info)
	}
	// A flow changed since is refused, and the run stays resumable.
	flow := filepath.Join(f.dir, "review.dot")
	if err := os.WriteFile(flow, []byte(strings.Replace(review, "Review Changes", "Changed", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if status, body := g.do("POST", "/pipelines/"+id+"/resume", nil); status != http.StatusConflict || !strings.Contains(string(body), "another graph") {
		t.Fatalf("a changed flow: %d %s", status, body)
	}
	if err := os.WriteFile(flow, []byte(review), 0o644); err != nil {
		t.Fatal(err)
	}
	g.json("POST", "/pipelines/"+id+"/resume", nil, http.StatusOK, nil)
	q = g.question(id)
	g.json("POST", "/pipelines/"+id+"/questions/"+q.ID+"/answer", map[string]any{"value": "A"}, http.StatusOK, nil)
	info = g.wait(id)
	if info.Status != StatusSuccess || strings.Join(info.CompletedNodes, ",") != "start,review_gate,fixes,review_gate,ship_it,exit" {
		t.Fatalf("resumed: %+v", info)
	}
	_, evs := g.stream(id, 0)
	for i, e := range evs {
		if e.ID != int64(i+1) {
			t.Fatalf("event %d has id %d", i+1, e.ID)
		}
	}
	if count(evs, "PipelineStarted") != 2 || evs[len(evs)-1].Event != "PipelineCompleted" {
		t.Fatalf("events %v", kinds(evs))
	}
	if n := len(f.fake.Recorder.Bodies()) + len(g.fake.Recorder.Bodies()); n != 2 {
		t.Errorf("%d LLM stages ran; want 2 (fixes once, ship_it once)", n)
	}
	g.json("POST", "/pipelines/"+id+"/resume", nil, http.StatusConflict, nil)

	// Cancelled, then resumed on the same server.
	id = g.start(map[string]any{"dot": review, "cartridge": "coder"})
	g.question(id)
	g.json("POST", "/pipelines/"+id+"/cancel", nil, http.StatusOK, nil)
	g.json("POST", "/pipelines/"+id+"/resume", nil, http.StatusOK, nil)
	q = g.question(id)
	g.json("POST", "/pipelines/"+id+"/questions/"+q.ID+"/answer", map[string]any{"value": "A"}, http.StatusOK, nil)
	if info := g.wait(id); info.Status != StatusSuccess {
		t.Fatalf("resumed after cancel: %+v", info)
	}
	g.json("POST", "/pipelines/nosuch/resume", nil, http.StatusNotFound, nil)
	g.json("GET", "/pipelines/../../etc", nil, http.StatusNotFound, nil)
}
