package script

import (
	"errors"
	"fmt"

	rt "github.com/arnodel/golua/runtime"
)

// fennelCompiler is the link to script/fennel; nil until that package
// provides Compile (see fennel_link.go).
type fennelCompiler interface {
	// compile returns a Lua chunk that returns the function
	// (fn [names] <src.Code>); errors are *CompileError naming the
	// cartridge line.
	compile(src Source, names []string, sandboxed bool, cacheDir string) (string, error)
	// runtimeLua is a Lua chunk returning the `fennel` table.
	runtimeLua() string
}

var fennelImpl fennelCompiler

// errNoFennel is returned for Fennel sources while the compiler is absent.
var errNoFennel = errors.New("Fennel support is not available yet: write this function in Lua")

// compileFennel compiles `(fn [names] <code>)` to a Lua chunk returning
// the function.
func (r *Runtime) compileFennel(src Source, names []string) (string, error) {
	if fennelImpl == nil {
		return "", errNoFennel
	}
	return fennelImpl.compile(src, names, r.opts.Sandboxed, r.opts.FennelCacheDir)
}

// loadFennel runs the Fennel runtime chunk once per state and keeps the
// `fennel` table it returns; every Fennel call gets a copy.
func (st *state) loadFennel(r *Runtime) error {
	if st.fennel != nil {
		return nil
	}
	if fennelImpl == nil {
		return errNoFennel
	}
	src := fennelImpl.runtimeLua()
	if src == "" {
		st.fennel = []entry{}
		return nil
	}
	// The runtime chunk sees the safe globals only (all of them
	// unsandboxed), never a call's environment.
	env := rt.NewTable()
	if st.sandboxed {
		for name, f := range st.base {
			env.Set(rt.StringValue(name), f)
		}
		for name, entries := range st.libs {
			env.Set(rt.StringValue(name), rt.TableValue(fill(rt.NewTable(), entries)))
		}
	} else {
		meta := rt.NewTable()
		meta.Set(rt.StringValue("__index"), rt.TableValue(st.rt.GlobalEnv()))
		env.SetMetatable(meta)
	}
	clos, err := st.rt.CompileAndLoadLuaChunk("fennel-runtime", []byte(src), rt.TableValue(env))
	if err != nil {
		return fmt.Errorf("load the Fennel runtime: %w", err)
	}
	v, err := rt.Call1(st.rt.MainThread(), rt.FunctionValue(clos))
	if err != nil {
		return fmt.Errorf("load the Fennel runtime: %s", errorText(err))
	}
	t, ok := v.TryTable()
	if !ok {
		return errors.New("load the Fennel runtime: it did not return a table")
	}
	st.fennel = tableEntries(t, nil)
	return nil
}
