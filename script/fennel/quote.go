package fennel

import (
	"strconv"
	"strings"
)

// Quoting. In compile-time code (macro bodies) a quoted form builds the
// syntax value it reads as, through the constructors of the macro
// prelude (the global __nbq); unquoted forms inside are evaluated. In run-time
// code only data can be quoted: strings, numbers, booleans, sequences
// and tables; symbols, lists and ... are refused, as Fennel does.

func spQuote(c *compiler, n *node, sc *scope, b *block, o copts) ([]expr, bool) {
	c.assert(len(n.items) == 2, n, "expected one argument")
	if c.compileTime {
		return []expr{c.quoteCT(n.items[1], sc, b)}, false
	}
	return []expr{c.quoteRT(n.items[1], sc, b)}, false
}

func spUnquote(c *compiler, n *node, sc *scope, b *block, o copts) ([]expr, bool) {
	c.fail(n, "tried to use unquote outside quote")
	return nil, true
}

// isUnquote says whether x is (unquote form).
func isUnquote(x *node) bool {
	return x.kind == kList && len(x.items) >= 2 && x.items[0].isSym("unquote") && !x.items[0].gensym
}

// quoteItems quotes the items of a list or sequence into a Lua table
// constructor; an unquoted last item gives all its values, as in Fennel.
func (c *compiler) quoteItems(items []*node, sc *scope, b *block, quote func(*node) expr) string {
	parts := make([]string, 0, len(items))
	for i, it := range items {
		if i == len(items)-1 && isUnquote(it) {
			for _, e := range c.compile(it.items[1], sc, b, oAll) {
				parts = append(parts, e.code)
			}
			continue
		}
		parts = append(parts, quote(it).code)
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// quoteCT compiles a quoted form in compile-time code.
func (c *compiler) quoteCT(x *node, sc *scope, b *block) expr {
	quote := func(y *node) expr { return c.quoteCT(y, sc, b) }
	pos := strconv.Itoa(x.line) + ", " + strconv.Itoa(x.col)
	switch x.kind {
	case kVarg:
		return expr{"__nbq.varg()", ekExpr}
	case kSym:
		name, quoted := x.s, "true"
		if auto, ok := c.autogensym(name, sc); ok {
			name, quoted = auto, "false"
		}
		return expr{"__nbq.sym(" + quoteString(name) + ", " + pos + ", " + quoted + ")", ekExpr}
	case kList:
		if isUnquote(x) {
			return c.compile1(x.items[1], sc, b)
		}
		return expr{"__nbq.list(" + c.quoteItems(x.items, sc, b, quote) + ", " + pos + ")", ekExpr}
	case kSeq:
		return expr{"__nbq.seq(" + c.quoteItems(x.items, sc, b, quote) + ")", ekExpr}
	case kTable:
		parts := make([]string, 0, len(x.items))
		for _, it := range x.items {
			parts = append(parts, quote(it).code)
		}
		return expr{"__nbq.tbl({" + strings.Join(parts, ", ") + "}, " + strconv.Itoa(len(parts)) + ")", ekExpr}
	}
	return c.atom(x, sc, b)
}

// autogensym names x# (and x#.field) uniquely for the macro being compiled:
// the same name everywhere in it, as in Fennel.
func (c *compiler) autogensym(name string, sc *scope) (string, bool) {
	i := strings.IndexByte(name, '#')
	if i <= 0 || (i != len(name)-1 && name[i+1] != '.' && name[i+1] != ':') {
		return "", false
	}
	base, rest := name[:i], name[i+1:]
	for s := sc; s != nil; s = s.parent {
		if g, ok := s.autogensyms[base]; ok {
			return g + rest, true
		}
	}
	top := sc
	for top.parent != nil {
		top = top.parent
	}
	if top.autogensyms == nil {
		top.autogensyms = map[string]string{}
	}
	c.gen++
	g := base + "_" + strconv.Itoa(c.gen) + "_auto"
	top.autogensyms[base] = g
	return g + rest, true
}

// quoteRT compiles a quoted form in run-time code.
func (c *compiler) quoteRT(x *node, sc *scope, b *block) expr {
	quote := func(y *node) expr { return c.quoteRT(y, sc, b) }
	switch x.kind {
	case kVarg:
		c.fail(x, "quoted ... may only be used at compile time")
	case kSym:
		c.fail(x, "symbols may only be used at compile time")
	case kList:
		if isUnquote(x) {
			return c.compile1(x.items[1], sc, b)
		}
		c.fail(x, "lists may only be used at compile time")
	case kSeq:
		return expr{c.quoteItems(x.items, sc, b, quote), ekExpr}
	case kTable:
		parts := make([]string, 0, len(x.items)/2)
		for i := 0; i+1 < len(x.items); i += 2 {
			k := quote(x.items[i])
			c.assert(k.code != "nil", x.items[i], "tables can't have nil keys")
			parts = append(parts, "["+k.code+"] = "+quote(x.items[i+1]).code)
		}
		return expr{"{" + strings.Join(parts, ", ") + "}", ekExpr}
	}
	return c.atom(x, sc, b)
}
