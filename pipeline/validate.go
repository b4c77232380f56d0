package pipeline

import (
	"cmp"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/nbots/nb/pipeline/condition"
	"github.com/nbots/nb/pipeline/stylesheet"
)

// Rule is a lint rule (§7.4).
type Rule interface {
	Name() string
	Apply(g *Graph) []Diagnostic
}

// RuleFunc makes a Rule of a function.
type RuleFunc struct {
	ID string
	F  func(g *Graph) []Diagnostic
}

// Name is the rule's id.
func (r RuleFunc) Name() string { return r.ID }

// Apply runs the rule.
func (r RuleFunc) Apply(g *Graph) []Diagnostic { return r.F(g) }

// FidelityModes are the valid fidelity values (§5.4).
var FidelityModes = []string{"full", "truncate", "compact", "summary:low", "summary:medium", "summary:high"}

// RetryPolicies are the retry presets retry_policy may name (§3.6; D7).
var RetryPolicies = []string{"none", "standard", "aggressive", "linear", "patient"}

// Rules returns the built-in rules: §7.2's thirteen, then nb's own.
// handlerTypes are the handler types registered besides the built-in
// ones.
func Rules(handlerTypes []string) []Rule {
	known := slices.Collect(func(yield func(string) bool) {
		for _, t := range ShapeHandlers {
			if !yield(t) {
				return
			}
		}
	})
	known = append(known, handlerTypes...)
	return []Rule{
		RuleFunc{"start_node", ruleStartNode},
		RuleFunc{"terminal_node", ruleTerminalNode},
		RuleFunc{"reachability", ruleReachability},
		RuleFunc{"edge_target_exists", ruleEdgeTargetExists},
		RuleFunc{"start_no_incoming", ruleStartNoIncoming},
		RuleFunc{"exit_no_outgoing", ruleExitNoOutgoing},
		RuleFunc{"condition_syntax", ruleConditionSyntax},
		RuleFunc{"stylesheet_syntax", ruleStylesheetSyntax},
		RuleFunc{"type_known", func(g *Graph) []Diagnostic { return ruleTypeKnown(g, known) }},
		RuleFunc{"fidelity_valid", ruleFidelityValid},
		RuleFunc{"retry_target_exists", ruleRetryTargetExists},
		RuleFunc{"goal_gate_has_retry", ruleGoalGateHasRetry},
		RuleFunc{"prompt_on_llm_nodes", rulePromptOnLLMNodes},
		// nb's own.
		RuleFunc{"implicit_node", ruleImplicitNode},
		RuleFunc{"attr_type", ruleAttrType},
		RuleFunc{"attr_value", ruleAttrValue},
		RuleFunc{"class_name", ruleClassName},
		RuleFunc{"all_conditional_edges", ruleAllConditionalEdges},
		RuleFunc{"parallel_converge", ruleParallelConverge},
		RuleFunc{"loop_cap", ruleLoopCap},
		RuleFunc{"human_channel", ruleHumanChannel},
	}
}

// Validate runs the built-in rules and opts.Rules over g (§7.3) and
// returns their diagnostics in file order.
func Validate(g *Graph, opts LoadOptions) []Diagnostic {
	var out []Diagnostic
	for _, r := range append(Rules(opts.HandlerTypes), opts.Rules...) {
		ds := r.Apply(g)
		for i := range ds {
			if ds[i].Rule == "" {
				ds[i].Rule = r.Name()
			}
		}
		out = append(out, ds...)
	}
	sort.SliceStable(out, func(i, j int) bool { // not slices.SortStableFunc: bench/README.md, "Binary: sorts"
		return cmp.Or(cmp.Compare(out[i].Pos.Line, out[j].Pos.Line), cmp.Compare(out[i].Pos.Col, out[j].Pos.Col)) < 0
	})
	return out
}

// ValuePos returns where byte off of a's text is in the file: a quoted
// value is walked escape by escape and line by line, so a condition's or
// a stylesheet's error points at its place.
func ValuePos(a Attr, off int) Pos {
	p := a.ValuePos
	if !p.IsValid() {
		return a.Pos
	}
	raw := a.Value.Raw
	if a.Value.Kind != KindString || len(raw) < 2 || raw[0] != '"' {
		return Pos{p.Line, p.Col + off}
	}
	p.Col++ // the opening quote
	decoded := 0
	for i := 1; i < len(raw)-1 && decoded < off; {
		step := 1
		if raw[i] == '\\' {
			step = 2
		}
		if raw[i] == '\n' {
			p.Line++
			p.Col = 1
		} else if raw[i]&0xC0 != 0x80 {
			p.Col += step
		}
		i += step
		decoded++
	}
	return p
}

func diag(rule string, sev Severity, pos Pos, node, msg string) Diagnostic {
	return Diagnostic{Rule: rule, Severity: sev, Pos: pos, Node: node, Message: msg}
}

func ids(ns []*Node) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = n.ID
	}
	return strings.Join(s, ", ")
}

func ruleStartNode(g *Graph) []Diagnostic {
	starts := g.StartNodes()
	if len(starts) == 0 {
		return []Diagnostic{{Rule: "start_node", Severity: Error, Pos: g.Pos, Message: "the graph has no start node: add one with shape=Mdiamond (start [shape=Mdiamond])"}}
	}
	if len(starts) == 1 {
		return nil
	}
	var out []Diagnostic
	for _, n := range starts {
		out = append(out, diag("start_node", Error, n.Pos, n.ID, fmt.Sprintf("%d start nodes (%s): a pipeline has exactly one; keep shape=Mdiamond on one of them", len(starts), ids(starts))))
	}
	return out
}

func ruleTerminalNode(g *Graph) []Diagnostic {
	exits := g.ExitNodes()
	if len(exits) == 0 {
		return []Diagnostic{{Rule: "terminal_node", Severity: Error, Pos: g.Pos, Message: "the graph has no exit node: add one with shape=Msquare (exit [shape=Msquare])"}}
	}
	if len(exits) == 1 {
		return nil
	}
	var out []Diagnostic
	for _, n := range exits {
		out = append(out, diag("terminal_node", Error, n.Pos, n.ID, fmt.Sprintf("%d exit nodes (%s): a pipeline has exactly one; keep shape=Msquare on one of them", len(exits), ids(exits))))
	}
	return out
}

// outIndex maps each node to its outgoing edges, in file order.
func outIndex(g *Graph) map[string][]*Edge {
	out := make(map[string][]*Edge, len(g.Nodes))
	for _, e := range g.Edges {
		out[e.From] = append(out[e.From], e)
	}
	return out
}

// reach returns the nodes reachable from the roots.
func reach(out map[string][]*Edge, roots ...string) map[string]bool {
	seen := map[string]bool{}
	stack := slices.Clone(roots)
	for _, r := range roots {
		seen[r] = true
	}
	for len(stack) > 0 {
		id := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, e := range out[id] {
			if !seen[e.To] {
				seen[e.To] = true
				stack = append(stack, e.To)
			}
		}
	}
	return seen
}

// ruleReachability: every node reachable from the start (from the first
// start node when there are several, so that the other ones show up).
// An ERROR, as §7.2 says (D5).
func ruleReachability(g *Graph) []Diagnostic {
	starts := g.StartNodes()
	if len(starts) == 0 {
		return nil
	}
	seen := reach(outIndex(g), starts[0].ID)
	var out []Diagnostic
	for _, n := range g.Nodes {
		if !seen[n.ID] {
			out = append(out, diag("reachability", Error, n.Pos, n.ID, fmt.Sprintf("%s cannot be reached from the start node %s: add an edge to it or remove it", n.ID, starts[0].ID)))
		}
	}
	return out
}

// ruleEdgeTargetExists: a parsed graph creates the nodes its edges name
// (D11), so this catches graphs built or changed by code and transforms.
func ruleEdgeTargetExists(g *Graph) []Diagnostic {
	var out []Diagnostic
	for _, e := range g.Edges {
		for _, end := range []struct {
			id  string
			pos Pos
		}{{e.From, e.FromPos}, {e.To, e.ToPos}} {
			if g.ByID[end.id] == nil {
				out = append(out, Diagnostic{Rule: "edge_target_exists", Severity: Error, Pos: end.pos, Edge: e.String(), Message: fmt.Sprintf("the edge names %s, which is not a node", end.id)})
			}
		}
	}
	return out
}

func ruleStartNoIncoming(g *Graph) []Diagnostic {
	var out []Diagnostic
	for _, s := range g.StartNodes() {
		for _, e := range g.Incoming(s.ID) {
			out = append(out, Diagnostic{Rule: "start_no_incoming", Severity: Error, Pos: e.Pos, Edge: e.String(), Message: fmt.Sprintf("the start node %s has an incoming edge: loop back to the node after it instead", s.ID)})
		}
	}
	return out
}

func ruleExitNoOutgoing(g *Graph) []Diagnostic {
	var out []Diagnostic
	for _, x := range g.ExitNodes() {
		for _, e := range g.Outgoing(x.ID) {
			out = append(out, Diagnostic{Rule: "exit_no_outgoing", Severity: Error, Pos: e.Pos, Edge: e.String(), Message: fmt.Sprintf("the exit node %s has an outgoing edge: the run ends at the exit; remove the edge", x.ID)})
		}
	}
	return out
}

// ruleConditionSyntax checks every condition, including D10's lints
// (`||`, `==`, `>`, `contains`, empty keys, unclosed quotes).
func ruleConditionSyntax(g *Graph) []Diagnostic {
	var out []Diagnostic
	for _, e := range g.Edges {
		a, ok := e.Attrs.Get("condition")
		if !ok {
			continue
		}
		if _, err := condition.Parse(a.Value.Text); err != nil {
			off := 0
			if se, ok := err.(*condition.SyntaxError); ok {
				off = se.Offset
			}
			out = append(out, Diagnostic{Rule: "condition_syntax", Severity: Error, Pos: ValuePos(a, off), Edge: e.String(), Message: fmt.Sprintf("condition %q: %v", a.Value.Text, err)})
		}
	}
	return out
}

func ruleStylesheetSyntax(g *Graph) []Diagnostic {
	a, ok := g.Attrs.Get("model_stylesheet")
	if !ok || strings.TrimSpace(a.Value.Text) == "" {
		return nil
	}
	if _, err := stylesheet.Parse(a.Value.Text); err != nil {
		off := 0
		if se, ok := err.(*stylesheet.Error); ok {
			off = se.Offset
		}
		return []Diagnostic{{Rule: "stylesheet_syntax", Severity: Error, Pos: ValuePos(a, off), Message: "model_stylesheet: " + err.Error()}}
	}
	return nil
}

func ruleTypeKnown(g *Graph, known []string) []Diagnostic {
	var out []Diagnostic
	for _, n := range g.Nodes {
		a, ok := n.Attrs.Get("type")
		if !ok || a.Value.Text == "" || slices.Contains(known, a.Value.Text) {
			continue
		}
		out = append(out, diag("type_known", Warning, a.ValuePos, n.ID, fmt.Sprintf("type %q is not a known handler (%s); the node runs by its shape", a.Value.Text, strings.Join(sortedHandlers(known), ", "))))
	}
	return out
}

func sortedHandlers(known []string) []string {
	s := slices.Clone(known)
	slices.Sort(s)
	return slices.Compact(s)
}

func ruleFidelityValid(g *Graph) []Diagnostic {
	var out []Diagnostic
	check := func(a Attr, ok bool, node, edge string) {
		if !ok || a.Value.Text == "" || slices.Contains(FidelityModes, a.Value.Text) {
			return
		}
		out = append(out, Diagnostic{Rule: "fidelity_valid", Severity: Warning, Pos: a.ValuePos, Node: node, Edge: edge, Message: fmt.Sprintf("%s %q is not a fidelity mode (%s)", a.Key, a.Value.Text, strings.Join(FidelityModes, ", "))})
	}
	a, ok := g.Attrs.Get("default_fidelity")
	check(a, ok, "", "")
	for _, n := range g.Nodes {
		a, ok := n.Attrs.Get("fidelity")
		check(a, ok, n.ID, "")
	}
	for _, e := range g.Edges {
		a, ok := e.Attrs.Get("fidelity")
		check(a, ok, "", e.String())
	}
	return out
}

func ruleRetryTargetExists(g *Graph) []Diagnostic {
	var out []Diagnostic
	check := func(as Attrs, node string) {
		for _, key := range []string{"retry_target", "fallback_retry_target"} {
			a, ok := as.Get(key)
			if !ok || a.Value.Text == "" || g.ByID[a.Value.Text] != nil {
				continue
			}
			out = append(out, diag("retry_target_exists", Warning, a.ValuePos, node, fmt.Sprintf("%s %q is not a node", key, a.Value.Text)))
		}
	}
	check(g.Attrs, "")
	for _, n := range g.Nodes {
		check(n.Attrs, n.ID)
	}
	return out
}

// ruleGoalGateHasRetry: a goal gate with no retry target of its own and
// none on the graph fails the run at the exit (§3.4). A graph-level
// target counts, since §3.4 falls back to it.
func ruleGoalGateHasRetry(g *Graph) []Diagnostic {
	if g.RetryTarget() != "" || g.FallbackRetryTarget() != "" {
		return nil
	}
	var out []Diagnostic
	for _, n := range g.Nodes {
		if !n.GoalGate() || n.RetryTarget() != "" || n.FallbackRetryTarget() != "" {
			continue
		}
		a, _ := n.Attrs.Get("goal_gate")
		out = append(out, diag("goal_gate_has_retry", Warning, a.Pos, n.ID, fmt.Sprintf("goal gate %s has no retry_target: when it has not succeeded at the exit the run fails; add retry_target=\"NODE\"", n.ID)))
	}
	return out
}

// rulePromptOnLLMNodes: an LLM node with neither prompt nor label (D6:
// the ID alone is not an instruction).
func rulePromptOnLLMNodes(g *Graph) []Diagnostic {
	var out []Diagnostic
	ends := append(g.StartNodes(), g.ExitNodes()...)
	for _, n := range g.Nodes {
		if n.HandlerType() != "codergen" || slices.Contains(ends, n) || n.Str("prompt", "") != "" || n.Str("label", "") != "" {
			continue
		}
		out = append(out, diag("prompt_on_llm_nodes", Warning, n.Pos, n.ID, fmt.Sprintf("LLM node %s has no prompt or label: the model gets only its ID; add prompt=\"…\"", n.ID)))
	}
	return out
}

// ruleImplicitNode: D11 creates nodes that only edges name, as Graphviz
// does; they run as LLM steps prompted with their ID, which is rarely
// meant.
func ruleImplicitNode(g *Graph) []Diagnostic {
	var out []Diagnostic
	for _, n := range g.Nodes {
		if n.Implicit {
			out = append(out, diag("implicit_node", Warning, n.Pos, n.ID, fmt.Sprintf("%s is named only by edges, so it is created as an LLM node (shape box) prompted with its ID; declare it (%s [prompt=\"…\"]) to say what it does", n.ID, n.ID)))
		}
	}
	return out
}

// Typed attributes: a value that does not read as its type would
// otherwise be ignored silently (a timeout of "soon" meaning none).
var (
	nodeInts      = []string{"max_retries", "max_parallel", "manager.max_cycles", "max_node_visits"}
	nodeBools     = []string{"goal_gate", "auto_status", "allow_partial", "stack.child_autostart"}
	nodeDurations = []string{"timeout", "manager.poll_interval"}
	edgeInts      = []string{"weight"}
	edgeBools     = []string{"loop_restart"}
	graphInts     = []string{"default_max_retries", "default_max_retry", "max_node_visits", "max_steps", "max_tokens"}
)

func typeErrors(as Attrs, ints, bools, durations []string, node, edge string) []Diagnostic {
	var out []Diagnostic
	add := func(a Attr, want string) {
		out = append(out, Diagnostic{Rule: "attr_type", Severity: Error, Pos: a.ValuePos, Node: node, Edge: edge, Message: fmt.Sprintf("%s=%s is not %s", a.Key, a.Value.Raw, want)})
	}
	for _, a := range as {
		t := strings.TrimSpace(a.Value.Text)
		switch {
		case slices.Contains(ints, a.Key):
			if _, err := strconv.Atoi(t); err != nil {
				add(a, "a whole number")
			} else if a.Key != "weight" && strings.HasPrefix(t, "-") {
				add(a, "a number of 0 or more")
			}
		case slices.Contains(bools, a.Key):
			if t != "true" && t != "false" {
				add(a, "true or false")
			}
		case slices.Contains(durations, a.Key):
			if d, err := ParseDuration(t); err != nil || d < 0 {
				add(a, "a duration (a whole number and ms, s, m, h or d: 900s, 15m)")
			}
		}
	}
	return out
}

func ruleAttrType(g *Graph) []Diagnostic {
	out := typeErrors(g.Attrs, graphInts, nil, nil, "", "")
	for _, n := range g.Nodes {
		out = append(out, typeErrors(n.Attrs, nodeInts, nodeBools, nodeDurations, n.ID, "")...)
	}
	for _, e := range g.Edges {
		out = append(out, typeErrors(e.Attrs, edgeInts, edgeBools, nil, "", e.String())...)
	}
	return out
}

// ruleAttrValue: attributes with a closed set of values.
func ruleAttrValue(g *Graph) []Diagnostic {
	sets := map[string][]string{
		"reasoning_effort": {"low", "medium", "high"},
		"join_policy":      {"wait_all", "first_success"},
		"retry_policy":     RetryPolicies,
	}
	var out []Diagnostic
	check := func(as Attrs, node string) {
		for key, set := range sets {
			if a, ok := as.Get(key); ok && !slices.Contains(set, a.Value.Text) {
				d := diag("attr_value", Warning, a.ValuePos, node, fmt.Sprintf("%s %q is not one of %s", key, a.Value.Text, strings.Join(set, ", ")))
				if a.Origin == OriginStylesheet {
					d.Message += " (set by the stylesheet rule " + a.Rule + ")"
				}
				out = append(out, d)
			}
		}
	}
	check(g.Attrs, "")
	for _, n := range g.Nodes {
		check(n.Attrs, n.ID)
	}
	return out
}

// ruleClassName: a class outside [a-z0-9-]+ can never be selected by the
// stylesheet, whose grammar allows only those characters (D8).
func ruleClassName(g *Graph) []Diagnostic {
	var out []Diagnostic
	for _, n := range g.Nodes {
		a, ok := n.Attrs.Get("class")
		if !ok {
			continue
		}
		for _, c := range ClassList(a.Value.Text) {
			if ClassName(c) != c {
				out = append(out, diag("class_name", Warning, a.ValuePos, n.ID, fmt.Sprintf("class %q cannot be selected by the stylesheet, whose class names are lowercase letters, digits and - (§8.2): write %q", c, ClassName(strings.ReplaceAll(c, "_", "-")))))
			}
		}
	}
	return out
}

// ruleAllConditionalEdges: D15. When every edge leaving a node has a
// condition and none holds, §3.2 ends the run successfully there, short
// of the exit and its goal gates. A pair `k=v` / `k!=v` covers every case
// and is not reported (the spec's own Branch example).
func ruleAllConditionalEdges(g *Graph) []Diagnostic {
	var out []Diagnostic
	idx := outIndex(g)
	for _, n := range g.Nodes {
		edges := idx[n.ID]
		if len(edges) == 0 || g.IsExit(n) {
			continue
		}
		var single []condition.Clause
		all := true
		for _, e := range edges {
			if strings.TrimSpace(e.Condition()) == "" {
				all = false
				break
			}
			if x, err := condition.Parse(e.Condition()); err == nil && len(x.Clauses) == 1 {
				single = append(single, x.Clauses[0])
			}
		}
		if !all || complementary(single) {
			continue
		}
		out = append(out, diag("all_conditional_edges", Warning, n.Pos, n.ID, fmt.Sprintf("every edge leaving %s has a condition: when none holds, the run ends there as a success without reaching the exit or checking goal gates (§3.2); add an edge without a condition as the fallback", n.ID)))
	}
	return out
}

func complementary(cs []condition.Clause) bool {
	for _, a := range cs {
		for _, b := range cs {
			if a.Key == b.Key && a.Literal == b.Literal && a.Op == condition.OpEq && b.Op == condition.OpNe {
				return true
			}
		}
	}
	return false
}

// ruleParallelConverge: D12. A parallel node's branches run up to the
// fan-in node (tripleoctagon) they all reach, where the run goes on; when
// they reach none in common there is nowhere to go on from.
func ruleParallelConverge(g *Graph) []Diagnostic {
	var out []Diagnostic
	idx := outIndex(g)
	for _, n := range g.Nodes {
		if n.HandlerType() != "parallel" {
			continue
		}
		branches := idx[n.ID]
		if len(branches) == 0 {
			out = append(out, diag("parallel_converge", Warning, n.Pos, n.ID, fmt.Sprintf("parallel node %s has no branches: add an edge per branch", n.ID)))
			continue
		}
		var common map[string]bool
		for _, e := range branches {
			fanins := faninsReached(g, idx, e.To)
			if common == nil {
				common = fanins
				continue
			}
			for id := range common {
				if !fanins[id] {
					delete(common, id)
				}
			}
		}
		if len(common) == 0 {
			out = append(out, diag("parallel_converge", Warning, n.Pos, n.ID, fmt.Sprintf("the branches of parallel node %s do not all reach one fan-in node (shape=tripleoctagon): join them there, where the run goes on", n.ID)))
		}
	}
	return out
}

// faninsReached returns the fan-in nodes reachable from id without
// passing through another fan-in.
func faninsReached(g *Graph, idx map[string][]*Edge, id string) map[string]bool {
	found := map[string]bool{}
	seen := map[string]bool{id: true}
	stack := []string{id}
	for len(stack) > 0 {
		cur := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if n := g.ByID[cur]; n != nil && n.HandlerType() == "parallel.fan_in" {
			found[cur] = true
			continue
		}
		for _, e := range idx[cur] {
			if !seen[e.To] {
				seen[e.To] = true
				stack = append(stack, e.To)
			}
		}
	}
	return found
}

// ruleLoopCap: a cycle that can never reach the exit, or whose nodes all
// have the visit cap turned off (max_node_visits=0) in a graph without
// max_steps, runs until a budget stops it.
func ruleLoopCap(g *Graph) []Diagnostic {
	idx := outIndex(g)
	exits := g.ExitNodes()
	var out []Diagnostic
	// Every node of a cycle reaches the same nodes, so one walk back from
	// the exits answers for all of them.
	toExit := map[string]bool{}
	rev := make(map[string][]string, len(g.Nodes))
	for _, e := range g.Edges {
		rev[e.To] = append(rev[e.To], e.From)
	}
	var stack []string
	for _, x := range exits {
		if !toExit[x.ID] {
			toExit[x.ID] = true
			stack = append(stack, x.ID)
		}
	}
	for len(stack) > 0 {
		id := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, from := range rev[id] {
			if !toExit[from] {
				toExit[from] = true
				stack = append(stack, from)
			}
		}
	}
	for _, scc := range cycles(g, idx) {
		canExit := toExit[scc[0]]
		first := g.ByID[scc[0]]
		names := strings.Join(scc, ", ")
		if !canExit && len(exits) > 0 {
			out = append(out, diag("loop_cap", Warning, first.Pos, first.ID, fmt.Sprintf("the loop through %s never reaches the exit: only the visit cap (max_node_visits, %d) or a budget ends it", names, first.MaxNodeVisits(g))))
			continue
		}
		if g.Int("max_steps", 0) > 0 {
			continue
		}
		capped := false
		for _, id := range scc {
			capped = capped || g.ByID[id].MaxNodeVisits(g) > 0
		}
		if !capped {
			out = append(out, diag("loop_cap", Warning, first.Pos, first.ID, fmt.Sprintf("the loop through %s has no cap: max_node_visits is 0 on all its nodes and the graph has no max_steps; set one of them", names)))
		}
	}
	return out
}

// cycles returns the graph's strongly connected components that hold a
// cycle (Tarjan's algorithm, iterative so a long chain cannot overflow
// the stack), each in file order.
func cycles(g *Graph, idx map[string][]*Edge) [][]string {
	order := map[string]int{}
	for i, n := range g.Nodes {
		order[n.ID] = i
	}
	index := map[string]int{}
	low := map[string]int{}
	onStack := map[string]bool{}
	var stack []string
	var out [][]string
	next := 0
	type frame struct {
		id string
		ei int
	}
	for _, root := range g.Nodes {
		if _, ok := index[root.ID]; ok {
			continue
		}
		call := []frame{{root.ID, 0}}
		index[root.ID], low[root.ID] = next, next
		next++
		stack = append(stack, root.ID)
		onStack[root.ID] = true
		for len(call) > 0 {
			f := &call[len(call)-1]
			edges := idx[f.id]
			if f.ei < len(edges) {
				to := edges[f.ei].To
				f.ei++
				if g.ByID[to] == nil {
					continue
				}
				if _, ok := index[to]; !ok {
					index[to], low[to] = next, next
					next++
					stack = append(stack, to)
					onStack[to] = true
					call = append(call, frame{to, 0})
				} else if onStack[to] {
					low[f.id] = min(low[f.id], index[to])
				}
				continue
			}
			id := f.id
			call = call[:len(call)-1]
			if len(call) > 0 {
				parent := call[len(call)-1].id
				low[parent] = min(low[parent], low[id])
			}
			if low[id] != index[id] {
				continue
			}
			var comp []string
			for {
				top := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				onStack[top] = false
				comp = append(comp, top)
				if top == id {
					break
				}
			}
			selfLoop := false
			for _, e := range idx[id] {
				selfLoop = selfLoop || e.To == id
			}
			if len(comp) > 1 || selfLoop {
				sort.Slice(comp, func(i, j int) bool { return order[comp[i]] < order[comp[j]] })
				out = append(out, comp)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return order[out[i][0]] < order[out[j][0]] })
	return out
}

// ValidationError is a graph with error diagnostics (§7.3's
// validate_or_raise): the engine refuses to run it.
type ValidationError struct {
	File        string
	Diagnostics []Diagnostic // the errors only
}

func (e *ValidationError) Error() string {
	lines := make([]string, 0, len(e.Diagnostics)+1)
	lines = append(lines, fmt.Sprintf("%s has %d error(s); nothing runs until they are fixed:", e.File, len(e.Diagnostics)))
	for _, d := range e.Diagnostics {
		lines = append(lines, "  "+d.String(e.File))
	}
	return strings.Join(lines, "\n")
}

// ValidateOrError is §7.3's validate_or_raise: Validate, and a
// *ValidationError holding the errors when there are any.
func ValidateOrError(g *Graph, opts LoadOptions) ([]Diagnostic, error) {
	ds := Validate(g, opts)
	var errs []Diagnostic
	for _, d := range ds {
		if d.Severity == Error {
			errs = append(errs, d)
		}
	}
	if len(errs) > 0 {
		return ds, &ValidationError{File: g.File, Diagnostics: errs}
	}
	return ds, nil
}

// ruleHumanChannel: a gate's human.channel names a chat as
// "<channel>:<chat id>" (an error: the gate would fail when asked), on a
// human gate (a warning elsewhere: nothing reads it).
func ruleHumanChannel(g *Graph) []Diagnostic {
	var out []Diagnostic
	for _, n := range g.Nodes {
		a, ok := n.Attrs.Get("human.channel")
		if !ok {
			continue
		}
		name, chat, cut := strings.Cut(strings.TrimSpace(a.Value.Text), ":")
		switch {
		case !cut || strings.TrimSpace(name) == "" || strings.TrimSpace(chat) == "":
			out = append(out, diag("human_channel", Error, a.ValuePos, n.ID, fmt.Sprintf("human.channel %q: write \"<channel>:<chat id>\", such as \"telegram:123456789\"", a.Value.Text)))
		case strings.TrimSpace(name) == "web" && (len(strings.TrimSpace(chat)) > 128 || strings.ContainsAny(chat, "/\\\x00")):
			out = append(out, diag("human_channel", Error, a.ValuePos, n.ID, fmt.Sprintf("human.channel %q: a web chat's id is 1 to 128 characters, without / or \\", a.Value.Text)))
		case n.HandlerType() != "wait.human":
			out = append(out, diag("human_channel", Warning, a.ValuePos, n.ID, fmt.Sprintf("human.channel on node %s, which is not a human gate (shape=hexagon): nothing asks there", n.ID)))
		}
	}
	return out
}
