package script

import (
	"errors"
	"fmt"
	"strings"

	rt "github.com/arnodel/golua/runtime"
)

// fennelCompiler is the link to script/fennel; nil until that package
// provides Compile (see fennel_link.go).
type fennelCompiler interface {
	compile(src string, file string, line int, sandboxed bool, cacheDir string) (string, error)
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
	file := src.File
	if file == "" {
		file = "fennel"
	}
	// The header sits on a line of its own, the line before the code, so
	// the compiler's line numbers are the cartridge's.
	wrapped := "(fn [" + strings.Join(names, " ") + "]\n" + src.Code + "\n)"
	line := src.Line - 1
	if line < 1 {
		line = 1
		wrapped = "(fn [" + strings.Join(names, " ") + "] " + src.Code + "\n)"
	}
	lua, err := fennelImpl.compile(wrapped, file, line, r.opts.Sandboxed, r.opts.FennelCacheDir)
	if err != nil {
		return "", &CompileError{Lang: Fennel, File: file, Line: fennelErrorLine(err.Error(), file), Message: err.Error()}
	}
	return lua, nil
}

// fennelErrorLine finds "file:LINE:" in a Fennel compiler message.
func fennelErrorLine(msg, file string) int {
	i := strings.Index(msg, file+":")
	if i < 0 {
		return 0
	}
	var line int
	if _, err := fmt.Sscanf(msg[i+len(file)+1:], "%d", &line); err != nil {
		return 0
	}
	return line
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
	env := rt.NewTable()
	g := st.rt.GlobalEnv()
	// The runtime chunk builds its table from the standard library; it
	// sees the pristine globals, never a call's environment.
	meta := rt.NewTable()
	meta.Set(rt.StringValue("__index"), rt.TableValue(g))
	env.SetMetatable(meta)
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
