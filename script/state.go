package script

import (
	"context"
	"io"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/arnodel/golua/lib/base"
	"github.com/arnodel/golua/lib/coroutine"
	"github.com/arnodel/golua/lib/debuglib"
	"github.com/arnodel/golua/lib/iolib"
	"github.com/arnodel/golua/lib/mathlib"
	"github.com/arnodel/golua/lib/oslib"
	"github.com/arnodel/golua/lib/packagelib"
	"github.com/arnodel/golua/lib/stringlib"
	"github.com/arnodel/golua/lib/tablelib"
	"github.com/arnodel/golua/lib/utf8lib"
	rt "github.com/arnodel/golua/runtime"
	"github.com/nbots/nb/script/internal/lualib"

	"github.com/nbots/nb/script/internal/guard"
)

// allFlags is what a Go function must declare to run in the sandbox.
const allFlags = rt.ComplyCpuSafe | rt.ComplyMemSafe | rt.ComplyTimeSafe | rt.ComplyIoSafe

// safeBase are the base functions a sandboxed call sees. Not load,
// dofile, loadfile, require, collectgarbage, print or warn.
var safeBase = []string{
	"assert", "error", "getmetatable", "ipairs", "next", "pairs", "pcall",
	"rawequal", "rawget", "rawlen", "rawset", "select", "setmetatable",
	"tonumber", "tostring", "type", "xpcall",
}

// safeLibs are the library tables a sandboxed call gets a fresh copy of,
// with the entries left out of each. Not coroutine: golua v0.1.1 ends a
// coroutine's goroutine with a data race on the quota counters (Thread.end
// releases memory after handing control back), which can panic outside
// any recover.
var safeLibs = map[string]map[string]bool{
	"string": {"dump": true},
	"table":  nil,
	"math":   nil,
	"utf8":   nil,
}

var (
	baseOnce    sync.Once
	baseEntries []entry
)

// loadBase installs Lua's base functions in r. golua's base.Load writes
// the flags of two package-level functions (next and the ipairs
// iterator) every time it runs, a data race with any call running them,
// so it runs once per process and every runtime shares its functions,
// which keep no per-runtime state.
func loadBase(r *rt.Runtime) {
	baseOnce.Do(func() {
		tmpl := rt.New(io.Discard)
		lualib.Load(tmpl, base.LibLoader)
		g := tmpl.GlobalEnv()
		// collectgarbage declares no compliance, so a quota would refuse
		// it; the sandbox leaves it out, unsandboxed calls may use it.
		if f, ok := g.Get(rt.StringValue("collectgarbage")).TryCallable(); ok {
			if gf, ok := f.(*rt.GoFunction); ok {
				gf.SolemnlyDeclareCompliance(rt.ComplyCpuSafe | rt.ComplyMemSafe)
			}
		}
		baseEntries = tableEntries(g, map[string]bool{"_G": true})
		// golua's setmetatable does not count the memory of the table it
		// links (see guard.Setmetatable).
		for i, e := range baseEntries {
			if s, _ := e.key.TryString(); s == "setmetatable" {
				baseEntries[i].value = rt.FunctionValue(guard.Setmetatable)
			}
		}
	})
	g := r.GlobalEnv()
	fill(g, baseEntries)
	g.Set(rt.StringValue("_G"), rt.TableValue(g))
}

// entry is one name and value of a library table.
type entry struct {
	key, value rt.Value
}

// state is one golua runtime, used by one call at a time.
type state struct {
	rt        *rt.Runtime
	sandboxed bool

	// Pristine copies of what the libraries installed. A sandboxed call's
	// environment starts empty and its __index (shared, protected) hands
	// out a base function, or a fresh copy of a library table on first
	// use, so no call sees another's changes and a call pays only for
	// the libraries it touches.
	base    map[string]rt.Value
	libs    map[string][]entry
	envMeta *rt.Table

	// env and lang are the current call's environment and language.
	env  *rt.Table
	lang Lang

	// fennel is the `fennel` runtime table, loaded on first Fennel call.
	fennel []entry

	// coroutines started during the current call; the suspended ones are
	// closed when the call ends, else their goroutines would live forever.
	coroutines []*rt.Thread

	// stop is set when the caller stops waiting for the current call
	// (cancellation, timeout): the call hook then ends the script at its
	// next function call instead of at its CPU or time limit.
	stop atomic.Bool

	// The current call's output (print, io.write, the output of the
	// commands it runs), context (children stop with it), and, for a
	// sandboxed call, the globals it looked up that the sandbox does not
	// offer (for the error message).
	out     *callOutput
	ctx     context.Context
	missing map[string]bool
	// children are the commands the current call started; their process
	// groups are killed when the call ends.
	children []*exec.Cmd
	// environ is the environment of children (proc.Env of Options.Environ).
	environ []string
}

func newState(sandboxed bool, environ []string) *state {
	st := &state{sandboxed: sandboxed, base: map[string]rt.Value{}, libs: map[string][]entry{}, environ: environ}
	if sandboxed {
		st.rt = rt.New(io.Discard)
		loadBase(st.rt)
		lualib.Load(st.rt, packagelib.LibLoader, stringlib.LibLoader,
			tablelib.LibLoader, mathlib.LibLoader, utf8lib.LibLoader)
	} else {
		// print writes to Stdout, which each call points at its output.
		st.rt = rt.New(io.Discard)
		// The Lua standard library; not golua's golib (reflection into Go)
		// nor its runtime library.
		loadBase(st.rt)
		lualib.Load(st.rt, packagelib.LibLoader, coroutine.LibLoader,
			stringlib.LibLoader, tablelib.LibLoader, mathlib.LibLoader, iolib.LibLoader,
			utf8lib.LibLoader, oslib.LibLoader, debuglib.LibLoader)
	}
	guard.ReplaceFormat(st.rt)
	guard.SetStop(st.rt, &st.stop)
	// Finalizers (__gc) run on a thread of golua's own, which needs the
	// hook too, sandboxed or not.
	guard.InstallFinalizers(st.rt, &st.stop)
	if !sandboxed {
		// Unsandboxed, the hook is always on: it also stops a script
		// whose caller gave up. A sandboxed call starts without it
		// (see guard.Install).
		st.installHook(st.rt.MainThread())
	}
	g := st.rt.GlobalEnv()
	st.replaceCoroutines(g)
	if sandboxed {
		for _, name := range safeBase {
			st.base[name] = g.Get(rt.StringValue(name))
		}
		for name, drop := range safeLibs {
			t, _ := g.Get(rt.StringValue(name)).TryTable()
			st.libs[name] = tableEntries(t, drop)
		}
		st.base["unpack"] = g.Get(rt.StringValue("table")).AsTable().Get(rt.StringValue("unpack"))
		// golua's quotas leak through protected calls nested in each
		// other (a context killed inside pcall stops counting; a message
		// handler calling xpcall again ran 20 s past a CPU limit of 0.05
		// s): a call that uses them gets the call hook, which stops the
		// script at its next call once the caller gives up.
		for _, name := range []string{"pcall", "xpcall"} {
			orig, _ := st.base[name].TryCallable()
			f := rt.NewGoFunction(func(t *rt.Thread, c *rt.GoCont) (rt.Cont, error) {
				guard.Ensure(t)
				return forward(t, c, orig, allArgs(c))
			}, name, 1, true)
			f.SolemnlyDeclareCompliance(allFlags)
			st.base[name] = rt.FunctionValue(f)
		}
		st.protect()
		return st
	}
	st.openUp(g)
	return st
}

func tableEntries(t *rt.Table, drop map[string]bool) []entry {
	var out []entry
	if t == nil {
		return nil
	}
	k, v, ok := t.Next(rt.NilValue)
	for ok && !k.IsNil() {
		if s, isString := k.TryString(); !isString || !drop[s] {
			out = append(out, entry{k, v})
		}
		k, v, ok = t.Next(k)
	}
	return out
}

func fill(t *rt.Table, entries []entry) *rt.Table {
	for _, e := range entries {
		t.Set(e.key, e.value)
	}
	return t
}

// newEnv builds the global environment of one call.
func (st *state) newEnv(r *Runtime, lang Lang) (rt.Value, error) {
	env := rt.NewTable()
	if lang == Fennel {
		if err := st.loadFennel(r); err != nil {
			return rt.NilValue, err
		}
	}
	if !st.sandboxed {
		// Globals a call sets stay in its own table; the libraries are
		// read through to the runtime's global table.
		meta := rt.NewTable()
		meta.Set(rt.StringValue("__index"), rt.TableValue(st.rt.GlobalEnv()))
		env.SetMetatable(meta)
		if lang == Fennel {
			env.Set(rt.StringValue("fennel"), rt.TableValue(fill(rt.NewTable(), st.fennel)))
		}
		return rt.TableValue(env), nil
	}
	env.SetMetatable(st.envMeta)
	st.env, st.lang = env, lang
	return rt.TableValue(env), nil
}

// global returns the value of a global a sandboxed call has not set:
// a base function, or a fresh copy of a library, stored in env so the
// call sees the same table again.
func (st *state) global(env *rt.Table, name string) rt.Value {
	var v rt.Value
	switch name {
	case "_G":
		v = rt.TableValue(env)
	case "_VERSION":
		v = rt.StringValue("Lua 5.4")
	case "fennel":
		if st.lang != Fennel || st.fennel == nil {
			return rt.NilValue
		}
		v = rt.TableValue(fill(rt.NewTable(), st.fennel))
	default:
		if f, ok := st.base[name]; ok {
			return f
		}
		entries, ok := st.libs[name]
		if !ok {
			if notOffered[name] {
				if st.missing == nil {
					st.missing = map[string]bool{}
				}
				st.missing[name] = true
			}
			return rt.NilValue
		}
		v = rt.TableValue(fill(rt.NewTable(), entries))
	}
	env.Set(rt.StringValue(name), v)
	return v
}

// notOffered are the standard globals the sandbox leaves out: a script
// that looks one up gets nil, and its error says why.
var notOffered = map[string]bool{
	"os": true, "io": true, "require": true, "package": true, "debug": true, "load": true,
	"loadstring": true, "dofile": true, "loadfile": true, "collectgarbage": true,
	"print": true, "warn": true, "coroutine": true,
}

// sandboxHint explains an "attempt to index/call a nil value" raised by a
// sandboxed call that looked up globals the sandbox does not offer.
func (st *state) sandboxHint(msg string) string {
	if len(st.missing) == 0 || !strings.Contains(msg, "a nil value") {
		return msg
	}
	names := make([]string, 0, len(st.missing))
	for n := range st.missing {
		names = append(names, n)
	}
	sort.Strings(names)
	verb := "is"
	if len(names) > 1 {
		verb = "are"
	}
	return msg + " (" + strings.Join(names, " and ") + " " + verb + " not available to sandboxed functions," +
		" which have only string, table, math, utf8 and the safe base functions;" +
		" to use os, io and the rest of Lua's standard library, set safety: {functions: {sandboxed: false}} in the cartridge)"
}

// installHook bounds the calls into Lua from Go of thread t (see
// guard.Install) and stops it once the caller has given up on the call.
func (st *state) installHook(t *rt.Thread) {
	guard.Install(t, &st.stop)
}

// protect installs the shared metatables of a sandboxed state: the
// environments' (which resolves globals through st.global) and the
// strings' (whose methods are the current call's string table). Both
// hide behind __metatable, so scripts can neither read nor change them.
func (st *state) protect() {
	envIndex := rt.NewGoFunction(func(t *rt.Thread, c *rt.GoCont) (rt.Cont, error) {
		if err := c.CheckNArgs(2); err != nil {
			return nil, err
		}
		env, err := c.TableArg(0)
		if err != nil {
			return nil, err
		}
		name, ok := c.Arg(1).TryString()
		if !ok {
			return c.PushingNext1(t.Runtime, rt.NilValue), nil
		}
		return c.PushingNext1(t.Runtime, st.global(env, name)), nil
	}, "__index", 2, false)
	envIndex.SolemnlyDeclareCompliance(allFlags)
	st.envMeta = rt.NewTable()
	st.envMeta.Set(rt.StringValue("__index"), rt.FunctionValue(envIndex))
	st.envMeta.Set(rt.StringValue("__metatable"), rt.BoolValue(false))

	stringIndex := rt.NewGoFunction(func(t *rt.Thread, c *rt.GoCont) (rt.Cont, error) {
		if err := c.CheckNArgs(2); err != nil {
			return nil, err
		}
		if st.env == nil {
			return c.PushingNext1(t.Runtime, rt.NilValue), nil
		}
		lib := st.env.Get(rt.StringValue("string"))
		if lib.IsNil() {
			lib = st.global(st.env, "string")
		}
		tbl, ok := lib.TryTable()
		if !ok {
			// The call replaced `string` with something else; methods
			// still come from a string library.
			tbl = fill(rt.NewTable(), st.libs["string"])
		}
		return c.PushingNext1(t.Runtime, tbl.Get(c.Arg(1))), nil
	}, "__index", 2, false)
	stringIndex.SolemnlyDeclareCompliance(allFlags)
	meta := fill(rt.NewTable(), tableEntries(st.rt.RawMetatable(rt.StringValue("")), map[string]bool{"__index": true}))
	meta.Set(rt.StringValue("__index"), rt.FunctionValue(stringIndex))
	meta.Set(rt.StringValue("__metatable"), rt.BoolValue(false))
	st.rt.SetStringMeta(meta)
}

// replaceCoroutines swaps coroutine.create and coroutine.wrap for
// versions that remember the threads they start.
func (st *state) replaceCoroutines(g *rt.Table) {
	co, ok := g.Get(rt.StringValue("coroutine")).TryTable()
	if !ok {
		return
	}
	start := func(t *rt.Thread, c *rt.GoCont) (*rt.Thread, error) {
		if err := c.Check1Arg(); err != nil {
			return nil, err
		}
		f, err := c.CallableArg(0)
		if err != nil {
			return nil, err
		}
		th := rt.NewThread(t.Runtime)
		st.installHook(th)
		th.Start(f)
		st.coroutines = append(st.coroutines, th)
		return th, nil
	}
	create := rt.NewGoFunction(func(t *rt.Thread, c *rt.GoCont) (rt.Cont, error) {
		th, err := start(t, c)
		if err != nil {
			return nil, err
		}
		return c.PushingNext1(t.Runtime, rt.ThreadValue(th)), nil
	}, "create", 1, false)
	wrap := rt.NewGoFunction(func(t *rt.Thread, c *rt.GoCont) (rt.Cont, error) {
		th, err := start(t, c)
		if err != nil {
			return nil, err
		}
		w := rt.NewGoFunction(func(t *rt.Thread, c *rt.GoCont) (rt.Cont, error) {
			res, err := th.Resume(t, c.Etc())
			if err != nil {
				return nil, err
			}
			return c.PushingNext(t.Runtime, res...), nil
		}, "wrap", 0, true)
		w.SolemnlyDeclareCompliance(allFlags)
		return c.PushingNext1(t.Runtime, rt.FunctionValue(w)), nil
	}, "wrap", 1, false)
	create.SolemnlyDeclareCompliance(allFlags)
	wrap.SolemnlyDeclareCompliance(allFlags)
	co.Set(rt.StringValue("create"), rt.FunctionValue(create))
	co.Set(rt.StringValue("wrap"), rt.FunctionValue(wrap))
}

// closeCoroutines ends the goroutines of the call's suspended coroutines.
// Closing runs their pending <close> handlers, so it runs under a small
// CPU and time limit of its own; it reports false when those were
// exceeded. No memory limit: a closing thread gives back the memory it
// took in the call's context, and golua panics when a context gives back
// more than it took.
func (st *state) closeCoroutines() (ok bool) {
	if len(st.coroutines) == 0 {
		return true
	}
	defer func() {
		if recover() != nil {
			ok = false
		}
		st.coroutines = st.coroutines[:0]
	}()
	main := st.rt.MainThread()
	def := rt.RuntimeContextDef{HardLimits: rt.RuntimeResources{Cpu: 1_000_000, Millis: 100}}
	ctx, _ := main.CallContext(def, func() error {
		for _, th := range st.coroutines {
			if th.Status() == rt.ThreadSuspended {
				_, _ = th.Close(main)
			}
		}
		return nil
	})
	return ctx == nil || ctx.Status() != rt.StatusKilled
}
