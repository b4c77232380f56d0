package guard

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"

	rt "github.com/arnodel/golua/runtime"
)

// MaxCallDepth bounds how many calls into Lua from Go (a metamethod, a
// function given to pcall, table.sort or string.gsub...) may be nested in
// one thread, as C Lua's LUAI_MAXCCALLS (200) does. Each such call runs
// golua's interpreter loop again on the Go stack, a few kilobytes each.
const MaxCallDepth = 200

// overflowMarker ends the message of a stop by the call hook.
const overflowMarker = "stack overflow (more than 200 nested calls through metamethods or callbacks such as pcall, table.sort and string.gsub)"

// stoppedMarker is the message of a stop because the caller gave up.
const stoppedMarker = "stopped: the call was canceled or timed out"

// Install sets the call hook on t, replacing any other hook. A thread
// runs Lua with the hook on until its hooks are set again; a coroutine is
// a thread of its own and needs the hook too. When stop is not nil and
// set, the hook also stops the script at its next function call (see
// Stopped).
//
// golua runs the call hook when a Lua function calls any function and
// when the interpreter starts on a function called from Go. The hook
// tells the second kind by the continuation the call returns to (a
// *rt.Termination, which only Go callers create) and counts the
// Terminations of the thread's continuation stack: each is a pending call
// from Go, that is, an interpreter loop on the Go stack. Past
// MaxCallDepth it terminates the call's context, as a CPU or memory limit
// does; pcall catches that as an error, like C Lua's "C stack overflow".
//
// Cost: a hook call on every function call (about 150 ns with golua
// v0.1.1: code made of small function calls runs about twice as long),
// and a walk of the continuation stack (charged as CPU, one unit per
// frame) on every call from Go. A sandbox that does not need to stop
// scripts at their next call may leave the hook off and let Setmetatable
// put it on: in a sandbox, only a metatable brings the unbounded
// recursion (calls from Go through library functions such as pcall and
// table.sort nest at most 1000 deep, a limit of golua's own).
func Install(t *rt.Thread, stop *atomic.Bool) {
	f := plainHook
	if stop != nil {
		f = newHook(stop)
	}
	t.SetupHooks(rt.DebugHooks{DebugHookFlags: rt.HookFlagCall, Hook: rt.FunctionValue(f)})
}

// stopKey is the registry key of a runtime's stop flag (SetStop).
type stopKey struct{}

// SetStop records the stop flag that the hook installed by Ensure
// checks, for every thread of r.
func SetStop(r *rt.Runtime, stop *atomic.Bool) {
	r.SetRegistry(rt.AsValue(stopKey{}), rt.AsValue(stop))
}

// Ensure puts the call hook on t if it is not on, with the stop flag of
// t's runtime (SetStop).
func Ensure(t *rt.Thread) {
	if Installed(t) {
		return
	}
	stop, _ := t.Registry(rt.AsValue(stopKey{})).Interface().(*atomic.Bool)
	Install(t, stop)
}

// Installed reports whether t has a call hook on.
func Installed(t *rt.Thread) bool { return t.DebugHookFlags&rt.HookFlagCall != 0 }

// Remove takes the hooks off t.
func Remove(t *rt.Thread) { t.SetupHooks(rt.DebugHooks{}) }

// plainHook is the call hook without a stop flag.
var plainHook = newHook(nil)

func newHook(stop *atomic.Bool) *rt.GoFunction {
	f := rt.NewGoFunction(func(t *rt.Thread, c *rt.GoCont) (rt.Cont, error) {
		if stop != nil && stop.Load() {
			t.TerminateContext("%s", stoppedMarker)
		}
		return hook(t, c)
	}, "nb call hook", 1, false)
	f.SolemnlyDeclareCompliance(rt.ComplyCpuSafe | rt.ComplyMemSafe | rt.ComplyTimeSafe | rt.ComplyIoSafe)
	return f
}

func hook(t *rt.Thread, c *rt.GoCont) (rt.Cont, error) {
	next := c.Next()
	// "call", not "tail call" (a tail call does not nest).
	if s, ok := c.Arg(0).TryString(); !ok || len(s) != len("call") {
		return next, nil
	}
	// next is the hook's own termination, whose Parent is the parent of
	// the function being started: where it returns.
	from, ok := next.Parent().(*rt.Termination)
	if !ok {
		return next, nil
	}
	depth, steps := 0, uint64(0)
	for k := rt.Cont(from); k != nil; k = k.Parent() {
		steps++
		if _, ok := k.(*rt.Termination); ok {
			depth++
		}
	}
	t.RequireCPU(steps)
	if depth > MaxCallDepth {
		where := ""
		// A termination's DebugInfo is its caller's: the Lua code whose
		// metamethod or callback this is.
		for k := rt.Cont(from); k != nil; k = k.Parent() {
			if info := k.DebugInfo(); info != nil && info.CurrentLine > 0 && info.Source != "[Go]" {
				where = fmt.Sprintf("%s:%d: ", info.Source, info.CurrentLine)
				break
			}
		}
		t.TerminateContext("%s", where+overflowMarker)
	}
	return next, nil
}

// Overflow reports whether err is a stop by the call hook, and the
// message ("file:line: stack overflow (...)").
func Overflow(err error) (string, bool) {
	var term rt.ContextTerminationError
	if !errors.As(err, &term) {
		return "", false
	}
	msg := term.Error()
	return msg, strings.HasSuffix(msg, overflowMarker)
}

// Stopped reports whether err is a stop of a script whose caller gave up
// (Install's stop).
func Stopped(err error) bool {
	var term rt.ContextTerminationError
	return errors.As(err, &term) && term.Error() == stoppedMarker
}

// InstallFinalizers sets the call hook (Install, with stop) on the thread
// golua runs finalizers (__gc metamethods) on. That thread is golua's
// own and not reachable from Go, so the hook is set from inside a
// finalizer: a throwaway table with a Go __gc is marked in a context of
// its own, whose end runs the finalizer on that thread. Without the hook,
// a finalizer that recursed through a metamethod would run into the end
// of the Go stack, which ends the process. It reports whether the hook
// was set.
func InstallFinalizers(r *rt.Runtime, stop *atomic.Bool) bool {
	installed := false
	gc := rt.NewGoFunction(func(t *rt.Thread, c *rt.GoCont) (rt.Cont, error) {
		if t != r.MainThread() {
			Install(t, stop)
			installed = true
		}
		return c.Next(), nil
	}, "__gc", 1, false)
	gc.SolemnlyDeclareCompliance(rt.ComplyCpuSafe | rt.ComplyMemSafe | rt.ComplyTimeSafe | rt.ComplyIoSafe)
	meta := rt.NewTable()
	meta.Set(rt.StringValue("__gc"), rt.FunctionValue(gc))
	def := rt.RuntimeContextDef{HardLimits: rt.RuntimeResources{Cpu: 1_000_000, Millis: 1000}}
	_, _ = r.MainThread().CallContext(def, func() error {
		r.SetRawMetatable(rt.TableValue(rt.NewTable()), meta)
		return nil
	})
	return installed
}
