package pipeline

import (
	"slices"
	"strings"
	"testing"
)

// rulesOf lists diagnostics as "rule:node-or-edge".
func rulesOf(ds []Diagnostic) []string {
	var out []string
	for _, d := range ds {
		out = append(out, d.Rule+":"+d.Node+d.Edge)
	}
	return out
}

const frame = "start [shape=Mdiamond]\nexit [shape=Msquare]\n"

// TestRules pins each rule and nb's choices, one graph per case.
func TestRules(t *testing.T) {
	tests := []struct {
		name, body string
		want       []string // exactly these rule:subject
	}{
		{"clean", frame + `a [prompt="x"]; start -> a -> exit`, nil},
		{"no start", `exit [shape=Msquare]; a [prompt="x"]; a -> exit`, []string{"start_node:"}},
		{"start by id", `start; a [prompt="x"]; done [shape=Msquare]; start -> a -> done`, nil},
		{"exit by id end", `start [shape=Mdiamond]; a [prompt="x"]; end; start -> a -> end`, nil},
		{"two exits", `start [shape=Mdiamond]; x1 [shape=Msquare]; x2 [shape=Msquare]; a [prompt="x"]; start -> a -> x1; a -> x2`, []string{"terminal_node:x1", "terminal_node:x2"}},
		// human.channel names "<channel>:<chat>", on a gate.
		{"human_channel ok", frame + `g [shape=hexagon, human.channel="telegram:42"]; start -> g -> exit`, nil},
		{"human_channel malformed", frame + `g [shape=hexagon, human.channel="telegram"]; start -> g -> exit`, []string{"human_channel:g"}},
		{"human_channel web chat", frame + `g [shape=hexagon, human.channel="web:me"]; start -> g -> exit`, nil},
		{"human_channel web chat id", frame + `g [shape=hexagon, human.channel="web:a/b"]; start -> g -> exit`, []string{"human_channel:g"}},
		{"human_channel not a gate", frame + `a [prompt="x", human.channel="slack:C1"]; start -> a -> exit`, []string{"human_channel:a"}},
		// D5: unreachable is an error.
		{"D5 reachability", frame + `a [prompt="x"]; lone [prompt="y"]; start -> a -> exit`, []string{"reachability:lone"}},
		// D6: prompt or explicit label.
		{"D6 label suffices", frame + `a [label="Plan the work"]; start -> a -> exit`, nil},
		{"D6 neither", frame + `a; start -> a -> exit`, []string{"prompt_on_llm_nodes:a"}},
		{"D6 not llm", frame + `t [shape=parallelogram, tool_command="true"]; start -> t -> exit`, nil},
		// D11: implicit nodes are created, warned about, and satisfy edge_target_exists.
		{"D11 implicit", frame + `start -> ghost -> exit`, []string{"prompt_on_llm_nodes:ghost", "implicit_node:ghost"}},
		{"D11 declared later", frame + `start -> g -> exit; g [prompt="x"]`, nil},
		{"fidelity", frame + `default_fidelity=bogus; a [prompt="x", fidelity="summary:high"]; start -> a [fidelity=full]; a -> exit [fidelity=nope]`, []string{"fidelity_valid:", "fidelity_valid:a -> exit"}},
		{"type known", frame + `a [prompt="x", type="wait.human"]; b [prompt="y", type="custom.x"]; start -> a -> b -> exit`, []string{"type_known:b"}},
		{"retry targets", frame + `retry_target=nowhere; a [prompt="x", fallback_retry_target=gone]; start -> a -> exit`, []string{"retry_target_exists:", "retry_target_exists:a"}},
		{"goal gate with graph target", frame + `retry_target=a; a [prompt="x", goal_gate=true]; start -> a -> exit`, nil},
		{"goal gate with fallback", frame + `a [prompt="x", goal_gate=true, fallback_retry_target=a]; start -> a -> exit`, nil},
		// D10: unqualified keys and bare keys are accepted; `==` is not.
		{"D10 accepted", frame + `a [prompt="x"]; start -> a; a -> exit [condition="tool.output=yes && context.ok"]; a -> exit`, nil},
		{"D10 ==", frame + `a [prompt="x"]; start -> a; a -> exit [condition="outcome==success"]; a -> exit`, []string{"condition_syntax:a -> exit"}},
		// D15: all edges conditional; a k=v / k!=v pair is exhaustive.
		{"D15 all conditional", frame + `a [prompt="x"]; start -> a; a -> exit [condition="outcome=success"]; a -> a [condition="outcome=fail"]`, []string{"all_conditional_edges:a"}},
		{"D15 complementary", frame + `a [prompt="x"]; start -> a; a -> exit [condition="outcome=success"]; a -> a [condition="outcome!=success"]`, nil},
		// D12: branches must meet at one fan-in.
		{"D12 converge", frame + `f [shape=component]; j [shape=tripleoctagon]; b1 [prompt="1"]; b2 [prompt="2"]; start -> f; f -> b1 -> j; f -> b2 -> j; j -> exit`, nil},
		{"D12 diverge", frame + `f [shape=component]; j [shape=tripleoctagon]; b1 [prompt="1"]; b2 [prompt="2"]; start -> f; f -> b1 -> j; f -> b2 -> exit; j -> exit`, []string{"parallel_converge:f"}},
		{"attr types", frame + `max_steps=lots; a [prompt="x", timeout=soon, max_retries=-1, goal_gate=yes, retry_target=a]; start -> a -> exit [weight=heavy]`, []string{"attr_type:", "attr_type:a", "attr_type:a", "attr_type:a", "attr_type:start -> a", "attr_type:a -> exit"}},
		{"attr values", frame + `a [prompt="x", reasoning_effort=max, retry_policy=standard]; p [shape=component, join_policy=any]; j [shape=tripleoctagon]; start -> a -> p -> j -> exit`, []string{"attr_value:a", "attr_value:p"}},
		// D8: classes outside [a-z0-9-] can never be selected.
		{"D8 class name", frame + `a [prompt="x", class="code,Big_One"]; start -> a -> exit`, []string{"class_name:a"}},
		{"loop never exits", frame + `a [prompt="x"]; b [prompt="y"]; c [prompt="z"]; start -> a -> exit; start -> b -> c -> b`, []string{"loop_cap:b"}},
		{"loop uncapped", frame + `max_node_visits=0; a [prompt="x"]; b [prompt="y"]; start -> a -> b -> a; b -> exit`, []string{"loop_cap:a"}},
		{"loop capped by steps", frame + `max_node_visits=0; max_steps=50; a [prompt="x"]; b [prompt="y"]; start -> a -> b -> a; b -> exit`, nil},
		{"loop default cap", frame + `a [prompt="x"]; b [prompt="y"]; start -> a -> b -> a; b -> exit`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, ds := loadString(t, "digraph G {\n"+tt.body+"\n}")
			if got := rulesOf(ds); !slices.Equal(got, tt.want) {
				var lines []string
				for _, d := range ds {
					lines = append(lines, d.String("flow.dot"))
				}
				t.Errorf("got %q, want %q\n%s", got, tt.want, strings.Join(lines, "\n"))
			}
		})
	}
}

// TestEdgeTargetExists: graphs built by code can name missing nodes.
func TestEdgeTargetExists(t *testing.T) {
	g, _ := loadString(t, "digraph G {\n"+frame+"a [prompt=\"x\"]; start -> a -> exit }")
	g.Edges = append(g.Edges, &Edge{From: "a", To: "nowhere"})
	ds := Validate(g, LoadOptions{})
	if got := rulesOf(ds); !slices.Contains(got, "edge_target_exists:a -> nowhere") {
		t.Errorf("got %v", got)
	}
}

// TestReviewExample is §2.13's Review example (S7's graph, D11): the
// nodes only edges name are created, with warnings, and no error.
func TestReviewExample(t *testing.T) {
	g, ds := loadString(t, `digraph Review {
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
}`)
	if HasErrors(ds) {
		t.Fatalf("errors: %v", ds)
	}
	for _, id := range []string{"ship_it", "fixes"} {
		n := g.Node(id)
		if n == nil || !n.Implicit || n.Shape() != "box" {
			t.Fatalf("%s: %+v", id, n)
		}
	}
	if g.Node("review_gate").HandlerType() != "wait.human" || g.Str("rankdir", "") != "LR" {
		t.Error("review_gate or rankdir")
	}
	if got := rulesOf(ds); !slices.Equal(got, []string{"prompt_on_llm_nodes:ship_it", "implicit_node:ship_it", "prompt_on_llm_nodes:fixes", "implicit_node:fixes"}) {
		t.Errorf("got %v", got)
	}
}

// TestBranchExample is §2.13's Branch example: clean apart from nothing;
// the gate's complementary conditions are not D15's case.
func TestBranchExample(t *testing.T) {
	g, ds := loadString(t, `digraph Branch {
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
}`)
	if len(ds) != 0 {
		t.Errorf("diagnostics %v", rulesOf(ds))
	}
	if g.Node("gate").HandlerType() != "conditional" || g.Node("plan").Timeout().String() != "15m0s" || len(g.Edges) != 6 {
		t.Error("shape")
	}
}

// TestDefaultsAndChains pins §2.9–2.12: chain attributes on every pair,
// defaults only for later statements and explicit attributes winning,
// subgraph scope, classes.
func TestDefaultsAndChains(t *testing.T) {
	g, _ := loadString(t, `digraph G {
  early
  node [shape=box, timeout=900s]
  edge [weight=3]
  start [shape=Mdiamond]; exit [shape=Msquare]
  a [timeout=1m, class="code, critical"]
  start -> a -> b -> exit [label="next", weight=7]
  a -> c
  subgraph cluster_x {
    label="Loop A"
    node [thread_id=x]
    subgraph inner { graph [label="Inner Part!"]; c; d }
    a
  }
  e
}`)
	if g.Node("early").Has("timeout") {
		t.Error("defaults applied to an earlier node")
	}
	if g.Node("a").Timeout().String() != "1m0s" || g.Node("b").Timeout().String() != "15m0s" {
		t.Error("timeouts")
	}
	for _, e := range g.Edges[:3] {
		if e.Label() != "next" || e.Weight() != 7 {
			t.Errorf("chain edge %s: %q %d", e, e.Label(), e.Weight())
		}
	}
	if e := g.Edges[3]; e.Weight() != 3 || e.Label() != "" {
		t.Errorf("a -> c: %d", e.Weight())
	}
	// c was created by a -> c outside the subgraph: no thread_id, but the
	// subgraphs' classes when named inside them.
	c := g.Node("c")
	if c.ThreadID() != "" || !slices.Equal(c.Classes, []string{"inner-part", "loop-a"}) || c.SubgraphClass != "inner-part" {
		t.Errorf("c: %q %v %q", c.ThreadID(), c.Classes, c.SubgraphClass)
	}
	if d := g.Node("d"); d.ThreadID() != "x" || d.SubgraphClass != "inner-part" {
		t.Errorf("d: %+v", d)
	}
	if a := g.Node("a"); !slices.Equal(a.Classes, []string{"code", "critical", "loop-a"}) {
		t.Errorf("a classes %v", a.Classes)
	}
	if g.Node("e").ThreadID() != "" {
		t.Error("subgraph default leaked out")
	}
}

func TestClassName(t *testing.T) {
	for in, want := range map[string]string{"Loop A": "loop-a", "Inner Part!": "inner-part", "x_y 2": "xy-2", "": ""} {
		if got := ClassName(in); got != want {
			t.Errorf("ClassName(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestVariables(t *testing.T) {
	g, _, err := LoadWith("f.dot", []byte(`digraph G { goal="old"; start [shape=Mdiamond]; exit [shape=Msquare]
  a [prompt="$goal / $go / $goals / $name"]; start -> a -> exit }`), LoadOptions{Vars: map[string]string{"go": "GO", "name": "N", "goal": "new"}})
	if err != nil {
		t.Fatal(err)
	}
	if p := g.Node("a").Prompt(); p != "new / GO / news / N" || g.Goal() != "new" {
		t.Errorf("prompt %q goal %q", p, g.Goal())
	}
}

func TestRetryAlias(t *testing.T) {
	g, _ := loadString(t, `digraph G { default_max_retry=1; start [shape=Mdiamond]; exit [shape=Msquare]; a [prompt="x"]; b [prompt="y", max_retries=0]; start -> a -> b -> exit }`)
	if g.Node("a").MaxRetries(g) != 1 || g.Node("b").MaxRetries(g) != 0 {
		t.Error("alias")
	}
	g, _ = loadString(t, `digraph G { default_max_retries=2; default_max_retry=1; start [shape=Mdiamond]; exit [shape=Msquare]; start -> exit }`)
	if g.DefaultMaxRetries() != 2 {
		t.Error("default_max_retries should win over its alias")
	}
}

func TestSyntaxError(t *testing.T) {
	_, _, err := Load("bad.dot", []byte("digraph G {\n  a [x=1 y=2]\n}"))
	se, ok := err.(*SyntaxError)
	if !ok || se.Error() != "bad.dot:2:10: a comma is missing before y: attributes are separated by commas (§2.3)" {
		t.Fatalf("%v", err)
	}
	if d := se.Diagnostic(); d.String("bad.dot") != "bad.dot:2:10: error: syntax: a comma is missing before y: attributes are separated by commas (§2.3)" {
		t.Error(d.String("bad.dot"))
	}
}

// TestCustomRulesAndTransforms pins §7.4 and §9.3: custom transforms run
// after the built-in ones (they see the expanded prompt and the
// stylesheet's model), custom rules after the built-in rules.
func TestCustomRulesAndTransforms(t *testing.T) {
	var seen string
	opts := LoadOptions{
		Transforms: []func(*Graph){func(g *Graph) {
			n := g.Node("a")
			seen = n.Prompt() + "|" + n.LLMModel()
			n.Attrs.Set(Attr{Key: "prompt", Value: String("rewritten"), Origin: OriginTransform})
		}},
		Rules: []Rule{RuleFunc{"no_rewrites", func(g *Graph) []Diagnostic {
			if g.Node("a").Prompt() == "rewritten" {
				return []Diagnostic{{Severity: Info, Message: "a was rewritten", Node: "a"}}
			}
			return nil
		}}},
		HandlerTypes: []string{"custom.x"},
	}
	g, ds, err := LoadWith("f.dot", []byte(`digraph G { goal=G; model_stylesheet="* { llm_model: m; }"
  start [shape=Mdiamond]; exit [shape=Msquare]; a [prompt="do $goal", type="custom.x"]; start -> a -> exit }`), opts)
	if err != nil {
		t.Fatal(err)
	}
	if seen != "do G|m" || g.Node("a").Prompt() != "rewritten" {
		t.Errorf("transform saw %q", seen)
	}
	if got := rulesOf(ds); !slices.Equal(got, []string{"no_rewrites:a"}) {
		t.Errorf("got %v", got)
	}
}

// TestCommentsInStrings: comment markers inside strings are text.
func TestCommentsInStrings(t *testing.T) {
	g, _ := loadString(t, `digraph G { // a comment
  a [prompt="see http://x /* not a comment */ // nor this"] /* a comment */ }`)
	if p := g.Node("a").Prompt(); p != "see http://x /* not a comment */ // nor this" {
		t.Errorf("prompt %q", p)
	}
}

// TestValidateOrError is §7.3's validate_or_raise.
func TestValidateOrError(t *testing.T) {
	g, _ := loadString(t, "digraph G {\n"+frame+"a [prompt=\"x\"]; lone; start -> a -> exit }")
	ds, err := ValidateOrError(g, LoadOptions{})
	ve, ok := err.(*ValidationError)
	if !ok || len(ve.Diagnostics) != 1 || len(ds) != 2 {
		t.Fatalf("%v, %v", err, rulesOf(ds))
	}
	if want := "flow.dot has 1 error(s); nothing runs until they are fixed:\n  flow.dot:4:17: error: reachability: lone cannot be reached from the start node start: add an edge to it or remove it (node lone)"; ve.Error() != want {
		t.Errorf("got %q", ve.Error())
	}
	g, _ = loadString(t, "digraph G {\n"+frame+"a [prompt=\"x\"]; start -> a -> exit }")
	if _, err := ValidateOrError(g, LoadOptions{}); err != nil {
		t.Error(err)
	}
}
