package guard

import (
	"fmt"

	"github.com/arnodel/golua/lib/stringlib"
	rt "github.com/arnodel/golua/runtime"
)

// ReplaceFormat swaps string.format of r for one that turns a panic of
// golua's formatter into a script error. golua v0.1.1 indexes past the
// arguments for "%p" without a value (string.format("%p") panics with
// "index out of range"); on the main thread the caller recovers that, but
// in a coroutine, which golua runs on a goroutine of its own, the panic
// ends the process. It does nothing when r has no string library.
func ReplaceFormat(r *rt.Runtime) {
	str, ok := r.GlobalEnv().Get(rt.StringValue("string")).TryTable()
	if !ok {
		return
	}
	format := rt.NewGoFunction(safeFormat, "format", 1, true)
	format.SolemnlyDeclareCompliance(rt.ComplyCpuSafe | rt.ComplyMemSafe | rt.ComplyTimeSafe | rt.ComplyIoSafe)
	str.Set(rt.StringValue("format"), rt.FunctionValue(format))
}

func safeFormat(t *rt.Thread, c *rt.GoCont) (next rt.Cont, err error) {
	if err := c.Check1Arg(); err != nil {
		return nil, err
	}
	f, err := c.StringArg(0)
	if err != nil {
		return nil, err
	}
	var s string
	func() {
		defer func() {
			if r := recover(); r != nil {
				if _, quota := r.(rt.ContextTerminationError); quota {
					panic(r)
				}
				err = fmt.Errorf("bad argument to 'format' (%v)", r)
			}
		}()
		s, err = stringlib.Format(t, f, c.Etc())
	}()
	if err != nil {
		return nil, err
	}
	t.RequireBytes(len(s))
	return c.PushingNext1(t.Runtime, rt.StringValue(s)), nil
}
