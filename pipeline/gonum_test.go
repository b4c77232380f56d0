package pipeline

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"testing"
	"unicode/utf8"

	gdot "gonum.org/v1/gonum/graph/formats/dot"
	"gonum.org/v1/gonum/graph/formats/dot/ast"

	"github.com/nbots/nb/pipeline/dot"
)

// graphvizSource returns src with every value nb did not read as a
// quoted string quoted, and every dotted key quoted: the specification's
// bare values (900s, claude-sonnet-4-5, summary:high) and keys
// (tool_hooks.pre) are not Graphviz IDs. Nothing else changes, so gonum
// sees the file's own structure.
func graphvizSource(t testing.TB, src []byte, tree *dot.Graph) []byte {
	lines := [][2]int{{0, 0}} // line starts, by line number
	start := 0
	for i, c := range src {
		if c == '\n' {
			lines = append(lines, [2]int{start, i})
			start = i + 1
		}
	}
	lines = append(lines, [2]int{start, len(src)})
	offset := func(p dot.Pos) int {
		off := lines[p.Line][0]
		for col := 1; col < p.Col; col++ {
			_, size := utf8.DecodeRune(src[off:])
			off += size
		}
		return off
	}
	type edit struct {
		from, to int
		text     string
	}
	var edits []edit
	var walk func([]dot.Stmt)
	add := func(as []dot.Attr) {
		for _, a := range as {
			if a.Value.Kind != dot.String {
				o := offset(a.Value.Pos)
				edits = append(edits, edit{o, o + len(a.Value.Raw), strconv.Quote(a.Value.Text)})
			}
			if bytes.ContainsRune([]byte(a.Key), '.') {
				o := offset(a.KeyPos)
				end := o + bytes.IndexByte(src[o:], '=')
				edits = append(edits, edit{o, end, strconv.Quote(a.Key)})
			}
		}
	}
	walk = func(stmts []dot.Stmt) {
		for _, st := range stmts {
			switch st := st.(type) {
			case *dot.AttrStmt:
				add(st.Attrs)
			case *dot.AssignStmt:
				add([]dot.Attr{st.Attr})
			case *dot.NodeStmt:
				add(st.Attrs)
			case *dot.EdgeStmt:
				add(st.Attrs)
			case *dot.Subgraph:
				walk(st.Stmts)
			}
		}
	}
	walk(tree.Stmts)
	sort.Slice(edits, func(i, j int) bool { return edits[i].from > edits[j].from })
	out := slices.Clone(src)
	for _, e := range edits {
		out = slices.Concat(out[:e.from], []byte(e.text), out[e.to:])
	}
	return out
}

// gonumShape returns the node IDs and the edges ("a->b", in order) gonum
// reads in src.
func gonumShape(f *ast.File) (nodes []string, edges []string) {
	seen := map[string]bool{}
	node := func(id string) {
		if !seen[id] {
			seen[id] = true
			nodes = append(nodes, id)
		}
	}
	var walk func([]ast.Stmt)
	walk = func(stmts []ast.Stmt) {
		for _, st := range stmts {
			switch st := st.(type) {
			case *ast.NodeStmt:
				node(st.Node.ID)
			case *ast.EdgeStmt:
				from := st.From.(*ast.Node).ID
				node(from)
				for e := st.To; e != nil; e = e.To {
					to := e.Vertex.(*ast.Node).ID
					node(to)
					edges = append(edges, from+"->"+to)
					from = to
				}
			case *ast.Subgraph:
				walk(st.Stmts)
			}
		}
	}
	for _, g := range f.Graphs {
		walk(g.Stmts)
	}
	return nodes, edges
}

// differential checks that gonum's DOT parser reads a flow nb accepts
// with the same nodes and edges.
func differential(t testing.TB, src []byte) {
	t.Helper()
	g, err := Parse("flow.dot", src)
	if err != nil {
		return // nb refuses it: nothing to compare
	}
	tree, err := dot.Parse(src)
	if err != nil {
		t.Fatalf("dot.Parse fails where Parse did not: %v", err)
	}
	gv := graphvizSource(t, src, tree)
	f, err := gdot.ParseBytes(gv)
	if err != nil {
		t.Fatalf("gonum refuses a flow nb accepts: %v\n%s", err, gv)
	}
	if len(f.Graphs) != 1 || !f.Graphs[0].Directed || f.Graphs[0].Strict || f.Graphs[0].ID != g.Name {
		t.Fatalf("gonum reads %d graphs, %+v", len(f.Graphs), f.Graphs)
	}
	gn, ge := gonumShape(f)
	var nn, ne []string
	for _, n := range g.Nodes {
		nn = append(nn, n.ID)
	}
	for _, e := range g.Edges {
		ne = append(ne, e.From+"->"+e.To)
	}
	if !slices.Equal(gn, nn) || !slices.Equal(ge, ne) {
		t.Fatalf("gonum: nodes %v edges %v\nnb:    nodes %v edges %v\n%s", gn, ge, nn, ne, src)
	}
}

func corpus(t testing.TB) [][]byte {
	files, _ := filepath.Glob("testdata/*.dot")
	var out [][]byte
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	return append(out, []byte(smoke))
}

// TestGonumDifferential: every flow of the tests parses in gonum's DOT
// parser (v0.17.0) with the same nodes and edges.
func TestGonumDifferential(t *testing.T) {
	flows := corpus(t)
	if len(flows) < 5 {
		t.Fatalf("only %d flows", len(flows))
	}
	for _, src := range flows {
		if _, err := Parse("f.dot", src); err != nil {
			t.Errorf("a corpus flow does not parse: %v", err)
		}
		differential(t, src)
	}
}

// FuzzLoad: Load never panics, its positions lie in the file, and what
// it accepts gonum reads with the same nodes and edges.
func FuzzLoad(f *testing.F) {
	for _, src := range corpus(f) {
		f.Add(src)
	}
	f.Add([]byte("digraph G { a -> b -> c [x=1, y=\"z\"] subgraph s { label=\"L A\"; node [k=v] d } }"))
	f.Fuzz(func(t *testing.T, src []byte) {
		nlines := bytes.Count(src, []byte("\n")) + 1
		g, ds, err := Load("f.dot", src)
		if err != nil {
			se, ok := err.(*SyntaxError)
			if !ok || se.Pos.Line < 1 || se.Pos.Line > nlines || se.Pos.Col < 1 {
				t.Fatalf("bad error %#v", err)
			}
			return
		}
		for _, d := range ds {
			if d.Pos.Line > nlines || d.Pos.Line < 0 {
				t.Fatalf("diagnostic outside the file: %s", d.String("f.dot"))
			}
		}
		_ = Resolve(g)
		differential(t, src)
	})
}
