package script

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/arnodel/golua/code"
	rt "github.com/arnodel/golua/runtime"

	"github.com/nbots/nb/proc"
	"github.com/nbots/nb/script/internal/guard"
)

// Lang is the language of a cartridge function.
type Lang string

// The languages a cartridge may use, named as the cartridge keys.
const (
	Lua     Lang = "lua"
	Fennel  Lang = "fennel"
	Clojure Lang = "clojure"
)

func (l Lang) title() string {
	switch l {
	case Lua:
		return "Lua"
	case Fennel:
		return "Fennel"
	case Clojure:
		return "Clojure"
	default:
		return string(l)
	}
}

// Source is the code of one adapter or tool.
type Source struct {
	// Lang is the language of Code.
	Lang Lang
	// Code is the source text. For Lua it is the body of a function whose
	// parameters are the Params' names and it must `return` its value; for
	// Fennel it is the body of (fn [names] ...).
	Code string
	// File is the cartridge file, for error messages.
	File string
	// Line is the line of File where Code starts (1-based; 0 or 1 when
	// Code is a file of its own).
	Line int
}

// Param is one value in scope for a call.
type Param struct {
	// Name is the name as the cartridge sees it: content, parameters, id,
	// name, output, parameters-as-json. In Lua, '-' becomes '_'
	// (parameters_as_json); Fennel and Clojure keep the name as it is.
	Name string
	// Value is a Go value as decoded from JSON (see toLua).
	Value any
}

// Limits bound the resources of one call.
type Limits struct {
	// CPU is golua's CPU budget in units (one per VM instruction, more for
	// library work); about CPUUnitsPerSecond run in a second of a tight
	// loop. 0 means the default.
	CPU uint64
	// Memory bounds the memory a call's data may take, in bytes: the
	// call stops before its live data takes much more than this,
	// whatever it builds (see guard.MemoryScale: golua counts tables and
	// closures at a tenth of their size or less, so nb hands golua a
	// tenth of this and text, which golua counts exactly, is limited to
	// about a tenth). 0 means the default.
	Memory uint64
	// Timeout bounds the wall-clock time of a call. 0 means the default.
	Timeout time.Duration
}

// CPUUnitsPerSecond is about how many golua CPU units a tight Lua loop
// runs in a second (measured on a 2-core VM; see bench/README.md). It
// converts the cartridge's cpu-seconds.
const CPUUnitsPerSecond = 100_000_000

// CPUUnits converts seconds of CPU (a cartridge's cpu-seconds) to golua
// CPU units; 0 stays 0 (the default).
func CPUUnits(seconds float64) uint64 {
	if seconds <= 0 {
		return 0
	}
	return uint64(seconds * CPUUnitsPerSecond)
}

// DefaultLimits are the limits of a sandboxed call, for zero fields: 50
// million CPU units (about half a second of a tight loop, ~6 times
// fib(27)), 64 MiB of memory (about 6 MiB of text) and a 10 s timeout.
func DefaultLimits() Limits {
	return Limits{CPU: 50_000_000, Memory: 64 << 20, Timeout: 10 * time.Second}
}

// DefaultUnsandboxedLimits are the limits of an unsandboxed call, for
// zero fields: 2 billion CPU units (about 20 s of a tight loop), 256 MiB
// of memory (about 25 MiB of text) and a 60 s timeout. An unsandboxed
// function is the cartridge author's own program doing real work (a
// prime count that Lua 5.4 runs in half a second takes golua 300 million
// units); the limits only stop a runaway call from holding a core or the
// memory of a process that serves others.
func DefaultUnsandboxedLimits() Limits {
	return Limits{CPU: 2_000_000_000, Memory: 256 << 20, Timeout: 60 * time.Second}
}

// Options configure a Runtime.
type Options struct {
	// Sandboxed is the cartridge's safety.functions.sandboxed (true by
	// default in cartridges; the zero Options is unsandboxed, so callers
	// must pass it).
	Sandboxed bool
	// Limits apply to every call; zero fields take DefaultLimits (or
	// DefaultUnsandboxedLimits).
	Limits Limits
	// FennelCacheDir keeps compiled Fennel across runs (script/fennel's
	// Cache); "" keeps it in memory only, for the life of the process.
	FennelCacheDir string
	// Environ is the environment (NAME=value entries, as os.Environ
	// gives) that the commands of unsandboxed functions (os.execute,
	// io.popen, Clojure's bb) and os.getenv start from; only what
	// proc.Env allows passes (PATH, HOME, locale...). nil: an empty
	// environment.
	Environ []string
}

// Runtime runs the functions of one cartridge. It is safe for concurrent
// use: each call takes a Lua state from a pool, so the tools of one round
// run in parallel.
type Runtime struct {
	opts Options
	// environ is the children's environment (proc.Env of opts.Environ).
	environ []string

	mu    sync.Mutex
	idle  []*state              // states ready for a call
	units map[unitKey]*compiled // compiled Lua, by source and names
}

type unitKey struct {
	lang  Lang
	code  string
	names string
	file  string
	line  int
}

type compiled struct {
	unit *code.Unit
	err  error
}

// maxIdle caps the pooled states; a round rarely runs more tools at once.
const maxIdle = 16

// New returns a Runtime with opts; zero limits take DefaultLimits or
// DefaultUnsandboxedLimits.
func New(opts Options) *Runtime {
	d := DefaultLimits()
	if !opts.Sandboxed {
		d = DefaultUnsandboxedLimits()
	}
	if opts.Limits.CPU == 0 {
		opts.Limits.CPU = d.CPU
	}
	if opts.Limits.Memory == 0 {
		opts.Limits.Memory = d.Memory
	}
	if opts.Limits.Timeout == 0 {
		opts.Limits.Timeout = d.Timeout
	}
	return &Runtime{
		opts:    opts,
		environ: proc.Env(opts.Environ, nil),
		units:   map[unitKey]*compiled{},
	}
}

// Sandboxed reports whether calls run in the sandbox.
func (r *Runtime) Sandboxed() bool { return r.opts.Sandboxed }

// Call runs src with params in scope and returns its value converted to
// Go (see fromLua): nil, bool, int64, float64, string, []any or
// map[string]any, values that encoding/json can encode. A script that
// raises an error returns a *RuntimeError, one that does not compile a
// *CompileError, one that exceeds a limit or is canceled through ctx a
// *LimitError. What the script prints goes where WithOutput says.
func (r *Runtime) Call(ctx context.Context, src Source, params ...Param) (any, error) {
	switch src.Lang {
	case Lua, Fennel:
		return r.callLua(ctx, src, params)
	case Clojure:
		return r.callClojure(ctx, src, params)
	default:
		return nil, fmt.Errorf("unknown script language %q: use lua, fennel or clojure", src.Lang)
	}
}

// Check compiles src as Call would with parameters named names, without
// running it, and returns the *CompileError it would give (nil when it
// compiles). The compiled code is kept for the calls. Call it for every
// function and adapter when a cartridge loads, so that errors show then,
// with their line in the cartridge. Clojure is read by Babashka only
// when it runs: Check accepts it.
func (r *Runtime) Check(src Source, names ...string) error {
	switch src.Lang {
	case Lua, Fennel:
		_, err := r.compile(src, names)
		return err
	case Clojure:
		return nil
	default:
		return fmt.Errorf("unknown script language %q: use lua, fennel or clojure", src.Lang)
	}
}

type outcome struct {
	value any
	err   error
}

func (r *Runtime) callLua(ctx context.Context, src Source, params []Param) (any, error) {
	if err := ctx.Err(); err != nil {
		return nil, &LimitError{Lang: src.Lang, Kind: LimitCanceled}
	}
	start := time.Now()
	deadline := start.Add(r.opts.Limits.Timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	// The commands an unsandboxed script runs stop with this context:
	// when the caller cancels, at the deadline, and when Call returns.
	cctx := ctx
	if !r.opts.Sandboxed {
		var cancel context.CancelFunc
		cctx, cancel = context.WithDeadline(ctx, deadline)
		defer cancel()
	}
	out := newCallOutput(ctx)
	defer out.close()
	st := r.getState()
	done := make(chan outcome, 1)
	go func() {
		v, err := r.run(cctx, st, out, src, params, deadline)
		done <- outcome{v, err}
	}()
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	select {
	case o := <-done:
		return o.value, o.err
	case <-ctx.Done():
		// The script goroutine stops at its next function call (the call
		// hook), or at its CPU or time limit; its state is then dropped,
		// not pooled.
		st.stop.Store(true)
		select {
		case o := <-done:
			return o.value, o.err
		default:
		}
		kind := LimitCanceled
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			kind = LimitTimeout
		}
		return nil, &LimitError{Lang: src.Lang, Kind: kind, After: time.Since(start)}
	case <-timer.C:
		st.stop.Store(true)
		select {
		case o := <-done:
			return o.value, o.err
		default:
		}
		return nil, &LimitError{Lang: src.Lang, Kind: LimitTimeout, After: time.Since(start)}
	}
}

// run does one call on st; it never panics.
func (r *Runtime) run(ctx context.Context, st *state, out *callOutput, src Source, params []Param, deadline time.Time) (value any, err error) {
	healthy := false
	st.ctx, st.out, st.missing = ctx, out, nil
	st.rt.Stdout = out
	defer func() {
		if p := recover(); p != nil {
			value, err = nil, fmt.Errorf("%s script failed inside the interpreter: %v", src.Lang.title(), p)
			healthy = false
		}
		if !st.closeCoroutines() {
			healthy = false
		}
		st.reap()
		st.ctx, st.out = nil, nil
		st.rt.Stdout = io.Discard
		if healthy && !st.stop.Load() {
			r.putState(st)
		}
	}()

	names := make([]string, len(params))
	for i, p := range params {
		names[i] = p.Name
	}
	unit, err := r.compile(src, names)
	if err != nil {
		healthy = true
		return nil, err
	}
	args := make([]rt.Value, len(params))
	for i, p := range params {
		v, err := toLua(p.Value, 0)
		if err != nil {
			healthy = true
			return nil, fmt.Errorf("parameter %s: %w", p.Name, err)
		}
		args[i] = v
	}
	env, err := st.newEnv(r, src.Lang)
	if err != nil {
		healthy = true
		return nil, err
	}

	limits := r.opts.Limits
	def := rt.RuntimeContextDef{
		HardLimits: rt.RuntimeResources{Cpu: limits.CPU, Memory: guard.Counted(limits.Memory)},
	}
	if r.opts.Sandboxed {
		def.RequiredFlags = rt.ComplyIoSafe
		// golua checks the clock every 10,000 CPU units; every function
		// in the sandbox is time-safe, so the VM stops itself on time.
		// Unsandboxed, the call hook stops the script at its next
		// function call once the caller gives up.
		ms := time.Until(deadline).Milliseconds()
		if ms < 1 {
			ms = 1
		}
		def.HardLimits.Millis = uint64(ms)
	}
	var result rt.Value
	thread := st.rt.MainThread()
	if st.sandboxed {
		// setmetatable puts the call hook on when the call needs it.
		guard.Remove(thread)
	}
	ctxt, callErr := thread.CallContext(def, func() error {
		chunk := st.rt.LoadLuaUnit(unit, env)
		fn, err := rt.Call1(thread, rt.FunctionValue(chunk))
		if err != nil {
			return err
		}
		result, err = rt.Call1(thread, fn, args...)
		return err
	})
	if ctxt != nil && ctxt.Status() == rt.StatusKilled {
		if msg, ok := guard.Overflow(callErr); ok {
			return nil, &RuntimeError{Lang: src.Lang, Message: msg}
		}
		var term rt.ContextTerminationError
		msg := ""
		if errors.As(callErr, &term) {
			msg = term.Error()
		}
		le := &LimitError{Lang: src.Lang, CPU: limits.CPU, Memory: limits.Memory}
		switch {
		case guard.Stopped(callErr):
			le.Kind, le.After = LimitCanceled, time.Duration(ctxt.UsedResources().Millis)*time.Millisecond
		case strings.HasPrefix(msg, "memory"):
			le.Kind = LimitMemory
		case strings.HasPrefix(msg, "time"):
			le.Kind, le.After = LimitTimeout, time.Duration(ctxt.UsedResources().Millis)*time.Millisecond
		default:
			le.Kind = LimitCPU
		}
		return nil, le
	}
	healthy = true
	if callErr != nil {
		msg := errorText(callErr)
		if st.sandboxed {
			msg = st.sandboxHint(msg)
		}
		return nil, &RuntimeError{Lang: src.Lang, Message: msg}
	}
	// The copy of the result runs outside golua's limits: it may take
	// as much memory as the call could.
	return fromLua(result, limits.Memory)
}

// errorText renders a Lua error value the way a Lua interpreter would.
func errorText(err error) string {
	v := rt.ErrorValue(err)
	if s, ok := v.TryString(); ok {
		return s
	}
	switch v.Type() {
	case rt.IntType, rt.FloatType:
		s, _ := v.ToString()
		return s
	case rt.NilType:
		return "nil"
	}
	if t, ok := v.TryTable(); ok {
		// error({message = "..."}) is a common idiom; show the message.
		if m, ok := t.Get(rt.StringValue("message")).TryString(); ok {
			return m
		}
	}
	return fmt.Sprintf("(error object is a %s value)", v.TypeName())
}

func (r *Runtime) getState() *state {
	r.mu.Lock()
	if n := len(r.idle); n > 0 {
		st := r.idle[n-1]
		r.idle = r.idle[:n-1]
		r.mu.Unlock()
		return st
	}
	r.mu.Unlock()
	return newState(r.opts.Sandboxed, r.environ)
}

func (r *Runtime) putState(st *state) {
	r.mu.Lock()
	if len(r.idle) < maxIdle {
		r.idle = append(r.idle, st)
	}
	r.mu.Unlock()
}

// luaName is the Lua spelling of a parameter name.
func luaName(name string) string { return strings.ReplaceAll(name, "-", "_") }

// compiler compiles Lua for every Runtime: compiling does not touch a
// runtime's state, so one is shared, under a lock (compiled units are
// cached, so it is rarely taken).
var (
	compilerMu sync.Mutex
	compiler   = sync.OnceValue(func() *rt.Runtime { return rt.New(io.Discard) })
)

// compile returns the compiled chunk for src, from the cache when the
// same source was compiled before. The chunk returns the function.
func (r *Runtime) compile(src Source, names []string) (*code.Unit, error) {
	key := unitKey{lang: src.Lang, code: src.Code, names: strings.Join(names, " "), file: src.File, line: src.Line}
	r.mu.Lock()
	c, ok := r.units[key]
	r.mu.Unlock()
	if ok {
		return c.unit, c.err
	}
	c = &compiled{}
	chunkName := src.File
	if chunkName == "" {
		chunkName = string(src.Lang)
	}
	switch {
	case len(src.Code) > maxSourceSize:
		c.err = &CompileError{Lang: src.Lang, File: chunkName, Line: src.Line, Message: errTooLong(len(src.Code)).Error()}
	case src.Lang == Fennel:
		lua, err := r.compileFennel(src, names)
		if err != nil {
			c.err = err
			break
		}
		if len(lua) > 4*maxSourceSize {
			c.err = &CompileError{Lang: Fennel, File: chunkName, Line: src.Line,
				Message: fmt.Sprintf("the code expands to too much Lua (%d KiB; at most %d KiB): keep big data out of the code", len(lua)>>10, 4*maxSourceSize>>10)}
			break
		}
		c.unit, err = compileLua(chunkName, lua, guard.MaxGeneratedDepth)
		var ne *guard.NestingError
		switch {
		case errors.As(err, &ne):
			// The compiled Lua keeps the lines of the Fennel source.
			c.err = &CompileError{Lang: Fennel, File: chunkName, Line: ne.Line, Message: ne.Error()}
		case err != nil:
			c.err = &CompileError{Lang: Fennel, File: chunkName, Line: src.Line, Message: "the Fennel compiler produced Lua that golua does not compile: " + err.Error()}
		}
	default:
		for _, n := range names {
			if !isLuaName(luaName(n)) {
				return nil, fmt.Errorf("parameter name %q is not a Lua name", n)
			}
		}
		var err error
		c.unit, err = compileLua(chunkName, wrapLua(src, names), guard.MaxSyntaxDepth)
		if err != nil {
			c.err = compileError(src, chunkName, err)
		}
	}
	r.mu.Lock()
	r.units[key] = c
	r.mu.Unlock()
	return c.unit, c.err
}

// maxSourceSize bounds the code of one adapter or tool (the Lua that nb
// compiles from a Fennel source may be four times as long). golua's
// compiler runs outside any limit, and it takes about 20 µs per constant
// in the worst case (a table of 50,000 numbers, 200 KiB, takes it 1 s on
// a loaded 2-core VM): a bigger source would hold a core for seconds
// when the cartridge loads.
const maxSourceSize = 64 << 10

// errTooLong is the error of a source longer than maxSourceSize.
func errTooLong(n int) error {
	return fmt.Errorf("the code is too long (%d KiB; at most %d KiB): keep big data out of the code", n>>10, maxSourceSize>>10)
}

// compileLua compiles a chunk with golua, after checking that its
// nesting stays within depth (golua's parser and compiler recurse on the
// Go stack without bound). It never panics: golua's compiler panics on
// some inputs (more constants than its instruction format holds).
func compileLua(name, lua string, depth int) (unit *code.Unit, err error) {
	defer func() {
		if p := recover(); p != nil {
			unit, err = nil, fmt.Errorf("%s: the Lua compiler failed on this code (%v)", name, p)
		}
	}()
	if err := guard.CheckNesting([]byte(lua), depth); err != nil {
		return nil, err
	}
	compilerMu.Lock()
	defer compilerMu.Unlock()
	unit, _, err = compiler().CompileLuaChunk(name, []byte(lua))
	return unit, err
}

// wrapLua makes the chunk `return function(names) <code> end`, padded with
// newlines so that the code's first line is the chunk's line src.Line:
// errors then name cartridge lines with no translation. The code sits on
// the header's line, so a source may hold anything Lua allows, "]]"
// included.
func wrapLua(src Source, names []string) string {
	var b strings.Builder
	if src.Line > 1 {
		b.WriteString(strings.Repeat("\n", src.Line-1))
	}
	b.WriteString("return function(")
	for i, n := range names {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(luaName(n))
	}
	b.WriteString(") ")
	b.WriteString(src.Code)
	b.WriteString("\nend")
	return b.String()
}

func compileError(src Source, file string, err error) error {
	ce := &CompileError{Lang: src.Lang, File: file, Message: err.Error()}
	var ne *guard.NestingError
	if errors.As(err, &ne) {
		ce.Line, ce.Message = ne.Line, ne.Error()
		return ce
	}
	if se, ok := rt.AsSyntaxError(err); ok && se.Err.Got != nil {
		ce.Line = se.Err.Got.Pos.Line
		ce.Message = se.Err.Error()
	}
	// Messages read "file:line: message", "file:line:col: message" or
	// "line:col: message".
	rest := strings.TrimPrefix(ce.Message, file+":")
	if line, after, ok := leadingNumber(rest); ok {
		if ce.Line == 0 {
			ce.Line = line
		}
		if _, after2, ok := leadingNumber(after); ok {
			after = after2
		}
		ce.Message = strings.TrimSpace(after)
	}
	// An error past the last line of the code is at the wrapper's "end":
	// the source itself ended too early.
	first := max(src.Line, 1)
	last := first + strings.Count(strings.TrimRight(src.Code, "\n"), "\n")
	if ce.Line > last {
		ce.Line = last
		ce.Message = strings.Replace(ce.Message, "near 'end'", "at the end of the source", 1)
	}
	return ce
}

// leadingNumber parses "123:rest" into 123 and "rest".
func leadingNumber(s string) (int, string, bool) {
	i := strings.IndexByte(s, ':')
	if i <= 0 || !isDigits(s[:i]) {
		return 0, s, false
	}
	n, err := strconv.Atoi(s[:i])
	if err != nil {
		return 0, s, false
	}
	return n, s[i+1:], true
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

var luaKeywords = map[string]bool{
	"and": true, "break": true, "do": true, "else": true, "elseif": true, "end": true,
	"false": true, "for": true, "function": true, "goto": true, "if": true, "in": true,
	"local": true, "nil": true, "not": true, "or": true, "repeat": true, "return": true,
	"then": true, "true": true, "until": true, "while": true,
}

func isLuaName(s string) bool {
	if s == "" || luaKeywords[s] {
		return false
	}
	for i, c := range s {
		switch {
		case c == '_', c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z':
		case c >= '0' && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}
