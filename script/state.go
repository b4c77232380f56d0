package script

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/arnodel/golua/lib"
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
		lib.LoadLibs(tmpl, base.LibLoader)
		g := tmpl.GlobalEnv()
		// collectgarbage declares no compliance, so a quota would refuse
		// it; the sandbox leaves it out, unsandboxed calls may use it.
		if f, ok := g.Get(rt.StringValue("collectgarbage")).TryCallable(); ok {
			if gf, ok := f.(*rt.GoFunction); ok {
				gf.SolemnlyDeclareCompliance(rt.ComplyCpuSafe | rt.ComplyMemSafe)
			}
		}
		baseEntries = tableEntries(g, map[string]bool{"_G": true})
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
}

func newState(sandboxed bool) *state {
	st := &state{sandboxed: sandboxed, base: map[string]rt.Value{}, libs: map[string][]entry{}}
	if sandboxed {
		st.rt = rt.New(io.Discard)
		loadBase(st.rt)
		lib.LoadLibs(st.rt, packagelib.LibLoader, stringlib.LibLoader,
			tablelib.LibLoader, mathlib.LibLoader, utf8lib.LibLoader)
	} else {
		st.rt = rt.New(os.Stdout)
		// The Lua standard library; not golua's golib (reflection into Go)
		// nor its runtime library.
		loadBase(st.rt)
		lib.LoadLibs(st.rt, packagelib.LibLoader, coroutine.LibLoader,
			stringlib.LibLoader, tablelib.LibLoader, mathlib.LibLoader, iolib.LibLoader,
			utf8lib.LibLoader, oslib.LibLoader, debuglib.LibLoader)
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
		st.protect()
		return st
	}
	st.openUp(g)
	return st
}

// openUp lets an unsandboxed call use the whole standard library under
// the CPU and memory limits: golua refuses a Go function that does not
// declare it counts its CPU and memory, and a few that do count it have
// no declaration. os.exit would end nb itself, so it raises an error.
func (st *state) openUp(g *rt.Table) {
	declare := func(t *rt.Table, name string) {
		if f, ok := t.Get(rt.StringValue(name)).TryCallable(); ok {
			if gf, ok := f.(*rt.GoFunction); ok {
				gf.SolemnlyDeclareCompliance(rt.ComplyCpuSafe | rt.ComplyMemSafe)
			}
		}
	}
	declare(g, "require")
	if pkg, ok := g.Get(rt.StringValue("package")).TryTable(); ok {
		declare(pkg, "searchpath")
	}
	if osTable, ok := g.Get(rt.StringValue("os")).TryTable(); ok {
		declare(osTable, "setlocale")
		exit := rt.NewGoFunction(func(t *rt.Thread, c *rt.GoCont) (rt.Cont, error) {
			return nil, errors.New("os.exit is not allowed in a cartridge function: return a value or raise an error instead")
		}, "exit", 0, true)
		exit.SolemnlyDeclareCompliance(allFlags)
		osTable.Set(rt.StringValue("exit"), rt.FunctionValue(exit))
		// golua has no os.execute; Lua 5.4 has, and unsandboxed tools
		// rely on it.
		execute := rt.NewGoFunction(osExecute, "execute", 1, false)
		execute.SolemnlyDeclareCompliance(rt.ComplyCpuSafe | rt.ComplyMemSafe)
		osTable.Set(rt.StringValue("execute"), rt.FunctionValue(execute))
	}
	if ioTable, ok := g.Get(rt.StringValue("io")).TryTable(); ok {
		// golua's io.popen hands the child nb's whole environment, API
		// keys included; this one does not.
		popen := rt.NewGoFunction(ioPopen, "popen", 2, false)
		popen.SolemnlyDeclareCompliance(rt.ComplyCpuSafe | rt.ComplyMemSafe)
		ioTable.Set(rt.StringValue("popen"), rt.FunctionValue(popen))
	}
}

// ioPopen is io.popen(command [, mode]) for the modes Lua scripts use:
// "r" (the default) runs the command and returns a file whose read,
// lines and close give its output and status; "w" collects what is
// written and runs the command with it as input when the file is closed.
func ioPopen(t *rt.Thread, c *rt.GoCont) (rt.Cont, error) {
	command, err := c.StringArg(0)
	if err != nil {
		return nil, err
	}
	mode := "r"
	if c.NArgs() > 1 && !c.Arg(1).IsNil() {
		if mode, err = c.StringArg(1); err != nil {
			return nil, err
		}
	}
	f := &popenFile{command: command}
	switch mode {
	case "r", "rb":
		f.output, f.status = runShell(command, nil)
	case "w", "wb":
		f.writing = true
	default:
		return nil, fmt.Errorf("bad argument #2 to 'popen' (invalid mode %q)", mode)
	}
	return c.PushingNext1(t.Runtime, rt.TableValue(f.table())), nil
}

// runShell runs command through /bin/sh without nb's secrets in its
// environment; stderr goes to nb's stderr.
func runShell(command string, input []byte) ([]byte, *exec.ExitError) {
	cmd := exec.Command("/bin/sh", "-c", command)
	if input != nil {
		cmd.Stdin = bytes.NewReader(input)
	}
	cmd.Stderr = os.Stderr
	cmd.Env = childEnv(os.Environ())
	out, err := cmd.Output()
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		return out, exitErr
	}
	return out, nil
}

// popenFile is the file io.popen returns.
type popenFile struct {
	command string
	writing bool
	input   []byte
	output  []byte
	pos     int
	status  *exec.ExitError
	closed  bool
}

func (f *popenFile) table() *rt.Table {
	tbl := rt.NewTable()
	set := func(name string, fn func(t *rt.Thread, c *rt.GoCont) (rt.Cont, error)) {
		g := rt.NewGoFunction(fn, name, 3, true)
		g.SolemnlyDeclareCompliance(rt.ComplyCpuSafe | rt.ComplyMemSafe)
		tbl.Set(rt.StringValue(name), rt.FunctionValue(g))
	}
	set("read", func(t *rt.Thread, c *rt.GoCont) (rt.Cont, error) {
		format := "l"
		if c.NArgs() > 1 {
			if n, ok := c.Arg(1).TryInt(); ok {
				return c.PushingNext1(t.Runtime, f.readN(int(n))), nil
			}
			format, _ = c.Arg(1).TryString()
		}
		return c.PushingNext1(t.Runtime, f.read(strings.TrimPrefix(format, "*"))), nil
	})
	set("lines", func(t *rt.Thread, c *rt.GoCont) (rt.Cont, error) {
		next := rt.NewGoFunction(func(t *rt.Thread, c *rt.GoCont) (rt.Cont, error) {
			return c.PushingNext1(t.Runtime, f.read("l")), nil
		}, "lines", 0, false)
		next.SolemnlyDeclareCompliance(rt.ComplyCpuSafe | rt.ComplyMemSafe)
		return c.PushingNext1(t.Runtime, rt.FunctionValue(next)), nil
	})
	set("write", func(t *rt.Thread, c *rt.GoCont) (rt.Cont, error) {
		for i := 1; i < c.NArgs(); i++ {
			s, _ := c.Arg(i).ToString()
			f.input = append(f.input, s...)
		}
		return c.PushingNext1(t.Runtime, rt.TableValue(tbl)), nil
	})
	set("close", func(t *rt.Thread, c *rt.GoCont) (rt.Cont, error) {
		if !f.closed && f.writing {
			_, f.status = runShell(f.command, f.input)
		}
		f.closed = true
		if f.status == nil {
			return c.PushingNext(t.Runtime, rt.BoolValue(true), rt.StringValue("exit"), rt.IntValue(0)), nil
		}
		return c.PushingNext(t.Runtime, rt.NilValue, rt.StringValue("exit"), rt.IntValue(int64(f.status.ExitCode()))), nil
	})
	return tbl
}

func (f *popenFile) readN(n int) rt.Value {
	if f.pos >= len(f.output) {
		return rt.NilValue
	}
	end := min(f.pos+n, len(f.output))
	s := string(f.output[f.pos:end])
	f.pos = end
	return rt.StringValue(s)
}

func (f *popenFile) read(format string) rt.Value {
	rest := f.output[f.pos:]
	switch format {
	case "a":
		f.pos = len(f.output)
		return rt.StringValue(string(rest))
	case "n":
		fields := strings.Fields(string(rest))
		if len(fields) == 0 {
			return rt.NilValue
		}
		f.pos += strings.Index(string(rest), fields[0]) + len(fields[0])
		if i, err := strconv.ParseInt(fields[0], 10, 64); err == nil {
			return rt.IntValue(i)
		}
		if x, err := strconv.ParseFloat(fields[0], 64); err == nil {
			return rt.FloatValue(x)
		}
		return rt.NilValue
	default: // "l" and "L"
		if len(rest) == 0 {
			return rt.NilValue
		}
		line := rest
		if i := bytes.IndexByte(rest, '\n'); i >= 0 {
			line = rest[:i+1]
		}
		f.pos += len(line)
		if format != "L" {
			line = bytes.TrimSuffix(line, []byte("\n"))
		}
		return rt.StringValue(string(line))
	}
}

// osExecute is Lua 5.4's os.execute: with no command, whether a shell is
// there; else the command's status as (true|nil, "exit"|"signal", code).
// The command runs through /bin/sh with no standard input; its output goes
// to stderr, never into nb's answer on stdout; it does not see variables
// named like secrets.
func osExecute(t *rt.Thread, c *rt.GoCont) (rt.Cont, error) {
	if c.NArgs() == 0 || c.Arg(0).IsNil() {
		_, err := os.Stat("/bin/sh")
		return c.PushingNext1(t.Runtime, rt.BoolValue(err == nil)), nil
	}
	command, err := c.StringArg(0)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command("/bin/sh", "-c", command)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	cmd.Env = childEnv(os.Environ())
	err = cmd.Run()
	var exitErr *exec.ExitError
	switch {
	case err == nil:
		return c.PushingNext(t.Runtime, rt.BoolValue(true), rt.StringValue("exit"), rt.IntValue(0)), nil
	case errors.As(err, &exitErr):
		if ws, ok := exitErr.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return c.PushingNext(t.Runtime, rt.NilValue, rt.StringValue("signal"), rt.IntValue(int64(ws.Signal()))), nil
		}
		return c.PushingNext(t.Runtime, rt.NilValue, rt.StringValue("exit"), rt.IntValue(int64(exitErr.ExitCode()))), nil
	default:
		return c.PushingNext(t.Runtime, rt.NilValue, rt.StringValue("exit"), rt.IntValue(127)), nil
	}
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
			return rt.NilValue
		}
		v = rt.TableValue(fill(rt.NewTable(), entries))
	}
	env.Set(rt.StringValue(name), v)
	return v
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
