package pipeline

import (
	"encoding/json"
)

// ResolvedAttr is an attribute as check --json shows it: its value, how
// it was written, where it came from and where it is in the file.
type ResolvedAttr struct {
	Value  string `json:"value"`
	Kind   Kind   `json:"kind"`
	Origin Origin `json:"origin"`
	// Rule is the stylesheet selector that set it.
	Rule string `json:"rule,omitempty"`
	Line int    `json:"line,omitempty"`
	Col  int    `json:"col,omitempty"`
}

// Effective are a node's values as the engine reads them, defaults of
// §2.6 included.
type Effective struct {
	Handler         string `json:"handler"`
	Shape           string `json:"shape"`
	Label           string `json:"label"`
	Prompt          string `json:"prompt"`
	LLMModel        string `json:"llm_model"`
	LLMProvider     string `json:"llm_provider"`
	ReasoningEffort string `json:"reasoning_effort"`
	MaxRetries      int    `json:"max_retries"`
	// Fidelity is the node's, else the graph's default_fidelity, else
	// compact; an edge's fidelity still overrides it at run time (§5.4).
	Fidelity      string `json:"fidelity"`
	ThreadID      string `json:"thread_id,omitempty"`
	TimeoutMS     int64  `json:"timeout_ms,omitempty"`
	GoalGate      bool   `json:"goal_gate"`
	MaxNodeVisits int    `json:"max_node_visits"`
}

// ResolvedNode is a node after defaults, classes and the stylesheet.
type ResolvedNode struct {
	ID            string                  `json:"id"`
	Line          int                     `json:"line,omitempty"`
	Col           int                     `json:"col,omitempty"`
	Implicit      bool                    `json:"implicit,omitempty"`
	Classes       []string                `json:"classes,omitempty"`
	SubgraphClass string                  `json:"subgraph_class,omitempty"`
	Attrs         map[string]ResolvedAttr `json:"attrs"`
	Effective     Effective               `json:"effective"`
}

// ResolvedEdge is an edge with its attributes (edge defaults included).
type ResolvedEdge struct {
	From  string                  `json:"from"`
	To    string                  `json:"to"`
	Line  int                     `json:"line,omitempty"`
	Col   int                     `json:"col,omitempty"`
	Attrs map[string]ResolvedAttr `json:"attrs"`
}

// ResolvedGraph is the graph as check --json prints it.
type ResolvedGraph struct {
	Name  string                  `json:"name"`
	File  string                  `json:"file"`
	Goal  string                  `json:"goal"`
	Start string                  `json:"start,omitempty"`
	Exit  string                  `json:"exit,omitempty"`
	Attrs map[string]ResolvedAttr `json:"attrs"`
	Nodes []ResolvedNode          `json:"nodes"`
	Edges []ResolvedEdge          `json:"edges"`
}

func resolveAttrs(as Attrs) map[string]ResolvedAttr {
	m := make(map[string]ResolvedAttr, len(as))
	for _, a := range as {
		o := a.Origin
		if o == "" {
			o = OriginExplicit
		}
		m[a.Key] = ResolvedAttr{Value: a.Value.Text, Kind: a.Value.Kind, Origin: o, Rule: a.Rule, Line: a.ValuePos.Line, Col: a.ValuePos.Col}
	}
	return m
}

// Resolve returns g as check --json shows it.
func Resolve(g *Graph) ResolvedGraph {
	r := ResolvedGraph{Name: g.Name, File: g.File, Goal: g.Goal(), Attrs: resolveAttrs(g.Attrs), Nodes: []ResolvedNode{}, Edges: []ResolvedEdge{}}
	if s := g.StartNode(); s != nil {
		r.Start = s.ID
	}
	if x := g.ExitNode(); x != nil {
		r.Exit = x.ID
	}
	for _, n := range g.Nodes {
		fid := n.Fidelity()
		if fid == "" {
			fid = g.DefaultFidelity()
		}
		if fid == "" {
			fid = "compact"
		}
		r.Nodes = append(r.Nodes, ResolvedNode{
			ID: n.ID, Line: n.Pos.Line, Col: n.Pos.Col, Implicit: n.Implicit, Classes: n.Classes, SubgraphClass: n.SubgraphClass,
			Attrs: resolveAttrs(n.Attrs),
			Effective: Effective{
				Handler: g.HandlerType(n), Shape: n.Shape(), Label: n.Label(), Prompt: n.Prompt(),
				LLMModel: n.LLMModel(), LLMProvider: n.LLMProvider(), ReasoningEffort: n.ReasoningEffort(),
				MaxRetries: n.MaxRetries(g), Fidelity: fid, ThreadID: n.ThreadID(), TimeoutMS: n.Timeout().Milliseconds(),
				GoalGate: n.GoalGate(), MaxNodeVisits: n.MaxNodeVisits(g),
			},
		})
	}
	for _, e := range g.Edges {
		r.Edges = append(r.Edges, ResolvedEdge{From: e.From, To: e.To, Line: e.Pos.Line, Col: e.Pos.Col, Attrs: resolveAttrs(e.Attrs)})
	}
	return r
}

// MarshalJSON writes the diagnostic with its line and column.
func (d Diagnostic) MarshalJSON() ([]byte, error) {
	type plain Diagnostic
	return json.Marshal(struct {
		plain
		Line int `json:"line,omitempty"`
		Col  int `json:"col,omitempty"`
	}{plain(d), d.Pos.Line, d.Pos.Col})
}
