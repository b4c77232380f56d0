package fennel

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	rt "github.com/arnodel/golua/runtime"
	"github.com/google/go-cmp/cmp"
)

// callAdapter compiles src as nb does for adapters and calls it on golua.
func callAdapter(t testing.TB, src string, params []string, args ...rt.Value) (string, error) {
	t.Helper()
	lua, err := Compile(src, Options{Filename: "cartridge.yml", Params: params})
	if err != nil {
		return "", err
	}
	var out bytes.Buffer
	r := newLuaState(t, &out)
	chunk, err := r.CompileAndLoadLuaChunk("adapter", []byte(lua), rt.TableValue(r.GlobalEnv()))
	if err != nil {
		t.Fatalf("compiled Lua does not load: %v\n%s", err, lua)
	}
	fn, err := rt.Call1(r.MainThread(), rt.FunctionValue(chunk))
	if err != nil {
		return "", err
	}
	v, err := rt.Call1(r.MainThread(), fn, args...)
	if err != nil {
		return "", err
	}
	s, _ := v.ToString()
	return s, nil
}

func TestCompileParams(t *testing.T) {
	str := rt.StringValue
	params := rt.NewTable()
	params.Set(str("from"), rt.IntValue(15))
	params.Set(str("to"), rt.IntValue(25))
	feedback := []string{"id", "name", "parameters", "parameters-as-json", "output"}
	tests := []struct {
		name   string
		src    string
		params []string
		args   []rt.Value
		want   string
	}{
		{"input", "(.. \"```\" content \"```\")", []string{"content"}, []rt.Value{str("hi")}, "```hi```"},
		{"feedback", "(.. name \" | \" parameters-as-json)", feedback,
			[]rt.Value{str("1"), str("tool"), rt.TableValue(params), str(`{"from":15}`), str("out")}, `tool | {"from":15}`},
		{"responding", "(.. name \" | \" parameters-as-json \"\\n\" output)", feedback,
			[]rt.Value{str("1"), str("tool"), rt.TableValue(params), str(`{}`), str("42")}, "tool | {}\n42"},
		{"view", "(fennel.view parameters)", []string{"parameters"}, []rt.Value{rt.TableValue(params)}, "{:from 15 :to 25}"},
		{"destructure", "(let [{: from : to} parameters] (.. from \"-\" to))", []string{"parameters"},
			[]rt.Value{rt.TableValue(params)}, "15-25"},
		{"multi-form", "(local x (string.upper content))\n(.. x \"!\")", []string{"content"}, []rt.Value{str("a")}, "A!"},
		{"keyword-param", "(.. end \"\")", []string{"end"}, []rt.Value{str("kw")}, "kw"},
		{"no-params", "(+ 1 2)", []string{}, nil, "3"},
		{"varargs", "(select \"#\" ...)", []string{"..."}, []rt.Value{str("a"), str("b")}, "2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := callAdapter(t, tt.src, tt.params, tt.args...)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestCompileErrors(t *testing.T) {
	tests := []struct {
		name string
		src  string
		opts Options
		want string
	}{
		{"unclosed", "(print 1", Options{Filename: "c.yml"}, "c.yml:1:9: Compile error: expected closing delimiter )"},
		{"offset-first-line", "(print 1", Options{Filename: "c.yml", Line: 12, Column: 9}, "c.yml:12:17: Compile error: expected closing delimiter )"},
		{"offset-later-line", "(print 1)\n  (\"x\")", Options{Filename: "c.yml", Line: 12, Column: 9}, "c.yml:13:4: Compile error: cannot call literal value"},
		{"mismatched", "(let [x 1) x)", Options{Filename: "c.yml"}, "c.yml:1:10: Compile error: mismatched closing delimiter ), expected ]"},
		{"bad-number", "(print 1x)", Options{}, "unknown:1:8: Compile error: could not read number \"1x\""},
		{"bad-escape", `(print "\q")`, Options{Filename: "f"}, "f:1:9: Compile error: invalid escape sequence"},
		{"odd-table", "{:a}", Options{Filename: "f"}, "f:1:4: Compile error: expected even number of values in table literal"},
		{"set-local", "(local x 1)\n(set x 2)", Options{Filename: "f"}, "f:2:6: Compile error: expected var x"},
		{"global-sandboxed", "(global x 1)", Options{Filename: "f", Sandboxed: true}, "f:1:1: Compile error: global is not allowed"},
		{"lua-sandboxed", `(lua "os.exit()")`, Options{Filename: "f", Sandboxed: true}, "f:1:1: Compile error: lua is not allowed"},
		{"set-global-sandboxed", "(set x 1)", Options{Filename: "f", Sandboxed: true}, "f:1:6: Compile error: expected local x"},
		{"import-macros", "(import-macros {: m} :mod)", Options{Filename: "f"}, "f:1:1: Compile error: import-macros: macro modules cannot be loaded from a cartridge"},
		{"require-macros", "(require-macros :mod)", Options{Filename: "f"}, "f:1:1: Compile error: require-macros: macro modules cannot be loaded from a cartridge"},
		{"eval-compiler", "(eval-compiler (print 1))", Options{Filename: "f"}, "f:1:1: Compile error: eval-compiler is not supported"},
		{"quote-symbol", "'x", Options{Filename: "f"}, "f:1:2: Compile error: symbols may only be used at compile time"},
		{"quote-list", "'(a b)", Options{Filename: "f"}, "f:1:2: Compile error: lists may only be used at compile time"},
		{"unquote", ",x", Options{Filename: "f"}, "f:1:1: Compile error: tried to use unquote outside quote"},
		{"macro-name", "(macro \"m\" [x] x)", Options{Filename: "f"}, "f:1:1: Compile error: expected symbol for macro name"},
		{"macro-raises", "(macro m [x] (error \"boom\"))\n  (m 1)", Options{Filename: "f"}, "f:2:3: Compile error: macro m failed: boom"},
		{"macro-assert", "(macro m [x] (assert-compile (= 1 2) \"want a number\" x))\n(m  s)", Options{Filename: "f"}, "f:2:5: Compile error: want a number"},
		{"macro-body-error", "(macro m [x] (let [y] x))", Options{Filename: "f"}, "f:1:19: Compile error: expected even number of name/value bindings"},
		{"macro-unhygienic", "(macro m [x] `(let [y ,x] y))\n(m 1)", Options{Filename: "f"}, "f:1:21: Compile error: macro tried to bind y without gensym"},
		{"macro-recursive", "(macro m [] `(m))\n(m)", Options{Filename: "f"}, "f:1:14: Compile error: macro expansion too deep"},
		{"macro-loops", "(macro m [] (while true nil))\n(m)", Options{Filename: "f"}, "f:2:1: Compile error: macro m failed: compile-time code stopped"},
		{"macro-no-io", "(macro m [] (io.open \"x\"))\n(m)", Options{Filename: "f"}, "f:2:1: Compile error: macro m failed:"},
		{"macro-special-name", "(macro if [] 1)", Options{Filename: "f"}, "f:1:8: Compile error: local if was overshadowed by a special form or macro"},
		{"macro-reference", "(macro m [] 1)\n(print m)", Options{Filename: "f"}, "f:2:8: Compile error: tried to reference a macro without calling it"},
		{"macro-local", "(macro m [] 1)\n(local m 2)", Options{Filename: "f"}, "f:2:8: Compile error: local m was overshadowed by a special form or macro"},
		{"macro-function-value", "(macro m [] string.format)\n(m)", Options{Filename: "f"}, "f:2:1: Compile error: could not compile value of type function"},
		{"too-deep", strings.Repeat("(", 300), Options{Filename: "f"}, "f:1:201: Compile error: too deeply nested"},
		{"tilde", "(print ~x)", Options{Filename: "f"}, "f:1:8: Compile error: invalid character: ~"},
		{"multisym", "(print a..b)", Options{Filename: "f"}, "f:1:8: Compile error: malformed multisym: a..b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Compile(tt.src, tt.opts)
			if err == nil {
				t.Fatalf("no error, want %q", tt.want)
			}
			if !strings.HasPrefix(err.Error(), tt.want) {
				t.Errorf("got  %q\nwant %q...", err, tt.want)
			}
			if _, ok := err.(*Error); !ok {
				t.Errorf("error is %T, want *Error", err)
			}
		})
	}
}

func TestMangle(t *testing.T) {
	tests := []struct{ in, local, global string }{
		{"parameters-as-json", "parameters_as_json", "__fnl_global__parameters_2das_2djson"},
		{"x?", "x_3f", "__fnl_global__x_3f"},
		{"end", "_end", "__fnl_global__end"},
		{"print", "print", "print"},
		{"a_b", "a_b", "a_b"},
		{"λ", "_ce_bb", "__fnl_global___ce_bb"},
	}
	for _, tt := range tests {
		if got := mangleLocal(tt.in); got != tt.local {
			t.Errorf("mangleLocal(%q) = %q, want %q", tt.in, got, tt.local)
		}
		if got := mangleGlobal(tt.in); got != tt.global {
			t.Errorf("mangleGlobal(%q) = %q, want %q", tt.in, got, tt.global)
		}
	}
}

func TestCache(t *testing.T) {
	dir := t.TempDir()
	opts := Options{Filename: "c.yml", Params: []string{"content"}}
	src := `(.. "<" content ">")`
	want, err := Compile(src, opts)
	if err != nil {
		t.Fatal(err)
	}

	c := NewCache(dir)
	got, err := c.Compile(src, opts)
	if err != nil || got != want {
		t.Fatalf("first compile: %q, %v", got, err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.lua"))
	if len(files) != 1 {
		t.Fatalf("want one cache file, got %v", files)
	}
	tmps, _ := filepath.Glob(filepath.Join(dir, "*.tmp"))
	if len(tmps) != 0 {
		t.Errorf("temporary files left: %v", tmps)
	}

	// A new cache reads the file: prove it by planting a different body
	// with a valid header.
	planted := "return function(content) return 'from disk' end\n"
	key := cacheKey(src, opts)
	if err := os.WriteFile(files[0], []byte(header(key, planted)+planted), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, _ := NewCache(dir).Compile(src, opts); got != planted {
		t.Errorf("disk cache not used: %q", got)
	}
	// The first cache answers from memory.
	if got, _ := c.Compile(src, opts); got != want {
		t.Errorf("memory cache not used: %q", got)
	}

	// A corrupt file is ignored and replaced.
	if err := os.WriteFile(files[0], []byte("-- garbage\nreturn 1"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := NewCache(dir).Compile(src, opts); err != nil || got != want {
		t.Errorf("corrupt file not ignored: %q, %v", got, err)
	}
	data, _ := os.ReadFile(files[0])
	if !strings.HasSuffix(string(data), want) {
		t.Errorf("corrupt file not rewritten: %q", data)
	}

	// Options are part of the key.
	other := opts
	other.Params = []string{"input"}
	if got, _ := c.Compile(src, other); got == want {
		t.Errorf("different params gave the same chunk")
	}

	// Errors come back and are not cached.
	if _, err := c.Compile("(", opts); err == nil {
		t.Errorf("no error for bad source")
	}

	// Memory only.
	m := NewCache("")
	if got, err := m.Compile(src, opts); err != nil || got != want {
		t.Errorf("memory-only cache: %q, %v", got, err)
	}
}

func TestDefaultCacheDir(t *testing.T) {
	env := func(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }
	if d, _ := DefaultCacheDir(env(map[string]string{"XDG_CACHE_HOME": "/x/cache", "HOME": "/home/u"})); d != "/x/cache/nano-bots/fennel" {
		t.Errorf("with XDG_CACHE_HOME: %q", d)
	}
	if d, _ := DefaultCacheDir(env(map[string]string{"XDG_CACHE_HOME": "relative", "HOME": "/home/u"})); d != "/home/u/.cache/nano-bots/fennel" {
		t.Errorf("with a relative XDG_CACHE_HOME: %q", d)
	}
	if d, err := DefaultCacheDir(env(nil)); err == nil {
		t.Errorf("without HOME: %q", d)
	}
}

func TestRuntimeView(t *testing.T) {
	tests := []struct{ src, want string }{
		{"(fennel.view {:b 2 :a [1 2 {:c true}]})", `{:a [1 2 {:c true}] :b 2}`},
		{`(fennel.view "a\"b")`, `"a\"b"`},
		{"(fennel.view [])", "{}"},
		{"fennel.version", LanguageVersion},
	}
	for _, tt := range tests {
		got, err := callAdapter(t, tt.src, []string{})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("%s: (-want +got)\n%s", tt.src, diff)
		}
	}
}
