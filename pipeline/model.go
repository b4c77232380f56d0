// Package pipeline is the model of attractor's DOT pipelines
// (attractor-spec.md at fb57a55): graphs, nodes, edges and their typed
// attributes with source positions, the diagnostics of §7, and Load,
// which parses, transforms and validates a flow file.
package pipeline

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Pos is a place in a flow file, both counted from 1. The zero Pos means
// "no place" (an attribute set by a transform or a default).
type Pos struct{ Line, Col int }

// IsValid reports whether p names a place in the file.
func (p Pos) IsValid() bool { return p.Line > 0 }

// Kind is the syntactic kind of a value (§2.4).
type Kind uint8

// The kinds of §2.4. A quoted string is KindString even when its text
// reads as a number or a duration: the typed getters parse the text.
const (
	KindString Kind = iota
	KindInt
	KindFloat
	KindBool
	KindDuration
	KindBare
)

var kindNames = [...]string{"string", "int", "float", "bool", "duration", "bare"}

// String returns the kind's name as check --json shows it.
func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// MarshalText writes the kind's name.
func (k Kind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// UnmarshalText reads a kind's name.
func (k *Kind) UnmarshalText(b []byte) error {
	for i, n := range kindNames {
		if n == string(b) {
			*k = Kind(i)
			return nil
		}
	}
	return fmt.Errorf("unknown value kind %q", b)
}

// Value is an attribute value: Text is what the value means (a string's
// escapes decoded, quotes removed), Raw what the file says, Kind how it
// was written.
type Value struct {
	Text string `json:"value"`
	Raw  string `json:"raw,omitempty"`
	Kind Kind   `json:"kind"`
}

// String returns a string value holding s, as a transform sets one.
func String(s string) Value { return Value{Text: s, Raw: strconv.Quote(s), Kind: KindString} }

// Origin says where a resolved attribute came from: check --json shows it
// so a user sees why a node has the model it has.
type Origin string

// The origins of a node's or edge's attribute.
const (
	OriginExplicit   Origin = "explicit"   // written on the node or edge
	OriginDefault    Origin = "default"    // a node[…] or edge[…] block in scope
	OriginStylesheet Origin = "stylesheet" // a model_stylesheet rule
	OriginTransform  Origin = "transform"  // set by a transform (variable expansion keeps the origin it had)
)

// Attr is one attribute: its key, value, where the key and the value
// were written, and where it came from.
type Attr struct {
	Key      string `json:"key"`
	Value    Value  `json:"-"`
	Pos      Pos    `json:"-"`
	ValuePos Pos    `json:"-"`
	Origin   Origin `json:"origin,omitempty"`
	// Rule is the stylesheet selector that set the attribute, when
	// Origin is OriginStylesheet.
	Rule string `json:"rule,omitempty"`
}

// Attrs is an ordered list of attributes with unique keys; the zero value
// is empty and ready to use. Lists are short (a handful of keys), so a
// scan is cheaper than a map.
type Attrs []Attr

// Get returns the attribute named key.
func (as Attrs) Get(key string) (Attr, bool) {
	for _, a := range as {
		if a.Key == key {
			return a, true
		}
	}
	return Attr{}, false
}

// Has reports whether key is set.
func (as Attrs) Has(key string) bool {
	_, ok := as.Get(key)
	return ok
}

// Set replaces the attribute with a's key, or appends a.
func (as *Attrs) Set(a Attr) {
	for i := range *as {
		if (*as)[i].Key == a.Key {
			(*as)[i] = a
			return
		}
	}
	*as = append(*as, a)
}

// Delete removes key.
func (as *Attrs) Delete(key string) {
	for i := range *as {
		if (*as)[i].Key == key {
			*as = append((*as)[:i], (*as)[i+1:]...)
			return
		}
	}
}

// Str returns key's text, or def when it is unset.
func (as Attrs) Str(key, def string) string {
	if a, ok := as.Get(key); ok {
		return a.Value.Text
	}
	return def
}

// Int returns key as an integer, or def when it is unset or not an
// integer (the validator reports the latter).
func (as Attrs) Int(key string, def int) int {
	if a, ok := as.Get(key); ok {
		if n, err := strconv.Atoi(strings.TrimSpace(a.Value.Text)); err == nil {
			return n
		}
	}
	return def
}

// Float returns key as a number, or def.
func (as Attrs) Float(key string, def float64) float64 {
	if a, ok := as.Get(key); ok {
		if f, err := strconv.ParseFloat(strings.TrimSpace(a.Value.Text), 64); err == nil {
			return f
		}
	}
	return def
}

// Bool returns key as a boolean ("true" or "false", quoted or not), or
// def.
func (as Attrs) Bool(key string, def bool) bool {
	if a, ok := as.Get(key); ok {
		switch strings.TrimSpace(a.Value.Text) {
		case "true":
			return true
		case "false":
			return false
		}
	}
	return def
}

// Duration returns key as a duration (§2.4: an integer and one of ms, s,
// m, h, d; quoted or not), or def.
func (as Attrs) Duration(key string, def time.Duration) time.Duration {
	if a, ok := as.Get(key); ok {
		if d, err := ParseDuration(a.Value.Text); err == nil {
			return d
		}
	}
	return def
}

// ParseDuration parses §2.4's Duration: an integer followed by ms, s, m,
// h or d ("900s", "250ms", "1d").
func ParseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	i := 0
	if i < len(s) && s[i] == '-' {
		i++
	}
	j := i
	for j < len(s) && s[j] >= '0' && s[j] <= '9' {
		j++
	}
	if j == i {
		return 0, &DurationError{Text: s}
	}
	n, err := strconv.ParseInt(s[:j], 10, 64)
	if err != nil {
		return 0, &DurationError{Text: s}
	}
	var unit time.Duration
	switch s[j:] {
	case "ms":
		unit = time.Millisecond
	case "s":
		unit = time.Second
	case "m":
		unit = time.Minute
	case "h":
		unit = time.Hour
	case "d":
		unit = 24 * time.Hour
	default:
		return 0, &DurationError{Text: s}
	}
	const maxDur = time.Duration(1<<63 - 1)
	if n > int64(maxDur/unit) || n < -int64(maxDur/unit) {
		return 0, &DurationError{Text: s}
	}
	return time.Duration(n) * unit, nil
}

// DurationError is ParseDuration's error.
type DurationError struct{ Text string }

func (e *DurationError) Error() string {
	return strconv.Quote(e.Text) + " is not a duration: write a whole number and one of ms, s, m, h, d (\"900s\", \"250ms\")"
}

// Node is one node of the graph.
type Node struct {
	ID string
	// Attrs are the node's attributes after defaults, subgraph classes and
	// the stylesheet (the resolved attributes).
	Attrs Attrs
	// Pos is where the node was first named (its statement, or the edge
	// that created it when Implicit).
	Pos Pos
	// Implicit is set when the node exists only because an edge names it
	// (D11).
	Implicit bool
	// Classes are the node's classes: its class attribute's, then those
	// derived from enclosing subgraphs' labels (innermost first).
	Classes []string
	// SubgraphClass is the class derived from the innermost enclosing
	// subgraph's label, "" outside labelled subgraphs (thread ids fall
	// back to it, §5.4).
	SubgraphClass string
}

// Edge is one edge; a chain A->B->C gives one Edge per pair.
type Edge struct {
	From, To string
	Attrs    Attrs
	// Pos is where the pair's arrow was written.
	Pos Pos
	// FromPos and ToPos are where the two ends were named.
	FromPos, ToPos Pos
}

// Graph is a parsed and transformed flow.
type Graph struct {
	Name string
	// Attrs are the graph attributes (graph[…] blocks and top-level
	// key=value, in any scope).
	Attrs Attrs
	// Nodes and Edges are in file order.
	Nodes []*Node
	Edges []*Edge
	// ByID finds a node.
	ByID map[string]*Node
	// File is the flow's file name, as diagnostics show it.
	File string
	// Pos is where the digraph keyword was.
	Pos Pos
}

// Node returns the node with the id, or nil.
func (g *Graph) Node(id string) *Node { return g.ByID[id] }

// AddNode adds n, which must have a new ID, and returns it.
func (g *Graph) AddNode(n *Node) *Node {
	if g.ByID == nil {
		g.ByID = map[string]*Node{}
	}
	g.Nodes = append(g.Nodes, n)
	g.ByID[n.ID] = n
	return n
}

// Outgoing returns the edges leaving id, in file order.
func (g *Graph) Outgoing(id string) []*Edge {
	var out []*Edge
	for _, e := range g.Edges {
		if e.From == id {
			out = append(out, e)
		}
	}
	return out
}

// Incoming returns the edges entering id, in file order.
func (g *Graph) Incoming(id string) []*Edge {
	var in []*Edge
	for _, e := range g.Edges {
		if e.To == id {
			in = append(in, e)
		}
	}
	return in
}

// StartNodes returns every node that qualifies as a start (§3.1: shape
// Mdiamond; when none has it, an ID start or Start).
func (g *Graph) StartNodes() []*Node {
	return g.terminals("Mdiamond", "start", "Start")
}

// ExitNodes returns every node that qualifies as an exit (§3.1: shape
// Msquare; when none has it, an ID exit or end).
func (g *Graph) ExitNodes() []*Node {
	return g.terminals("Msquare", "exit", "end")
}

func (g *Graph) terminals(shape string, ids ...string) []*Node {
	var out []*Node
	for _, n := range g.Nodes {
		if n.Shape() == shape {
			out = append(out, n)
		}
	}
	if len(out) > 0 {
		return out
	}
	for _, n := range g.Nodes {
		for _, id := range ids {
			if n.ID == id {
				out = append(out, n)
			}
		}
	}
	return out
}

// StartNode returns the start node, or nil when there is not exactly one
// (the start_node rule reports that).
func (g *Graph) StartNode() *Node {
	if s := g.StartNodes(); len(s) == 1 {
		return s[0]
	}
	return nil
}

// ExitNode returns the exit node, or nil when there is not exactly one.
func (g *Graph) ExitNode() *Node {
	if s := g.ExitNodes(); len(s) == 1 {
		return s[0]
	}
	return nil
}

// IsExit reports whether n is an exit node: shape Msquare, or, in a graph
// with no Msquare node, the ID exit or end.
func (g *Graph) IsExit(n *Node) bool {
	if n.Shape() == "Msquare" {
		return true
	}
	if n.ID != "exit" && n.ID != "end" {
		return false // the common case, without a walk over the nodes
	}
	return slices.Contains(g.ExitNodes(), n)
}

// IsStart reports whether n is a start node: shape Mdiamond, or, in a
// graph with no Mdiamond node, the ID start or Start.
func (g *Graph) IsStart(n *Node) bool {
	if n.Shape() == "Mdiamond" {
		return true
	}
	if n.ID != "start" && n.ID != "Start" {
		return false
	}
	return slices.Contains(g.StartNodes(), n)
}

// Str returns a graph attribute's text, or def.
func (g *Graph) Str(key, def string) string { return g.Attrs.Str(key, def) }

// Int returns a graph attribute as an integer, or def.
func (g *Graph) Int(key string, def int) int { return g.Attrs.Int(key, def) }

// Goal is the graph's goal ("" when unset).
func (g *Graph) Goal() string { return g.Str("goal", "") }

// Label is the graph's label ("" when unset).
func (g *Graph) Label() string { return g.Str("label", "") }

// ModelStylesheet is the graph's model_stylesheet text.
func (g *Graph) ModelStylesheet() string { return g.Str("model_stylesheet", "") }

// DefaultMaxRetries is default_max_retries (legacy alias
// default_max_retry), 0 when unset.
func (g *Graph) DefaultMaxRetries() int {
	if g.Attrs.Has("default_max_retries") {
		return g.Int("default_max_retries", 0)
	}
	return g.Int("default_max_retry", 0)
}

// DefaultFidelity is default_fidelity ("" means unset; the runtime falls
// back to compact).
func (g *Graph) DefaultFidelity() string { return g.Str("default_fidelity", "") }

// RetryTarget is the graph's retry_target.
func (g *Graph) RetryTarget() string { return g.Str("retry_target", "") }

// FallbackRetryTarget is the graph's fallback_retry_target.
func (g *Graph) FallbackRetryTarget() string { return g.Str("fallback_retry_target", "") }

// DefaultMaxNodeVisits is the per-node visit cap when neither node nor
// graph sets max_node_visits (an nb extension).
const DefaultMaxNodeVisits = 20

// MaxNodeVisits is the graph's max_node_visits (DefaultMaxNodeVisits when
// unset; 0 or less means no cap).
func (g *Graph) MaxNodeVisits() int { return g.Int("max_node_visits", DefaultMaxNodeVisits) }

// Str returns a node attribute's text, or def.
func (n *Node) Str(key, def string) string { return n.Attrs.Str(key, def) }

// Int returns a node attribute as an integer, or def.
func (n *Node) Int(key string, def int) int { return n.Attrs.Int(key, def) }

// Bool returns a node attribute as a boolean, or def.
func (n *Node) Bool(key string, def bool) bool { return n.Attrs.Bool(key, def) }

// Duration returns a node attribute as a duration, or def.
func (n *Node) Duration(key string, def time.Duration) time.Duration {
	return n.Attrs.Duration(key, def)
}

// Has reports whether the node has the attribute.
func (n *Node) Has(key string) bool { return n.Attrs.Has(key) }

// Shape is the node's shape (box when unset).
func (n *Node) Shape() string { return n.Str("shape", "box") }

// Label is the node's label (its ID when unset or empty).
func (n *Node) Label() string {
	if l := n.Str("label", ""); l != "" {
		return l
	}
	return n.ID
}

// Prompt is the node's prompt, falling back to its label (§2.6).
func (n *Node) Prompt() string {
	if p := n.Str("prompt", ""); p != "" {
		return p
	}
	return n.Label()
}

// Type is the node's explicit type attribute ("" when unset).
func (n *Node) Type() string { return n.Str("type", "") }

// ShapeHandlers maps a shape to its handler type (§2.8).
var ShapeHandlers = map[string]string{
	"Mdiamond":      "start",
	"Msquare":       "exit",
	"box":           "codergen",
	"hexagon":       "wait.human",
	"diamond":       "conditional",
	"component":     "parallel",
	"tripleoctagon": "parallel.fan_in",
	"parallelogram": "tool",
	"house":         "stack.manager_loop",
}

// HandlerType is the handler §4.2 resolves the node to without a
// registry: its type, else its shape's handler, else codergen.
func (n *Node) HandlerType() string {
	if t := n.Type(); t != "" {
		return t
	}
	if h, ok := ShapeHandlers[n.Shape()]; ok {
		return h
	}
	return "codergen"
}

// MaxRetries is the node's max_retries, else the graph's
// default_max_retries (§2.6).
func (n *Node) MaxRetries(g *Graph) int {
	if n.Has("max_retries") {
		return n.Int("max_retries", 0)
	}
	if g == nil {
		return 0
	}
	return g.DefaultMaxRetries()
}

// MaxNodeVisits is the node's max_node_visits, else the graph's (nb
// extension; 0 or less means no cap).
func (n *Node) MaxNodeVisits(g *Graph) int {
	if n.Has("max_node_visits") {
		return n.Int("max_node_visits", DefaultMaxNodeVisits)
	}
	if g == nil {
		return DefaultMaxNodeVisits
	}
	return g.MaxNodeVisits()
}

// GoalGate is goal_gate (false when unset).
func (n *Node) GoalGate() bool { return n.Bool("goal_gate", false) }

// RetryTarget is the node's retry_target.
func (n *Node) RetryTarget() string { return n.Str("retry_target", "") }

// FallbackRetryTarget is the node's fallback_retry_target.
func (n *Node) FallbackRetryTarget() string { return n.Str("fallback_retry_target", "") }

// Fidelity is the node's fidelity ("" when unset).
func (n *Node) Fidelity() string { return n.Str("fidelity", "") }

// ThreadID is the node's thread_id ("" when unset).
func (n *Node) ThreadID() string { return n.Str("thread_id", "") }

// Timeout is the node's timeout, 0 when unset or unreadable.
func (n *Node) Timeout() time.Duration { return n.Duration("timeout", 0) }

// LLMModel is llm_model ("" when unset: the cartridge's).
func (n *Node) LLMModel() string { return n.Str("llm_model", "") }

// LLMProvider is llm_provider ("" when unset).
func (n *Node) LLMProvider() string { return n.Str("llm_provider", "") }

// ReasoningEffort is reasoning_effort (high when unset, §2.6).
func (n *Node) ReasoningEffort() string { return n.Str("reasoning_effort", "high") }

// AutoStatus is auto_status.
func (n *Node) AutoStatus() bool { return n.Bool("auto_status", false) }

// AllowPartial is allow_partial.
func (n *Node) AllowPartial() bool { return n.Bool("allow_partial", false) }

// HasClass reports whether the node has class c.
func (n *Node) HasClass(c string) bool {
	for _, x := range n.Classes {
		if x == c {
			return true
		}
	}
	return false
}

// Str returns an edge attribute's text, or def.
func (e *Edge) Str(key, def string) string { return e.Attrs.Str(key, def) }

// Int returns an edge attribute as an integer, or def.
func (e *Edge) Int(key string, def int) int { return e.Attrs.Int(key, def) }

// Bool returns an edge attribute as a boolean, or def.
func (e *Edge) Bool(key string, def bool) bool { return e.Attrs.Bool(key, def) }

// Label is the edge's label.
func (e *Edge) Label() string { return e.Str("label", "") }

// Condition is the edge's condition ("" means always eligible).
func (e *Edge) Condition() string { return e.Str("condition", "") }

// Weight is the edge's weight (0 when unset).
func (e *Edge) Weight() int { return e.Int("weight", 0) }

// Fidelity is the edge's fidelity ("" when unset).
func (e *Edge) Fidelity() string { return e.Str("fidelity", "") }

// ThreadID is the edge's thread_id ("" when unset).
func (e *Edge) ThreadID() string { return e.Str("thread_id", "") }

// LoopRestart is loop_restart.
func (e *Edge) LoopRestart() bool { return e.Bool("loop_restart", false) }

// String names the edge as diagnostics do: "a -> b".
func (e *Edge) String() string { return e.From + " -> " + e.To }

// HandlerType is n's handler as the engine should resolve it: the node's
// type, else start or exit for the graph's start and exit nodes even when
// they are found by ID (a node `start` without shape=Mdiamond is the
// start, not an LLM step), else its shape's handler.
func (g *Graph) HandlerType(n *Node) string {
	if n.Type() == "" {
		if g.IsStart(n) {
			return "start"
		}
		if g.IsExit(n) {
			return "exit"
		}
	}
	return n.HandlerType()
}
