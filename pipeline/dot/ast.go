// Package dot reads attractor's subset of Graphviz DOT (§2.2 of
// attractor-spec.md at fb57a55) into a syntax tree with a position on
// every name, attribute and value, so that `nb pipeline check` can point
// at file:line:col. It is stricter than Graphviz where the specification
// is (commas between attributes, no ports, no quoted IDs, reserved words,
// one digraph per file) and knows nothing of what the attributes mean:
// package pipeline builds the graph from the tree.
package dot

import "fmt"

// Pos is a place in the source, line and column (in bytes) counted from 1.
type Pos struct{ Line, Col int }

// String formats p as line:col.
func (p Pos) String() string { return fmt.Sprintf("%d:%d", p.Line, p.Col) }

// Kind is how a value was written (§2.4).
type Kind uint8

// The value kinds, in the order package pipeline's Kind uses.
const (
	String Kind = iota
	Int
	Float
	Bool
	Duration
	Bare
)

// Value is an attribute value: Text is its meaning (a string without
// quotes, escapes decoded), Raw the source text.
type Value struct {
	Text string
	Raw  string
	Kind Kind
	Pos  Pos
}

// Attr is key=value in an attribute block or a top-level declaration.
type Attr struct {
	Key    string
	KeyPos Pos
	Value  Value
}

// Ident is a name and where it was written.
type Ident struct {
	Name string
	Pos  Pos
}

// Stmt is one statement: *AttrStmt, *AssignStmt, *NodeStmt, *EdgeStmt or
// *Subgraph.
type Stmt interface{ stmt() }

// AttrStmt is graph[…], node[…] or edge[…].
type AttrStmt struct {
	Kind  string // "graph", "node" or "edge"
	Pos   Pos
	Attrs []Attr
}

// AssignStmt is a statement-level key=value (a graph attribute, or the
// subgraph's in a subgraph).
type AssignStmt struct {
	Attr Attr
}

// NodeStmt is ID [attrs].
type NodeStmt struct {
	ID    Ident
	Attrs []Attr
}

// EdgeStmt is A -> B -> … [attrs]; Arrows[i] is where the arrow from
// IDs[i] to IDs[i+1] was written.
type EdgeStmt struct {
	IDs    []Ident
	Arrows []Pos
	Attrs  []Attr
}

// Subgraph is subgraph Name? { … }.
type Subgraph struct {
	Name  *Ident
	Pos   Pos
	Stmts []Stmt
}

func (*AttrStmt) stmt()   {}
func (*AssignStmt) stmt() {}
func (*NodeStmt) stmt()   {}
func (*EdgeStmt) stmt()   {}
func (*Subgraph) stmt()   {}

// Graph is the file's digraph.
type Graph struct {
	Name  Ident
	Pos   Pos
	Stmts []Stmt
}

// Error is a syntax error at a place.
type Error struct {
	Pos Pos
	Msg string
}

func (e *Error) Error() string { return e.Pos.String() + ": " + e.Msg }
