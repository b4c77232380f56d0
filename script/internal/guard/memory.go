package guard

import (
	"errors"
	"unsafe"

	rt "github.com/arnodel/golua/runtime"
)

// MemoryScale is how much more memory Lua data may take than golua
// counts for it. golua v0.1.1 counts a string at its length, but a table
// at 16 bytes per entry set (not the table itself, nor its growth) and a
// closure at its upvalue cells: measured over many shapes of data, a
// table of tables takes 4 to 6 times what golua counts, a chain of
// closures or of one-element tables 9 to 10 times (script's
// TestMemoryLimit measures the process's peak against the limit). A
// memory limit of M bytes is therefore given to golua as M/MemoryScale:
// whatever a call builds, its live data stays within about M.
const MemoryScale = 10

// Counted returns the golua memory limit that bounds the real memory of a
// call to about limit bytes (0 stays 0, no limit).
func Counted(limit uint64) uint64 {
	if limit == 0 {
		return 0
	}
	return max(limit/MemoryScale, 1)
}

// tableCost is what Setmetatable charges: golua does not count a table
// when it makes one, only the entries set in it, so a chain of empty
// tables linked through their metatables would cost nothing at all.
const tableCost = 2 * unsafe.Sizeof(rt.Table{})

// Setmetatable is Lua's setmetatable, as golua's base library has it,
// that also charges the memory of a table to the call, and puts the call
// hook on the thread (Ensure) if it is not on: a metamethod is how a
// sandboxed script recurses without bound on the Go stack. Install it in
// place of golua's.
var Setmetatable = func() *rt.GoFunction {
	f := rt.NewGoFunction(setmetatable, "setmetatable", 2, false)
	f.SolemnlyDeclareCompliance(rt.ComplyCpuSafe | rt.ComplyMemSafe | rt.ComplyTimeSafe | rt.ComplyIoSafe)
	return f
}()

func setmetatable(t *rt.Thread, c *rt.GoCont) (rt.Cont, error) {
	if err := c.CheckNArgs(2); err != nil {
		return nil, err
	}
	tbl, err := c.TableArg(0)
	if err != nil {
		return nil, err
	}
	if !rt.RawGet(tbl.Metatable(), rt.StringValue("__metatable")).IsNil() {
		return nil, errors.New("cannot set metatable")
	}
	if c.Arg(1).IsNil() {
		tbl.SetMetatable(nil)
	} else if meta, err := c.TableArg(1); err == nil {
		t.RequireSize(tableCost)
		Ensure(t)
		t.SetRawMetatable(c.Arg(0), meta)
	} else {
		return nil, err
	}
	return c.PushingNext1(t.Runtime, c.Arg(0)), nil
}
