package fennel

import (
	"strconv"
	"strings"
	"sync"
)

// specialFn compiles one special form. It returns the form's values; done
// says they were already delivered as o asks (returned, assigned, or given
// back as they are).
type specialFn func(c *compiler, n *node, sc *scope, b *block, o copts) (es []expr, done bool)

// specials are the special forms by name; specialForms builds them on
// the first compilation, not at every nb start (the table refers to the
// compiler's functions, which refer back to it, so it is filled in a
// function rather than by a variable's initialiser).
var (
	specialsOnce sync.Once
	specials     map[string]specialFn
)

// specialForms is the table of special forms.
func specialForms() map[string]specialFn {
	specialsOnce.Do(buildSpecials)
	return specials
}

func buildSpecials() {
	specials = map[string]specialFn{
		"do":          spDo,
		"let":         spLet,
		"local":       spLocal,
		"var":         spLocal,
		"set":         spSet,
		"tset":        spTset,
		"global":      spGlobal,
		"if":          spIf,
		"when":        spWhen,
		"each":        spEach,
		"for":         spFor,
		"while":       spWhile,
		"fn":          spFn,
		"lambda":      spFn,
		"λ":           spFn,
		"hashfn":      spHashfn,
		"values":      spValues,
		"pick-values": spPickValues,
		".":           spDot,
		"?.":          spSafeDot,
		":":           spMethod,
		"length":      spLength,
		"#":           spLength,
		"not":         spNot,
		"and":         spAndOr,
		"or":          spAndOr,
		"=":           spCompare,
		"not=":        spCompare,
		"~=":          spCompare,
		"<":           spCompare,
		">":           spCompare,
		"<=":          spCompare,
		">=":          spCompare,
		"+":           spArith,
		"-":           spArith,
		"*":           spArith,
		"/":           spArith,
		"//":          spArith,
		"%":           spArith,
		"^":           spArith,
		"..":          spArith,
		"band":        spArith,
		"bor":         spArith,
		"bxor":        spArith,
		"lshift":      spArith,
		"rshift":      spArith,
		"bnot":        spBnot,
		"tail!":       spTail,
		"comment":     spComment,
		"lua":         spLua,
		"->":          spThread,
		"->>":         spThread,
		"-?>":         spThread,
		"-?>>":        spThread,
		"doto":        spDoto,
		"partial":     spPartial,
		"collect":     spCollect,
		"icollect":    spSeqCollect,
		"fcollect":    spSeqCollect,
		"accumulate":  spAccumulate,
		"faccumulate": spAccumulate,
		"case":        spCase,
		"match":       spCase,
		"case-try":    spCaseTry,
		"match-try":   spCaseTry,
		"with-open":   spWithOpen,
	}
	for _, name := range []string{"eval-compiler", "macrodebug", "include", "assert-repl", "pick-args"} {
		specials[name] = spUnsupported
	}
	specials["macro"] = spMacro
	specials["macros"] = spMacros
	specials["import-macros"] = spMacroModule
	specials["require-macros"] = spMacroModule
	specials["quote"] = spQuote
	specials["unquote"] = spUnquote
}

func spUnsupported(c *compiler, n *node, sc *scope, b *block, o copts) ([]expr, bool) {
	name := n.items[0].s
	if name == "eval-compiler" {
		c.fail(n, "eval-compiler is not supported by nb's Fennel compiler: define a macro with `macro` instead")
	}
	c.fail(n, "%s is not supported by nb's Fennel compiler", name)
	return nil, true
}

// stmt wraps stmtForm for specials.
func (c *compiler) stmt(sc *scope, b *block, o copts, body func(b *block, o copts)) ([]expr, bool) {
	es := c.stmtForm(sc, b, o, body)
	return es, es == nil
}

func list(at *node, items ...*node) *node {
	return &node{kind: kList, line: at.line, col: at.col, items: items}
}

func seq(at *node, items ...*node) *node {
	return &node{kind: kSeq, line: at.line, col: at.col, items: items}
}

func sym(at *node, name string) *node {
	return &node{kind: kSym, s: name, line: at.line, col: at.col}
}

// rawSym names a global directly (type, select, table.unpack ...).
func rawSym(at *node, name string) *node {
	return &node{kind: kSym, s: name, raw: true, line: at.line, col: at.col}
}

func str(at *node, s string) *node {
	return &node{kind: kStr, s: s, line: at.line, col: at.col}
}

func num(at *node, i int64) *node {
	return &node{kind: kNum, isInt: true, i: i, line: at.line, col: at.col}
}

// doBlock compiles forms in a new scope inside do ... end.
func (c *compiler) doBlock(forms []*node, sc *scope, b *block, o copts) {
	sub := newScope(sc, false)
	inner := c.newBlock()
	c.body(forms, sub, inner, o)
	if len(inner.lines) == 0 {
		return
	}
	b.emit("do")
	b.nest(inner)
	b.emit("end")
}

func spDo(c *compiler, n *node, sc *scope, b *block, o copts) ([]expr, bool) {
	forms := n.items[1:]
	if len(forms) == 1 && forms[0].kind != kList {
		return c.compile(forms[0], sc, b, o), true
	}
	return c.stmt(sc, b, o, func(b *block, o copts) { c.doBlock(forms, sc, b, o) })
}

func spLet(c *compiler, n *node, sc *scope, b *block, o copts) ([]expr, bool) {
	c.assert(len(n.items) >= 2 && n.items[1].kind == kSeq, n, "expected binding sequence")
	bindings := n.items[1].items
	c.assert(len(bindings)%2 == 0, n.items[1], "expected even number of name/value bindings")
	c.assert(len(n.items) >= 3, n, "expected body expression")
	return c.stmt(sc, b, o, func(b *block, o copts) {
		sub := newScope(sc, false)
		inner := c.newBlock()
		for i := 0; i < len(bindings); i += 2 {
			c.bind(bindings[i], bindings[i+1], sub, inner, bLocal)
		}
		c.body(n.items[2:], sub, inner, o)
		b.emit("do")
		b.nest(inner)
		b.emit("end")
	})
}

func spLocal(c *compiler, n *node, sc *scope, b *block, o copts) ([]expr, bool) {
	c.assert(len(n.items) == 3, n, "expected name and value")
	c.assert(o.tail || o.target != "" || o.nval == 0, n, "can't introduce %s here", n.items[0].s)
	kind := bLocal
	if n.items[0].s == "var" {
		kind = bVar
	}
	c.bind(n.items[1], n.items[2], sc, b, kind)
	return []expr{nilExpr}, false
}

func spGlobal(c *compiler, n *node, sc *scope, b *block, o copts) ([]expr, bool) {
	c.assert(!c.opts.Sandboxed, n, "global is not allowed in a sandboxed cartridge; use local")
	c.assert(len(n.items) == 3, n, "expected name and value")
	c.bind(n.items[1], n.items[2], sc, b, bGlobal)
	return []expr{nilExpr}, false
}

func spSet(c *compiler, n *node, sc *scope, b *block, o copts) ([]expr, bool) {
	c.assert(len(n.items) == 3, n, "expected name and value")
	c.bind(n.items[1], n.items[2], sc, b, bSet)
	return []expr{nilExpr}, false
}

func spTset(c *compiler, n *node, sc *scope, b *block, o copts) ([]expr, bool) {
	c.assert(len(n.items) >= 4, n, "expected table, key, and value arguments")
	t := c.compile1(n.items[1], sc, b)
	target := prefixExpr(t)
	for _, k := range n.items[2 : len(n.items)-1] {
		target += c.index(k, sc, b)
	}
	v := c.compile1(n.items[len(n.items)-1], sc, b)
	b.emit(target + " = " + v.code)
	return []expr{nilExpr}, false
}

// index compiles a key into .name or [key].
func (c *compiler) index(k *node, sc *scope, b *block) string {
	if k.kind == kStr && isIdent(k.s) {
		return "." + k.s
	}
	kc := c.compile1(k, sc, b)
	return "[" + kc.code + "]"
}

func spIf(c *compiler, n *node, sc *scope, b *block, o copts) ([]expr, bool) {
	c.assert(len(n.items) >= 3, n, "expected condition and body")
	return c.stmt(sc, b, o, func(b *block, o copts) { c.ifChain(n.items[1:], sc, b, o) })
}

func spWhen(c *compiler, n *node, sc *scope, b *block, o copts) ([]expr, bool) {
	c.assert(len(n.items) >= 3, n, "expected body")
	body := list(n, append([]*node{sym(n, "do")}, n.items[2:]...)...)
	return c.stmt(sc, b, o, func(b *block, o copts) { c.ifChain([]*node{n.items[1], body}, sc, b, o) })
}

// ifChain emits if/elseif/else. o is tail, target or statement.
func (c *compiler) ifChain(items []*node, sc *scope, b *block, o copts) {
	cond := c.compile1(items[0], sc, b)
	c.ifRest(cond, items[1:], sc, b, o)
}

// ifRest emits the if for an already compiled condition; items are its
// body then the remaining clauses.
func (c *compiler) ifRest(cond expr, items []*node, sc *scope, b *block, o copts) {
	branch := func(x *node) *block {
		bb := c.newBlock()
		c.compile(x, newScope(sc, false), bb, o)
		return bb
	}
	b.emit("if " + cond.code + " then")
	b.nest(branch(items[0]))
	rest := items[1:]
	for len(rest) >= 2 {
		cb := c.newBlock()
		cond := c.compile1(rest[0], sc, cb)
		if len(cb.lines) > 0 {
			// The condition needs statements: they go in the else branch.
			eb := c.newBlock()
			eb.append(cb)
			c.ifRest(cond, rest[1:], sc, eb, o)
			b.emit("else")
			b.nest(eb)
			b.emit("end")
			return
		}
		b.emit("elseif " + cond.code + " then")
		b.nest(branch(rest[1]))
		rest = rest[2:]
	}
	c.elseBranch(rest, b, o, branch)
	b.emit("end")
}

func (c *compiler) elseBranch(rest []*node, b *block, o copts, branch func(*node) *block) {
	if len(rest) == 1 {
		b.emit("else")
		b.nest(branch(rest[0]))
		return
	}
	if o.tail || o.target != "" {
		eb := c.newBlock()
		c.finish([]expr{nilExpr}, eb, o)
		b.emit("else")
		b.nest(eb)
	}
}

// untilClause removes &until cond from binding items.
func (c *compiler) untilClause(items []*node) ([]*node, *node) {
	for i, it := range items {
		if it.isSym("&until") {
			c.assert(i+1 < len(items), it, "expected condition after &until")
			rest := append(append([]*node{}, items[:i]...), items[i+2:]...)
			return rest, items[i+1]
		}
	}
	return items, nil
}

func (c *compiler) emitUntil(cond *node, sc *scope, b *block) {
	if cond == nil {
		return
	}
	e := c.compile1(cond, sc, b)
	b.emit("if " + e.code + " then break end")
}

func spEach(c *compiler, n *node, sc *scope, b *block, o copts) ([]expr, bool) {
	c.assert(len(n.items) >= 3, n, "expected body expression")
	c.assert(n.items[1].kind == kSeq, n, "expected binding table")
	items, until := c.untilClause(n.items[1].items)
	c.assert(len(items) >= 2, n.items[1], "expected binding and iterator")
	iter := items[len(items)-1]
	binds := items[:len(items)-1]
	if len(binds) == 1 && binds[0].kind == kList {
		binds = binds[0].items
	}
	iterExprs := c.compile(iter, sc, b, oAll)
	sub := newScope(sc, false)
	names := make([]string, len(binds))
	type later struct {
		pat  *node
		name string
	}
	var destructs []later
	for i, bn := range binds {
		if bn.kind == kSym {
			names[i] = c.declare(bn, sub, false)
		} else {
			names[i] = c.gensym(sub, "")
			destructs = append(destructs, later{bn, names[i]})
		}
	}
	inner := c.newBlock()
	for _, d := range destructs {
		c.bindExpr(d.pat, expr{d.name, ekSym}, sub, inner, bLocal)
	}
	c.emitUntil(until, sub, inner)
	c.doBodyInto(n.items[2:], sub, inner)
	b.emit("for " + strings.Join(names, ", ") + " in " + joinExprs(iterExprs) + " do")
	b.nest(inner)
	b.emit("end")
	return []expr{nilExpr}, false
}

// doBodyInto compiles loop bodies as statements in their own scope.
func (c *compiler) doBodyInto(forms []*node, sc *scope, b *block) {
	sub := newScope(sc, false)
	c.body(forms, sub, b, oStmt)
}

func spFor(c *compiler, n *node, sc *scope, b *block, o copts) ([]expr, bool) {
	c.assert(len(n.items) >= 3, n, "expected body expression")
	c.assert(n.items[1].kind == kSeq, n, "expected binding table")
	items, until := c.untilClause(n.items[1].items)
	c.assert(len(items) >= 3, n.items[1], "expected range to include start and stop")
	c.assert(len(items) <= 4, n.items[1], "unexpected arguments")
	c.assert(items[0].kind == kSym, items[0], "unable to bind %s", describe(items[0]))
	var rng []string
	for _, r := range items[1:] {
		rng = append(rng, c.compile1(r, sc, b).code)
	}
	sub := newScope(sc, false)
	name := c.declare(items[0], sub, false)
	inner := c.newBlock()
	c.emitUntil(until, sub, inner)
	c.doBodyInto(n.items[2:], sub, inner)
	b.emit("for " + name + " = " + strings.Join(rng, ", ") + " do")
	b.nest(inner)
	b.emit("end")
	return []expr{nilExpr}, false
}

func spWhile(c *compiler, n *node, sc *scope, b *block, o copts) ([]expr, bool) {
	c.assert(len(n.items) >= 2, n, "expected condition")
	cb := c.newBlock()
	cond := c.compile1(n.items[1], sc, cb)
	inner := c.newBlock()
	if len(cb.lines) > 0 {
		inner.append(cb)
		inner.emit("if not " + cond.code + " then break end")
		cond = expr{"true", ekLit}
	}
	c.doBodyInto(n.items[2:], sc, inner)
	b.emit("while " + cond.code + " do")
	b.nest(inner)
	b.emit("end")
	return []expr{nilExpr}, false
}

func spValues(c *compiler, n *node, sc *scope, b *block, o copts) ([]expr, bool) {
	var es []expr
	for i, it := range n.items[1:] {
		if i == len(n.items)-2 {
			es = append(es, c.compile(it, sc, b, oAll)...)
		} else {
			es = append(es, c.compile1(it, sc, b))
		}
	}
	return es, false
}

func spPickValues(c *compiler, n *node, sc *scope, b *block, o copts) ([]expr, bool) {
	c.assert(len(n.items) >= 2 && n.items[1].kind == kNum && n.items[1].isInt && n.items[1].i >= 0 && n.items[1].i <= 200,
		n, "expected a number of values to pick")
	count := int(n.items[1].i)
	vals := list(n, append([]*node{sym(n, "values")}, n.items[2:]...)...)
	if count == 0 {
		c.compile(vals, sc, b, oStmt)
		return nil, false
	}
	names := make([]string, count)
	for i := range names {
		names[i] = c.gensym(sc, "")
	}
	es := c.compile(vals, sc, b, copts{nval: count})
	if len(es) == 0 {
		b.emit("local " + strings.Join(names, ", "))
	} else {
		b.emit("local " + strings.Join(names, ", ") + " = " + joinExprs(es))
	}
	out := make([]expr, count)
	for i, nm := range names {
		out[i] = expr{nm, ekSym}
	}
	return out, false
}

func spDot(c *compiler, n *node, sc *scope, b *block, o copts) ([]expr, bool) {
	c.assert(len(n.items) >= 2, n, "expected table argument")
	t := c.compile1(n.items[1], sc, b)
	if len(n.items) == 2 {
		return []expr{t}, false
	}
	code := prefixExpr(t)
	for _, k := range n.items[2:] {
		code += c.index(k, sc, b)
	}
	return []expr{{code, ekSym}}, false
}

func spSafeDot(c *compiler, n *node, sc *scope, b *block, o copts) ([]expr, bool) {
	c.assert(len(n.items) >= 2, n, "expected table argument")
	head := c.symNode("t", n)
	out := []*node{sym(n, "do"), list(n, sym(n, "var"), head, n.items[1])}
	for _, k := range n.items[2:] {
		out = append(out, list(n, sym(n, "if"), list(n, sym(n, "not="), sym(n, "nil"), head),
			list(n, sym(n, "set"), head, list(n, sym(n, "."), head, k))))
	}
	out = append(out, head)
	return c.compile(list(n, out...), sc, b, o), true
}

func spMethod(c *compiler, n *node, sc *scope, b *block, o copts) ([]expr, bool) {
	c.assert(len(n.items) >= 3, n, "expected at least 2 arguments")
	return c.methodCall(n, n.items[1], n.items[2], n.items[3:], sc, b), false
}

func spLength(c *compiler, n *node, sc *scope, b *block, o copts) ([]expr, bool) {
	c.assert(len(n.items) == 2, n, "expected one argument")
	e := c.compile1(n.items[1], sc, b)
	return []expr{{"#" + prefixExpr(e), ekExpr}}, false
}

func spNot(c *compiler, n *node, sc *scope, b *block, o copts) ([]expr, bool) {
	c.assert(len(n.items) == 2, n, "expected one argument")
	e := c.compile1(n.items[1], sc, b)
	return []expr{{"not " + prefixExpr(e), ekExpr}}, false
}

func spBnot(c *compiler, n *node, sc *scope, b *block, o copts) ([]expr, bool) {
	c.assert(len(n.items) == 2, n, "expected one argument")
	e := c.compile1(n.items[1], sc, b)
	return []expr{{"~" + "(" + e.code + ")", ekExpr}}, false
}

// operand compiles an operator's argument: exactly one value.
func (c *compiler) operand(x *node, sc *scope, b *block) expr {
	return c.compile1(x, sc, b)
}

func spAndOr(c *compiler, n *node, sc *scope, b *block, o copts) ([]expr, bool) {
	op := n.items[0].s
	args := n.items[1:]
	if len(args) == 0 {
		return []expr{{strconv.FormatBool(op == "and"), ekLit}}, false
	}
	var parts []string
	for i, a := range args {
		ab := c.newBlock()
		e := c.operand(a, sc, ab)
		if len(ab.lines) == 0 {
			parts = append(parts, e.code)
			continue
		}
		// This operand needs statements: keep short-circuiting with a
		// temporary and an if.
		tmp := c.gensym(sc, op+"_")
		if len(parts) == 0 {
			b.append(ab)
			b.emit("local " + tmp + " = " + e.code)
		} else {
			b.emit("local " + tmp + " = " + "(" + strings.Join(parts, " "+op+" ") + ")")
			test := tmp
			if op == "or" {
				test = "not " + tmp
			}
			b.emit("if " + test + " then")
			inner := c.newBlock()
			inner.append(ab)
			inner.emit(tmp + " = " + e.code)
			b.nest(inner)
			b.emit("end")
		}
		rest := list(n, append([]*node{n.items[0], {kind: kSym, s: tmp, raw: true, line: n.line, col: n.col}}, args[i+1:]...)...)
		if i+1 == len(args) {
			return []expr{{tmp, ekSym}}, false
		}
		return spAndOr(c, rest, sc, b, o)
	}
	if len(parts) == 1 {
		return []expr{{parts[0], ekExpr}}, false
	}
	return []expr{{"(" + strings.Join(parts, " "+op+" ") + ")", ekExpr}}, false
}

var compareOps = map[string]string{"=": "==", "not=": "~=", "~=": "~=", "<": "<", ">": ">", "<=": "<=", ">=": ">="}

func spCompare(c *compiler, n *node, sc *scope, b *block, o copts) ([]expr, bool) {
	name := n.items[0].s
	op := compareOps[name]
	args := n.items[1:]
	c.assert(len(args) >= 2, n, "expected at least two arguments")
	es := make([]expr, len(args))
	for i, a := range args {
		es[i] = c.operand(a, sc, b)
	}
	if len(args) == 2 {
		return []expr{{"(" + es[0].code + " " + op + " " + es[1].code + ")", ekExpr}}, false
	}
	for i := 1; i < len(es)-1; i++ {
		if es[i].k != ekLit && es[i].k != ekSym {
			tmp := c.gensym(sc, "")
			b.emit("local " + tmp + " = " + es[i].code)
			es[i] = expr{tmp, ekSym}
		}
	}
	join := " and "
	if op == "~=" {
		join = " or "
	}
	var parts []string
	for i := 0; i+1 < len(es); i++ {
		parts = append(parts, "("+es[i].code+" "+op+" "+es[i+1].code+")")
	}
	return []expr{{"(" + strings.Join(parts, join) + ")", ekExpr}}, false
}

var arithOps = map[string]string{
	"+": "+", "-": "-", "*": "*", "/": "/", "//": "//", "%": "%", "^": "^", "..": "..",
	"band": "&", "bor": "|", "bxor": "~", "lshift": "<<", "rshift": ">>",
}

// arithIdentity is what an operator gives with no argument.
var arithIdentity = map[string]string{"+": "0", "*": "1", "..": `""`, "band": "-1", "bor": "0", "bxor": "0"}

func spArith(c *compiler, n *node, sc *scope, b *block, o copts) ([]expr, bool) {
	name := n.items[0].s
	op := arithOps[name]
	args := n.items[1:]
	if len(args) == 0 {
		id, ok := arithIdentity[name]
		c.assert(ok, n, "expected at least one argument to %s", name)
		return []expr{{id, ekLit}}, false
	}
	es := make([]string, len(args))
	for i, a := range args {
		es[i] = c.operand(a, sc, b).code
	}
	if len(args) == 1 {
		switch name {
		case "-":
			return []expr{{"(- " + es[0] + ")", ekExpr}}, false
		case "/", "//", "lshift", "rshift":
			return []expr{{"(1 " + op + " " + es[0] + ")", ekExpr}}, false
		}
		return []expr{{es[0], ekExpr}}, false
	}
	return []expr{{"(" + strings.Join(es, " "+op+" ") + ")", ekExpr}}, false
}

func spTail(c *compiler, n *node, sc *scope, b *block, o copts) ([]expr, bool) {
	c.assert(len(n.items) == 2, n, "expected exactly one argument")
	c.assert(o.tail, n, "must be in tail position")
	c.assert(n.items[1].kind == kList, n, "expected a function call")
	return c.compile(n.items[1], sc, b, o), true
}

func spComment(c *compiler, n *node, sc *scope, b *block, o copts) ([]expr, bool) {
	return []expr{nilExpr}, false
}

func spLua(c *compiler, n *node, sc *scope, b *block, o copts) ([]expr, bool) {
	c.assert(!c.opts.Sandboxed, n, "lua is not allowed in a sandboxed cartridge")
	c.assert(len(n.items) >= 2 && len(n.items) <= 3, n, "expected one or two string arguments")
	for _, a := range n.items[1:] {
		c.assert(a.kind == kStr || a.isSym("nil"), a, "expected a string of Lua code")
	}
	if n.items[1].kind == kStr {
		b.emit(n.items[1].s)
	}
	if len(n.items) == 3 && n.items[2].kind == kStr {
		return []expr{{"(" + n.items[2].s + ")", ekExpr}}, false
	}
	return []expr{nilExpr}, false
}
