package fennel

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	rt "github.com/arnodel/golua/runtime"
)

// Options for Compile.
type Options struct {
	// Filename is shown in errors (the cartridge path).
	Filename string
	// Line and Column say where the source starts inside that file
	// (1-based; 0 means 1), so that errors report file positions, not
	// snippet positions.
	Line, Column int
	// Sandboxed refuses `global`, `lua` and other escapes at compile time.
	// The runtime sandbox is the real fence.
	Sandboxed bool
	// Params, when not nil, makes the chunk return a function of these
	// parameters whose body is the source, as if it were written
	// (fn [Params...] source). Names are Fennel names (parameters-as-json).
	Params []string
}

// Error is a compile error located in the cartridge file.
type Error struct {
	Filename     string
	Line, Column int
	Msg          string
}

// Error formats the error like Fennel: "<file>:<line>:<col>: Compile error: <msg>".
func (e *Error) Error() string {
	f := e.Filename
	if f == "" {
		f = "unknown"
	}
	return fmt.Sprintf("%s:%d:%d: Compile error: %s", f, e.Line, e.Column, e.Msg)
}

// failAt stops compilation with an *Error. Compile recovers only that type:
// any other panic is a bug and is left to crash the tests.
func failAt(file string, line, col int, format string, args ...any) {
	panic(&Error{Filename: file, Line: line, Column: col, Msg: fmt.Sprintf(format, args...)})
}

// Compile compiles Fennel source into the source of a Lua 5.4 chunk that
// returns the values of the last form (or, with Options.Params, a function).
func Compile(src string, opts Options) (lua string, err error) {
	defer func() {
		if r := recover(); r != nil {
			e, ok := r.(*Error)
			if !ok {
				panic(r)
			}
			lua, err = "", e
		}
	}()
	c := &compiler{opts: opts}
	forms := newReader(src, opts).readAll()
	top := newScope(nil, true)
	top.vararg = true
	b := c.newBlock()
	if opts.Params != nil {
		fnScope := newScope(top, true)
		var names []string
		for _, p := range opts.Params {
			if p == "..." {
				fnScope.vararg = true
				names = append(names, "...")
				continue
			}
			names = append(names, c.declare(&node{kind: kSym, s: p, line: 1, col: 1}, fnScope, false))
		}
		body := c.newBlock()
		c.body(forms, fnScope, body, copts{tail: true})
		b.emit("return function(" + strings.Join(names, ", ") + ")")
		b.nest(body)
		b.emit("end")
	} else {
		c.body(forms, top, b, copts{tail: true})
	}
	return b.String(), nil
}

type compiler struct {
	opts Options
	gen  int
	// compileTime is set while compiling macro bodies: quote then builds
	// syntax values.
	compileTime bool
	// hasMacros says a user macro was defined, so calls look for them.
	hasMacros bool
	// mr runs compile-time code; nil until the first macro definition.
	mr *macroRuntime
	// expansions counts the macro expansions being compiled, nested.
	expansions int
	// line is the source line of the form being compiled: the line the
	// statements emitted now come from.
	line int
}

// newBlock returns an empty block whose statements record c.line.
func (c *compiler) newBlock() *block { return &block{line: &c.line} }

func (c *compiler) fail(n *node, format string, args ...any) {
	line, col := 1, 1
	if n != nil && n.line > 0 {
		line, col = n.line, n.col
	}
	failAt(c.opts.Filename, line, col, format, args...)
}

func (c *compiler) assert(ok bool, n *node, format string, args ...any) {
	if !ok {
		c.fail(n, format, args...)
	}
}

// binding is a local variable known to the compiler.
type binding struct {
	lua   string
	isVar bool
}

// scope maps Fennel names to Lua locals. A scope matches a Lua block, so
// Lua's own scoping agrees with Fennel's.
type scope struct {
	parent *scope
	syms   map[string]*binding
	lua    map[string]bool
	fn     bool // a function boundary
	vararg bool // for a function boundary: whether ... is bound
	hashfn bool
	// macros are the user macros defined in this scope.
	macros map[string]rt.Value
	// autogensyms name x# symbols of compile-time code (top scope only).
	autogensyms map[string]string
}

func newScope(parent *scope, fn bool) *scope {
	s := &scope{parent: parent, fn: fn}
	if parent != nil && !fn {
		s.hashfn = parent.hashfn
	}
	return s
}

func (s *scope) lookup(name string) *binding {
	for ; s != nil; s = s.parent {
		if b, ok := s.syms[name]; ok {
			return b
		}
	}
	return nil
}

func (s *scope) luaUsed(name string) bool {
	for ; s != nil; s = s.parent {
		if s.lua[name] {
			return true
		}
	}
	return false
}

func (s *scope) hasVararg() bool {
	for ; s != nil; s = s.parent {
		if s.fn {
			return s.vararg
		}
	}
	return false
}

func (s *scope) inHashfn() bool {
	for ; s != nil; s = s.parent {
		if s.fn {
			return s.hashfn
		}
	}
	return false
}

func (s *scope) addLua(name string) {
	if s.lua == nil {
		s.lua = map[string]bool{}
	}
	s.lua[name] = true
}

// block is a list of Lua statements being produced, each with the
// source line it comes from.
type block struct {
	lines []string
	at    []int
	line  *int // the compiler's current line
}

func (b *block) emit(s string) {
	// A statement starting with ( would continue the previous one as a call.
	if strings.HasPrefix(s, "(") {
		s = ";" + s
	}
	b.lines = append(b.lines, s)
	at := 0
	if b.line != nil {
		at = *b.line
	}
	b.at = append(b.at, at)
}

func (b *block) nest(sub *block) {
	for i, l := range sub.lines {
		b.lines = append(b.lines, "  "+l)
		b.at = append(b.at, sub.at[i])
	}
}

// append adds the statements of sub, at the same level.
func (b *block) append(sub *block) {
	b.lines = append(b.lines, sub.lines...)
	b.at = append(b.at, sub.at...)
}

// String returns the Lua code with every statement on the line of the
// source it comes from, when the statements before it leave room (as
// Fennel's --correlate does): the chunk's line numbers are the source's,
// so Lua's run-time errors name the line in the cartridge. Statements
// that share a line are separated by a space; one whose line has passed
// goes on the current line.
func (b *block) String() string {
	var sb strings.Builder
	cur := 1
	for i, l := range b.lines {
		at := b.at[i]
		switch {
		case at > cur:
			sb.WriteString(strings.Repeat("\n", at-cur))
			cur = at
		case i > 0:
			sb.WriteByte(' ')
		}
		sb.WriteString(strings.TrimLeft(l, " "))
	}
	sb.WriteByte('\n')
	return sb.String()
}

// ekind classifies a compiled Lua expression.
type ekind uint8

const (
	ekLit  ekind = iota // literal: no side effects
	ekSym               // name or field access: a prefix expression
	ekExpr              // any other expression
	ekCall              // function call: prefix expression, statement, many values
	ekVarg              // ...
)

type expr struct {
	code string
	k    ekind
}

var nilExpr = expr{"nil", ekLit}

// copts says where the values of a form go: returned (tail), assigned to
// target, or given back as expressions (nval of them; -1 for all; 0 when
// the form is a statement whose values are dropped).
type copts struct {
	tail   bool
	target string
	nval   int
}

var (
	oStmt = copts{nval: 0}
	oOne  = copts{nval: 1}
	oAll  = copts{nval: -1}
)

func (c *compiler) gensym(sc *scope, base string) string {
	for {
		c.gen++
		name := fmt.Sprintf("_%s%d_", base, c.gen)
		if !sc.luaUsed(name) {
			sc.addLua(name)
			return name
		}
	}
}

// symNode makes a compiler-generated symbol that user code cannot name.
func (c *compiler) symNode(base string, at *node) *node {
	c.gen++
	return &node{kind: kSym, s: fmt.Sprintf("%s %d", base, c.gen), gensym: true, line: at.line, col: at.col}
}

// body compiles a sequence of forms; the last one gets o.
func (c *compiler) body(forms []*node, sc *scope, b *block, o copts) []expr {
	if len(forms) == 0 {
		return c.finish(nil, b, o)
	}
	for _, f := range forms[:len(forms)-1] {
		c.compile(f, sc, b, oStmt)
	}
	return c.compile(forms[len(forms)-1], sc, b, o)
}

// compile compiles one form.
func (c *compiler) compile(n *node, sc *scope, b *block, o copts) []expr {
	if n.line > 0 && n.line != c.line {
		defer func(line int) { c.line = line }(c.line)
		c.line = n.line
	}
	if n.kind == kList {
		return c.compileList(n, sc, b, o)
	}
	return c.finish([]expr{c.atom(n, sc, b)}, b, o)
}

// compile1 compiles a form to exactly one expression.
func (c *compiler) compile1(n *node, sc *scope, b *block) expr {
	es := c.compile(n, sc, b, oOne)
	if len(es) == 0 {
		return nilExpr
	}
	return es[0]
}

// finish delivers values as o asks.
func (c *compiler) finish(es []expr, b *block, o copts) []expr {
	switch {
	case o.tail:
		if len(es) == 0 {
			b.emit("return")
		} else if len(es) == 1 && es[0].k == ekCall && strings.HasPrefix(es[0].code, "error(") {
			// error never returns. Called as a statement, not by a tail
			// call: golua reports no position for an error raised by a
			// function called in a tail call. Locals never take the Lua
			// name error (reservedGlobals), so this is the global.
			b.emit(es[0].code)
		} else {
			b.emit("return " + joinExprs(es))
		}
		return nil
	case o.target != "":
		if len(es) == 0 {
			es = []expr{nilExpr}
		}
		b.emit(o.target + " = " + joinExprs(es))
		return nil
	case o.nval == 0:
		for _, e := range es {
			c.statement(e, b)
		}
		return nil
	case o.nval > 0 && len(es) > o.nval:
		for _, e := range es[o.nval:] {
			c.statement(e, b)
		}
		return es[:o.nval]
	}
	return es
}

// statement keeps the side effects of an expression whose value is dropped.
func (c *compiler) statement(e expr, b *block) {
	switch e.k {
	case ekCall:
		b.emit(e.code)
	case ekExpr:
		b.emit("do local _ = " + e.code + " end")
	}
}

func joinExprs(es []expr) string {
	parts := make([]string, len(es))
	for i, e := range es {
		parts[i] = e.code
	}
	return strings.Join(parts, ", ")
}

// stmtForm runs body, which compiles a statement-like form (if, let, do, ...)
// honouring tail and target, and makes it usable as an expression otherwise:
// through temporary locals for a known number of values, through a local
// function called at once when every value is wanted.
func (c *compiler) stmtForm(sc *scope, b *block, o copts, body func(b *block, o copts)) []expr {
	if o.tail || o.target != "" || o.nval == 0 {
		body(b, o)
		return nil
	}
	if o.nval > 0 {
		names := make([]string, o.nval)
		for i := range names {
			names[i] = c.gensym(sc, "")
		}
		b.emit("local " + strings.Join(names, ", "))
		body(b, copts{target: strings.Join(names, ", "), nval: o.nval})
		es := make([]expr, len(names))
		for i, nm := range names {
			es[i] = expr{nm, ekSym}
		}
		return es
	}
	name := c.gensym(sc, "")
	args := ""
	if sc.hasVararg() {
		args = "..."
	}
	fb := c.newBlock()
	body(fb, copts{tail: true})
	b.emit("local function " + name + "(" + args + ")")
	b.nest(fb)
	b.emit("end")
	return []expr{{name + "(" + args + ")", ekCall}}
}

// luaKeywords are names Lua reserves.
var luaKeywords = map[string]bool{
	"and": true, "break": true, "do": true, "else": true, "elseif": true, "end": true,
	"false": true, "for": true, "function": true, "goto": true, "if": true, "in": true,
	"local": true, "nil": true, "not": true, "or": true, "repeat": true, "return": true,
	"then": true, "true": true, "until": true, "while": true,
}

// reservedGlobals are globals the generated code calls; locals never take
// these Lua names, so user bindings cannot shadow them.
var reservedGlobals = map[string]bool{
	"type": true, "select": true, "table": true, "error": true, "assert": true,
	"setmetatable": true, "getmetatable": true, "next": true, "tostring": true, "_G": true,
	"_ENV": true, "__nbq": true,
}

func isIdent(s string) bool {
	if s == "" || luaKeywords[s] {
		return false
	}
	for i := 0; i < len(s); i++ {
		ch := s[i]
		if !(ch == '_' || (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (i > 0 && ch >= '0' && ch <= '9')) {
			return false
		}
	}
	return true
}

func isAlnum(ch byte) bool {
	return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9')
}

// mangleLocal turns a Fennel name into a Lua identifier the way Fennel
// does: - becomes _, other characters become _XX (hex), keywords and
// leading digits get a _ prefix.
func mangleLocal(name string) string {
	if luaKeywords[name] || (name != "" && name[0] >= '0' && name[0] <= '9') {
		name = "_" + name
	}
	var sb strings.Builder
	for i := 0; i < len(name); i++ {
		ch := name[i]
		switch {
		case ch == '-':
			sb.WriteByte('_')
		case ch == '_' || isAlnum(ch):
			sb.WriteByte(ch)
		default:
			fmt.Fprintf(&sb, "_%02x", ch)
		}
	}
	return sb.String()
}

// mangleGlobal names a global the way Fennel does.
func mangleGlobal(name string) string {
	if isIdent(name) {
		return name
	}
	var sb strings.Builder
	sb.WriteString("__fnl_global__")
	for i := 0; i < len(name); i++ {
		ch := name[i]
		if isAlnum(ch) {
			sb.WriteByte(ch)
		} else {
			fmt.Fprintf(&sb, "_%02x", ch)
		}
	}
	return sb.String()
}

// declare introduces a local named by sym in sc and returns its Lua name.
func (c *compiler) declare(sym *node, sc *scope, isVar bool) string {
	name := sym.s
	c.checkBindable(sym)
	if c.hasMacros && !sym.gensym {
		_, isMacro := sc.macro(name)
		c.assert(!isMacro, sym, "local %s was overshadowed by a special form or macro", name)
	}
	base := mangleLocal(name)
	if sym.gensym {
		base = "_" + mangleLocal(strings.ReplaceAll(name, " ", "")) + "_"
	}
	lua := base
	for i := 0; sc.luaUsed(lua) || reservedGlobals[lua]; i++ {
		lua = base + strconv.Itoa(i)
	}
	sc.addLua(lua)
	if sc.syms == nil {
		sc.syms = map[string]*binding{}
	}
	sc.syms[name] = &binding{lua: lua, isVar: isVar}
	return lua
}

func (c *compiler) checkBindable(sym *node) {
	if sym.gensym {
		return
	}
	name := sym.s
	c.assert(sym.kind == kSym, sym, "unable to bind %s", describe(sym))
	c.assert(!sym.quoted, sym, "macro tried to bind %s without gensym", name)
	c.assert(!strings.ContainsAny(name, ".:") || name == "...", sym, "unexpected multi symbol %s", name)
	_, special := specialForms()[name]
	c.assert(!special, sym, "local %s was overshadowed by a special form or macro", name)
	c.assert(name != "nil" && name != "&" && name != "&as" && name != "&until" && name != "&into", sym, "unable to bind %s", name)
}

func describe(n *node) string {
	switch n.kind {
	case kSym:
		return n.s
	case kStr:
		return strconv.Quote(n.s)
	case kNum:
		return numberCode(n)
	case kBool:
		return strconv.FormatBool(n.b)
	case kVarg:
		return "..."
	case kList:
		return "list"
	case kSeq:
		return "sequence"
	}
	return "table"
}

// quoteString writes a Lua string literal.
func quoteString(s string) string {
	var sb strings.Builder
	sb.Grow(len(s) + 2)
	sb.WriteByte('"')
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch ch {
		case '"':
			sb.WriteString(`\"`)
		case '\\':
			sb.WriteString(`\\`)
		case '\n':
			sb.WriteString(`\n`)
		case '\r':
			sb.WriteString(`\r`)
		case '\t':
			sb.WriteString(`\t`)
		default:
			if ch < 32 || ch == 127 {
				// three digits so that a following digit is not absorbed
				fmt.Fprintf(&sb, "\\%03d", ch)
			} else {
				sb.WriteByte(ch)
			}
		}
	}
	sb.WriteByte('"')
	return sb.String()
}

func numberCode(n *node) string {
	if n.isInt {
		if n.i == math.MinInt64 {
			return "math.mininteger"
		}
		if n.i < 0 {
			return "(" + strconv.FormatInt(n.i, 10) + ")"
		}
		return strconv.FormatInt(n.i, 10)
	}
	f := n.f
	switch {
	case math.IsNaN(f):
		return "(0/0)"
	case math.IsInf(f, 1):
		return "(1/0)"
	case math.IsInf(f, -1):
		return "(-1/0)"
	}
	// Fennel 1.5 writes numbers as its view does: integral floats below
	// 1e15 become integers, others keep 14 significant digits.
	var s string
	switch {
	case f == math.Floor(f) && math.Abs(f) < 1e15:
		s = strconv.FormatInt(int64(f), 10)
	case f == math.Floor(f):
		s = strconv.FormatFloat(f, 'e', -1, 64)
	default:
		s = strconv.FormatFloat(f, 'g', 14, 64)
	}
	if strings.HasPrefix(s, "-") {
		s = "(" + s + ")"
	}
	return s
}

// atom compiles a form that is not a list.
func (c *compiler) atom(n *node, sc *scope, b *block) expr {
	switch n.kind {
	case kNum:
		return expr{numberCode(n), ekLit}
	case kStr:
		return expr{quoteString(n.s), ekLit}
	case kBool:
		return expr{strconv.FormatBool(n.b), ekLit}
	case kVarg:
		c.assert(sc.hasVararg(), n, "unexpected vararg")
		return expr{"...", ekVarg}
	case kSym:
		return c.symbol(n, sc)
	case kSeq:
		parts := make([]string, 0, len(n.items))
		for i, it := range n.items {
			if i == len(n.items)-1 {
				es := c.compile(it, sc, b, oAll)
				if len(es) == 0 {
					es = []expr{nilExpr}
				}
				for _, e := range es {
					parts = append(parts, e.code)
				}
			} else {
				parts = append(parts, c.compile1(it, sc, b).code)
			}
		}
		return expr{"{" + strings.Join(parts, ", ") + "}", ekExpr}
	case kTable:
		parts := make([]string, 0, len(n.items)/2)
		for i := 0; i+1 < len(n.items); i += 2 {
			k, v := n.items[i], n.items[i+1]
			var key string
			if k.kind == kStr && isIdent(k.s) {
				key = k.s
			} else {
				kc := c.compile1(k, sc, b)
				c.assert(kc.code != "nil", k, "tables can't have nil keys")
				key = "[" + kc.code + "]"
			}
			parts = append(parts, key+" = "+c.compile1(v, sc, b).code)
		}
		return expr{"{" + strings.Join(parts, ", ") + "}", ekExpr}
	}
	c.fail(n, "could not compile value")
	return nilExpr
}

// symbol compiles a symbol reference, including a.b.c field access.
func (c *compiler) symbol(n *node, sc *scope) expr {
	name := n.s
	if name == "nil" {
		return nilExpr
	}
	if n.raw {
		return expr{name, ekSym}
	}
	if strings.Contains(name, ":") && name != ":" {
		c.fail(n, "multisym method calls may only be in call position")
	}
	parts := []string{name}
	if name != "." && name != ".." && name != "?." && name != "$..." && strings.Contains(name, ".") {
		parts = strings.Split(name, ".")
		for _, p := range parts {
			c.assert(p != "", n, "malformed multisym: %s", name)
		}
	}
	head := c.resolve(n, parts[0], sc)
	if len(parts) == 1 {
		return head
	}
	code := head.code
	for _, p := range parts[1:] {
		if isIdent(p) {
			code += "." + p
		} else {
			code += "[" + quoteString(p) + "]"
		}
	}
	return expr{code, ekSym}
}

func (c *compiler) resolve(n *node, name string, sc *scope) expr {
	if name == "$" && sc.inHashfn() {
		name = "$1"
	}
	if c.hasMacros && !n.gensym {
		_, isMacro := sc.macro(name)
		c.assert(!isMacro, n, "tried to reference a macro without calling it")
	}
	if b := sc.lookup(name); b != nil {
		if b.lua == "..." {
			return expr{"...", ekVarg}
		}
		return expr{b.lua, ekSym}
	}
	if strings.HasPrefix(name, "$") && sc.inHashfn() {
		c.fail(n, "unknown identifier: %s", name)
	}
	if _, ok := specialForms()[name]; ok && !n.gensym {
		c.fail(n, "tried to reference a special form without calling it")
	}
	c.assert(!n.gensym, n, "internal error: unbound generated symbol")
	return expr{mangleGlobal(name), ekSym}
}

// prefixExpr makes e usable before a call, index or method.
func prefixExpr(e expr) string {
	if e.k == ekSym || e.k == ekCall {
		return e.code
	}
	return "(" + e.code + ")"
}

// compileList compiles (head args...).
func (c *compiler) compileList(n *node, sc *scope, b *block, o copts) []expr {
	c.assert(len(n.items) > 0, n, "expected a function, macro, or special to call")
	head := n.items[0]
	if head.kind == kSym && !head.gensym && !head.raw {
		if c.hasMacros {
			if m, ok := sc.macro(head.s); ok {
				return c.compileMacroCall(n, m, sc, b, o)
			}
		}
		if sp, ok := specialForms()[head.s]; ok {
			es, done := sp(c, n, sc, b, o)
			if done {
				return es
			}
			return c.finish(es, b, o)
		}
		if i := strings.IndexByte(head.s, ':'); i > 0 && i < len(head.s)-1 {
			obj := &node{kind: kSym, s: head.s[:i], line: head.line, col: head.col}
			meth := &node{kind: kStr, s: head.s[i+1:], line: head.line, col: head.col}
			return c.finish(c.methodCall(n, obj, meth, n.items[1:], sc, b), b, o)
		}
	}
	switch head.kind {
	case kStr, kNum, kBool:
		c.fail(head, "cannot call literal value %s", describe(head))
	case kSym:
		c.assert(head.s != "nil", head, "cannot call literal value nil")
	}
	f := c.compile1(head, sc, b)
	args := c.args(n.items[1:], sc, b)
	return c.finish([]expr{{prefixExpr(f) + "(" + args + ")", ekCall}}, b, o)
}

// args compiles call arguments: the last one gives all its values.
func (c *compiler) args(items []*node, sc *scope, b *block) string {
	parts := make([]string, 0, len(items))
	for i, it := range items {
		if i == len(items)-1 {
			for _, e := range c.compile(it, sc, b, oAll) {
				parts = append(parts, e.code)
			}
		} else {
			parts = append(parts, c.compile1(it, sc, b).code)
		}
	}
	return strings.Join(parts, ", ")
}

func (c *compiler) methodCall(n, objNode, methNode *node, argNodes []*node, sc *scope, b *block) []expr {
	obj := c.compile1(objNode, sc, b)
	if methNode.kind == kStr && isIdent(methNode.s) {
		args := c.args(argNodes, sc, b)
		return []expr{{prefixExpr(obj) + ":" + methNode.s + "(" + args + ")", ekCall}}
	}
	// The object is evaluated once, then indexed by the method name.
	tmp := obj.code
	if obj.k != ekSym || strings.ContainsAny(obj.code, ".[") {
		tmp = c.gensym(sc, "")
		b.emit("local " + tmp + " = " + obj.code)
	}
	meth := c.compile1(methNode, sc, b)
	args := c.args(argNodes, sc, b)
	if args != "" {
		args = ", " + args
	}
	return []expr{{tmp + "[" + meth.code + "](" + tmp + args + ")", ekCall}}
}
