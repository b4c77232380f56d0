package engine

import (
	"github.com/nbots/nb/pipeline"
)

// The engine reads the model through these few functions.

func nodeStr(n *pipeline.Node, key string) string { return n.Str(key, "") }
func nodeBool(n *pipeline.Node, key string) bool  { return n.Bool(key, false) }
func nodeShape(n *pipeline.Node) string           { return n.Shape() }
func nodeType(n *pipeline.Node) string            { return n.Type() }

// nodeClasses are the classes a thread key falls back to: the enclosing
// subgraph's (§5.4).
func nodeClasses(n *pipeline.Node) []string {
	if n.SubgraphClass != "" {
		return []string{n.SubgraphClass}
	}
	return nil
}

func nodeIntOK(n *pipeline.Node, key string) (int, bool) {
	if !n.Has(key) {
		return 0, false
	}
	return n.Int(key, 0), true
}

func graphStr(g *pipeline.Graph, key string) string { return g.Str(key, "") }
func graphInt(g *pipeline.Graph, key string, def int) int {
	return g.Int(key, def)
}

func graphIntOK(g *pipeline.Graph, key string) (int, bool) {
	if !g.Attrs.Has(key) {
		return 0, false
	}
	return g.Int(key, 0), true
}

// graphAttrs are the graph's attributes as the context mirrors them.
func graphAttrs(g *pipeline.Graph) map[string]string {
	out := make(map[string]string, len(g.Attrs))
	for _, a := range g.Attrs {
		out[a.Key] = a.Value.Text
	}
	return out
}

func edgeStr(e *pipeline.Edge, key string) string       { return e.Str(key, "") }
func edgeInt(e *pipeline.Edge, key string, def int) int { return e.Int(key, def) }
func edgeBool(e *pipeline.Edge, key string) bool        { return e.Bool(key, false) }
