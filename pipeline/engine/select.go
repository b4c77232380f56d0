package engine

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
	"sync"

	"github.com/nbots/nb/pipeline"
	"github.com/nbots/nb/pipeline/condition"
)

// conditions caches the parsed condition of each edge: a condition is
// parsed once per run, not at every selection.
type conditions struct {
	mu sync.Mutex
	m  map[*pipeline.Edge]condition.Expr
}

func newConditions() *conditions { return &conditions{m: map[*pipeline.Edge]condition.Expr{}} }

func (c *conditions) get(e *pipeline.Edge, src string) (condition.Expr, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if x, ok := c.m[e]; ok {
		return x, nil
	}
	x, err := condition.Parse(src)
	if err != nil {
		return x, err
	}
	c.m[e] = x
	return x, nil
}

// selectEdge is §3.3's select_edge over node's outgoing edges, with the
// run's context.
func (r *run) selectEdge(node *pipeline.Node, out Outcome) (*pipeline.Edge, error) {
	return r.selectEdgeIn(node, out, r.ctx)
}

// selectEdgeIn is select_edge with a given context (a parallel branch's).
//  1. Edges whose condition is true, best by weight then target id.
//  2. Else the first unconditional edge whose normalised label is the
//     outcome's preferred label.
//  3. Else, for each suggested id in order, the first unconditional edge
//     to it.
//  4. Else the best unconditional edge by weight then target id.
//  5. Else none: a false conditional edge is never taken.
func (r *run) selectEdgeIn(node *pipeline.Node, out Outcome, c *Context) (*pipeline.Edge, error) {
	edges := r.g.Outgoing(node.ID)
	if len(edges) == 0 {
		return nil, nil
	}
	var matched, unconditional []*pipeline.Edge
	status := string(out.Status)
	for _, e := range edges {
		src := strings.TrimSpace(edgeStr(e, "condition"))
		if src == "" {
			unconditional = append(unconditional, e)
			continue
		}
		x, err := r.conds.get(e, src)
		if err != nil {
			return nil, fmt.Errorf("edge %s -> %s: condition %q: %v (nb pipeline check reports it with its line)", e.From, e.To, src, err)
		}
		if x.Eval(status, out.PreferredLabel, c.Lookup) {
			matched = append(matched, e)
		}
	}
	if len(matched) > 0 {
		return best(matched), nil
	}
	if out.PreferredLabel != "" {
		want := NormalizeLabel(out.PreferredLabel)
		for _, e := range unconditional {
			if NormalizeLabel(edgeStr(e, "label")) == want {
				return e, nil
			}
		}
	}
	for _, id := range out.SuggestedNextIDs {
		for _, e := range unconditional {
			if e.To == id {
				return e, nil
			}
		}
	}
	if len(unconditional) > 0 {
		return best(unconditional), nil
	}
	return nil, nil
}

// best is best_by_weight_then_lexical: the highest weight, then the
// target id first in byte order; the sort is stable, so equal edges keep
// their declaration order.
func best(edges []*pipeline.Edge) *pipeline.Edge {
	sorted := append([]*pipeline.Edge(nil), edges...)
	sort.SliceStable(sorted, func(i, j int) bool {
		wi, wj := edgeInt(sorted[i], "weight", 0), edgeInt(sorted[j], "weight", 0)
		if wi != wj {
			return wi > wj
		}
		return sorted[i].To < sorted[j].To
	})
	return sorted[0]
}

// accelerator matches the accelerator prefixes §3.3 strips: "[Y] ",
// "Y) ", "Y - ".
var accelerator = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^(?:\[[^\]\s]+\]\s*|[A-Za-z0-9]\)\s+|[A-Za-z0-9]\s+-\s+)`)
})

// NormalizeLabel is §3.3's label normalisation: lowercase, trimmed,
// without an accelerator prefix.
func NormalizeLabel(s string) string {
	s = strings.TrimSpace(s)
	s = accelerator().ReplaceAllString(s, "")
	return strings.ToLower(strings.TrimSpace(s))
}
