package script

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"

	rt "github.com/arnodel/golua/runtime"

	"github.com/nbots/nb/proc"
	"github.com/nbots/nb/script/internal/guard"
)

// openUp lets an unsandboxed call use the whole standard library under
// its limits, with what would reach beyond the call replaced:
//
//   - golua refuses a Go function that does not declare it counts its CPU
//     and memory; require, package.searchpath and os.setlocale count them
//     and declare nothing, so they are declared here;
//   - os.exit would end nb itself: it raises an error;
//   - os.execute (which golua lacks) and io.popen run their command with
//     package proc, in the call's context (its end or cancellation kills
//     the command's process group) and an allow-listed environment;
//   - os.getenv reads that environment, not nb's;
//   - print, io.write, io.stdout and io.stderr write to the call's output
//     (WithOutput), never to nb's; there is no standard input;
//   - load, loadfile, dofile and require check the nesting of the code
//     before golua parses it (guard.CheckNesting) and refuse binary chunks
//     (golua's loader of binary chunks trusts its input);
//   - debug.sethook would take off the call hook that bounds recursion.
func (st *state) openUp(g *rt.Table) {
	declare := func(t *rt.Table, name string) {
		if f, ok := t.Get(rt.StringValue(name)).TryCallable(); ok {
			if gf, ok := f.(*rt.GoFunction); ok {
				gf.SolemnlyDeclareCompliance(rt.ComplyCpuSafe | rt.ComplyMemSafe)
			}
		}
	}
	set := func(t *rt.Table, name string, nargs int, variadic bool, fn rt.GoFunctionFunc) {
		f := rt.NewGoFunction(fn, name, nargs, variadic)
		f.SolemnlyDeclareCompliance(rt.ComplyCpuSafe | rt.ComplyMemSafe)
		t.Set(rt.StringValue(name), rt.FunctionValue(f))
	}
	table := func(name string) *rt.Table {
		t, _ := g.Get(rt.StringValue(name)).TryTable()
		return t
	}
	declare(g, "require")
	if pkg := table("package"); pkg != nil {
		declare(pkg, "searchpath")
		if searchers, ok := pkg.Get(rt.StringValue("searchers")).TryTable(); ok {
			f := rt.NewGoFunction(st.searchLua, "searchlua", 1, false)
			f.SolemnlyDeclareCompliance(rt.ComplyCpuSafe | rt.ComplyMemSafe)
			searchers.Set(rt.IntValue(2), rt.FunctionValue(f))
		}
	}
	load, _ := g.Get(rt.StringValue("load")).TryCallable()
	set(g, "load", 4, false, func(t *rt.Thread, c *rt.GoCont) (rt.Cont, error) { return st.load(t, c, load) })
	loadfile, _ := g.Get(rt.StringValue("loadfile")).TryCallable()
	set(g, "loadfile", 3, false, func(t *rt.Thread, c *rt.GoCont) (rt.Cont, error) {
		return st.loadFile(t, c, loadfile, false)
	})
	dofile, _ := g.Get(rt.StringValue("dofile")).TryCallable()
	set(g, "dofile", 1, false, func(t *rt.Thread, c *rt.GoCont) (rt.Cont, error) {
		return st.loadFile(t, c, dofile, true)
	})
	if osTable := table("os"); osTable != nil {
		declare(osTable, "setlocale")
		set(osTable, "exit", 2, false, func(t *rt.Thread, c *rt.GoCont) (rt.Cont, error) {
			return nil, errors.New("os.exit is not allowed in a cartridge function: return a value or raise an error instead")
		})
		set(osTable, "execute", 1, false, st.osExecute)
		set(osTable, "getenv", 1, false, func(t *rt.Thread, c *rt.GoCont) (rt.Cont, error) {
			name, err := c.StringArg(0)
			if err != nil {
				return nil, err
			}
			if v, ok := proc.Lookup(st.environ, name); ok {
				return c.PushingNext1(t.Runtime, rt.StringValue(v)), nil
			}
			return c.PushingNext1(t.Runtime, rt.NilValue), nil
		})
	}
	if ioTable := table("io"); ioTable != nil {
		st.stdio(ioTable)
	}
	if debug := table("debug"); debug != nil {
		set(debug, "sethook", 4, false, func(t *rt.Thread, c *rt.GoCont) (rt.Cont, error) {
			return nil, errors.New("debug.sethook is not available in nb: nb's own hook bounds the nesting of calls")
		})
		set(debug, "debug", 0, false, func(t *rt.Thread, c *rt.GoCont) (rt.Cont, error) {
			return nil, errors.New("debug.debug is not available in nb: a function has no standard input")
		})
	}
}

// errNoStdin is the error of the functions that would read nb's input.
var errNoStdin = errors.New("a cartridge function has no standard input: open a file with io.open")

// stdio replaces what io would read from nb's standard input or write to
// its standard output: io.write and the io.stdout and io.stderr files
// write to the call's output; io.read and io.stdin read nothing.
func (st *state) stdio(ioTable *rt.Table) {
	set := func(t *rt.Table, name string, nargs int, variadic bool, fn rt.GoFunctionFunc) {
		f := rt.NewGoFunction(fn, name, nargs, variadic)
		f.SolemnlyDeclareCompliance(allFlags)
		t.Set(rt.StringValue(name), rt.FunctionValue(f))
	}
	write := func(t *rt.Thread, c *rt.GoCont, args []rt.Value) error {
		for i, v := range args {
			s, ok := v.ToString()
			if !ok {
				return fmt.Errorf("bad argument #%d to 'write' (string expected, got %s)", i+1, v.TypeName())
			}
			t.RequireBytes(len(s))
			_, _ = st.out.Write([]byte(s))
		}
		return nil
	}
	// A standard file is a table whose methods are those of a Lua file.
	file := func(name string, writable bool) *rt.Table {
		methods := rt.NewTable()
		f := rt.NewTable()
		set(methods, "write", 1, true, func(t *rt.Thread, c *rt.GoCont) (rt.Cont, error) {
			if !writable {
				return c.PushingNext(t.Runtime, rt.NilValue, rt.StringValue("Bad file descriptor")), nil
			}
			if err := write(t, c, c.Etc()); err != nil {
				return nil, err
			}
			return c.PushingNext1(t.Runtime, c.Arg(0)), nil
		})
		set(methods, "read", 1, true, func(t *rt.Thread, c *rt.GoCont) (rt.Cont, error) {
			return c.PushingNext1(t.Runtime, rt.NilValue), nil
		})
		set(methods, "lines", 1, true, func(t *rt.Thread, c *rt.GoCont) (rt.Cont, error) {
			if writable {
				return nil, errors.New("bad argument #1 to 'lines' (" + name + " is not readable)")
			}
			end := rt.NewGoFunction(func(t *rt.Thread, c *rt.GoCont) (rt.Cont, error) {
				return c.PushingNext1(t.Runtime, rt.NilValue), nil
			}, "lines", 0, false)
			end.SolemnlyDeclareCompliance(allFlags)
			return c.PushingNext1(t.Runtime, rt.FunctionValue(end)), nil
		})
		for _, name := range []string{"flush", "setvbuf"} {
			set(methods, name, 1, true, func(t *rt.Thread, c *rt.GoCont) (rt.Cont, error) {
				return c.PushingNext1(t.Runtime, c.Arg(0)), nil
			})
		}
		set(methods, "close", 1, false, func(t *rt.Thread, c *rt.GoCont) (rt.Cont, error) {
			return c.PushingNext(t.Runtime, rt.NilValue, rt.StringValue("cannot close standard file")), nil
		})
		set(methods, "seek", 3, false, func(t *rt.Thread, c *rt.GoCont) (rt.Cont, error) {
			return c.PushingNext(t.Runtime, rt.NilValue, rt.StringValue("Illegal seek")), nil
		})
		meta := rt.NewTable()
		meta.Set(rt.StringValue("__index"), rt.TableValue(methods))
		meta.Set(rt.StringValue("__name"), rt.StringValue("FILE*"))
		meta.Set(rt.StringValue("__tostring"), rt.FunctionValue(func() *rt.GoFunction {
			g := rt.NewGoFunction(func(t *rt.Thread, c *rt.GoCont) (rt.Cont, error) {
				return c.PushingNext1(t.Runtime, rt.StringValue("file ("+name+")")), nil
			}, "__tostring", 1, false)
			g.SolemnlyDeclareCompliance(allFlags)
			return g
		}()))
		f.SetMetatable(meta)
		return f
	}
	stdin, stdout, stderr := file("stdin", false), file("stdout", true), file("stderr", true)
	ioTable.Set(rt.StringValue("stdin"), rt.TableValue(stdin))
	ioTable.Set(rt.StringValue("stdout"), rt.TableValue(stdout))
	ioTable.Set(rt.StringValue("stderr"), rt.TableValue(stderr))
	set(ioTable, "write", 0, true, func(t *rt.Thread, c *rt.GoCont) (rt.Cont, error) {
		if err := write(t, c, c.Etc()); err != nil {
			return nil, err
		}
		return c.PushingNext1(t.Runtime, rt.TableValue(stdout)), nil
	})
	set(ioTable, "read", 0, true, func(t *rt.Thread, c *rt.GoCont) (rt.Cont, error) {
		return c.PushingNext1(t.Runtime, rt.NilValue), nil
	})
	lines, _ := ioTable.Get(rt.StringValue("lines")).TryCallable()
	set(ioTable, "lines", 1, true, func(t *rt.Thread, c *rt.GoCont) (rt.Cont, error) {
		if c.NArgs() == 0 || c.Arg(0).IsNil() {
			return nil, errNoStdin
		}
		return forward(t, c, lines, allArgs(c))
	})
	for _, name := range []string{"input", "output"} {
		std := stdin
		if name == "output" {
			std = stdout
		}
		set(ioTable, name, 1, false, func(t *rt.Thread, c *rt.GoCont) (rt.Cont, error) {
			if c.NArgs() > 0 && !c.Arg(0).IsNil() {
				return nil, fmt.Errorf("io.%s cannot change the standard files of a cartridge function: use io.open and the file's methods", name)
			}
			return c.PushingNext1(t.Runtime, rt.TableValue(std)), nil
		})
	}
	set(ioTable, "popen", 2, false, st.ioPopen)
}

// allArgs returns every argument of a Go function's call, those past its
// declared count (Etc) included.
func allArgs(c *rt.GoCont) []rt.Value {
	return append(append([]rt.Value(nil), c.Args()...), c.Etc()...)
}

// forward continues a call with f and args, as a tail call.
func forward(t *rt.Thread, c *rt.GoCont, f rt.Callable, args []rt.Value) (rt.Cont, error) {
	cont := f.Continuation(t, c.Next())
	t.Push(cont, args...)
	return cont, nil
}

// maxLoadSize bounds what load, loadfile, dofile and require compile:
// golua's compiler runs outside the call's limits, at about 30 KiB a
// second in the worst case.
const maxLoadSize = 1 << 20

// checkChunk refuses what golua must not be given to load: a binary
// chunk, a chunk bigger than maxLoadSize, or code nested past
// guard.MaxSyntaxDepth.
func checkChunk(src []byte) error {
	if len(src) > maxLoadSize {
		return fmt.Errorf("the chunk is too long (%d KiB; at most %d KiB)", len(src)>>10, maxLoadSize>>10)
	}
	if rt.HasMarshalPrefix(src) {
		return errors.New("binary chunks are not supported: load Lua source text")
	}
	if err := guard.CheckNesting(src, guard.MaxSyntaxDepth); err != nil {
		return err
	}
	return nil
}

// load is Lua's load(chunk [, chunkname [, mode [, env]]]) through
// checkChunk; golua's load does the rest.
func (st *state) load(t *rt.Thread, c *rt.GoCont, orig rt.Callable) (rt.Cont, error) {
	if err := c.Check1Arg(); err != nil {
		return nil, err
	}
	args := append([]rt.Value(nil), c.Args()...)
	var src []byte
	switch x := args[0]; x.Type() {
	case rt.StringType:
		src = []byte(x.AsString())
	case rt.FunctionType:
		// Read the pieces here, so the whole text can be checked.
		var buf bytes.Buffer
		for {
			piece, err := rt.Call1(t, x)
			if err != nil {
				return c.PushingNext(t.Runtime, rt.NilValue, rt.StringValue(err.Error())), nil
			}
			s, ok := piece.TryString()
			if piece.IsNil() || (ok && s == "") {
				break
			}
			if !ok {
				return c.PushingNext(t.Runtime, rt.NilValue, rt.StringValue("reader must return a string")), nil
			}
			t.RequireBytes(len(s))
			buf.WriteString(s)
		}
		src = buf.Bytes()
		args[0] = rt.StringValue(buf.String())
	default:
		return forward(t, c, orig, args)
	}
	if err := checkChunk(src); err != nil {
		return c.PushingNext(t.Runtime, rt.NilValue, rt.StringValue(err.Error())), nil
	}
	return forward(t, c, orig, args)
}

// loadFile is loadfile(filename [, mode [, env]]) or dofile(filename)
// through checkChunk.
func (st *state) loadFile(t *rt.Thread, c *rt.GoCont, orig rt.Callable, do bool) (rt.Cont, error) {
	name, err := c.StringArg(0)
	if c.NArgs() == 0 || c.Arg(0).IsNil() {
		err = errNoStdin
	}
	if err != nil {
		return nil, err
	}
	src, err := os.ReadFile(name)
	if err == nil {
		err = checkChunk(src)
		if err != nil {
			err = fmt.Errorf("%s: %w", name, err)
		}
	}
	if err != nil {
		if do {
			return nil, err
		}
		return c.PushingNext(t.Runtime, rt.NilValue, rt.StringValue(err.Error())), nil
	}
	return forward(t, c, orig, allArgs(c))
}

// searchLua is package.searchers[2]: it finds a module on package.path
// as golua's does, and loads it through checkChunk.
func (st *state) searchLua(t *rt.Thread, c *rt.GoCont) (rt.Cont, error) {
	name, err := c.StringArg(0)
	if err != nil {
		return nil, err
	}
	pkg, _ := t.GlobalEnv().Get(rt.StringValue("package")).TryTable()
	path := ""
	if pkg != nil {
		path, _ = pkg.Get(rt.StringValue("path")).TryString()
	}
	var tried []string
	for _, template := range strings.Split(path, ";") {
		file := strings.ReplaceAll(template, "?", strings.ReplaceAll(name, ".", "/"))
		if fi, err := os.Stat(file); err == nil && fi.Mode().IsRegular() {
			loader := rt.NewGoFunction(func(t *rt.Thread, c *rt.GoCont) (rt.Cont, error) {
				src, err := os.ReadFile(file)
				if err != nil {
					return nil, fmt.Errorf("error reading file: %s", err)
				}
				if err := checkChunk(src); err != nil {
					return nil, fmt.Errorf("error compiling file: %s: %s", file, err)
				}
				clos, err := t.LoadFromSourceOrCode(file, src, "t", rt.TableValue(t.GlobalEnv()), true)
				if err != nil {
					return nil, fmt.Errorf("error compiling file: %s", err)
				}
				return rt.Continue(t, rt.FunctionValue(clos), c.Next())
			}, "loadlua", 2, false)
			loader.SolemnlyDeclareCompliance(rt.ComplyCpuSafe | rt.ComplyMemSafe)
			return c.PushingNext(t.Runtime, rt.FunctionValue(loader), rt.StringValue(file)), nil
		}
		tried = append(tried, file)
	}
	return c.PushingNext1(t.Runtime, rt.StringValue("\n\tno file '"+strings.Join(tried, "'\n\tno file '")+"'")), nil
}

// command starts /bin/sh -c command for the current call: in its own
// process group, killed when the call's context ends (or when the call
// returns, by reap), with the allow-listed environment.
func (st *state) command(command string) *exec.Cmd {
	cmd := proc.Command(st.ctx, "/bin/sh", "-c", command)
	cmd.Env = st.environ
	st.children = append(st.children, cmd)
	return cmd
}

// reap kills what the commands of the call left behind (background
// processes of a shell that has exited).
func (st *state) reap() {
	for _, cmd := range st.children {
		proc.Reap(cmd)
	}
	st.children = st.children[:0]
}

// osExecute is Lua 5.4's os.execute: with no command, whether a shell is
// there; else the command's status as (true|nil, "exit"|"signal", code).
// The command runs through /bin/sh with no standard input; its output
// goes to the call's output (WithOutput).
func (st *state) osExecute(t *rt.Thread, c *rt.GoCont) (rt.Cont, error) {
	if c.NArgs() == 0 || c.Arg(0).IsNil() {
		_, err := os.Stat("/bin/sh")
		return c.PushingNext1(t.Runtime, rt.BoolValue(err == nil)), nil
	}
	command, err := c.StringArg(0)
	if err != nil {
		return nil, err
	}
	cmd := st.command(command)
	cmd.Stdout, cmd.Stderr = st.out, st.out
	return pushStatus(t, c, cmd.Run()), nil
}

// pushStatus pushes a command's status as os.execute returns it.
func pushStatus(t *rt.Thread, c *rt.GoCont, err error) rt.Cont {
	var exitErr *exec.ExitError
	switch {
	case err == nil:
		return c.PushingNext(t.Runtime, rt.BoolValue(true), rt.StringValue("exit"), rt.IntValue(0))
	case errors.As(err, &exitErr):
		if ws, ok := exitErr.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return c.PushingNext(t.Runtime, rt.NilValue, rt.StringValue("signal"), rt.IntValue(int64(ws.Signal())))
		}
		return c.PushingNext(t.Runtime, rt.NilValue, rt.StringValue("exit"), rt.IntValue(int64(exitErr.ExitCode())))
	default:
		return c.PushingNext(t.Runtime, rt.NilValue, rt.StringValue("exit"), rt.IntValue(127))
	}
}

// ioPopen is io.popen(command [, mode]) for the modes Lua scripts use:
// "r" (the default) runs the command and returns a file whose read,
// lines and close give its output and status; "w" collects what is
// written and runs the command with it as input when the file is closed.
// The command's standard error goes to the call's output.
func (st *state) ioPopen(t *rt.Thread, c *rt.GoCont) (rt.Cont, error) {
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
	f := &popenFile{st: st, command: command}
	switch mode {
	case "r", "rb":
		f.output, f.status = f.run(nil)
		t.RequireBytes(len(f.output))
	case "w", "wb":
		f.writing = true
	default:
		return nil, fmt.Errorf("bad argument #2 to 'popen' (invalid mode %q)", mode)
	}
	return c.PushingNext1(t.Runtime, rt.TableValue(f.table())), nil
}

// popenFile is the file io.popen returns.
type popenFile struct {
	st      *state
	command string
	writing bool
	input   []byte
	output  []byte
	pos     int
	status  error
	closed  bool
}

// run runs the command with input (nil: none) and returns its output.
func (f *popenFile) run(input []byte) ([]byte, error) {
	cmd := f.st.command(f.command)
	if input != nil {
		cmd.Stdin = bytes.NewReader(input)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, f.st.out
	err := cmd.Run()
	return out.Bytes(), err
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
			t.RequireBytes(len(s))
			f.input = append(f.input, s...)
		}
		return c.PushingNext1(t.Runtime, rt.TableValue(tbl)), nil
	})
	set("close", func(t *rt.Thread, c *rt.GoCont) (rt.Cont, error) {
		if !f.closed && f.writing {
			_, f.status = f.run(f.input)
		}
		f.closed = true
		return pushStatus(t, c, f.status), nil
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
