package fennel

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	rt "github.com/arnodel/golua/runtime"

	"github.com/nbots/nb/script/internal/guard"
)

// fuzzSeeds adds every differential program as a seed.
func fuzzSeeds(f *testing.F) {
	files, _ := filepath.Glob("testdata/programs/*.fnl")
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		for _, part := range strings.Split(string(data), "\n;;;; ") {
			f.Add(part)
		}
	}
	for _, s := range []string{"", "(", ")", "#", "#(", "\"\\", ":", "a:b.c", "[& x]", "{:a}", "(fn [...] ...)", "'x", "`(,x)",
		"(macro m [x] `(let [y# ,x] (+ y# y#)))\n(m 2)", "(macros {:m (fn [& xs] `[,(unpack xs)])})\n(m 1 2)",
		"(macro m [x] (list (sym :print) x (gensym)))\n(m 1)", "(macro m [] (macroexpand `(m)))\n(m)",
		"(macro m [x] (assert-compile (sym? x) \"want a symbol\" x) x)\n(m 1)", "'[1 ,x {:a 2}]",
		// Inputs that once threatened the process: deep nesting for the
		// reader and the compiler, macros that recurse, a metamethod
		// that recurses at compile time.
		strings.Repeat("(", 10000) + strings.Repeat(")", 10000), strings.Repeat("[", 10000),
		strings.Repeat("{:a ", 5000), strings.Repeat("'", 10000) + "x", strings.Repeat("#(", 300),
		strings.Repeat("(+ 1 ", 199) + "1" + strings.Repeat(")", 199),
		strings.Repeat("(fn [] ", 199) + "1" + strings.Repeat(")", 199),
		strings.Repeat("(let [x ", 100) + "1" + strings.Repeat("] x)", 100),
		"(macro m [x] `(m ,x)) (m 1)",
		"(macro deep [n] (var f 1) (for [i 1 n] (set f (list (sym :+) 1 f))) f) (deep 190)",
		"(macro deep [n] (var f 1) (for [i 1 n] (set f (list (sym :deep) 1 f))) f) (deep 190)",
		"(macro m [] (let [mt {} t (setmetatable {} mt)] (set mt.__len (fn [s] (length s))) (length t))) (m)",
		"(macro m [] (let [mt {} t (setmetatable {} mt)] (set mt.__index (fn [s k] (. s k))) (. t :x))) (m)",
		"(local m {}) (local t (setmetatable {} m)) (set m.__len (fn [s] (length s))) (length t)",
		"(macro big [] (let [t []] (for [i 1 70000] (table.insert t i)) t)) (big)",
	} {
		f.Add(s)
	}
}

// FuzzRead checks that the reader never panics.
func FuzzRead(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, src string) {
		readForFuzz(src)
	})
}

func readForFuzz(src string) (forms []*node, err error) {
	defer func() {
		if r := recover(); r != nil {
			e, ok := r.(*Error)
			if !ok {
				panic(r)
			}
			err = e
		}
	}()
	return newReader(src, Options{Filename: "fuzz.fnl"}).readAll(), nil
}

// FuzzCompile checks that compiling never panics and that whatever
// compiles is Lua that golua's parser accepts.
func FuzzCompile(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, src string) {
		lua, err := Compile(src, Options{Filename: "fuzz.fnl"})
		if err != nil {
			if !strings.HasPrefix(err.Error(), "fuzz.fnl:") {
				t.Fatalf("error without position: %v", err)
			}
			return
		}
		if _, err := parseLua(lua); err != nil {
			t.Fatalf("compiled Lua does not parse: %v\n--- fennel\n%s\n--- lua\n%s", err, src, lua)
		}
	})
}

var (
	luaCheckMu sync.Mutex
	luaCheck   = rt.New(io.Discard)
)

// parseLua compiles Lua source with golua's compiler, which also rejects
// what Lua rejects beyond syntax (such as ... outside a vararg function).
// Lua nested past guard.MaxGeneratedDepth is refused first, as nb does.
func parseLua(src string) (*rt.Closure, error) {
	if err := guard.CheckNesting([]byte(src), guard.MaxGeneratedDepth); err != nil {
		return nil, nil
	}
	luaCheckMu.Lock()
	defer luaCheckMu.Unlock()
	return luaCheck.CompileAndLoadLuaChunk("fuzz.lua", []byte(src), rt.NilValue)
}
