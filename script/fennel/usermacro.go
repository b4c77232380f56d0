package fennel

import (
	"strings"

	rt "github.com/arnodel/golua/runtime"
)

// User macros. A macro body is compiled by this compiler in compile-time
// mode (quote builds syntax values), run in a sandboxed golua runtime made
// for this compilation only (see macroRuntime), and its result converted
// back into nodes that are compiled in place of the call.

// maxExpansions bounds nested macro expansion, so that a macro expanding
// into a call of itself fails instead of exhausting the stack.
const maxExpansions = 200

// macroNames are the forms that are macros, not special forms, in Fennel
// 1.5: a user macro may take their names. nb compiles them as specials.
var macroNames = map[string]bool{
	"when": true, "lambda": true, "λ": true, "?.": true, "->": true, "->>": true, "-?>": true,
	"-?>>": true, "doto": true, "partial": true, "collect": true, "icollect": true, "fcollect": true,
	"accumulate": true, "faccumulate": true, "case": true, "match": true, "case-try": true,
	"match-try": true, "with-open": true, "macro": true, "import-macros": true, "macrodebug": true,
	"assert-repl": true, "pick-args": true,
}

// macro finds a user macro visible in s.
func (s *scope) macro(name string) (rt.Value, bool) {
	for ; s != nil; s = s.parent {
		if m, ok := s.macros[name]; ok {
			return m, true
		}
	}
	return rt.NilValue, false
}

// defineMacro makes f the macro name in sc.
func (c *compiler) defineMacro(name string, f rt.Value, sc *scope, at *node) {
	_, special := specialForms()[name]
	c.assert(!special || macroNames[name], at, "local %s was overshadowed by a special form or macro", name)
	c.assert(name != "" && !strings.HasPrefix(name, ".") && !strings.ContainsAny(name, "&"), at, "invalid macro name %s", name)
	_, ok := f.TryCallable()
	c.assert(ok, at, "expected each macro to be function")
	if sc.macros == nil {
		sc.macros = map[string]rt.Value{}
	}
	sc.macros[name] = f
	c.hasMacros = true
}

// spMacro compiles (macro name [params] body...): it defines name as a
// macro in the current scope and compiles to nil.
func spMacro(c *compiler, n *node, sc *scope, b *block, o copts) ([]expr, bool) {
	c.assert(len(n.items) >= 3 && n.items[1].kind == kSym, n, "expected symbol for macro name")
	name := n.items[1]
	c.assert(!strings.ContainsAny(name.s, ".:"), name, "macro names cannot be multi-symbols: %s", name.s)
	head := []*node{sym(n, "fn"), name}
	if _, special := specialForms()[name.s]; special {
		// A built-in macro's name cannot be a local of the macro body.
		head = head[:1]
	}
	fnForm := list(n, append(head, n.items[2:]...)...)
	f := c.evalCompileTime(fnForm, n)
	c.defineMacro(name.s, f, sc, name)
	return []expr{nilExpr}, false
}

// spMacros compiles (macros {:name (fn ...) ...}).
func spMacros(c *compiler, n *node, sc *scope, b *block, o copts) ([]expr, bool) {
	c.assert(len(n.items) == 2, n, "Expected one table argument")
	v := c.evalCompileTime(n.items[1], n)
	t, ok := v.TryTable()
	c.assert(ok && c.mr.astKind(v) == astTable, n, "expected macros to be table")
	type entry struct {
		name string
		f    rt.Value
	}
	var entries []entry
	for k, val, ok := t.Next(rt.NilValue); ok && !k.IsNil(); k, val, ok = t.Next(k) {
		name, isStr := k.TryString()
		c.assert(isStr, n, "expected macro names to be strings")
		entries = append(entries, entry{name, val})
	}
	for _, e := range entries {
		c.defineMacro(e.name, e.f, sc, n)
	}
	return []expr{nilExpr}, false
}

// spMacroModule refuses import-macros and require-macros: they load macro
// modules from files, and a cartridge has none.
func spMacroModule(c *compiler, n *node, sc *scope, b *block, o copts) ([]expr, bool) {
	c.fail(n, "%s: macro modules cannot be loaded from a cartridge; define the macro with `macro` in the same source", n.items[0].s)
	return nil, true
}

// evalCompileTime compiles form as a compile-time chunk, runs it in the
// macro runtime and returns its first value.
func (c *compiler) evalCompileTime(form *node, at *node) rt.Value {
	mr := c.macroRuntime(at)
	sub := &compiler{opts: c.opts, compileTime: true, mr: mr, gen: c.gen}
	top := newScope(nil, true)
	top.vararg = true
	b := c.newBlock()
	sub.body([]*node{form}, top, b, copts{tail: true})
	c.gen = sub.gen
	v, err := mr.eval(b.String())
	if err != nil {
		c.macroFail(err, at, "")
	}
	return v
}

// macroFail reports an error raised while running compile-time code: at
// the position assert-compile gave, else at the macro call.
func (c *compiler) macroFail(err error, at *node, name string) {
	msg, line, col := c.mr.errorInfo(err)
	pos := at
	if line > 0 {
		pos = &node{line: line, col: col}
		if col <= 0 {
			pos.col = 1
		}
	}
	if name != "" && line <= 0 {
		c.fail(pos, "macro %s failed: %s", name, msg)
	}
	c.fail(pos, "%s", msg)
}

// expand runs the macro m on the call n and returns the form it produced.
func (c *compiler) expand(n *node, m rt.Value, sc *scope) *node {
	c.assert(c.expansions < maxExpansions, n, "macro expansion too deep: more than %d nested expansions", maxExpansions)
	mr := c.mr
	args := make([]rt.Value, 0, len(n.items)-1)
	for _, a := range n.items[1:] {
		args = append(args, mr.toLua(a))
	}
	prevScope, prevCall := mr.scope, mr.call
	mr.scope, mr.call = sc, n
	v, err := mr.callMacro(m, args)
	mr.scope, mr.call = prevScope, prevCall
	if err != nil {
		c.macroFail(err, n, n.items[0].s)
	}
	return mr.toNode(v, n, 0)
}

// expandAll expands form while its head names a user macro in sc; it is
// what macroexpand gives macros.
func (c *compiler) expandAll(form *node, sc *scope) *node {
	for i := 0; form.kind == kList && len(form.items) > 0 && form.items[0].kind == kSym && !form.items[0].gensym; i++ {
		m, ok := sc.macro(form.items[0].s)
		if !ok {
			break
		}
		c.assert(i < maxExpansions, form, "macro expansion too deep: more than %d nested expansions", maxExpansions)
		form = c.expand(form, m, sc)
	}
	return form
}

// compileMacroCall compiles a call of a user macro.
func (c *compiler) compileMacroCall(n *node, m rt.Value, sc *scope, b *block, o copts) []expr {
	form := c.expand(n, m, sc)
	c.expansions++
	defer func() { c.expansions-- }()
	return c.compile(form, sc, b, o)
}
