package pipeline

import (
	"fmt"
	"strings"
	"testing"
)

// flow1000 is a generated 1,000-node flow: a chain of LLM nodes with
// prompts, classes and timeouts, a conditional loop back every ten nodes,
// subgraphs with labels and node defaults, and a model stylesheet.
func flow1000() []byte {
	var b strings.Builder
	b.WriteString(`digraph Big {
  graph [goal="Exercise the checker", model_stylesheet="* { llm_model: base; } box { reasoning_effort: low; } .even { llm_model: even-model; } #n500 { llm_provider: openai; }"]
  node [shape=box, timeout=900s]
  start [shape=Mdiamond]
  exit [shape=Msquare]
`)
	const n = 998
	for i := 0; i < n; i++ {
		if i%100 == 0 {
			fmt.Fprintf(&b, "  subgraph cluster_%d {\n    label=\"Part %d\"\n    node [thread_id=\"part-%d\"]\n", i/100, i/100, i/100)
		}
		class := "odd"
		if i%2 == 0 {
			class = "even"
		}
		fmt.Fprintf(&b, "    n%d [label=\"Step %d\", prompt=\"Do step %d of $goal\", class=\"%s,work\", max_retries=1]\n", i, i, i, class)
		if i%100 == 99 || i == n-1 {
			b.WriteString("  }\n")
		}
	}
	b.WriteString("  start -> n0\n")
	for i := 0; i+1 < n; i++ {
		if i%10 == 9 {
			fmt.Fprintf(&b, "  n%d -> n%d [condition=\"outcome=success && context.round!=3\", weight=2]\n", i, i+1)
			fmt.Fprintf(&b, "  n%d -> n%d [label=\"[R] Retry\"]\n", i, i-9)
		} else {
			fmt.Fprintf(&b, "  n%d -> n%d\n", i, i+1)
		}
	}
	fmt.Fprintf(&b, "  n%d -> exit\n}\n", n-1)
	return []byte(b.String())
}

func TestFlow1000(t *testing.T) {
	g, ds, err := Load("big.dot", flow1000())
	if err != nil {
		t.Fatal(err)
	}
	if len(g.Nodes) != 1000 || HasErrors(ds) || len(ds) != 0 {
		t.Fatalf("%d nodes, %v", len(g.Nodes), rulesOf(ds))
	}
	if n := g.Node("n500"); n.LLMModel() != "even-model" || n.LLMProvider() != "openai" || n.ThreadID() != "part-5" || !n.HasClass("part-5") {
		t.Errorf("n500: %+v", n)
	}
}

// BenchmarkLoad1000 is `nb pipeline check`'s work on a 1,000-node flow:
// parse, transform and validate (goal: 50 ms).
func BenchmarkLoad1000(b *testing.B) {
	src := flow1000()
	b.SetBytes(int64(len(src)))
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := Load("big.dot", src); err != nil {
			b.Fatal(err)
		}
	}
}
