package pipeline

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

func load(t *testing.T, file string) (*Graph, []Diagnostic) {
	t.Helper()
	src, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	g, ds, err := Load(file, src)
	if err != nil {
		t.Fatal(err)
	}
	return g, ds
}

func loadString(t *testing.T, src string) (*Graph, []Diagnostic) {
	t.Helper()
	g, ds, err := Load("flow.dot", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return g, ds
}

// TestS10a is scenario S10(a): exactly the reference page's diagnostics,
// each with its line.
func TestS10a(t *testing.T) {
	_, ds := load(t, "testdata/s10a.dot")
	var got []string
	for _, d := range ds {
		got = append(got, d.Severity.String()+" "+d.Rule+" L"+itoa(d.Pos.Line)+" "+d.Node+d.Edge)
	}
	want := []string{
		"error stylesheet_syntax L2 ",
		"error start_node L3 start",
		"error start_node L4 begin",
		"error reachability L4 begin",
		"warning fidelity_valid L6 a",
		"warning type_known L6 a",
		"warning goal_gate_has_retry L6 a",
		"warning prompt_on_llm_nodes L7 b",
		"warning retry_target_exists L7 b",
		"error reachability L8 orphan",
		"error start_no_incoming L10 a -> start",
		"error exit_no_outgoing L11 exit -> a",
		"error condition_syntax L12 b -> exit",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("diagnostics:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if !HasErrors(ds) {
		t.Error("no errors")
	}
	// Columns: the stylesheet error points at `gpt-5.2` inside the string,
	// the condition error at `||`.
	for _, d := range ds {
		switch d.Rule {
		case "stylesheet_syntax":
			if d.Pos != (Pos{2, 41}) {
				t.Errorf("stylesheet_syntax at %v", d.Pos)
			}
		case "condition_syntax":
			if d.Pos != (Pos{12, 38}) || !strings.Contains(d.String("s10a.dot"), "s10a.dot:12:38: error: condition_syntax: ") {
				t.Errorf("condition_syntax: %s", d.String("s10a.dot"))
			}
		}
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// TestS10b is scenario S10(b): stylesheet, subgraph class and node
// defaults resolved.
func TestS10b(t *testing.T) {
	g, ds := load(t, "testdata/s10b.dot")
	if HasErrors(ds) {
		t.Fatalf("errors: %v", ds)
	}
	tests := []struct {
		id                          string
		model, provider, effort, th string
		timeout                     time.Duration
	}{
		{"plan", "claude-sonnet-4-5", "anthropic", "low", "", 0},
		{"implement", "claude-opus-4-6", "anthropic", "low", "", 0},
		{"critical_review", "gpt-5.2", "openai", "high", "", 0},
		{"P", "m", "anthropic", "low", "loop-a", 900 * time.Second},
		{"I", "m", "anthropic", "low", "loop-a", 1800 * time.Second},
	}
	for _, tt := range tests {
		n := g.Node(tt.id)
		if n == nil {
			t.Fatalf("no node %s", tt.id)
		}
		if n.LLMModel() != tt.model || n.LLMProvider() != tt.provider || n.ReasoningEffort() != tt.effort || n.ThreadID() != tt.th || n.Timeout() != tt.timeout {
			t.Errorf("%s: %s %s %s %s %v", tt.id, n.LLMModel(), n.LLMProvider(), n.ReasoningEffort(), n.ThreadID(), n.Timeout())
		}
	}
	if p := g.Node("P"); p.SubgraphClass != "loop-a" || !p.HasClass("loop-a") {
		t.Errorf("P classes %v %q", p.Classes, p.SubgraphClass)
	}
	if a, _ := g.Node("critical_review").Attrs.Get("llm_model"); a.Origin != OriginStylesheet || a.Rule != "#critical_review" {
		t.Errorf("origin %+v", a)
	}
	if a, _ := g.Node("I").Attrs.Get("timeout"); a.Origin != OriginExplicit {
		t.Errorf("I timeout %+v", a)
	}
	if a, _ := g.Node("P").Attrs.Get("timeout"); a.Origin != OriginDefault {
		t.Errorf("P timeout %+v", a)
	}
}

// TestExplicitBeatsID: an explicit node llm_model beats #id (§8.5).
func TestExplicitBeatsID(t *testing.T) {
	g, _ := loadString(t, `digraph G {
  model_stylesheet="#n { llm_model: sheet; } * { llm_provider: p }"
  llm_model=graphwide
  reasoning_effort=medium
  start [shape=Mdiamond]; exit [shape=Msquare]
  n [llm_model=mine, prompt="x"]
  o [prompt="y"]
  start -> n -> o -> exit
}`)
	if m := g.Node("n").LLMModel(); m != "mine" {
		t.Errorf("n model %q", m)
	}
	if p := g.Node("n").LLMProvider(); p != "p" {
		t.Errorf("n provider %q", p)
	}
	o := g.Node("o")
	if a, _ := o.Attrs.Get("llm_model"); a.Value.Text != "graphwide" || a.Origin != OriginGraph || o.ReasoningEffort() != "medium" {
		t.Errorf("o %+v %s", a, o.ReasoningEffort())
	}
}

// TestSmoke is S1's check: the §11.13 smoke test parses with 5 nodes and
// 6 edges and its goal.
func TestSmoke(t *testing.T) {
	g, ds := loadString(t, smoke)
	if HasErrors(ds) || len(g.Nodes) != 5 || len(g.Edges) != 6 || g.Goal() != "Create a hello world Python script" {
		t.Fatalf("%d nodes, %d edges, goal %q, %v", len(g.Nodes), len(g.Edges), g.Goal(), ds)
	}
	if p := g.Node("plan").Prompt(); p != "Plan how to create a hello world script for: Create a hello world Python script" {
		t.Errorf("plan prompt %q", p)
	}
	// Warnings only: the gate has no retry target, and implement and
	// review end the run short of the exit on a RETRY outcome (D15).
	var rules []string
	for _, d := range ds {
		rules = append(rules, d.Rule+":"+d.Node)
	}
	if got := strings.Join(rules, " "); got != "all_conditional_edges:implement goal_gate_has_retry:implement all_conditional_edges:review" {
		t.Errorf("diagnostics: %s", got)
	}
}

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
}`

func TestGraphHandlerType(t *testing.T) {
	g, ds := loadString(t, `digraph G { start; a [prompt="x"]; end; start -> a -> end }`)
	if HasErrors(ds) {
		t.Fatal(ds)
	}
	if g.HandlerType(g.Node("start")) != "start" || g.HandlerType(g.Node("end")) != "exit" || g.HandlerType(g.Node("a")) != "codergen" {
		t.Error("handler types")
	}
}
