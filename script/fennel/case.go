package fennel

import "strings"

// case and match are rewritten into if and let forms the way Fennel's own
// match.fnl expands them: each pattern gives a condition and the bindings
// its body sees.

type caseOpts struct {
	match   bool // match: symbols already in scope are compared, not bound
	multi   bool // multiple-value patterns allowed here
	inWhere bool
}

type caseCtx struct {
	c  *compiler
	sc *scope
	at *node
}

func spCase(c *compiler, n *node, sc *scope, b *block, o copts) ([]expr, bool) {
	isMatch := n.items[0].s == "match"
	c.assert(len(n.items) >= 2, n, "missing subject")
	clauses := n.items[2:]
	c.assert(len(clauses)%2 == 0, n, "expected even number of pattern/body pairs")
	c.assert(len(clauses) > 0, n, "expected at least one pattern/body pair")
	return c.compile(c.caseExpand(n, n.items[1], clauses, sc, isMatch), sc, b, o), true
}

func (c *compiler) caseExpand(at, val *node, clauses []*node, sc *scope, isMatch bool) *node {
	topTable := val.kind == kSeq || val.kind == kTable
	// [a b] against only [x y] patterns: match the values directly.
	if val.kind == kSeq {
		all := true
		for i := 0; i < len(clauses); i += 2 {
			p := clauses[i]
			if p.kind != kSeq || len(p.items) == 0 {
				all = false
				break
			}
			for _, d := range p.items {
				if d.kind == kSym && strings.HasPrefix(d.s, "&") {
					all = false
				}
			}
		}
		if all {
			val = list(val, append([]*node{sym(val, "values")}, val.items...)...)
			nc := make([]*node, len(clauses))
			for i := range clauses {
				if i%2 == 0 {
					nc[i] = &node{kind: kList, line: clauses[i].line, col: clauses[i].col, items: clauses[i].items}
				} else {
					nc[i] = clauses[i]
				}
			}
			clauses = nc
		}
	}
	count := 0
	for i := 0; i < len(clauses); i += 2 {
		if k := countMultival(clauses[i]); k > count {
			count = k
		}
	}
	ctx := &caseCtx{c: c, sc: sc, at: at}
	if count == 1 && idempotent(val) {
		return ctx.condition([]*node{val}, clauses, isMatch, topTable)
	}
	vals := make([]*node, count)
	for i := range vals {
		vals[i] = c.symNode("case", at)
	}
	var pat *node
	if count == 1 {
		pat = vals[0]
	} else {
		pat = list(at, vals...)
	}
	return list(at, sym(at, "let"), seq(at, pat, val), ctx.condition(vals, clauses, isMatch, topTable))
}

func countMultival(p *node) int {
	if p.kind != kList {
		return 1
	}
	if len(p.items) > 1 && p.items[1].isSym("?") {
		return countMultival(p.items[0])
	}
	if len(p.items) > 0 && p.items[0].isSym("where") {
		if len(p.items) > 1 {
			return countMultival(p.items[1])
		}
		return 1
	}
	if len(p.items) > 0 && p.items[0].isSym("or") {
		longest := 0
		for _, ch := range p.items[1:] {
			if k := countMultival(ch); k > longest {
				longest = k
			}
		}
		return longest
	}
	return len(p.items)
}

func (x *caseCtx) condition(vals []*node, clauses []*node, isMatch, topTable bool) *node {
	at := x.at
	root := list(at, sym(at, "if"))
	out := root
	for i := 0; i < len(clauses); i += 2 {
		pattern, body := clauses[i], clauses[i+1]
		cond, bindings, pre := x.pattern(vals, pattern, map[string]*node{}, caseOpts{match: isMatch, multi: true}, true, topTable)
		if pre != nil {
			tail := list(at, sym(at, "if"))
			out.items = append(out.items, &node{kind: kBool, b: true, line: at.line, col: at.col},
				list(at, sym(at, "let"), pre, tail))
			out = tail
		}
		out.items = append(out.items, cond, list(at, sym(at, "let"), seq(at, bindings...), body))
	}
	return root
}

func (x *caseCtx) inScope(s *node) bool {
	name := s.s
	if i := strings.IndexAny(name, ".:"); i > 0 {
		name = name[:i]
	}
	return x.sc.lookup(name) != nil
}

func trueNode(at *node) *node { return &node{kind: kBool, b: true, line: at.line, col: at.col} }

// pattern returns the condition for vals to match pat, the bindings
// (name value name value ...) and bindings needed before the condition.
func (x *caseCtx) pattern(vals []*node, pat *node, unif map[string]*node, o caseOpts, top, topTable bool) (*node, []*node, *node) {
	c, at := x.c, x.at
	var val *node
	if len(vals) > 0 {
		val = vals[0]
	} else {
		val = sym(at, "nil")
	}
	eq := func(a, b *node) *node { return list(at, sym(at, "="), a, b) }
	switch {
	case pat.kind == kSym && (pat.s == "nil" || (o.match && pat.s != "_" && x.inScope(pat))):
		return eq(val, pat), nil, nil
	case pat.kind == kSym && unif[pat.s] != nil:
		return eq(unif[pat.s], val), nil, nil
	case pat.kind == kSym:
		c.assert(!strings.ContainsAny(pat.s, ".:"), pat, "unexpected multi symbol %s", pat.s)
		wildcard := strings.HasPrefix(pat.s, "_")
		if !wildcard {
			unif[pat.s] = val
		}
		var cond *node
		if wildcard || strings.HasPrefix(pat.s, "?") {
			cond = trueNode(at)
		} else {
			cond = list(at, sym(at, "not="), sym(at, "nil"), val)
		}
		return cond, []*node{pat, val}, nil
	case pat.kind == kList && len(pat.items) > 0 && pat.items[0].isSym("=") && len(pat.items) > 1 && pat.items[1].kind == kSym:
		c.assert(len(pat.items) == 2, pat, "(=) should take only one argument")
		c.assert(!o.match, pat, "(=) cannot be used inside of match")
		c.assert(o.inWhere, pat, "(=) must be used in (where) patterns")
		c.assert(!pat.items[1].isSym("nil"), pat, "= has to bind to a symbol")
		return eq(val, pat.items[1]), nil, nil
	case pat.kind == kList && len(pat.items) > 1 && pat.items[0].isSym("where") && pat.items[1].kind == kList &&
		len(pat.items[1].items) > 0 && pat.items[1].items[0].isSym("or"):
		c.assert(top, pat, "can't nest (where) pattern")
		o.inWhere = true
		return x.or(vals, pat.items[1], pat.items[2:], unif, o)
	case pat.kind == kList && len(pat.items) > 0 && pat.items[0].isSym("where"):
		c.assert(top, pat, "can't nest (where) pattern")
		c.assert(len(pat.items) > 1, pat, "expected a pattern in (where)")
		o.inWhere = true
		cond, binds := x.guard(vals, pat.items[1], pat.items[2:], unif, o)
		return cond, binds, nil
	case pat.kind == kList && len(pat.items) > 0 && pat.items[0].isSym("or"):
		c.assert(top, pat, "can't nest (or) pattern")
		c.fail(pat, "(or) must be used in (where) patterns")
	case pat.kind == kList && len(pat.items) > 1 && pat.items[1].isSym("?"):
		c.assert(o.match, pat, "legacy guard clause not supported in case")
		cond, binds := x.guard(vals, pat.items[0], pat.items[2:], unif, o)
		return cond, binds, nil
	case pat.kind == kList:
		c.assert(o.multi, pat, "can't nest multi-value destructuring")
		conds := []*node{sym(at, "and")}
		var binds []*node
		sub := o
		sub.multi = false
		for i, p := range pat.items {
			var v []*node
			if i < len(vals) {
				v = []*node{vals[i]}
			}
			cond, bs, _ := x.pattern(v, p, unif, sub, false, false)
			conds = append(conds, cond)
			binds = append(binds, bs...)
		}
		return list(at, conds...), binds, nil
	case pat.kind == kSeq || pat.kind == kTable:
		cond, binds := x.table(val, pat, unif, o, top && topTable)
		return cond, binds, nil
	}
	return eq(val, pat), nil, nil
}

func (x *caseCtx) guard(vals []*node, pat *node, guards []*node, unif map[string]*node, o caseOpts) (*node, []*node) {
	at := x.at
	cond, binds, _ := x.pattern(vals, pat, unif, o, false, false)
	if len(guards) == 0 {
		return cond, binds
	}
	g := list(at, append([]*node{sym(at, "and")}, guards...)...)
	return list(at, sym(at, "and"), cond, list(at, sym(at, "let"), seq(at, binds...), g)), binds
}

func (x *caseCtx) table(val, pat *node, unif map[string]*node, o caseOpts, skipType bool) (*node, []*node) {
	c, at := x.c, x.at
	conds := []*node{sym(at, "and")}
	if !skipType {
		conds = append(conds, list(at, sym(at, "="), list(at, rawSym(at, "type"), val), str(at, "table")))
	}
	var binds []*node
	sub := o
	sub.multi = false
	add := func(v, p *node) {
		cond, bs, _ := x.pattern([]*node{v}, p, unif, sub, false, false)
		conds = append(conds, cond)
		binds = append(binds, bs...)
	}
	if pat.kind == kSeq {
		items := pat.items
		for i := 0; i < len(items); i++ {
			p := items[i]
			switch {
			case p.isSym("&"):
				c.assert(i+1 < len(items), p, "expected rest argument before last parameter")
				restPat := items[i+1]
				c.assert(i+2 == len(items), p, "expected & rest argument before last parameter")
				restVal := seq(at, list(at, rawSym(at, "select"), num(at, int64(i+1)),
					list(at, rawSym(at, "table.unpack"), val)))
				if restPat.kind != kSym {
					cond, bs := x.table(restVal, restPat, unif, sub, false)
					conds = append(conds, cond)
					_ = bs
				}
				binds = append(binds, restPat, restVal)
				i++
			case p.isSym("&as"):
				c.assert(i+2 == len(items), p, "expected &as argument before last parameter")
				binds = append(binds, items[i+1], val)
				i++
			default:
				add(list(at, sym(at, "."), val, num(at, int64(i+1))), p)
			}
		}
	} else {
		for i := 0; i+1 < len(pat.items); i += 2 {
			k, p := pat.items[i], pat.items[i+1]
			if k.isSym("&as") {
				binds = append(binds, p, val)
				continue
			}
			add(list(at, sym(at, "."), val, k), p)
		}
	}
	return list(at, conds...), binds
}

// symbolsIn lists the symbols a pattern binds, in order, without repeats.
func symbolsIn(p *node, out *[]*node, seen map[string]bool) {
	switch p.kind {
	case kList:
		if len(p.items) > 0 && (p.items[0].isSym("where") || p.items[0].isSym("=")) {
			if len(p.items) > 1 {
				symbolsIn(p.items[1], out, seen)
			}
			return
		}
		if len(p.items) > 1 && p.items[1].isSym("?") {
			symbolsIn(p.items[0], out, seen)
			return
		}
		for _, it := range p.items {
			symbolsIn(it, out, seen)
		}
	case kSym:
		if p.s != "or" && p.s != "nil" && !seen[p.s] {
			seen[p.s] = true
			*out = append(*out, p)
		}
	case kSeq, kTable:
		for _, it := range p.items {
			symbolsIn(it, out, seen)
		}
	}
}

func (x *caseCtx) or(vals []*node, orPat *node, guards []*node, unif map[string]*node, o caseOpts) (*node, []*node, *node) {
	at := x.at
	subs := orPat.items[1:]
	// symbols bound by every alternative
	var common []*node
	for i, p := range subs {
		var syms []*node
		symbolsIn(p, &syms, map[string]bool{})
		if i == 0 {
			common = syms
			continue
		}
		have := map[string]bool{}
		for _, s := range syms {
			have[s.s] = true
		}
		kept := common[:0:0]
		for _, s := range common {
			if have[s.s] {
				kept = append(kept, s)
			}
		}
		common = kept
	}
	var bindings []*node
	for _, s := range common {
		if strings.HasPrefix(s.s, "&") || (o.match && x.inScope(s)) {
			continue
		}
		bindings = append(bindings, s)
	}
	if len(bindings) == 0 {
		conds := []*node{sym(at, "or")}
		for _, p := range subs {
			cond, _, _ := x.pattern(vals, p, unif, o, false, false)
			conds = append(conds, cond)
		}
		cond := list(at, conds...)
		if len(guards) > 0 {
			cond = list(at, append([]*node{sym(at, "and"), cond}, guards...)...)
		}
		return cond, nil, nil
	}
	matched := x.c.symNode("matched", at)
	mangled := make([]*node, len(bindings))
	for i, bnd := range bindings {
		mangled[i] = x.c.symNode(bnd.s, at)
	}
	pre := list(at, sym(at, "if"))
	for _, p := range subs {
		cond, binds := x.guard(vals, p, guards, map[string]*node{}, o)
		pre.items = append(pre.items, cond,
			list(at, sym(at, "let"), seq(at, binds...), list(at, append([]*node{sym(at, "values"), trueNode(at)}, bindings...)...)))
	}
	preBinds := seq(at, list(at, append([]*node{matched}, mangled...)...), pre)
	return matched, []*node{list(at, bindings...), list(at, append([]*node{sym(at, "values")}, mangled...)...)}, preBinds
}

// case-try and match-try chain patterns over successive steps.
func spCaseTry(c *compiler, n *node, sc *scope, b *block, o copts) ([]expr, bool) {
	how := "case"
	if n.items[0].s == "match-try" {
		how = "match"
	}
	c.assert(len(n.items) >= 4, n, "expected an expression, a pattern and a body")
	clauses := append([]*node{}, n.items[2:]...)
	var catch []*node
	if last := clauses[len(clauses)-1]; last.kind == kList && len(last.items) > 0 && last.items[0].isSym("catch") {
		catch = last.items[1:]
		clauses = clauses[:len(clauses)-1]
	} else {
		catch = []*node{sym(n, "_"), &node{kind: kVarg, line: n.line, col: n.col}}
	}
	c.assert(len(clauses)%2 == 0, n, "expected every pattern to have a body")
	c.assert(len(catch)%2 == 0, n, "expected every catch pattern to have a body")
	var step func(expr *node, cl []*node) *node
	step = func(e *node, cl []*node) *node {
		if len(cl) == 0 {
			return e
		}
		varg := &node{kind: kVarg, line: n.line, col: n.col}
		inner := list(n, append([]*node{sym(n, how), varg, cl[0], step(cl[1], cl[2:])}, catch...)...)
		return list(n, list(n, sym(n, "fn"), seq(n, varg), inner), e)
	}
	return c.compile(step(n.items[1], clauses), sc, b, o), true
}
