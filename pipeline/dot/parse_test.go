package dot

import (
	"strings"
	"testing"
)

func TestParseShapes(t *testing.T) {
	src := `// a flow
digraph Flow {
    graph [goal="Say \"hi\"\n\tnow", label=Greeting]
    rankdir=LR; stack.child_dotfile="child.dot"
    node [shape=box, timeout=900s]
    /* block
       comment */
    start [shape=Mdiamond]
    a [
        prompt="multi
line",
        max_retries=3, weight=-1, ratio=0.5, on=true, human.default_choice=ship_it,
    ]
    start -> a -> exit [label="next", weight=2]
    subgraph cluster_x { label="Loop A"; b }
    exit [shape=Msquare];
}
`
	g, err := Parse([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if g.Name.Name != "Flow" || g.Name.Pos != (Pos{2, 9}) {
		t.Errorf("name %+v", g.Name)
	}
	if len(g.Stmts) != 9 {
		t.Fatalf("%d statements", len(g.Stmts))
	}
	ga := g.Stmts[0].(*AttrStmt)
	if ga.Kind != "graph" || ga.Attrs[0].Value.Text != "Say \"hi\"\n\tnow" || ga.Attrs[0].Value.Pos != (Pos{3, 17}) || ga.Attrs[1].Value.Kind != Bare {
		t.Errorf("graph attrs %+v", ga)
	}
	if as := g.Stmts[2].(*AssignStmt); as.Attr.Key != "stack.child_dotfile" || as.Attr.KeyPos != (Pos{4, 17}) {
		t.Errorf("assign %+v", as)
	}
	if nd := g.Stmts[3].(*AttrStmt); nd.Attrs[1].Value.Kind != Duration || nd.Attrs[1].Value.Text != "900s" {
		t.Errorf("node defaults %+v", nd)
	}
	a := g.Stmts[5].(*NodeStmt)
	kinds := map[string]Kind{"prompt": String, "max_retries": Int, "weight": Int, "ratio": Float, "on": Bool, "human.default_choice": Bare}
	for _, at := range a.Attrs {
		if kinds[at.Key] != at.Value.Kind {
			t.Errorf("%s: kind %d, want %d", at.Key, at.Value.Kind, kinds[at.Key])
		}
	}
	if a.Attrs[0].Value.Text != "multi\nline" || a.Attrs[1].KeyPos != (Pos{12, 9}) {
		t.Errorf("a %+v", a.Attrs[:2])
	}
	e := g.Stmts[6].(*EdgeStmt)
	if len(e.IDs) != 3 || e.Arrows[1] != (Pos{14, 16}) || e.IDs[2].Pos != (Pos{14, 19}) || e.Attrs[1].Value.Text != "2" {
		t.Errorf("edge %+v", e)
	}
	sg := g.Stmts[7].(*Subgraph)
	if sg.Name.Name != "cluster_x" || len(sg.Stmts) != 2 {
		t.Errorf("subgraph %+v", sg)
	}
}

// TestParseErrors pins the grammar's strict points (§2.2–2.3, D19), each
// with the place of the error.
func TestParseErrors(t *testing.T) {
	tests := []struct{ src, where, msg string }{
		{``, "1:1", "empty"},
		{`graph G { a }`, "1:1", "undirected graphs"},
		{`strict digraph G { a }`, "1:1", "strict"},
		{`digraph { a }`, "1:9", "no name"},
		{`digraph G { a -- b }`, "1:15", "`--`"},
		{`digraph G { a -> b } digraph H { }`, "1:22", "one digraph per file"},
		{"digraph G {\n a [x=1 y=2] }", "2:9", "comma is missing"},
		{"digraph G {\n a [x=1; y=2] }", "2:8", "commas, not semicolons"},
		{`digraph G { a:p -> b }`, "1:14", "ports"},
		{`digraph G { a -> {b c} }`, "1:18", "{A B} endpoints"},
		{`digraph G { "a b" -> c }`, "1:13", "not quoted strings"},
		{`digraph G { node -> b }`, "1:18", "expected ["},
		{`digraph G { a -> node }`, "1:18", "keyword node"},
		{`digraph G { Edge [x=1] }`, "1:13", "keyword edge"},
		{`digraph G { a -> Subgraph }`, "1:18", "subgraphs cannot"},
		{`digraph G { a [x="\q"] }`, "1:19", "unknown escape \\q"},
		{`digraph G { a [x="abc] }`, "1:18", "unterminated string"},
		{`digraph G { a [x=5x] }`, "1:18", "not a value"},
		{`digraph G { a [x=1.5s] }`, "1:18", "not a value"},
		{`digraph G { a [x=a/b] }`, "1:19", "unexpected '/'"},
		{`digraph G { a [x=<b>] }`, "1:18", "HTML"},
		{"digraph G {\n a [x=1\n", "3:1", "never closed"},
		{"digraph G {\n a\n", "1:11", "never closed"},
		{`digraph G { /* open`, "1:13", "unterminated /*"},
		{`digraph G { 1 -> 2 }`, "1:13", "start with a letter"},
		{`digraph G { { a } }`, "1:13", "anonymous"},
		{`digraph G { a [x=] }`, "1:18", "value is missing"},
		{"digraph G { a [label=\"\xff\"] }", "1:23", "not UTF-8"},
		{"digraph A{A[A=\"\x00\"]}", "1:16", "control character (0x00)"},
		{"digraph A{A\v}", "1:12", "control character (0x0b)"},
		{`digraph G { a -> b [edge=x] }`, "1:21", "cannot be an attribute key"},
		{`digraph G { a [Node=1] }`, "1:16", "keyword node: it cannot be an attribute key"},
	}
	for _, tt := range tests {
		_, err := Parse([]byte(tt.src))
		e, ok := err.(*Error)
		if !ok {
			t.Errorf("Parse(%q) = %v, want an *Error", tt.src, err)
			continue
		}
		if e.Pos.String() != tt.where || !strings.Contains(e.Msg, tt.msg) {
			t.Errorf("Parse(%q) = %s: %s, want %s: …%s…", tt.src, e.Pos, e.Msg, tt.where, tt.msg)
		}
	}
}

// TestNestingLimit: deep nesting is an error, not a stack overflow.
func TestNestingLimit(t *testing.T) {
	deep := func(n int) []byte {
		return []byte("digraph G {" + strings.Repeat("subgraph {", n) + "a" + strings.Repeat("}", n) + "}")
	}
	if _, err := Parse(deep(100)); err != nil {
		t.Fatalf("100 levels: %v", err)
	}
	_, err := Parse(deep(200000))
	if e, ok := err.(*Error); !ok || !strings.Contains(e.Msg, "nested more than 100 deep") || e.Pos != (Pos{1, 1012}) {
		t.Fatalf("200000 levels: %v", err)
	}
}

func TestNumberKind(t *testing.T) {
	for raw, want := range map[string]Kind{"42": Int, "-1": Int, "0": Int, "0.5": Float, "-3.14": Float, ".5": Float, "900s": Duration, "250ms": Duration, "1d": Duration, "15m": Duration, "2h": Duration} {
		if k, ok := numberKind(raw); !ok || k != want {
			t.Errorf("%s: %v %v", raw, k, ok)
		}
	}
	for _, raw := range []string{"-", "1.", "1.2.3", "5x", "1.5s", "-ms"} {
		if _, ok := numberKind(raw); ok {
			t.Errorf("%s accepted", raw)
		}
	}
}

// FuzzParse: the parser never panics, and its errors point inside the
// input.
func FuzzParse(f *testing.F) {
	f.Add([]byte("digraph G { a -> b -> c [x=1, y=\"z\", k.q=900s] subgraph s { label=\"L\"; node [k=v] d } }"))
	f.Add([]byte("digraph G {\n /* c */ a [x=\"\\n\"]; // c\n}"))
	f.Fuzz(func(t *testing.T, src []byte) {
		_, err := Parse(src)
		if err == nil {
			return
		}
		e, ok := err.(*Error)
		lines := strings.Count(string(src), "\n") + 1
		if !ok || e.Pos.Line < 1 || e.Pos.Line > lines || e.Pos.Col < 1 {
			t.Fatalf("error %#v outside %d lines", err, lines)
		}
	})
}
