package graphview

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	gdot "gonum.org/v1/gonum/graph/formats/dot"
	"gonum.org/v1/gonum/graph/formats/dot/ast"

	"github.com/nbots/nb/pipeline"
)

// TestDOTIsGraphviz: the DOT given to Graphviz's dot quotes every value
// again (900s, claude-sonnet-4-5, dotted keys are not Graphviz IDs) and
// parses in gonum's DOT parser with every node and edge, for every flow
// of the tests.
func TestDOTIsGraphviz(t *testing.T) {
	files, _ := filepath.Glob("../testdata/*.dot")
	if len(files) < 5 {
		t.Fatalf("%d flows", len(files))
	}
	for _, file := range files {
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		g, _, err := pipeline.Load(file, src)
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		path := &Path{Completed: []string{g.Nodes[0].ID}, Current: g.Nodes[0].ID}
		if err := DOT(&b, g, path); err != nil {
			t.Fatal(err)
		}
		f, err := gdot.ParseBytes(b.Bytes())
		if err != nil {
			t.Fatalf("%s: Graphviz would refuse it: %v\n%s", file, err, b.String())
		}
		nodes, edges := 0, 0
		for _, st := range f.Graphs[0].Stmts {
			switch st.(type) {
			case *ast.NodeStmt:
				nodes++
			case *ast.EdgeStmt:
				edges++
			}
		}
		if nodes != len(g.Nodes) || edges != len(g.Edges) {
			t.Errorf("%s: %d nodes and %d edges, want %d and %d", file, nodes, edges, len(g.Nodes), len(g.Edges))
		}
	}
}

func TestQuote(t *testing.T) {
	for in, want := range map[string]string{`a"b`: `"a\"b"`, `a\b`: `"a\\b"`, "a\nb": `"a\nb"`, "a\x00b\tc": `"ab c"`} {
		if got := quote(in); got != want {
			t.Errorf("quote(%q) = %s, want %s", in, got, want)
		}
	}
}

// TestTextPath: visits, the edges taken and the current node are marked.
func TestTextPath(t *testing.T) {
	g, _, err := pipeline.Load("f.dot", []byte(`digraph G { start [shape=Mdiamond]; exit [shape=Msquare]
  a [prompt="x"]; b [prompt="y", label="Bee"]
  start -> a -> b -> exit; b -> a [condition="outcome=fail", label="again", weight=2] }`))
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := Text(&b, g, &Path{Completed: []string{"start", "a", "b", "a"}, Current: "b"}); err != nil {
		t.Fatal(err)
	}
	want := `digraph G (4 nodes, 4 edges)

✓ start  [start]
    ⇒ a

✓ a  [codergen] ×2
    ⇒ b

✓ b "Bee"  [codergen] ◀ current
    → exit
    ⇒ a  "again"  if outcome=fail  weight 2

  exit  [exit]
`
	if b.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", b.String(), want)
	}
}
