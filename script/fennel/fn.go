package fennel

import (
	"strconv"
	"strings"
)

func spFn(c *compiler, n *node, sc *scope, b *block, o copts) ([]expr, bool) {
	isLambda := n.items[0].s != "fn"
	items := n.items[1:]
	var nameNode *node
	if len(items) > 0 && items[0].kind == kSym {
		nameNode = items[0]
		items = items[1:]
	}
	c.assert(len(items) > 0 && items[0].kind == kSeq, n, "expected parameters table")
	params := items[0].items
	body := items[1:]
	// A docstring or metadata table before other forms is not code.
	if len(body) > 1 && (body[0].kind == kStr || body[0].kind == kTable) {
		body = body[1:]
	}

	var fnName, assignTo string
	switch {
	case nameNode == nil:
		fnName = c.gensym(sc, "")
	case strings.ContainsAny(nameNode.s, ".:"):
		c.assert(!strings.Contains(nameNode.s, ":"), nameNode, "method functions are not supported; use (fn t.name [self ...] ...)")
		assignTo = c.symbol(nameNode, sc).code
		fnName = c.gensym(sc, "")
	default:
		// Declared first so that the function can call itself.
		fnName = c.declare(nameNode, sc, false)
	}

	fs := newScope(sc, true)
	inner := c.newBlock()
	var names []string
	type later struct {
		pat  *node
		name string
	}
	var destructs []later
	var checks []*node
	for i, p := range params {
		switch {
		case p.kind == kVarg:
			c.assert(i == len(params)-1, p, "expected vararg as last parameter")
			fs.vararg = true
			names = append(names, "...")
		case p.isSym("&"):
			c.assert(i == len(params)-2, p, "expected rest argument before last parameter")
			fs.vararg = true
			names = append(names, "...")
			rest := params[i+1]
			c.bindExpr(rest, expr{"{...}", ekExpr}, fs, inner, bLocal)
			if isLambda {
				checks = append(checks, rest)
			}
		case i > 0 && params[i-1].isSym("&"):
			// bound above
		case p.kind == kSym:
			c.assert(!strings.ContainsAny(p.s, ".:"), p, "unexpected multi symbol %s", p.s)
			names = append(names, c.declare(p, fs, false))
			if isLambda {
				checks = append(checks, p)
			}
		case p.kind == kSeq || p.kind == kTable:
			g := c.gensym(fs, "")
			names = append(names, g)
			destructs = append(destructs, later{p, g})
			if isLambda {
				checks = append(checks, p)
			}
		default:
			c.fail(p, "expected symbol for function parameter: %s", describe(p))
		}
	}
	for _, d := range destructs {
		c.bindExpr(d.pat, expr{d.name, ekSym}, fs, inner, bLocal)
	}
	for _, p := range checks {
		c.lambdaChecks(p, fs, inner)
	}
	c.body(body, fs, inner, copts{tail: true})

	header := "function(" + strings.Join(names, ", ") + ")"
	if assignTo != "" {
		b.emit(assignTo + " = " + header)
	} else {
		b.emit("local function " + fnName + "(" + strings.Join(names, ", ") + ")")
	}
	b.nest(inner)
	b.emit("end")
	if assignTo != "" {
		return []expr{{assignTo, ekSym}}, false
	}
	return []expr{{fnName, ekSym}}, false
}

// lambdaChecks makes lambda fail when a required argument is nil.
func (c *compiler) lambdaChecks(p *node, sc *scope, b *block) {
	switch p.kind {
	case kSym:
		if strings.HasPrefix(p.s, "?") || strings.HasPrefix(p.s, "_") || p.s == "&" || p.s == "&as" {
			return
		}
		bd := sc.lookup(p.s)
		if bd == nil {
			return
		}
		file := c.opts.Filename
		if file == "" {
			file = "unknown"
		}
		msg := quoteString("Missing argument " + p.s + " on " + file + ":" + strconv.Itoa(p.line))
		b.emit("assert((nil ~= " + bd.lua + "), " + msg + ")")
	case kSeq:
		for _, it := range p.items {
			c.lambdaChecks(it, sc, b)
		}
	case kTable:
		for i := 1; i < len(p.items); i += 2 {
			c.lambdaChecks(p.items[i], sc, b)
		}
	}
}

// hashfnArgs finds the highest $N and whether $... is used, not looking
// into nested hash functions.
func hashfnArgs(n *node, max *int, varg *bool) {
	switch n.kind {
	case kSym:
		name := n.s
		if i := strings.IndexAny(name, ".:"); i > 0 && name != "$..." {
			name = name[:i]
		}
		switch {
		case name == "$":
			if *max < 1 {
				*max = 1
			}
		case name == "$...":
			*varg = true
		case len(name) == 2 && name[0] == '$' && name[1] >= '1' && name[1] <= '9':
			if d := int(name[1] - '0'); d > *max {
				*max = d
			}
		}
	case kList:
		if len(n.items) > 0 && n.items[0].isSym("hashfn") {
			return
		}
		for _, it := range n.items {
			hashfnArgs(it, max, varg)
		}
	case kSeq, kTable:
		for _, it := range n.items {
			hashfnArgs(it, max, varg)
		}
	}
}

func spHashfn(c *compiler, n *node, sc *scope, b *block, o copts) ([]expr, bool) {
	c.assert(len(n.items) == 2, n, "expected one argument")
	max, varg := 0, false
	hashfnArgs(n.items[1], &max, &varg)
	c.assert(!(varg && max > 0), n, "$ and $... in hashfn are mutually exclusive")
	fs := newScope(sc, true)
	fs.hashfn = true
	var names []string
	for i := 1; i <= max; i++ {
		names = append(names, c.declare(&node{kind: kSym, s: "$" + strconv.Itoa(i), line: n.line, col: n.col}, fs, false))
	}
	if varg {
		fs.vararg = true
		names = append(names, "...")
		if fs.syms == nil {
			fs.syms = map[string]*binding{}
		}
		fs.syms["$..."] = &binding{lua: "..."}
	}
	inner := c.newBlock()
	c.compile(n.items[1], fs, inner, copts{tail: true})
	name := c.gensym(sc, "")
	b.emit("local function " + name + "(" + strings.Join(names, ", ") + ")")
	b.nest(inner)
	b.emit("end")
	return []expr{{name, ekSym}}, false
}
