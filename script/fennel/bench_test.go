package fennel

import (
	"testing"

	rt "github.com/arnodel/golua/runtime"
)

var feedbackParams = []string{"id", "name", "parameters", "parameters-as-json", "output"}

// specAdapters are the Fennel adapters and tools of the specification,
// with the parameters nb gives them.
var specAdapters = []struct {
	name   string
	src    string
	params []string
}{
	{"input-output", "(.. \"```\" content \"```\")", []string{"content"}},
	{"confirming", "(.. name \" | \" parameters-as-json)", feedbackParams},
	{"responding", "(.. name \" | \" parameters-as-json \"\\n\" output)", feedbackParams},
	{"with-id", "(.. id \" | \" name \" | \" parameters-as-json \"\\n\" output)", feedbackParams},
	{"view", "(fennel.view parameters)", feedbackParams},
	{"tool-random", "(math.random 1 100)", []string{"parameters"}},
	{"tool-random-range", "(let [{ : from : to } parameters]\n  (math.random from to))", []string{"parameters"}},
	{"tool-date", "(os.date)", []string{"parameters"}},
}

// BenchmarkCompileSpecAdapters: goal at most 100 µs per adapter.
func BenchmarkCompileSpecAdapters(b *testing.B) {
	for _, a := range specAdapters {
		b.Run(a.name, func(b *testing.B) {
			opts := Options{Filename: "cartridge.yml", Params: a.params, Sandboxed: true}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Compile(a.src, opts); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// The same adapter in both languages, as in the specification.
const (
	fennelAdapter = "(.. name \" | \" parameters-as-json \"\\n\" output)"
	luaAdapter    = "return function(id, name, parameters, parameters_as_json, output)\n" +
		"  return name .. \" | \" .. parameters_as_json .. \"\\n\" .. output\nend\n"
)

func adapterArgs() []rt.Value {
	return []rt.Value{rt.StringValue("call-1"), rt.StringValue("random-number"), rt.TableValue(rt.NewTable()),
		rt.StringValue(`{"from":15,"to":25}`), rt.StringValue("21")}
}

// BenchmarkAdapterInvocation measures what nb pays per adapter run on one
// golua state: get the Lua chunk (from the cache for Fennel), load it, and
// call the adapter. Goal: Fennel at most 1.5 times Lua.
func BenchmarkAdapterInvocation(b *testing.B) {
	cache := NewCache("")
	opts := Options{Filename: "cartridge.yml", Params: feedbackParams, Sandboxed: true}
	run := func(b *testing.B, source func() string) {
		r := newLuaState(b, nil)
		env := rt.TableValue(r.GlobalEnv())
		args := adapterArgs()
		b.ReportAllocs()
		for b.Loop() {
			chunk, err := r.CompileAndLoadLuaChunk("adapter", []byte(source()), env)
			if err != nil {
				b.Fatal(err)
			}
			fn, err := rt.Call1(r.MainThread(), rt.FunctionValue(chunk))
			if err != nil {
				b.Fatal(err)
			}
			if _, err := rt.Call1(r.MainThread(), fn, args...); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("lua", func(b *testing.B) { run(b, func() string { return luaAdapter }) })
	b.Run("fennel-cached", func(b *testing.B) {
		run(b, func() string {
			lua, err := cache.Compile(fennelAdapter, opts)
			if err != nil {
				b.Fatal(err)
			}
			return lua
		})
	})
}

// BenchmarkAdapterCall measures calling an already loaded adapter.
func BenchmarkAdapterCall(b *testing.B) {
	load := func(b *testing.B, lua string) (*rt.Runtime, rt.Value) {
		r := newLuaState(b, nil)
		chunk, err := r.CompileAndLoadLuaChunk("adapter", []byte(lua), rt.TableValue(r.GlobalEnv()))
		if err != nil {
			b.Fatal(err)
		}
		fn, err := rt.Call1(r.MainThread(), rt.FunctionValue(chunk))
		if err != nil {
			b.Fatal(err)
		}
		return r, fn
	}
	fnl, err := NewCache("").Compile(fennelAdapter, Options{Params: feedbackParams})
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct{ name, lua string }{{"lua", luaAdapter}, {"fennel", fnl}} {
		b.Run(c.name, func(b *testing.B) {
			r, fn := load(b, c.lua)
			args := adapterArgs()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := rt.Call1(r.MainThread(), fn, args...); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
