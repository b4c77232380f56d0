package fennel

import (
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"sync"

	"github.com/arnodel/golua/lib/base"
	"github.com/arnodel/golua/lib/mathlib"
	"github.com/arnodel/golua/lib/packagelib"
	"github.com/arnodel/golua/lib/stringlib"
	"github.com/arnodel/golua/lib/tablelib"
	"github.com/arnodel/golua/lib/utf8lib"
	rt "github.com/arnodel/golua/runtime"
	"github.com/nbots/nb/script/internal/lualib"

	"github.com/nbots/nb/script/internal/guard"
)

// Limits of compile-time code. Each macro definition and each expansion
// runs under macroCallLimits; a whole compilation may spend macroCPUBudget.
// The memory limit is real memory (see guard.Counted).
var macroCallLimits = rt.RuntimeResources{Cpu: 20_000_000, Memory: guard.Counted(32 << 20), Millis: 2000}

const (
	macroCPUBudget   = 100_000_000
	maxMacroExpands  = 20_000
	macroChunkPrefix = "macro"
)

// macroSafeBase are the base functions compile-time code sees: no load,
// dofile, loadfile, require, print or collectgarbage. The prelude then
// replaces pairs by one in a stable order, as Fennel's compiler does.
var macroSafeBase = []string{
	"assert", "error", "getmetatable", "ipairs", "next", "pairs", "pcall", "rawequal", "rawget",
	"rawlen", "rawset", "select", "setmetatable", "tonumber", "tostring", "type", "xpcall",
}

var (
	macroBaseOnce sync.Once
	macroBase     map[string]rt.Value
)

// baseFunctions loads Lua's base library once per process: golua's
// base.Load writes the flags of package-level functions each time it
// runs, a data race with any Lua code running them. The functions keep no
// per-runtime state, so every macro runtime shares them.
func baseFunctions() map[string]rt.Value {
	macroBaseOnce.Do(func() {
		tmpl := rt.New(io.Discard)
		lualib.Load(tmpl, base.LibLoader)
		g := tmpl.GlobalEnv()
		macroBase = map[string]rt.Value{}
		for _, name := range macroSafeBase {
			macroBase[name] = g.Get(rt.StringValue(name))
		}
		// golua's setmetatable does not count the table it links.
		macroBase["setmetatable"] = rt.FunctionValue(guard.Setmetatable)
	})
	return macroBase
}

// macroPrelude builds the syntax values and the helpers macros use. It
// receives what it needs and returns a table of helpers.
const macroPrelude = `local setmetatable, getmetatable, type, tostring, select, next, error, view, sort, concat, unpack, tpack = ...
local SYM, LIST, VARG, ASSERT = {}, {}, {}, {}
local SEQMARK = {}
local SEQ = {sequence = SEQMARK}

local function is_sym(x, name)
  if type(x) == "table" and getmetatable(x) == SYM and (name == nil or x[1] == name) then return x end
  return false
end
local function is_list(x)
  if type(x) == "table" and getmetatable(x) == LIST then return x end
  return false
end
local function is_varg(x)
  if type(x) == "table" and getmetatable(x) == VARG then return x end
  return false
end
local function is_seq(x)
  local mt = type(x) == "table" and getmetatable(x)
  if type(mt) == "table" and mt.sequence == SEQMARK then return x end
  return false
end
local function is_table(x)
  if type(x) ~= "table" then return false end
  local mt = getmetatable(x)
  if mt == SYM or mt == LIST or mt == VARG then return false end
  return x
end

local function maxn(t)
  local n = 0
  for k in next, t do
    if type(k) == "number" and k > n and k == k // 1 then n = k end
  end
  return n
end

SYM.__tostring = function(s) return s[1] end
SYM.__fennelview = function(s) return s[1] end
VARG.__tostring = function() return "..." end
VARG.__fennelview = function() return "..." end
local function list_view(l, show, o, indent)
  local parts = {}
  for i = 1, maxn(l) do
    local x = l[i]
    if show and o then parts[i] = show(x, o, indent + 1) else parts[i] = view(x) end
  end
  return "(" .. concat(parts, " ") .. ")"
end
LIST.__tostring = function(l) return list_view(l) end
LIST.__fennelview = list_view
ASSERT.__tostring = function(e) return e.msg end

local function sym(name, source)
  if type(name) ~= "string" then error("sym expects a string as first argument", 2) end
  local s = {name}
  if type(source) == "table" then s.line, s.col = source.line, source.col end
  return setmetatable(s, SYM)
end
local function list(...) return setmetatable({...}, LIST) end
local function sequence(...) return setmetatable({...}, SEQ) end
local function varg() return setmetatable({"..."}, VARG) end

local function multi_sym(x)
  if is_sym(x) then x = x[1] end
  if type(x) ~= "string" then return false end
  if x == "." or x == ".." or x == "?." or x == "$..." then return false end
  local parts, method = {}, false
  for part, sep in x:gmatch("([^.:]+)([.:]?)") do
    parts[#parts + 1] = part
    method = sep == ":"
  end
  if #parts < 2 and not x:find(":", 1, true) then return false end
  if #parts < 2 then return false end
  if x:find(":", 1, true) then parts["multi-sym-method-call"] = true end
  return parts
end

local function assert_compile(cond, msg, ast)
  if cond then return cond end
  local e = {msg = tostring(msg or "assertion failed")}
  if type(ast) == "table" and type(ast.line) == "number" then e.line, e.col = ast.line, ast.col end
  error(setmetatable(e, ASSERT), 0)
end

local function before(a, b)
  local ta, tb = type(a), type(b)
  if ta == tb and (ta == "number" or ta == "string") then return a < b end
  if ta ~= tb then return ta < tb end
  return tostring(a) < tostring(b)
end
local function stablepairs(t)
  local keys = {}
  for k in next, t do keys[#keys + 1] = k end
  sort(keys, before)
  local i = 0
  return function()
    i = i + 1
    local k = keys[i]
    if k ~= nil then return k, t[k] end
  end, t, nil
end

-- The constructors quoted forms compile to.
local q = {}
function q.sym(name, line, col, quoted)
  return setmetatable({name, line = line, col = col, quoted = quoted or nil}, SYM)
end
function q.list(t, line, col)
  t.line, t.col = line, col
  return setmetatable(t, LIST)
end
function q.seq(t) return setmetatable(t, SEQ) end
function q.tbl(t, n)
  local out = {}
  for i = 1, n, 2 do
    local k, v = t[i], t[i + 1]
    if k ~= nil and v ~= nil then out[k] = v end
  end
  return out
end
q.varg = varg

return {
  SYM = SYM, LIST = LIST, VARG = VARG, SEQ = SEQ, SEQMARK = SEQMARK, ASSERT = ASSERT, q = q,
  sym = sym, list = list, sequence = sequence, ["sym?"] = is_sym, ["list?"] = is_list,
  ["sequence?"] = is_seq, ["table?"] = is_table, ["varg?"] = is_varg, ["multi-sym?"] = multi_sym,
  ["assert-compile"] = assert_compile, pairs = stablepairs, unpack = unpack, pack = tpack,
}`

// astKind classifies a Lua value as a syntax value.
type astKind uint8

const (
	astOther astKind = iota
	astSym
	astList
	astSeq
	astVarg
	astTable
)

// macroRuntime is the golua runtime compile-time code of one compilation
// runs in. It is made when the first macro is defined.
type macroRuntime struct {
	r        *rt.Runtime
	env      *rt.Table
	symMT    *rt.Table
	listMT   *rt.Table
	seqMT    *rt.Table
	vargMT   *rt.Table
	assertMT *rt.Table
	seqMark  rt.Value

	c *compiler // the compiler of the source (for gensym and macroexpand)
	// scope and call are those of the expansion running, for in-scope?
	// and macroexpand.
	scope *scope
	call  *node
	// origin keeps the nodes that symbols given to macros came from, so
	// that compiler-made symbols keep their nature through a macro.
	origin  map[*rt.Table]*node
	cpuUsed uint64
	expands int
}

// macroRuntime returns the compilation's macro runtime, making it first.
func (c *compiler) macroRuntime(at *node) *macroRuntime {
	if c.mr != nil {
		return c.mr
	}
	mr := &macroRuntime{c: c, origin: map[*rt.Table]*node{}}
	r := rt.New(io.Discard)
	mr.r = r
	// Calls into Lua from Go (metamethods, pcall...) nest on the Go
	// stack: the hook bounds them.
	guard.Install(r.MainThread(), nil)
	guard.InstallFinalizers(r, nil)
	lualib.Load(r, packagelib.LibLoader, stringlib.LibLoader, tablelib.LibLoader, mathlib.LibLoader, utf8lib.LibLoader)
	guard.ReplaceFormat(r)
	g := r.GlobalEnv()
	env := rt.NewTable()
	for name, v := range baseFunctions() {
		env.Set(rt.StringValue(name), v)
	}
	for _, name := range []string{"string", "table", "math", "utf8"} {
		env.Set(rt.StringValue(name), g.Get(rt.StringValue(name)))
	}
	if s, ok := g.Get(rt.StringValue("string")).TryTable(); ok {
		s.Set(rt.StringValue("dump"), rt.NilValue)
	}
	env.Set(rt.StringValue("_G"), rt.TableValue(env))
	env.Set(rt.StringValue("_VERSION"), rt.StringValue("Lua 5.4"))
	env.Set(rt.StringValue("version"), rt.StringValue(LanguageVersion))

	get := func(t *rt.Table, k string) rt.Value { return t.Get(rt.StringValue(k)) }
	tbl := get(g, "table").AsTable()
	viewTable, err := mr.load("fennel-view", RuntimeLua(), env)
	if err != nil {
		c.fail(at, "macro runtime: %v", err)
	}
	view := get(viewTable.AsTable(), "view")
	env.Set(rt.StringValue("view"), view)
	prelude, err := mr.loadWith("macro-prelude", macroPrelude, env,
		get(env, "setmetatable"), get(env, "getmetatable"), get(env, "type"), get(env, "tostring"),
		get(env, "select"), get(env, "next"), get(env, "error"), view, get(tbl, "sort"), get(tbl, "concat"),
		get(tbl, "unpack"), get(tbl, "pack"))
	if err != nil {
		c.fail(at, "macro runtime: %v", err)
	}
	p := prelude.AsTable()
	mr.symMT = get(p, "SYM").AsTable()
	mr.listMT = get(p, "LIST").AsTable()
	mr.seqMT = get(p, "SEQ").AsTable()
	mr.vargMT = get(p, "VARG").AsTable()
	mr.assertMT = get(p, "ASSERT").AsTable()
	mr.seqMark = get(p, "SEQMARK")
	env.Set(rt.StringValue("__nbq"), get(p, "q"))
	for _, name := range []string{"sym", "list", "sequence", "sym?", "list?", "sequence?", "table?", "varg?",
		"multi-sym?", "assert-compile", "pairs", "unpack", "pack"} {
		env.Set(rt.StringValue(name), get(p, name))
	}
	goFn := func(name string, nargs int, f rt.GoFunctionFunc) {
		gf := rt.NewGoFunction(f, name, nargs, false)
		gf.SolemnlyDeclareCompliance(rt.ComplyCpuSafe | rt.ComplyMemSafe | rt.ComplyTimeSafe | rt.ComplyIoSafe)
		env.Set(rt.StringValue(name), rt.FunctionValue(gf))
	}
	goFn("gensym", 1, mr.gensym)
	goFn("in-scope?", 1, mr.inScope)
	goFn("macroexpand", 1, mr.macroexpand)
	// Compiled compile-time code names these globals by their mangled names.
	for k, v, ok := env.Next(rt.NilValue); ok && !k.IsNil(); k, v, ok = env.Next(k) {
		if s, isStr := k.TryString(); isStr {
			if m := mangleGlobal(s); m != s {
				defer env.Set(rt.StringValue(m), v)
			}
		}
	}
	mr.env = env
	c.mr = mr
	return mr
}

func (mr *macroRuntime) load(name, src string, env *rt.Table) (rt.Value, error) {
	return mr.loadWith(name, src, env)
}

func (mr *macroRuntime) loadWith(name, src string, env *rt.Table, args ...rt.Value) (rt.Value, error) {
	chunk, err := mr.r.CompileAndLoadLuaChunk(name, []byte(src), rt.TableValue(env))
	if err != nil {
		return rt.NilValue, err
	}
	return rt.Call1(mr.r.MainThread(), rt.FunctionValue(chunk), args...)
}

// run calls f under the limits of compile-time code.
func (mr *macroRuntime) run(f func(t *rt.Thread) (rt.Value, error)) (v rt.Value, err error) {
	if mr.cpuUsed > macroCPUBudget {
		return rt.NilValue, errors.New("macros used more than their CPU budget for this source")
	}
	th := mr.r.MainThread()
	def := rt.RuntimeContextDef{HardLimits: macroCallLimits, RequiredFlags: rt.ComplyIoSafe}
	ctx, err := th.CallContext(def, func() error {
		var err error
		v, err = f(th)
		return err
	})
	if ctx != nil {
		mr.cpuUsed += ctx.UsedResources().Cpu
		if ctx.Status() == rt.StatusKilled {
			return rt.NilValue, &limitError{err}
		}
	}
	return v, err
}

// limitError is compile-time code stopped by its limits.
type limitError struct{ err error }

func (e *limitError) Error() string {
	var term rt.ContextTerminationError
	msg := "limit exceeded"
	if errors.As(e.err, &term) {
		msg = term.Error()
	}
	return "compile-time code stopped: " + msg
}

// eval runs compiled compile-time Lua and returns its first value.
func (mr *macroRuntime) eval(lua string) (rt.Value, error) {
	chunk, err := mr.loadCode(lua)
	if err != nil {
		return rt.NilValue, fmt.Errorf("compile-time code does not load: %v", err)
	}
	return mr.run(func(t *rt.Thread) (rt.Value, error) { return rt.Call1(t, rt.FunctionValue(chunk)) })
}

// loadCode compiles compile-time Lua, refusing what would make golua's
// parser recurse too deeply (guard.CheckNesting) and turning a panic of
// golua's compiler into an error.
func (mr *macroRuntime) loadCode(lua string) (chunk *rt.Closure, err error) {
	defer func() {
		if p := recover(); p != nil {
			chunk, err = nil, fmt.Errorf("the Lua compiler failed on this code (%v)", p)
		}
	}()
	if err := guard.CheckNesting([]byte(lua), guard.MaxGeneratedDepth); err != nil {
		return nil, err
	}
	return mr.r.CompileAndLoadLuaChunk(macroChunkPrefix, []byte(lua), rt.TableValue(mr.env))
}

// callMacro calls macro m with args.
func (mr *macroRuntime) callMacro(m rt.Value, args []rt.Value) (rt.Value, error) {
	mr.expands++
	if mr.expands > maxMacroExpands {
		return rt.NilValue, fmt.Errorf("more than %d macro expansions", maxMacroExpands)
	}
	return mr.run(func(t *rt.Thread) (rt.Value, error) { return rt.Call1(t, m, args...) })
}

// errorInfo gives the message of an error raised by compile-time code and
// the position assert-compile gave it (line 0 when none).
func (mr *macroRuntime) errorInfo(err error) (msg string, line, col int) {
	var le *limitError
	if errors.As(err, &le) {
		return le.Error(), 0, 0
	}
	var le2 *rt.Error
	if !errors.As(err, &le2) {
		return err.Error(), 0, 0
	}
	v := rt.ErrorValue(err)
	if t, ok := v.TryTable(); ok && t.Metatable() == mr.assertMT {
		msg, _ = t.Get(rt.StringValue("msg")).TryString()
		l, _ := t.Get(rt.StringValue("line")).TryInt()
		c, _ := t.Get(rt.StringValue("col")).TryInt()
		return msg, int(l), int(c)
	}
	switch v.Type() {
	case rt.StringType:
		msg, _ = v.TryString()
	case rt.IntType, rt.FloatType:
		msg, _ = v.ToString()
	case rt.NilType:
		msg = "nil"
	default:
		msg = "(error object is a " + v.TypeName() + " value)"
	}
	// Positions in the compiled macro mean nothing to the user.
	if rest, ok := strings.CutPrefix(msg, macroChunkPrefix+":"); ok {
		if i := strings.Index(rest, ": "); i > 0 && strings.Trim(rest[:i], "0123456789") == "" {
			msg = rest[i+2:]
		}
	}
	return msg, 0, 0
}

// luaFail raises a compile error from a Go function called by a macro:
// as an assert-compile error, so that it keeps its position.
func (mr *macroRuntime) luaFail(e *Error) error {
	t := rt.NewTable()
	t.Set(rt.StringValue("msg"), rt.StringValue(e.Msg))
	t.Set(rt.StringValue("line"), rt.IntValue(int64(e.Line)))
	t.Set(rt.StringValue("col"), rt.IntValue(int64(e.Column)))
	t.SetMetatable(mr.assertMT)
	return rt.NewError(rt.TableValue(t))
}

// guard runs f, turning a compile error it raises into a Lua error.
func (mr *macroRuntime) guard(f func() rt.Value) (v rt.Value, err error) {
	defer func() {
		if r := recover(); r != nil {
			e, ok := r.(*Error)
			if !ok {
				panic(r)
			}
			err = mr.luaFail(e)
		}
	}()
	return f(), nil
}

func (mr *macroRuntime) gensym(t *rt.Thread, c *rt.GoCont) (rt.Cont, error) {
	base := ""
	if c.NArgs() > 0 {
		if s, ok := c.Arg(0).ToString(); ok {
			base = string(s)
		} else if st, ok := c.Arg(0).TryTable(); ok && st.Metatable() == mr.symMT {
			base, _ = st.Get(rt.IntValue(1)).TryString()
		}
	}
	mr.c.gen++
	return c.PushingNext1(t.Runtime, mr.symValue(fmt.Sprintf("%s_%d_", base, mr.c.gen), mr.call)), nil
}

func (mr *macroRuntime) inScope(t *rt.Thread, c *rt.GoCont) (rt.Cont, error) {
	if mr.scope == nil {
		return nil, errors.New("in-scope? must be called from a macro")
	}
	name := ""
	if c.NArgs() > 0 {
		if st, ok := c.Arg(0).TryTable(); ok && st.Metatable() == mr.symMT {
			name, _ = st.Get(rt.IntValue(1)).TryString()
		} else if s, ok := c.Arg(0).TryString(); ok {
			name = s
		}
	}
	b := mr.scope.lookup(name)
	if b == nil {
		return c.PushingNext1(t.Runtime, rt.NilValue), nil
	}
	return c.PushingNext1(t.Runtime, rt.StringValue(b.lua)), nil
}

func (mr *macroRuntime) macroexpand(t *rt.Thread, c *rt.GoCont) (rt.Cont, error) {
	if mr.scope == nil {
		return nil, errors.New("macroexpand must be called from a macro")
	}
	if err := c.Check1Arg(); err != nil {
		return nil, err
	}
	at, sc := mr.call, mr.scope
	v, err := mr.guard(func() rt.Value {
		form := mr.toNode(c.Arg(0), at, 0)
		return mr.toLua(mr.c.expandAll(form, sc))
	})
	mr.scope, mr.call = sc, at
	if err != nil {
		return nil, err
	}
	return c.PushingNext1(t.Runtime, v), nil
}

// symValue makes a symbol value placed at the node at.
func (mr *macroRuntime) symValue(name string, at *node) rt.Value {
	t := rt.NewTable()
	t.Set(rt.IntValue(1), rt.StringValue(name))
	if at != nil {
		t.Set(rt.StringValue("line"), rt.IntValue(int64(at.line)))
		t.Set(rt.StringValue("col"), rt.IntValue(int64(at.col)))
	}
	t.SetMetatable(mr.symMT)
	return rt.TableValue(t)
}

// toLua turns a node into the value macros see.
func (mr *macroRuntime) toLua(n *node) rt.Value {
	switch n.kind {
	case kStr:
		return rt.StringValue(n.s)
	case kNum:
		if n.isInt {
			return rt.IntValue(n.i)
		}
		return rt.FloatValue(n.f)
	case kBool:
		return rt.BoolValue(n.b)
	case kVarg:
		t := rt.NewTable()
		t.Set(rt.IntValue(1), rt.StringValue("..."))
		t.SetMetatable(mr.vargMT)
		return rt.TableValue(t)
	case kSym:
		if n.s == "nil" && !n.gensym && !n.raw {
			// nil is a symbol in Fennel's syntax tree too.
			return mr.symValue("nil", n)
		}
		v := mr.symValue(n.s, n)
		if n.quoted {
			v.AsTable().Set(rt.StringValue("quoted"), rt.BoolValue(true))
		}
		if n.gensym || n.raw {
			mr.origin[v.AsTable()] = n
		}
		return v
	}
	t := rt.NewTable()
	switch n.kind {
	case kList, kSeq:
		for i, it := range n.items {
			t.Set(rt.IntValue(int64(i+1)), mr.toLua(it))
		}
		if n.kind == kList {
			t.Set(rt.StringValue("line"), rt.IntValue(int64(n.line)))
			t.Set(rt.StringValue("col"), rt.IntValue(int64(n.col)))
			t.SetMetatable(mr.listMT)
		} else {
			t.SetMetatable(mr.seqMT)
		}
	case kTable:
		for i := 0; i+1 < len(n.items); i += 2 {
			k := mr.toLua(n.items[i])
			if !k.IsNil() {
				t.Set(k, mr.toLua(n.items[i+1]))
			}
		}
	}
	return rt.TableValue(t)
}

// astKind says what syntax value v is.
func (mr *macroRuntime) astKind(v rt.Value) astKind {
	t, ok := v.TryTable()
	if !ok {
		return astOther
	}
	switch mt := t.Metatable(); {
	case mt == nil:
		return astTable
	case mt == mr.symMT:
		return astSym
	case mt == mr.listMT:
		return astList
	case mt == mr.vargMT:
		return astVarg
	case isRawEqual(mt.Get(rt.StringValue("sequence")), mr.seqMark):
		return astSeq
	}
	return astTable
}

// maxAstItems bounds the items of one form a macro returns.
const maxAstItems = 1 << 16

// position gives the line and column stored in a syntax value, or at's.
func position(t *rt.Table, at *node) (int, int) {
	l, ok1 := t.Get(rt.StringValue("line")).TryInt()
	c, ok2 := t.Get(rt.StringValue("col")).TryInt()
	if ok1 && ok2 && l > 0 && c > 0 && l < math.MaxInt32 && c < math.MaxInt32 {
		return int(l), int(c)
	}
	return at.line, at.col
}

// items reads the elements 1..maxn of a list or sequence; holes are nil.
func (mr *macroRuntime) items(t *rt.Table, at *node, depth int) []*node {
	n := int64(0)
	count := 0
	for k, _, ok := t.Next(rt.NilValue); ok && !k.IsNil(); k, _, ok = t.Next(k) {
		count++
		if i, isInt := k.TryInt(); isInt && i > n {
			n = i
		} else if f, isFloat := k.TryFloat(); isFloat && f > float64(n) && f == math.Floor(f) && f < maxAstItems+1 {
			n = int64(f)
		}
	}
	mr.c.assert(n <= maxAstItems && n <= int64(count)+maxAstItems, at, "macro returned a form with too many items")
	out := make([]*node, n)
	for i := int64(1); i <= n; i++ {
		out[i-1] = mr.toNode(t.Get(rt.IntValue(i)), at, depth+1)
	}
	return out
}

// toNode turns a value a macro returned into a node; at is the macro call,
// whose position forms without their own take.
func (mr *macroRuntime) toNode(v rt.Value, at *node, depth int) *node {
	c := mr.c
	c.assert(depth < maxDepth, at, "macro returned a form nested more than %d levels", maxDepth)
	n := &node{line: at.line, col: at.col}
	switch v.Type() {
	case rt.NilType:
		n.kind, n.s = kSym, "nil"
		return n
	case rt.BoolType:
		n.kind, n.b = kBool, v.AsBool()
		return n
	case rt.IntType:
		n.kind, n.isInt, n.i = kNum, true, v.AsInt()
		return n
	case rt.FloatType:
		n.kind, n.f = kNum, v.AsFloat()
		return n
	case rt.StringType:
		n.kind, n.s = kStr, v.AsString()
		return n
	case rt.TableType:
	default:
		c.fail(at, "could not compile value of type %s", v.TypeName())
	}
	t := v.AsTable()
	switch mr.astKind(v) {
	case astSym:
		name, ok := t.Get(rt.IntValue(1)).TryString()
		c.assert(ok, at, "macro returned a symbol without a name")
		if orig, ok := mr.origin[t]; ok && orig.s == name {
			cp := *orig
			return &cp
		}
		n.line, n.col = position(t, at)
		n.kind, n.s = kSym, name
		n.quoted = rt.Truth(t.Get(rt.StringValue("quoted")))
		if name == "..." {
			n.kind, n.s = kVarg, ""
		}
		return n
	case astVarg:
		n.kind = kVarg
		return n
	case astList:
		n.line, n.col = position(t, at)
		n.kind = kList
		n.items = mr.items(t, n, depth)
		return n
	case astSeq:
		n.kind = kSeq
		n.items = mr.items(t, at, depth)
		return n
	}
	// A plain table: a sequence when its keys are 1..n, else a table with
	// its keys in a stable order.
	type kv struct{ k, v rt.Value }
	var entries []kv
	for k, val, ok := t.Next(rt.NilValue); ok && !k.IsNil(); k, val, ok = t.Next(k) {
		entries = append(entries, kv{k, val})
		c.assert(len(entries) <= maxAstItems, at, "macro returned a table with too many entries")
	}
	isSeq := true
	for _, e := range entries {
		if i, ok := e.k.TryInt(); !ok || i < 1 || i > int64(len(entries)) {
			isSeq = false
			break
		}
	}
	if isSeq {
		n.kind = kSeq
		n.items = mr.items(t, at, depth)
		return n
	}
	sort.SliceStable(entries, func(i, j int) bool { return luaKeyLess(entries[i].k, entries[j].k) })
	n.kind = kTable
	for _, e := range entries {
		n.items = append(n.items, mr.toNode(e.k, at, depth+1), mr.toNode(e.v, at, depth+1))
	}
	return n
}

// luaKeyLess orders table keys: numbers, then strings, then the rest by
// type name.
func luaKeyLess(a, b rt.Value) bool {
	ta, tb := a.TypeName(), b.TypeName()
	if ta != tb {
		return ta < tb
	}
	if x, ok := a.TryString(); ok {
		y, _ := b.TryString()
		return x < y
	}
	if x, ok := rt.ToFloat(a); ok {
		y, _ := rt.ToFloat(b)
		return x < y
	}
	return false
}

func isRawEqual(a, b rt.Value) bool {
	eq, _ := rt.RawEqual(a, b)
	return eq
}
