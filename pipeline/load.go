package pipeline

import (
	"cmp"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/nbots/nb/pipeline/dot"
	"github.com/nbots/nb/pipeline/stylesheet"
)

// OriginGraph marks a node's llm_model, llm_provider or reasoning_effort
// taken from the graph attribute of that name (§8.5 step 3).
const OriginGraph Origin = "graph"

// SyntaxError is a flow file that does not parse: where and why.
type SyntaxError struct {
	File string
	Pos  Pos
	Msg  string
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("%s:%d:%d: %s", e.File, e.Pos.Line, e.Pos.Col, e.Msg)
}

// Diagnostic returns the error as a diagnostic of rule "syntax", so that
// check prints it like the others.
func (e *SyntaxError) Diagnostic() Diagnostic {
	return Diagnostic{Rule: "syntax", Severity: Error, Message: e.Msg, Pos: e.Pos}
}

// LoadOptions tune Load.
type LoadOptions struct {
	// Vars are `--set key=value` variables: $key in a node's prompt is
	// replaced by value, as §9.2 replaces $goal; a "goal" variable
	// replaces the graph's goal.
	Vars map[string]string
	// HandlerTypes are handler types registered besides the built-in
	// ones (type_known does not warn about them).
	HandlerTypes []string
	// Rules are custom lint rules, run after the built-in ones (§7.4).
	Rules []Rule
	// Transforms are custom transforms, run after the built-in ones in
	// this order (§9.3).
	Transforms []func(*Graph)
}

// Load parses a flow file, applies the transforms ($goal and variable
// expansion, the model stylesheet) and validates it. The error is a
// *SyntaxError when the file does not parse; otherwise the graph comes
// back with every diagnostic, and the caller refuses to run it when
// HasErrors says so.
func Load(file string, src []byte) (*Graph, []Diagnostic, error) {
	return LoadWith(file, src, LoadOptions{})
}

// LoadWith is Load with options.
func LoadWith(file string, src []byte, opts LoadOptions) (*Graph, []Diagnostic, error) {
	g, err := Parse(file, src)
	if err != nil {
		return nil, nil, err
	}
	Transform(g, opts)
	return g, Validate(g, opts), nil
}

// Parse reads a flow file into a graph (no transforms): node and edge
// defaults applied in scope, subgraph classes derived, nodes named only by
// edges created (D11).
func Parse(file string, src []byte) (*Graph, error) {
	ast, err := dot.Parse(src)
	if err != nil {
		if de, ok := err.(*dot.Error); ok {
			return nil, &SyntaxError{File: file, Pos: Pos(de.Pos), Msg: de.Msg}
		}
		return nil, &SyntaxError{File: file, Msg: err.Error()}
	}
	g := &Graph{Name: ast.Name.Name, File: file, Pos: Pos(ast.Pos), ByID: map[string]*Node{}}
	b := builder{g: g}
	b.stmts(ast.Stmts, &scope{root: true})
	for _, n := range g.Nodes {
		n.Classes = append(ClassList(n.Str("class", "")), n.Classes...)
		n.Classes = slices.Compact(n.Classes)
	}
	return g, nil
}

// ClassList splits a class attribute (comma-separated, §2.12).
func ClassList(s string) []string {
	var out []string
	for c := range strings.SplitSeq(s, ",") {
		if c = strings.TrimSpace(c); c != "" && !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	return out
}

// ClassName derives a class from a subgraph label (§2.10): lowercase,
// spaces to hyphens, only [a-z0-9-] kept. "Loop A" → "loop-a".
func ClassName(label string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(label) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-':
			b.WriteRune(r)
		}
	}
	return b.String()
}

type scope struct {
	root             bool
	nodeDef, edgeDef Attrs
	classes          []string // derived from enclosing subgraphs, innermost first
	sgClass          string
}

type builder struct{ g *Graph }

func convAttr(a dot.Attr, o Origin) Attr {
	return Attr{
		Key:      a.Key,
		Value:    Value{Text: a.Value.Text, Raw: a.Value.Raw, Kind: Kind(a.Value.Kind)},
		Pos:      Pos(a.KeyPos),
		ValuePos: Pos(a.Value.Pos),
		Origin:   o,
	}
}

func (b *builder) stmts(stmts []dot.Stmt, sc *scope) {
	for _, st := range stmts {
		switch st := st.(type) {
		case *dot.AttrStmt:
			for _, a := range st.Attrs {
				switch st.Kind {
				case "graph":
					if sc.root {
						b.g.Attrs.Set(convAttr(a, OriginExplicit))
					}
				case "node":
					sc.nodeDef.Set(convAttr(a, OriginDefault))
				case "edge":
					sc.edgeDef.Set(convAttr(a, OriginDefault))
				}
			}
		case *dot.AssignStmt:
			// In a subgraph, key=value is the subgraph's own attribute:
			// only its label means something (a class, read below).
			if sc.root {
				b.g.Attrs.Set(convAttr(st.Attr, OriginExplicit))
			}
		case *dot.NodeStmt:
			n := b.node(st.ID, sc, false)
			n.Attrs = slices.Grow(n.Attrs, len(st.Attrs)+len(stylesheet.Properties))
			for _, a := range st.Attrs {
				n.Attrs.Set(convAttr(a, OriginExplicit))
			}
		case *dot.EdgeStmt:
			for i := range st.IDs {
				b.node(st.IDs[i], sc, true)
			}
			for i := 0; i+1 < len(st.IDs); i++ {
				e := &Edge{From: st.IDs[i].Name, To: st.IDs[i+1].Name, Pos: Pos(st.Arrows[i]), FromPos: Pos(st.IDs[i].Pos), ToPos: Pos(st.IDs[i+1].Pos)}
				e.Attrs = make(Attrs, len(sc.edgeDef), len(sc.edgeDef)+len(st.Attrs))
				copy(e.Attrs, sc.edgeDef)
				for _, a := range st.Attrs {
					e.Attrs.Set(convAttr(a, OriginExplicit))
				}
				b.g.Edges = append(b.g.Edges, e)
			}
		case *dot.Subgraph:
			inner := &scope{nodeDef: slices.Clone(sc.nodeDef), edgeDef: slices.Clone(sc.edgeDef), classes: sc.classes, sgClass: sc.sgClass}
			if c := ClassName(subgraphLabel(st)); c != "" {
				inner.classes = append([]string{c}, sc.classes...)
				inner.sgClass = c
			}
			b.stmts(st.Stmts, inner)
		}
	}
}

// subgraphLabel is a subgraph's label, wherever in it it is set (so a
// label written after the nodes still gives them the class).
func subgraphLabel(sg *dot.Subgraph) string {
	label := ""
	for _, st := range sg.Stmts {
		switch st := st.(type) {
		case *dot.AssignStmt:
			if st.Attr.Key == "label" {
				label = st.Attr.Value.Text
			}
		case *dot.AttrStmt:
			if st.Kind == "graph" {
				for _, a := range st.Attrs {
					if a.Key == "label" {
						label = a.Value.Text
					}
				}
			}
		}
	}
	return label
}

// node returns the node named id, creating it with the defaults in scope
// (as Graphviz does; implicit when an edge creates it, D11). A node named
// again inside a subgraph takes that subgraph's classes too.
func (b *builder) node(id dot.Ident, sc *scope, fromEdge bool) *Node {
	if n, ok := b.g.ByID[id.Name]; ok {
		for _, c := range sc.classes {
			if !slices.Contains(n.Classes, c) {
				n.Classes = append(n.Classes, c)
			}
		}
		if n.SubgraphClass == "" {
			n.SubgraphClass = sc.sgClass
		}
		if !fromEdge && n.Implicit {
			n.Implicit = false
			n.Pos = Pos(id.Pos)
		}
		return n
	}
	n := &Node{ID: id.Name, Pos: Pos(id.Pos), Implicit: fromEdge, Attrs: slices.Clone(sc.nodeDef), Classes: slices.Clone(sc.classes), SubgraphClass: sc.sgClass}
	return b.g.AddNode(n)
}

// Transform applies the built-in transforms (§9.2) in order, then opts'
// own: variables and $goal in prompts, the model stylesheet, then the
// graph's llm_model, llm_provider and reasoning_effort where neither the
// node nor the stylesheet set them (§8.5).
func Transform(g *Graph, opts LoadOptions) {
	if v, ok := opts.Vars["goal"]; ok {
		g.Attrs.Set(Attr{Key: "goal", Value: String(v), Origin: OriginTransform})
	}
	ExpandVariables(g, opts.Vars)
	ApplyStylesheet(g)
	for _, f := range opts.Transforms {
		f(g)
	}
}

// ExpandVariables replaces $goal (the graph's goal) and $name for every
// variable in node prompts: a plain string replacement, as §9.2 does,
// the longest name first where two start alike ($goal before $go).
func ExpandVariables(g *Graph, vars map[string]string) {
	all := map[string]string{"goal": g.Goal()}
	for k, v := range vars {
		all[k] = v
	}
	names := make([]string, 0, len(all))
	for k := range all {
		names = append(names, k)
	}
	sort.Slice(names, func(i, j int) bool {
		return cmp.Or(cmp.Compare(len(names[j]), len(names[i])), strings.Compare(names[i], names[j])) < 0
	})
	pairs := make([]string, 0, 2*len(names))
	for _, k := range names {
		pairs = append(pairs, "$"+k, all[k])
	}
	r := strings.NewReplacer(pairs...)
	for _, n := range g.Nodes {
		a, ok := n.Attrs.Get("prompt")
		if !ok || !strings.Contains(a.Value.Text, "$") {
			continue
		}
		if s := r.Replace(a.Value.Text); s != a.Value.Text {
			a.Value.Text = s
			n.Attrs.Set(a)
		}
	}
}

// ApplyStylesheet sets llm_model, llm_provider and reasoning_effort from
// the graph's model_stylesheet on nodes that do not have them (§8.5), then
// from the graph's attributes of the same names. A node's attribute from
// a node[…] default block counts as the node's own: the stylesheet does
// not override it. A stylesheet that does not parse is left to
// stylesheet_syntax.
func ApplyStylesheet(g *Graph) {
	var sheet *stylesheet.Sheet
	if text := g.ModelStylesheet(); strings.TrimSpace(text) != "" {
		sheet, _ = stylesheet.Parse(text)
	}
	for _, n := range g.Nodes {
		if sheet != nil {
			ms := sheet.Resolve(n.ID, n.Shape(), n.Classes)
			for _, prop := range stylesheet.Properties {
				if m, ok := ms[prop]; ok && !n.Has(prop) {
					n.Attrs.Set(Attr{Key: prop, Value: String(m.Value), Origin: OriginStylesheet, Rule: m.Selector.String()})
				}
			}
		}
		for _, prop := range stylesheet.Properties {
			if a, ok := g.Attrs.Get(prop); ok && !n.Has(prop) {
				a.Origin = OriginGraph
				n.Attrs.Set(a)
			}
		}
	}
}
