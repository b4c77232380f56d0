package fennel

import (
	"strconv"
	"strings"
)

// bindKind says what a binding form does with its names.
type bindKind uint8

const (
	bLocal  bindKind = iota // let, local: new immutable locals
	bVar                    // var: new mutable locals
	bSet                    // set: assign existing vars or fields
	bGlobal                 // global
)

// bind destructures the values of val into pat.
func (c *compiler) bind(pat, val *node, sc *scope, b *block, kind bindKind) {
	if kind == bSet && pat.kind == kList && len(pat.items) > 0 && pat.items[0].isSym(".") {
		// (set (. t k ...) v)
		c.assert(len(pat.items) >= 3, pat, "expected table and key")
		place := prefixExpr(c.compile1(pat.items[1], sc, b))
		for _, k := range pat.items[2:] {
			place += c.index(k, sc, b)
		}
		e := c.compile1(val, sc, b)
		b.emit(place + " = " + e.code)
		return
	}
	if pat.kind == kList {
		c.bindMulti(pat, val, sc, b, kind)
		return
	}
	if pat.kind == kSym && (kind == bLocal || kind == bVar) && !strings.ContainsAny(pat.s, ".:") {
		// Compile the value before the name exists, then declare it.
		c.checkBindable(pat)
		e := c.compile1(val, sc, b)
		name := c.declare(pat, sc, kind == bVar)
		b.emit("local " + name + " = " + e.code)
		return
	}
	e := c.compile1(val, sc, b)
	c.bindExpr(pat, e, sc, b, kind)
}

// bindMulti binds (a b c) to several values.
func (c *compiler) bindMulti(pat, val *node, sc *scope, b *block, kind bindKind) {
	c.assert(len(pat.items) > 0, pat, "expected at least one name to bind")
	es := c.compile(val, sc, b, copts{nval: len(pat.items)})
	rhs := joinExprs(es)
	if rhs == "" {
		rhs = "nil"
	}
	names := make([]string, len(pat.items))
	type later struct {
		pat  *node
		name string
	}
	var rest []later
	for i, p := range pat.items {
		switch {
		case p.kind == kSym && (kind == bLocal || kind == bVar) && !strings.ContainsAny(p.s, ".:"):
			c.checkBindable(p)
		case p.kind == kSym && kind == bSet:
			names[i] = c.setTarget(p, sc)
		case p.kind == kSym && kind == bGlobal:
			names[i] = mangleGlobal(p.s)
		case p.kind == kSeq || p.kind == kTable:
			names[i] = c.gensym(sc, "")
			rest = append(rest, later{p, names[i]})
		default:
			c.fail(p, "unable to bind %s", describe(p))
		}
	}
	switch kind {
	case bLocal, bVar:
		for i, p := range pat.items {
			if names[i] == "" {
				names[i] = c.declare(p, sc, kind == bVar)
			}
		}
		b.emit("local " + strings.Join(names, ", ") + " = " + rhs)
	default:
		var tmps []string
		for _, r := range rest {
			tmps = append(tmps, r.name)
		}
		if len(tmps) > 0 {
			b.emit("local " + strings.Join(tmps, ", "))
		}
		b.emit(strings.Join(names, ", ") + " = " + rhs)
	}
	for _, r := range rest {
		c.bindExpr(r.pat, expr{r.name, ekSym}, sc, b, kind)
	}
}

// setTarget checks that a symbol can be assigned by set and returns its
// Lua place.
func (c *compiler) setTarget(p *node, sc *scope) string {
	name := p.s
	parts := strings.Split(name, ".")
	if strings.Contains(name, ":") {
		c.fail(p, "cannot set method sym")
	}
	if len(parts) == 1 {
		bd := sc.lookup(name)
		if bd == nil && !c.opts.Sandboxed {
			// Like the reference with allowedGlobals false: a global.
			return mangleGlobal(name)
		}
		c.assert(bd != nil, p, "expected local %s", name)
		c.assert(bd.isVar, p, "expected var %s", name)
		return bd.lua
	}
	return c.symbol(p, sc).code
}

// bindExpr destructures one Lua value e into pat.
func (c *compiler) bindExpr(pat *node, e expr, sc *scope, b *block, kind bindKind) {
	switch pat.kind {
	case kSym:
		switch kind {
		case bLocal, bVar:
			c.assert(!strings.ContainsAny(pat.s, ".:"), pat, "unexpected multi symbol %s", pat.s)
			c.checkBindable(pat)
			name := c.declare(pat, sc, kind == bVar)
			b.emit("local " + name + " = " + e.code)
		case bSet:
			c.assert(pat.s != "nil", pat, "unable to bind nil")
			b.emit(c.setTarget(pat, sc) + " = " + e.code)
		case bGlobal:
			c.assert(!strings.ContainsAny(pat.s, ".:"), pat, "unexpected multi symbol %s", pat.s)
			b.emit(mangleGlobal(pat.s) + " = " + e.code)
		}
	case kSeq:
		tmp := c.tempFor(e, sc, b, kind == bLocal || kind == bVar)
		items := pat.items
		for i := 0; i < len(items); i++ {
			it := items[i]
			switch {
			case it.isSym("&"):
				c.assert(i+2 == len(items) || (i+4 == len(items) && items[i+2].isSym("&as")), it,
					"expected rest argument before last parameter")
				rest := expr{"{table.unpack(" + tmp + ", " + strconv.Itoa(i+1) + ")}", ekExpr}
				c.bindExpr(items[i+1], rest, sc, b, kind)
				i++
			case it.isSym("&as"):
				c.assert(i+2 == len(items), it, "expected &as argument before last parameter")
				c.bindExpr(items[i+1], expr{tmp, ekSym}, sc, b, kind)
				i++
			default:
				c.bindExpr(it, expr{tmp + "[" + strconv.Itoa(i+1) + "]", ekSym}, sc, b, kind)
			}
		}
	case kTable:
		tmp := c.tempFor(e, sc, b, kind == bLocal || kind == bVar)
		for i := 0; i+1 < len(pat.items); i += 2 {
			k, v := pat.items[i], pat.items[i+1]
			if k.isSym("&as") {
				c.bindExpr(v, expr{tmp, ekSym}, sc, b, kind)
				continue
			}
			c.assert(k.kind != kSym || k.s == "nil" || sc.lookup(k.s) != nil || !strings.HasPrefix(k.s, "&"), k,
				"unexpected %s in table destructuring", k.s)
			c.bindExpr(v, expr{tmp + c.index(k, sc, b), ekSym}, sc, b, kind)
		}
	case kList:
		c.fail(pat, "can't nest multi-value destructuring")
	default:
		c.fail(pat, "unable to bind %s", describe(pat))
	}
}

// tempFor gives a name holding e, declaring a local unless reuse allows a
// plain local name (a set may reassign that name while destructuring).
func (c *compiler) tempFor(e expr, sc *scope, b *block, reuse bool) string {
	if reuse && e.k == ekSym && isIdent(e.code) && sc.luaUsed(e.code) {
		return e.code
	}
	tmp := c.gensym(sc, "")
	b.emit("local " + tmp + " = " + e.code)
	return tmp
}
