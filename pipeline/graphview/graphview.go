// Package graphview draws a pipeline for people: as text, with the path
// a run took marked, and as DOT that Graphviz's own `dot` accepts (the
// specification's bare values, such as 900s, are not valid Graphviz: every
// value is quoted again).
package graphview

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/nbots/nb/pipeline"
)

// Path is what a run did: the nodes it completed in order (a node may
// come more than once) and the node it was at.
type Path struct {
	Completed []string
	Current   string
}

// visits counts each node's visits, and taken marks each edge the run
// went along (consecutive completed nodes).
func (p Path) marks() (visits map[string]int, taken map[[2]string]bool) {
	visits = map[string]int{}
	taken = map[[2]string]bool{}
	for i, id := range p.Completed {
		visits[id]++
		if i > 0 {
			taken[[2]string{p.Completed[i-1], id}] = true
		}
	}
	return visits, taken
}

// Text writes g as text: the nodes from the start, breadth first (then
// any the start does not reach), each with its handler and its edges. With
// a path, visited nodes are marked ✓ (×N when visited N times), the
// current node ▶, and the edges taken ⇒ instead of →.
func Text(w io.Writer, g *pipeline.Graph, path *Path) error {
	var b strings.Builder
	fmt.Fprintf(&b, "digraph %s", g.Name)
	if goal := g.Goal(); goal != "" {
		fmt.Fprintf(&b, ": %s", oneLine(goal))
	}
	fmt.Fprintf(&b, " (%d nodes, %d edges)\n", len(g.Nodes), len(g.Edges))
	var visits map[string]int
	var taken map[[2]string]bool
	if path != nil {
		visits, taken = path.marks()
	}
	out := map[string][]*pipeline.Edge{}
	for _, e := range g.Edges {
		out[e.From] = append(out[e.From], e)
	}
	for _, n := range order(g, out) {
		mark := "  "
		switch {
		case path != nil && n.ID == path.Current && visits[n.ID] == 0:
			mark = "▶ "
		case visits[n.ID] > 0:
			mark = "✓ "
		}
		fmt.Fprintf(&b, "\n%s%s", mark, n.ID)
		if l := n.Str("label", ""); l != "" && l != n.ID {
			fmt.Fprintf(&b, " %q", oneLine(l))
		}
		fmt.Fprintf(&b, "  [%s", g.HandlerType(n))
		if m := n.LLMModel(); m != "" && g.HandlerType(n) == "codergen" {
			fmt.Fprintf(&b, ", %s", m)
		}
		if n.GoalGate() {
			b.WriteString(", goal gate")
		}
		b.WriteString("]")
		if visits[n.ID] > 1 {
			fmt.Fprintf(&b, " ×%d", visits[n.ID])
		}
		if path != nil && n.ID == path.Current && visits[n.ID] > 0 {
			b.WriteString(" ◀ current")
		}
		b.WriteString("\n")
		for _, e := range out[n.ID] {
			arrow := "→"
			if taken[[2]string{e.From, e.To}] {
				arrow = "⇒"
			}
			fmt.Fprintf(&b, "    %s %s", arrow, e.To)
			if l := e.Label(); l != "" {
				fmt.Fprintf(&b, "  %q", oneLine(l))
			}
			if c := e.Condition(); c != "" {
				fmt.Fprintf(&b, "  if %s", oneLine(c))
			}
			if wt := e.Weight(); wt != 0 {
				fmt.Fprintf(&b, "  weight %d", wt)
			}
			b.WriteString("\n")
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > 60 {
		s = string(r[:59]) + "…"
	}
	return s
}

// order is the nodes breadth first from the start, then the rest in
// file order.
func order(g *pipeline.Graph, out map[string][]*pipeline.Edge) []*pipeline.Node {
	var list []*pipeline.Node
	seen := map[string]bool{}
	var queue []string
	if s := g.StartNodes(); len(s) > 0 {
		queue = append(queue, s[0].ID)
		seen[s[0].ID] = true
	}
	for len(queue) > 0 {
		id := queue[0]
		queue = queue[1:]
		if n := g.ByID[id]; n != nil {
			list = append(list, n)
		}
		for _, e := range out[id] {
			if !seen[e.To] {
				seen[e.To] = true
				queue = append(queue, e.To)
			}
		}
	}
	for _, n := range g.Nodes {
		if !seen[n.ID] {
			list = append(list, n)
		}
	}
	return list
}

// DOT writes g as Graphviz DOT: every attribute of the file (after
// defaults and the stylesheet) with its value quoted, and, with a path,
// the visited nodes filled and the edges taken drawn bold.
func DOT(w io.Writer, g *pipeline.Graph, path *Path) error {
	var b strings.Builder
	fmt.Fprintf(&b, "digraph %s {\n", quote(g.Name))
	for _, a := range g.Attrs {
		if a.Key == "model_stylesheet" {
			continue // long, and Graphviz has no use for it
		}
		fmt.Fprintf(&b, "  %s=%s\n", quote(a.Key), quote(a.Value.Text))
	}
	var visits map[string]int
	var taken map[[2]string]bool
	if path != nil {
		visits, taken = path.marks()
	}
	for _, n := range g.Nodes {
		attrs := drawAttrs(n.Attrs)
		if visits[n.ID] > 0 {
			attrs = append(attrs, `style="filled"`, `fillcolor="palegreen"`)
		}
		if path != nil && n.ID == path.Current {
			attrs = append(attrs, `penwidth="3"`)
		}
		fmt.Fprintf(&b, "  %s [%s]\n", quote(n.ID), strings.Join(attrs, ", "))
	}
	for _, e := range g.Edges {
		attrs := drawAttrs(e.Attrs)
		if taken[[2]string{e.From, e.To}] {
			attrs = append(attrs, `penwidth="3"`, `color="darkgreen"`)
		}
		fmt.Fprintf(&b, "  %s -> %s", quote(e.From), quote(e.To))
		if len(attrs) > 0 {
			fmt.Fprintf(&b, " [%s]", strings.Join(attrs, ", "))
		}
		b.WriteString("\n")
	}
	b.WriteString("}\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// drawAttrs are the attributes as Graphviz reads them, quoted; a
// condition is shown in the edge's label, since Graphviz ignores it.
func drawAttrs(as pipeline.Attrs) []string {
	var out []string
	label, hasLabel := as.Get("label")
	cond, hasCond := as.Get("condition")
	for _, a := range as {
		if a.Key == "label" || a.Key == "style" || a.Key == "fillcolor" || a.Key == "penwidth" {
			continue
		}
		out = append(out, quote(a.Key)+"="+quote(a.Value.Text))
	}
	text := ""
	if hasLabel {
		text = label.Value.Text
	}
	if hasCond && cond.Value.Text != "" {
		text = strings.TrimSpace(text + " [" + cond.Value.Text + "]")
	}
	if hasLabel || hasCond {
		out = append(out, "label="+quote(text))
	}
	slices.Sort(out)
	return out
}

// quote writes s as a DOT string: Graphviz's escapes are \" and \\
// (and its own \n, \l, \r line breaks in labels).
func quote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
		case '\t':
			b.WriteByte(' ')
		default:
			if r < 0x20 {
				continue // Graphviz has no escape for them
			}
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}
