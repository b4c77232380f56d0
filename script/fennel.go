package script

import (
	"errors"
	"fmt"
	"sync"

	rt "github.com/arnodel/golua/runtime"

	"github.com/nbots/nb/script/fennel"
)

var (
	cachesMu sync.Mutex
	caches   = map[string]*fennel.Cache{}
)

// fennelCache returns the process-wide cache for dir ("" is memory only),
// so every Runtime of a process shares compiled chunks.
func fennelCache(dir string) *fennel.Cache {
	cachesMu.Lock()
	defer cachesMu.Unlock()
	c, ok := caches[dir]
	if !ok {
		c = fennel.NewCache(dir)
		caches[dir] = c
	}
	return c
}

// compileFennel compiles `(fn [names] <code>)` to a Lua chunk returning
// the function, through the memory and disk cache. Errors are
// *CompileError naming the cartridge line.
func (r *Runtime) compileFennel(src Source, names []string) (string, error) {
	file := src.File
	if file == "" {
		file = "fennel"
	}
	params := names
	if params == nil {
		params = []string{}
	}
	lua, err := fennelCache(r.opts.FennelCacheDir).Compile(src.Code, fennel.Options{
		Filename: file, Line: max(src.Line, 1), Column: 1, Sandboxed: r.opts.Sandboxed, Params: params,
	})
	if err != nil {
		ce := &CompileError{Lang: Fennel, File: file, Message: err.Error()}
		var fe *fennel.Error
		if errors.As(err, &fe) {
			ce.Line, ce.Message = fe.Line, fe.Msg
		}
		return "", ce
	}
	return lua, nil
}

// loadFennel runs the Fennel runtime chunk once per state and keeps the
// `fennel` table it returns; every Fennel call gets a copy.
func (st *state) loadFennel(r *Runtime) error {
	if st.fennel != nil {
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
	clos, err := st.rt.CompileAndLoadLuaChunk("fennel-runtime", []byte(fennel.RuntimeLua()), rt.TableValue(env))
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
