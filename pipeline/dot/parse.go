package dot

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

type tokKind uint8

const (
	tEOF tokKind = iota
	tIdent
	tString
	tNumber
	tArrow
	tUndirected
	tLBrace
	tRBrace
	tLBrack
	tRBrack
	tEq
	tComma
	tSemi
	tDot
	tColon
	tOther
)

type token struct {
	kind tokKind
	text string // an identifier's name, a string's decoded text, the other tokens' source
	pos  Pos
}

// describe names a token for an error message.
func (t token) describe() string {
	switch t.kind {
	case tEOF:
		return "the end of the file"
	case tIdent:
		return fmt.Sprintf("%q", t.text)
	case tString:
		return "a quoted string"
	case tNumber:
		return "the number " + t.text
	}
	return "`" + t.text + "`"
}

// scanner reads src byte by byte, keeping the line and column (columns
// count characters, so an editor lands on the right one).
type scanner struct {
	src       []byte
	off       int
	line, col int
}

func (s *scanner) pos() Pos { return Pos{s.line, s.col} }

func (s *scanner) peekAt(i int) byte {
	if s.off+i < len(s.src) {
		return s.src[s.off+i]
	}
	return 0
}

func (s *scanner) advance() {
	if s.off >= len(s.src) {
		return
	}
	c := s.src[s.off]
	s.off++
	if c == '\n' {
		s.line++
		s.col = 1
	} else if c&0xC0 != 0x80 {
		s.col++
	}
}

func (s *scanner) errorf(p Pos, format string, args ...any) error {
	return &Error{Pos: p, Msg: fmt.Sprintf(format, args...)}
}

// skipSpace skips white space and both kinds of comment.
func (s *scanner) skipSpace() error {
	for s.off < len(s.src) {
		c := s.src[s.off]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			s.advance()
		case c == '/' && s.peekAt(1) == '/':
			for s.off < len(s.src) && s.src[s.off] != '\n' {
				s.advance()
			}
		case c == '/' && s.peekAt(1) == '*':
			start := s.pos()
			s.advance()
			s.advance()
			for {
				if s.off >= len(s.src) {
					return s.errorf(start, "unterminated /* comment: close it with */")
				}
				if s.src[s.off] == '*' && s.peekAt(1) == '/' {
					s.advance()
					s.advance()
					break
				}
				s.advance()
			}
		default:
			return nil
		}
	}
	return nil
}

func isLetter(c byte) bool { return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
func isDigit(c byte) bool  { return c >= '0' && c <= '9' }

// next scans the next token outside a value.
func (s *scanner) next() (token, error) {
	if err := s.skipSpace(); err != nil {
		return token{}, err
	}
	p := s.pos()
	if s.off >= len(s.src) {
		return token{kind: tEOF, pos: p}, nil
	}
	c := s.src[s.off]
	switch {
	case isLetter(c):
		start := s.off
		for s.off < len(s.src) && (isLetter(s.src[s.off]) || isDigit(s.src[s.off])) {
			s.advance()
		}
		return token{tIdent, string(s.src[start:s.off]), p}, nil
	case isDigit(c) || c == '-' && isDigit(s.peekAt(1)) || c == '.' && isDigit(s.peekAt(1)):
		start := s.off
		s.advance()
		for s.off < len(s.src) && (isDigit(s.src[s.off]) || s.src[s.off] == '.' || isLetter(s.src[s.off])) {
			s.advance()
		}
		return token{tNumber, string(s.src[start:s.off]), p}, nil
	case c == '"':
		text, _, err := s.str()
		return token{tString, text, p}, err
	case c == '-' && s.peekAt(1) == '>':
		s.advance()
		s.advance()
		return token{tArrow, "->", p}, nil
	case c == '-' && s.peekAt(1) == '-':
		s.advance()
		s.advance()
		return token{tUndirected, "--", p}, nil
	}
	if k := punct[c]; k != tEOF {
		s.advance()
		return token{k, string(c), p}, nil
	}
	if c < 0x20 || c == 0x7f {
		// Graphviz's white space is space, tab and line breaks only
		// (gonum's differential fuzzing found \v and \f).
		return token{}, s.errorf(p, "a control character (0x%02x): remove it", c)
	}
	r, size := utf8.DecodeRune(s.src[s.off:])
	if r == utf8.RuneError && size <= 1 {
		return token{}, s.errorf(p, "a byte that is not UTF-8 text (0x%02x)", c)
	}
	for range size {
		s.advance()
	}
	return token{tOther, string(r), p}, nil
}

// punct are the one-character tokens (tEOF: none).
var punct = [256]tokKind{'{': tLBrace, '}': tRBrace, '[': tLBrack, ']': tRBrack, '=': tEq, ',': tComma, ';': tSemi, '.': tDot, ':': tColon}

// str scans a quoted string (§2.4: escapes \" \n \t \\ only; newlines may
// be written as they are) and returns its text and raw source.
func (s *scanner) str() (text, raw string, err error) {
	start := s.pos()
	begin := s.off
	s.advance()
	var b strings.Builder
	for {
		if s.off >= len(s.src) {
			return "", "", s.errorf(start, "unterminated string: close it with \"")
		}
		c := s.src[s.off]
		if c == '"' {
			s.advance()
			return b.String(), string(s.src[begin:s.off]), nil
		}
		if c == '\\' {
			p := s.pos()
			switch s.peekAt(1) {
			case '"':
				b.WriteByte('"')
			case '\\':
				b.WriteByte('\\')
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			default:
				e := s.peekAt(1)
				if e == 0 || e == '\n' {
					return "", "", s.errorf(p, "a backslash ends the line: write \\\\ for a backslash, \\n for a new line")
				}
				r, _ := utf8.DecodeRune(s.src[s.off+1:])
				return "", "", s.errorf(p, "unknown escape \\%c in a string: the escapes are \\\" \\n \\t and \\\\ (write \\\\ for a backslash)", r)
			}
			s.advance()
			s.advance()
			continue
		}
		if c < 0x20 && c != '\t' && c != '\n' && c != '\r' {
			// Graphviz refuses them too (gonum's differential test found it).
			return "", "", s.errorf(s.pos(), "a control character (0x%02x) in a string: remove it", c)
		}
		if c < 0x80 {
			b.WriteByte(c)
			s.advance()
			continue
		}
		r, size := utf8.DecodeRune(s.src[s.off:])
		if r == utf8.RuneError && size <= 1 {
			return "", "", s.errorf(s.pos(), "a byte that is not UTF-8 text (0x%02x) in a string", c)
		}
		b.WriteString(string(s.src[s.off : s.off+size]))
		for range size {
			s.advance()
		}
	}
}

// value scans a value right after `=` (§2.4).
func (s *scanner) value() (Value, error) {
	if err := s.skipSpace(); err != nil {
		return Value{}, err
	}
	p := s.pos()
	if s.off >= len(s.src) {
		return Value{}, s.errorf(p, "a value is missing after =")
	}
	c := s.src[s.off]
	var v Value
	switch {
	case c == '"':
		text, raw, err := s.str()
		if err != nil {
			return Value{}, err
		}
		v = Value{Text: text, Raw: raw, Kind: String, Pos: p}
	case isDigit(c) || c == '-' || c == '.':
		start := s.off
		for s.off < len(s.src) && (isDigit(s.src[s.off]) || isLetter(s.src[s.off]) || strings.IndexByte(".-:", s.src[s.off]) >= 0) {
			s.advance()
		}
		raw := string(s.src[start:s.off])
		k, ok := numberKind(raw)
		if !ok {
			return Value{}, s.errorf(p, "%s is not a value: numbers are 42, -1 or 0.5, durations 900s, 15m, 250ms; quote anything else (\"%s\")", raw, raw)
		}
		v = Value{Text: raw, Raw: raw, Kind: k, Pos: p}
	case isLetter(c):
		start := s.off
		for s.off < len(s.src) && (isDigit(s.src[s.off]) || isLetter(s.src[s.off]) || strings.IndexByte(".-:", s.src[s.off]) >= 0) {
			s.advance()
		}
		raw := string(s.src[start:s.off])
		k := Bare
		if raw == "true" || raw == "false" {
			k = Bool
		}
		v = Value{Text: raw, Raw: raw, Kind: k, Pos: p}
	case c == '<':
		return Value{}, s.errorf(p, "HTML values <…> are not supported: quote the value")
	default:
		return Value{}, s.errorf(p, "a value is missing after = (found %q): write a number, true/false, a word, or a quoted string", rune(c))
	}
	if s.off < len(s.src) {
		switch c := s.src[s.off]; c {
		case ' ', '\t', '\n', '\r', ',', ']', ';', '}':
		case '/':
			if n := s.peekAt(1); n != '/' && n != '*' {
				return Value{}, s.errorf(s.pos(), "unexpected '/' after the value %s: quote the whole value (\"…\")", v.Raw)
			}
		default:
			r, _ := utf8.DecodeRune(s.src[s.off:])
			return Value{}, s.errorf(s.pos(), "unexpected %q after the value %s: quote the whole value (\"…\")", r, v.Raw)
		}
	}
	return v, nil
}

// numberKind classifies Integer, Float and Duration (§2.4).
func numberKind(raw string) (Kind, bool) {
	t := strings.TrimPrefix(raw, "-")
	i := 0
	for i < len(t) && isDigit(t[i]) {
		i++
	}
	digits := i
	if i < len(t) && t[i] == '.' {
		j := i + 1
		for j < len(t) && isDigit(t[j]) {
			j++
		}
		if j == i+1 || j != len(t) {
			return 0, false
		}
		return Float, true
	}
	if digits == 0 {
		return 0, false
	}
	switch t[i:] {
	case "":
		return Int, true
	case "ms", "s", "m", "h", "d":
		return Duration, true
	}
	return 0, false
}

// keywords are DOT's keywords; Graphviz reads them in any case, so none
// may be a node ID in any case (D19).
var keywords = []string{"digraph", "graph", "node", "edge", "subgraph", "strict"}

func keyword(name string) string {
	for _, k := range keywords {
		if strings.EqualFold(name, k) {
			return k
		}
	}
	return ""
}

type parser struct {
	s     scanner
	tok   token
	depth int // subgraph nesting
}

// maxDepth bounds subgraph nesting, so that a hostile file cannot
// exhaust the stack of this parser and of the graph builder.
const maxDepth = 100

// Parse reads one digraph.
func Parse(src []byte) (*Graph, error) {
	p := &parser{s: scanner{src: src, line: 1, col: 1}}
	if len(src) >= 3 && src[0] == 0xEF && src[1] == 0xBB && src[2] == 0xBF {
		p.s.off = 3
	}
	if err := p.next(); err != nil {
		return nil, err
	}
	return p.file()
}

func (p *parser) next() error {
	t, err := p.s.next()
	if err != nil {
		return err
	}
	p.tok = t
	return nil
}

func (p *parser) errorf(pos Pos, format string, args ...any) error {
	return &Error{Pos: pos, Msg: fmt.Sprintf(format, args...)}
}

func (p *parser) file() (*Graph, error) {
	t := p.tok
	switch {
	case t.kind == tEOF:
		return nil, p.errorf(t.pos, "the file is empty: a flow is one `digraph Name { … }`")
	case t.kind == tIdent && keyword(t.text) == "strict":
		return nil, p.errorf(t.pos, "strict graphs are not supported (§2.3): remove `strict`")
	case t.kind == tIdent && keyword(t.text) == "graph":
		return nil, p.errorf(t.pos, "undirected graphs are not supported (§2.3): write `digraph`")
	case t.kind != tIdent || t.text != "digraph":
		return nil, p.errorf(t.pos, "a flow is one `digraph Name { … }`, found %s", t.describe())
	}
	g := &Graph{Pos: t.pos}
	if err := p.next(); err != nil {
		return nil, err
	}
	switch {
	case p.tok.kind == tIdent && keyword(p.tok.text) == "":
		g.Name = Ident{p.tok.text, p.tok.pos}
		if err := p.next(); err != nil {
			return nil, err
		}
	case p.tok.kind == tLBrace:
		return nil, p.errorf(p.tok.pos, "the digraph has no name: write `digraph Name {` (§2.2)")
	default:
		return nil, p.errorf(p.tok.pos, "the digraph's name must be an identifier (letters, digits, _), found %s", p.tok.describe())
	}
	if p.tok.kind != tLBrace {
		return nil, p.errorf(p.tok.pos, "expected { after `digraph %s`, found %s", g.Name.Name, p.tok.describe())
	}
	open := p.tok.pos
	if err := p.next(); err != nil {
		return nil, err
	}
	stmts, err := p.stmts(open)
	if err != nil {
		return nil, err
	}
	g.Stmts = stmts
	if err := p.next(); err != nil {
		return nil, err
	}
	if p.tok.kind != tEOF {
		return nil, p.errorf(p.tok.pos, "one digraph per file (§2.3): found %s after the graph's closing }", p.tok.describe())
	}
	return g, nil
}

// stmts reads statements up to the } that closes the block opened at
// open; p.tok is that } on return.
func (p *parser) stmts(open Pos) ([]Stmt, error) {
	var out []Stmt
	for {
		switch p.tok.kind {
		case tRBrace:
			return out, nil
		case tEOF:
			return nil, p.errorf(open, "this { is never closed: add } at the end")
		case tSemi:
			if err := p.next(); err != nil {
				return nil, err
			}
			continue
		}
		st, err := p.stmt()
		if err != nil {
			return nil, err
		}
		out = append(out, st)
		if p.tok.kind == tSemi {
			if err := p.next(); err != nil {
				return nil, err
			}
		}
	}
}

func (p *parser) stmt() (Stmt, error) {
	t := p.tok
	switch t.kind {
	case tIdent:
	case tString:
		return nil, p.errorf(t.pos, "node IDs are bare identifiers, not quoted strings (§2.3): write the ID as letters, digits and _, and put the display name in label=\"…\"")
	case tNumber:
		return nil, p.errorf(t.pos, "node IDs start with a letter or _ (§2.3), found %s", t.text)
	case tLBrace:
		return nil, p.errorf(t.pos, "anonymous { … } blocks are not supported: write `subgraph Name { … }`")
	default:
		return nil, p.errorf(t.pos, "expected a statement (a node, an edge, graph/node/edge [ … ], subgraph or key=value), found %s", t.describe())
	}
	if k := keyword(t.text); k != "" {
		if t.text != k {
			return nil, p.errorf(t.pos, "%q is the DOT keyword %s (DOT keywords ignore case): it cannot be a node ID (D19); rename the node", t.text, k)
		}
		switch k {
		case "graph", "node", "edge":
			if err := p.next(); err != nil {
				return nil, err
			}
			if p.tok.kind != tLBrack {
				return nil, p.errorf(p.tok.pos, "expected [ after `%s`, found %s (`%s` is a keyword: it cannot be a node ID or a key)", k, p.tok.describe(), k)
			}
			attrs, err := p.attrBlock()
			if err != nil {
				return nil, err
			}
			return &AttrStmt{Kind: k, Pos: t.pos, Attrs: attrs}, nil
		case "subgraph":
			return p.subgraph()
		case "digraph", "strict":
			return nil, p.errorf(t.pos, "one digraph per file (§2.3): `%s` inside a graph", k)
		}
	}
	if err := p.next(); err != nil {
		return nil, err
	}
	switch p.tok.kind {
	case tDot, tEq:
		key, err := p.qualified(t)
		if err != nil {
			return nil, err
		}
		if p.tok.kind != tEq {
			return nil, p.errorf(p.tok.pos, "expected = after %s, found %s", key.Name, p.tok.describe())
		}
		v, err := p.value()
		if err != nil {
			return nil, err
		}
		return &AssignStmt{Attr{Key: key.Name, KeyPos: key.Pos, Value: v}}, nil
	case tArrow:
		return p.edge(t)
	case tUndirected:
		return nil, p.errorf(p.tok.pos, "undirected edges `--` are not supported (§2.3): write ->")
	case tColon:
		return nil, p.errorf(p.tok.pos, "ports (node:port) are not supported (§2.3)")
	}
	n := &NodeStmt{ID: Ident{t.text, t.pos}}
	if p.tok.kind == tLBrack {
		attrs, err := p.attrBlock()
		if err != nil {
			return nil, err
		}
		n.Attrs = attrs
	}
	return n, nil
}

// qualified reads a key, first its first identifier (already read):
// Identifier ( '.' Identifier )*.
func (p *parser) qualified(first token) (Ident, error) {
	name := first.text
	for p.tok.kind == tDot {
		if err := p.next(); err != nil {
			return Ident{}, err
		}
		if p.tok.kind != tIdent {
			return Ident{}, p.errorf(p.tok.pos, "expected a name after . in the key %s., found %s", name, p.tok.describe())
		}
		name += "." + p.tok.text
		if err := p.next(); err != nil {
			return Ident{}, err
		}
	}
	return Ident{name, first.pos}, nil
}

// value reads the value after the current `=` and the token after it.
func (p *parser) value() (Value, error) {
	v, err := p.s.value()
	if err != nil {
		return Value{}, err
	}
	return v, p.next()
}

func (p *parser) nodeID(what string) (Ident, error) {
	t := p.tok
	switch t.kind {
	case tIdent:
		if k := keyword(t.text); k != "" {
			if k == "subgraph" {
				return Ident{}, p.errorf(t.pos, "subgraphs cannot be edge endpoints: write one edge per node")
			}
			return Ident{}, p.errorf(t.pos, "%q is the DOT keyword %s (DOT keywords ignore case): it cannot be a node ID (D19); rename the node", t.text, k)
		}
		return Ident{t.text, t.pos}, p.next()
	case tLBrace:
		return Ident{}, p.errorf(t.pos, "{A B} endpoints are not supported (§2.3): write one edge per target")
	case tString:
		return Ident{}, p.errorf(t.pos, "node IDs are bare identifiers, not quoted strings (§2.3)")
	}
	return Ident{}, p.errorf(t.pos, "expected %s, found %s", what, t.describe())
}

func (p *parser) edge(first token) (Stmt, error) {
	e := &EdgeStmt{IDs: []Ident{{first.text, first.pos}}}
	for p.tok.kind == tArrow {
		e.Arrows = append(e.Arrows, p.tok.pos)
		if err := p.next(); err != nil {
			return nil, err
		}
		id, err := p.nodeID("a node ID after ->")
		if err != nil {
			return nil, err
		}
		e.IDs = append(e.IDs, id)
		switch p.tok.kind {
		case tColon:
			return nil, p.errorf(p.tok.pos, "ports (node:port) are not supported (§2.3)")
		case tUndirected:
			return nil, p.errorf(p.tok.pos, "undirected edges `--` are not supported (§2.3): write ->")
		}
	}
	if p.tok.kind == tLBrack {
		attrs, err := p.attrBlock()
		if err != nil {
			return nil, err
		}
		e.Attrs = attrs
	}
	return e, nil
}

func (p *parser) subgraph() (Stmt, error) {
	sg := &Subgraph{Pos: p.tok.pos}
	if p.depth++; p.depth > maxDepth {
		return nil, p.errorf(sg.Pos, "subgraphs nested more than %d deep", maxDepth)
	}
	defer func() { p.depth-- }()
	if err := p.next(); err != nil {
		return nil, err
	}
	if p.tok.kind == tIdent {
		if k := keyword(p.tok.text); k != "" {
			return nil, p.errorf(p.tok.pos, "%q is a DOT keyword: it cannot name a subgraph", p.tok.text)
		}
		sg.Name = &Ident{p.tok.text, p.tok.pos}
		if err := p.next(); err != nil {
			return nil, err
		}
	}
	if p.tok.kind != tLBrace {
		return nil, p.errorf(p.tok.pos, "expected { after subgraph, found %s", p.tok.describe())
	}
	open := p.tok.pos
	if err := p.next(); err != nil {
		return nil, err
	}
	stmts, err := p.stmts(open)
	if err != nil {
		return nil, err
	}
	sg.Stmts = stmts
	return sg, p.next()
}

// attrBlock reads [ k=v, … ] (commas required, §2.3); p.tok is [.
func (p *parser) attrBlock() ([]Attr, error) {
	var attrs []Attr
	if err := p.next(); err != nil {
		return nil, err
	}
	for {
		switch p.tok.kind {
		case tRBrack:
			return attrs, p.next()
		case tIdent:
		case tString:
			return nil, p.errorf(p.tok.pos, "attribute keys are bare names, not quoted strings: write key=value")
		case tEOF:
			return nil, p.errorf(p.tok.pos, "the attribute block is never closed: add ]")
		default:
			return nil, p.errorf(p.tok.pos, "expected an attribute (key=value) or ], found %s", p.tok.describe())
		}
		first := p.tok
		if err := p.next(); err != nil {
			return nil, err
		}
		if k := keyword(first.text); k != "" && p.tok.kind != tDot {
			// Graphviz refuses it (gonum's differential test found it).
			return nil, p.errorf(first.pos, "%q is the DOT keyword %s: it cannot be an attribute key", first.text, k)
		}
		key, err := p.qualified(first)
		if err != nil {
			return nil, err
		}
		if p.tok.kind != tEq {
			return nil, p.errorf(p.tok.pos, "expected = after the key %s, found %s", key.Name, p.tok.describe())
		}
		v, err := p.value()
		if err != nil {
			return nil, err
		}
		attrs = append(attrs, Attr{Key: key.Name, KeyPos: key.Pos, Value: v})
		switch p.tok.kind {
		case tComma:
			if err := p.next(); err != nil {
				return nil, err
			}
		case tRBrack:
		case tSemi:
			return nil, p.errorf(p.tok.pos, "separate attributes with commas, not semicolons (§2.3)")
		case tIdent:
			return nil, p.errorf(p.tok.pos, "a comma is missing before %s: attributes are separated by commas (§2.3)", p.tok.text)
		case tEOF:
			return nil, p.errorf(p.tok.pos, "the attribute block is never closed: add ]")
		default:
			return nil, p.errorf(p.tok.pos, "expected , or ] after %s=%s, found %s", key.Name, v.Raw, p.tok.describe())
		}
	}
}
