// Package stylesheet reads attractor's model stylesheet (§8 of
// attractor-spec.md at fb57a55), `selector { property: value; … }`
// rules that give nodes their llm_model, llm_provider and
// reasoning_effort, and says which rule wins for a node.
package stylesheet

import (
	"fmt"
	"strings"
)

// Properties are the properties a rule may set (§8.4).
var Properties = []string{"llm_model", "llm_provider", "reasoning_effort"}

// SelectorKind is what a selector matches.
type SelectorKind uint8

// The selectors of §8.3, in order of specificity.
const (
	Universal SelectorKind = iota // *
	Shape                         // box
	Class                         // .code
	ID                            // #review
)

// Selector is a rule's selector.
type Selector struct {
	Kind SelectorKind
	Name string // the shape, class or ID
}

// Specificity is §8.3's: * 0, shape 1, class 2, id 3.
func (s Selector) Specificity() int { return int(s.Kind) }

// String writes the selector as in the stylesheet.
func (s Selector) String() string {
	switch s.Kind {
	case Universal:
		return "*"
	case Class:
		return "." + s.Name
	case ID:
		return "#" + s.Name
	}
	return s.Name
}

// Matches reports whether the selector matches a node.
func (s Selector) Matches(id, shape string, classes []string) bool {
	switch s.Kind {
	case Universal:
		return true
	case Shape:
		return shape == s.Name
	case ID:
		return id == s.Name
	}
	for _, c := range classes {
		if c == s.Name {
			return true
		}
	}
	return false
}

// Decl is property: value.
type Decl struct {
	Property, Value string
	Offset          int
}

// Rule is a selector and its declarations.
type Rule struct {
	Selector Selector
	Decls    []Decl
	Offset   int
}

// Sheet is a parsed stylesheet.
type Sheet struct{ Rules []Rule }

// Error is a syntax error at a byte offset of the stylesheet's text.
type Error struct {
	Offset int
	Msg    string
}

func (e *Error) Error() string { return e.Msg }

type parser struct {
	s   string
	off int
}

func (p *parser) errorf(off int, format string, args ...any) error {
	return &Error{Offset: off, Msg: fmt.Sprintf(format, args...)}
}

func (p *parser) space() {
	for p.off < len(p.s) && strings.IndexByte(" \t\r\n\f\v", p.s[p.off]) >= 0 {
		p.off++
	}
}

func (p *parser) word(extra string) string {
	start := p.off
	for p.off < len(p.s) {
		c := p.s[p.off]
		if c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte(extra, c) >= 0 {
			p.off++
			continue
		}
		break
	}
	return p.s[start:p.off]
}

func isIdent(s string) bool {
	if s == "" || s[0] >= '0' && s[0] <= '9' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// Parse reads a stylesheet (§8.2). Blank text is an empty sheet.
func Parse(text string) (*Sheet, error) {
	p := &parser{s: text}
	sheet := &Sheet{}
	for {
		p.space()
		if p.off >= len(p.s) {
			return sheet, nil
		}
		r, err := p.rule()
		if err != nil {
			return nil, err
		}
		sheet.Rules = append(sheet.Rules, r)
	}
}

func (p *parser) rule() (Rule, error) {
	r := Rule{Offset: p.off}
	switch c := p.s[p.off]; {
	case c == '*':
		p.off++
	case c == '#':
		p.off++
		name := p.word("")
		if !isIdent(name) {
			return r, p.errorf(r.Offset, "#%s: an ID selector is # and a node ID (letters, digits, _)", name)
		}
		r.Selector = Selector{ID, name}
	case c == '.':
		p.off++
		name := p.word("-")
		if name == "" || strings.ToLower(name) != name || strings.Contains(name, "_") {
			return r, p.errorf(r.Offset, ".%s: class names are lowercase letters, digits and - (§8.2), as subgraph labels become (\"Loop A\" → .loop-a)", name)
		}
		r.Selector = Selector{Class, name}
	default:
		name := p.word("")
		if !isIdent(name) {
			return r, p.errorf(r.Offset, "expected a selector (*, a shape such as box, .class or #id), found %q", rest(p.s[r.Offset:]))
		}
		r.Selector = Selector{Shape, name}
	}
	p.space()
	if p.off >= len(p.s) || p.s[p.off] != '{' {
		return r, p.errorf(p.off, "expected { after the selector %s, found %q", r.Selector, rest(p.s[p.off:]))
	}
	open := p.off
	p.off++
	for {
		p.space()
		if p.off >= len(p.s) {
			return r, p.errorf(open, "this { is never closed: add }")
		}
		if p.s[p.off] == '}' {
			p.off++
			if len(r.Decls) == 0 {
				return r, p.errorf(open, "the rule %s sets nothing: write property: value; inside { }", r.Selector)
			}
			return r, nil
		}
		d, err := p.decl()
		if err != nil {
			return r, err
		}
		r.Decls = append(r.Decls, d)
		p.space()
		if p.off < len(p.s) && p.s[p.off] == ';' {
			p.off++
			continue
		}
		if p.off < len(p.s) && p.s[p.off] != '}' {
			return r, p.errorf(p.off, "expected ; or } after %s: %s, found %q", d.Property, d.Value, rest(p.s[p.off:]))
		}
	}
}

func (p *parser) decl() (Decl, error) {
	d := Decl{Offset: p.off}
	d.Property = p.word("")
	if d.Property == "" {
		return d, p.errorf(p.off, "expected a property (llm_model, llm_provider, reasoning_effort), found %q", rest(p.s[p.off:]))
	}
	known := false
	for _, k := range Properties {
		known = known || k == d.Property
	}
	if !known {
		return d, p.errorf(d.Offset, "unknown property %q: a stylesheet sets llm_model, llm_provider and reasoning_effort (§8.4)", d.Property)
	}
	p.space()
	if p.off >= len(p.s) || p.s[p.off] != ':' {
		return d, p.errorf(p.off, "expected : after %s, found %q (write %s: value;)", d.Property, rest(p.s[p.off:]), d.Property)
	}
	p.off++
	p.space()
	if p.off < len(p.s) && p.s[p.off] == '"' {
		start := p.off
		p.off++
		var b strings.Builder
		for {
			if p.off >= len(p.s) {
				return d, p.errorf(start, "unterminated string: close it with \"")
			}
			c := p.s[p.off]
			if c == '"' {
				p.off++
				break
			}
			if c == '\\' && p.off+1 < len(p.s) && (p.s[p.off+1] == '"' || p.s[p.off+1] == '\\') {
				p.off++
				c = p.s[p.off]
			}
			b.WriteByte(c)
			p.off++
		}
		d.Value = b.String()
		return d, nil
	}
	// BareValue (§8.2), widened to the characters model names use
	// (vendor/model@version).
	d.Value = p.word(".:-/@+")
	if d.Value == "" {
		return d, p.errorf(p.off, "expected a value after %s:, found %q (quote values with other characters)", d.Property, rest(p.s[p.off:]))
	}
	return d, nil
}

// rest is the start of s, for a message.
func rest(s string) string {
	if s == "" {
		return "the end"
	}
	if i := strings.IndexAny(s, "\n"); i >= 0 {
		s = s[:i]
	}
	if len(s) > 20 {
		s = s[:20] + "…"
	}
	return s
}

// Match is the value a node gets for a property, and the rule that set
// it.
type Match struct {
	Value    string
	Selector Selector
}

// Resolve returns, for each property some rule sets for the node, the
// value of the most specific matching rule (the later one among equals,
// §8.3).
func (s *Sheet) Resolve(id, shape string, classes []string) map[string]Match {
	var out map[string]Match
	best := map[string]int{}
	for _, r := range s.Rules {
		if !r.Selector.Matches(id, shape, classes) {
			continue
		}
		spec := r.Selector.Specificity()
		for _, d := range r.Decls {
			if b, ok := best[d.Property]; ok && b > spec {
				continue
			}
			best[d.Property] = spec
			if out == nil {
				out = map[string]Match{}
			}
			out[d.Property] = Match{d.Value, r.Selector}
		}
	}
	return out
}
