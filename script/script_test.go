package script

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func call(t *testing.T, r *Runtime, code string, params ...Param) (any, error) {
	t.Helper()
	return r.Call(context.Background(), Source{Lang: Lua, Code: code, File: "bot.yml", Line: 10}, params...)
}

func TestLuaToGo(t *testing.T) {
	r := New(Options{Sandboxed: true})
	tests := []struct {
		code string
		want any
	}{
		{`return nil`, nil},
		{``, nil},
		{`return true`, true},
		{`return 42`, int64(42)},
		{`return 10/2`, float64(5)},
		{`return 7//2`, int64(3)},
		{`return 7.0//2`, float64(3)},
		{`return 2^2`, float64(4)},
		{`return math.type(1) .. " " .. math.type(1.0)`, "integer float"},
		{`return utf8.len("héllo")`, int64(5)},
		{`local i = 0 ::top:: i = i + 1 if i < 3 then goto top end return i`, int64(3)},
		{`return 1, 2`, int64(1)},
		{`return "a]]b" .. [[c]] .. [==[]]]==]`, "a]]bc]]"},
		{`return {1, 2, "x"}`, []any{int64(1), int64(2), "x"}},
		{`return {}`, map[string]any{}},
		{`return {a = 1, b = {c = 1.5}}`, map[string]any{"a": int64(1), "b": map[string]any{"c": 1.5}}},
		{`return {[1] = "a", [3] = "c"}`, map[string]any{"1": "a", "3": "c"}},
		{`return {1, 2, x = 3}`, map[string]any{"1": int64(1), "2": int64(2), "x": int64(3)}},
		{`return {[true] = 1, [2.5] = 2}`, map[string]any{"true": int64(1), "2.5": int64(2)}},
		{`return print`, nil},
		{`return string.upper`, "function"},
	}
	for _, tt := range tests {
		t.Run(tt.code, func(t *testing.T) {
			got, err := call(t, r, tt.code)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
		})
	}
}

// TestResultEncodesAsJSON: whatever a script returns converts to values
// encoding/json can encode; NaN and the infinities become "nan", "inf"
// and "-inf", inside tables too.
func TestResultEncodesAsJSON(t *testing.T) {
	r := New(Options{Sandboxed: true})
	tests := []struct {
		code   string
		params []Param
		want   any
	}{
		{`return parameters.a / parameters.b`, []Param{{"parameters", map[string]any{"a": 1.0, "b": 0.0}}}, "inf"},
		{`return -1 / 0`, nil, "-inf"},
		{`return 0 / 0`, nil, "nan"},
		{`return -(0 / 0)`, nil, "nan"},
		{`return math.huge`, nil, "inf"},
		{`return {1 / 0, {x = 0 / 0}, [1 / 0 > 0 and 3 or 4] = -math.huge}`, nil, []any{"inf", map[string]any{"x": "nan"}, "-inf"}},
		{`return {[math.huge] = 1, [-math.huge] = 2}`, nil, map[string]any{"inf": int64(1), "-inf": int64(2)}},
		{`return 1.5`, nil, 1.5},
		{`return {string.upper, "\xff"}`, nil, []any{"function", "\xff"}},
	}
	for _, tt := range tests {
		t.Run(tt.code, func(t *testing.T) {
			got, err := call(t, r, tt.code, tt.params...)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
			if _, err := json.Marshal(got); err != nil {
				t.Errorf("the result does not encode as JSON: %v", err)
			}
		})
	}
}

func TestCycleIsAnError(t *testing.T) {
	r := New(Options{Sandboxed: true})
	_, err := call(t, r, `local t = {} t.self = t return t`)
	if err == nil || !strings.Contains(err.Error(), "contains itself") {
		t.Fatalf("err = %v", err)
	}
	// A table reached twice without a cycle is fine.
	got, err := call(t, r, `local s = {1} return {s, s}`)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]any{[]any{int64(1)}, []any{int64(1)}}, got); diff != "" {
		t.Error(diff)
	}
}

// A result that shares tables is copied once per path when converted to
// Go: a few shared tables stand for billions of values, which the
// conversion must refuse instead of filling the memory outside the limits.
func TestSharedTableBomb(t *testing.T) {
	r := New(Options{Sandboxed: true, Limits: small})
	done := make(chan error, 1)
	go func() {
		_, err := call(t, r, `local t = {"x"} for i = 1, 60 do t = {t, t} end return t`)
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "too large") {
			t.Fatalf("err = %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the conversion of the result did not stop")
	}
	// Repeating one big string is a bomb too.
	_, err := call(t, r, `local s = string.rep("x", 1e5) local t = {} for i = 1, 1000 do t[i] = s end return t`)
	if err == nil || !strings.Contains(err.Error(), "too large") {
		t.Fatalf("repeated string: err = %v", err)
	}
	// Sharing within the limits is fine.
	got, err := call(t, r, `local t = {1} for i = 1, 10 do t = {t, t} end return t`)
	if l, ok := got.([]any); err != nil || !ok || len(l) != 2 {
		t.Fatalf("got %v, %v", got, err)
	}
}

func TestGoToLua(t *testing.T) {
	r := New(Options{Sandboxed: true})
	var decoded, numbers any
	const text = `{"i": 5, "f": 5.0, "x": 1.5, "big": 12345678901234567, "s": "t", "a": [1, "two", null, true], "o": {"k": "v"}}`
	if err := json.Unmarshal([]byte(text), &decoded); err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(strings.NewReader(text))
	dec.UseNumber()
	if err := dec.Decode(&numbers); err != nil {
		t.Fatal(err)
	}
	const probe = `local p = parameters
		return table.concat({math.type(p.i), math.type(p.f), math.type(p.x), math.type(p.big),
			type(p.s), p.a[1], type(p.a[2]), tostring(p.a[3]), tostring(p.a[4]), p.o.k}, " ")`
	tests := []struct {
		name  string
		value any
		want  string
	}{
		// encoding/json's float64: integral values become integers.
		{"float64", decoded, "integer integer float float string 1 string nil true v"},
		// json.Number keeps 5.0 a float and big integers exact.
		{"json.Number", numbers, "integer float float integer string 1 string nil true v"},
		{"Go types", map[string]any{
			"i": 5, "f": float32(5.5), "x": 1.5, "big": int64(1) << 60, "s": "t",
			"a": []string{"1", "two", "3", "4"}, "o": map[string]string{"k": "v"},
		}, "integer float float integer string 1 string 3 4 v"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := call(t, r, probe, Param{"parameters", tt.value})
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
	got, err := call(t, r, `return n + 1, n`, Param{"n", json.Number("12345678901234567")})
	if err != nil || got != int64(12345678901234568) {
		t.Errorf("json.Number integer: %v, %v", got, err)
	}
}

func TestNamesInScope(t *testing.T) {
	r := New(Options{Sandboxed: true})
	feedback := []Param{
		{"id", "call_1"}, {"name", "random-number"},
		{"parameters", map[string]any{"from": float64(1)}},
		{"parameters-as-json", `{"from":1}`}, {"output", nil},
	}
	tests := []struct {
		name   string
		code   string
		params []Param
		want   any
	}{
		{"adapter", "return \"```\" .. content .. \"```\"", []Param{{"content", "hi"}}, "```hi```"},
		{"tool", `return math.random(parameters['from'], parameters['to'])`,
			[]Param{{"parameters", map[string]any{"from": 4.0, "to": 4.0}}}, int64(4)},
		{"tool without parameters sees nil", `return parameters`, nil, nil},
		{"feedback", `return id .. " | " .. name .. " | " .. parameters_as_json .. " " .. tostring(output) .. " " .. parameters.from`,
			feedback, `call_1 | random-number | {"from":1} nil 1`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := call(t, r, tt.code, tt.params...)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("got %#v, want %#v", got, tt.want)
			}
		})
	}
}

func TestFreshGlobalsEveryCall(t *testing.T) {
	for _, sandboxed := range []bool{true, false} {
		r := New(Options{Sandboxed: sandboxed})
		for i := 0; i < 3; i++ {
			got, err := call(t, r, `local seen = tostring(leaked) .. " " .. tostring(string.evil)
				leaked = "x"; string.evil = true
				return seen`)
			if err != nil {
				t.Fatal(err)
			}
			want := "nil nil"
			if !sandboxed {
				// Globals are per call; the libraries are the process's own.
				want = "nil true"
				if i == 0 {
					want = "nil nil"
				}
			}
			if got != want {
				t.Errorf("sandboxed=%v call %d: got %v, want %v", sandboxed, i, got, want)
			}
		}
	}
}

func TestCompileError(t *testing.T) {
	r := New(Options{Sandboxed: true})
	tests := []struct {
		code string
		line int
		msg  string
	}{
		{"return 1 +", 10, "bot.yml:10: Lua compile error:"},
		{"local x = 1\nlocal y = = 2\nreturn x", 11, "bot.yml:11: Lua compile error:"},
		{"local x = 1\n\nif x then\nreturn x", 13, "expected 'end'"},
		{"goto nowhere", 10, "bot.yml:10"},
	}
	for _, tt := range tests {
		t.Run(tt.code, func(t *testing.T) {
			_, err := call(t, r, tt.code)
			var ce *CompileError
			if !errors.As(err, &ce) {
				t.Fatalf("err = %#v, want a *CompileError", err)
			}
			if ce.Line != tt.line || ce.File != "bot.yml" || !strings.Contains(ce.Error(), tt.msg) {
				t.Errorf("got %q (line %d), want line %d and %q", ce.Error(), ce.Line, tt.line, tt.msg)
			}
			// The error is cached with the unit and stays the same.
			_, err2 := call(t, r, tt.code)
			if err2 == nil || err2.Error() != err.Error() {
				t.Errorf("second call: %v", err2)
			}
		})
	}
}

func TestRuntimeError(t *testing.T) {
	r := New(Options{Sandboxed: true})
	tests := []struct {
		code, want string
	}{
		{`error("boom")`, "bot.yml:10: boom"},
		{"local x = 1\nerror('on line 11')", "bot.yml:11: on line 11"},
		{`error("no position", 0)`, "no position"},
		{`error({message = "in a table"})`, "in a table"},
		{`error({})`, "(error object is a table value)"},
		{`return nothing.field`, "bot.yml:10: attempt to index a nil value"},
		{`return os.execute("id")`, "bot.yml:10: attempt to index a nil value"},
	}
	for _, tt := range tests {
		t.Run(tt.code, func(t *testing.T) {
			_, err := call(t, r, tt.code)
			var re *RuntimeError
			if !errors.As(err, &re) {
				t.Fatalf("err = %#v, want a *RuntimeError", err)
			}
			if !strings.HasPrefix(re.Error(), tt.want) {
				t.Errorf("got %q, want prefix %q", re.Error(), tt.want)
			}
			for _, goName := range []string{"*runtime.", "golua", "goroutine", ".go:"} {
				if strings.Contains(re.Error(), goName) {
					t.Errorf("message %q shows Go internals", re.Error())
				}
			}
		})
	}
}

// TestSandboxEscapes tries the ways out of the sandbox a cartridge could
// attempt; each must fail with a Lua error or return nothing useful.
func TestSandboxEscapes(t *testing.T) {
	r := New(Options{Sandboxed: true})
	tests := []struct {
		name string
		code string
	}{
		{"os.execute", `return os.execute("touch /tmp/nb-escape")`},
		{"io.open", `return io.open("/etc/passwd"):read("a")`},
		{"require", `return require("os").execute("id")`},
		{"load with an env", `return load("return os", "x", "t", {os = 1})()`},
		{"load text", `return load("return 1")()`},
		{"loadstring", `return loadstring("return 1")()`},
		{"dofile", `return dofile("/etc/passwd")`},
		{"loadfile", `return loadfile("/etc/passwd")`},
		{"package.loaded", `return package.loaded.os.execute("id")`},
		{"debug", `return debug.getregistry()`},
		{"collectgarbage", `return collectgarbage("count")`},
		{"print", `print("hi") return 1`},
		{"string.dump", `return string.dump(function() end)`},
		{"string metatable", `return getmetatable("").__index.dump(function() end)`},
		{"string method", `return ("x"):dump()`},
		{"_G walk", `for k, v in pairs(_G) do if type(v) == "table" and v.execute then return v.execute("id") end end error("none")`},
		{"_ENV", `return _ENV.os.execute("id")`},
		{"coroutine running main", `local co = coroutine.running() return debug.getinfo(co)`},
		{"coroutine environment", `local co = coroutine.wrap(function() return os.execute("id") end) return co()`},
		{"metatable of _G", `return getmetatable(_G).__index.os.execute("id")`},
		{"golib", `return golib.import("os")`},
		{"runtime lib", `return runtime.callcontext({}, function() end)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := call(t, r, tt.code)
			var re *RuntimeError
			if !errors.As(err, &re) {
				t.Fatalf("got %#v, %v; want a *RuntimeError", got, err)
			}
		})
	}
	// What the sandbox offers, and only that.
	got, err := call(t, r, `local names = {}
		for _, k in ipairs({"_G", "_VERSION", "assert", "coroutine", "error", "getmetatable",
			"ipairs", "math", "next", "pairs", "pcall", "rawequal", "rawget", "rawlen", "rawset",
			"select", "setmetatable", "string", "table", "tonumber", "tostring", "type", "unpack",
			"utf8", "xpcall", "os", "io", "require", "load", "loadstring", "dofile", "loadfile",
			"package", "debug", "collectgarbage", "print", "warn", "golib", "runtime", "fennel"}) do
			if _G[k] ~= nil then names[#names + 1] = k end
		end
		return table.concat(names, " ")`)
	if err != nil {
		t.Fatal(err)
	}
	want := "_G _VERSION assert error getmetatable ipairs math next pairs pcall rawequal rawget rawlen rawset select setmetatable string table tonumber tostring type unpack utf8 xpcall"
	if got != want {
		t.Errorf("globals:\n got %s\nwant %s", got, want)
	}
	got, err = call(t, r, `return ("%d-%s"):format(3, ("x"):upper()) .. tostring(getmetatable("")) .. tostring(getmetatable(_G))`)
	if err != nil || got != "3-Xfalsefalse" {
		t.Errorf("string methods: %v, %v", got, err)
	}
}

func TestUnsandboxedHasTheStandardLibrary(t *testing.T) {
	r := New(Options{Sandboxed: false})
	got, err := call(t, r, `return type(os.time()) .. " " .. type(io.open) .. " " .. type(require) .. " " .. type(load) .. " " .. type(debug)`)
	if err != nil {
		t.Fatal(err)
	}
	if got != "number function function function table" {
		t.Errorf("got %v", got)
	}
	got, err = call(t, r, `return load("return 1 + 1")()`)
	if err != nil || got != int64(2) {
		t.Errorf("load: %v, %v", got, err)
	}
	got, err = call(t, r, `return os.date("%Y") ~= nil`)
	if err != nil || got != true {
		t.Errorf("os.date: %v, %v", got, err)
	}
	got, err = call(t, r, `local f = io.open("testdata/hello.txt") local s = f:read("a") f:close() return s`)
	if err != nil || got != "hello\n" {
		t.Errorf("io.open: %v, %v", got, err)
	}
	got, err = call(t, r, `return type(require("string").upper) .. " " .. type(collectgarbage("count"))`)
	if err != nil || got != "function number" {
		t.Errorf("require, collectgarbage: %v, %v", got, err)
	}
	_, err = call(t, r, `os.exit(1)`)
	if err == nil || !strings.Contains(err.Error(), "os.exit is not allowed") {
		t.Errorf("os.exit: %v", err)
	}
	_, err = call(t, New(Options{Sandboxed: false, Limits: small}), `while true do end`)
	var le *LimitError
	if !errors.As(err, &le) || le.Kind != LimitCPU {
		t.Errorf("unsandboxed runaway loop: %v", err)
	}
}

// small limits keep the limit tests fast, under -race too.
var small = Limits{CPU: 5_000_000, Memory: 8 << 20, Timeout: 5 * time.Second}

func TestLimits(t *testing.T) {
	tests := []struct {
		name   string
		code   string
		limits Limits
		kind   LimitKind
		within time.Duration
	}{
		{"infinite loop", `while true do end`, small, LimitCPU, 3 * time.Second},
		{"loop catching its own kill", `while true do pcall(function() while true do end end) end`, small, LimitCPU, 3 * time.Second},
		{"string.rep bomb", `return string.rep("x", 1e9)`, small, LimitMemory, time.Second},
		{"string doubling", `local s = "x" while true do s = s .. s end`, small, LimitMemory, time.Second},
		{"table bomb", `local t = {} for i = 1, 1e9 do t[i] = {i} end`, small, LimitMemory, 5 * time.Second},
		{"deep recursion", `local function f(n) return 1 + f(n + 1) end return f(1)`, small, LimitMemory, 5 * time.Second},
		{"timeout", `while true do end`, Limits{CPU: 1 << 62, Memory: 8 << 20, Timeout: 200 * time.Millisecond}, LimitTimeout, 2 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := New(Options{Sandboxed: true, Limits: tt.limits})
			start := time.Now()
			_, err := call(t, r, tt.code)
			took := time.Since(start)
			var le *LimitError
			if !errors.As(err, &le) {
				t.Fatalf("err = %v, want a *LimitError", err)
			}
			if le.Kind != tt.kind {
				t.Errorf("kind %s, want %s (%v)", le.Kind, tt.kind, err)
			}
			within := tt.within
			if raceEnabled {
				within *= 10 // the race detector slows golua ~10x
			}
			if took > within {
				t.Errorf("took %v, want at most %v", took, within)
			}
			if !strings.HasPrefix(err.Error(), "Lua script stopped: ") {
				t.Errorf("message %q", err)
			}
			// The runtime goes on.
			got, err := call(t, r, `return content .. "!"`, Param{"content", "still here"})
			if err != nil || got != "still here!" {
				t.Errorf("after the limit: %v, %v", got, err)
			}
		})
	}
}

func TestCancel(t *testing.T) {
	r := New(Options{Sandboxed: true, Limits: Limits{CPU: 1 << 62, Timeout: time.Minute}})
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	start := time.Now()
	_, err := r.Call(ctx, Source{Lang: Lua, Code: `while true do end`})
	var le *LimitError
	if !errors.As(err, &le) || le.Kind != LimitCanceled {
		t.Fatalf("err = %v", err)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("cancel took %v", took)
	}
	ctx, cancel2 := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel2()
	_, err = r.Call(ctx, Source{Lang: Lua, Code: `while true do end`})
	if !errors.As(err, &le) || le.Kind != LimitTimeout {
		t.Fatalf("deadline: err = %v", err)
	}
	if !strings.Contains(err.Error(), "timed out after") {
		t.Errorf("message %q", err)
	}
}

// Coroutines exist only unsandboxed; golua v0.1.1 races when a
// coroutine ends (see safeLibs), so these tests do not run under -race.
func TestCoroutines(t *testing.T) {
	if raceEnabled {
		t.Skip("golua's coroutines race (Thread.end)")
	}
	r := New(Options{Sandboxed: false, Limits: small})
	got, err := call(t, r, `local co = coroutine.wrap(function(a) local b = coroutine.yield(a + 1) return b * 2 end)
		return co(1) + co(10)`)
	if err != nil || got != int64(22) {
		t.Errorf("coroutines: %v, %v", got, err)
	}
	for _, code := range []string{
		`local co = coroutine.wrap(function() local s = "x" while true do s = s .. s end end) co()`,
		`local co = coroutine.wrap(function() while true do end end) co()`,
	} {
		_, err := call(t, r, code)
		var le *LimitError
		if !errors.As(err, &le) {
			t.Errorf("%s: %v, want a limit error", code, err)
		}
	}

	before := runtime.NumGoroutine()
	for i := 0; i < 5; i++ {
		_, err := call(t, r, `for i = 1, 200 do
				local co = coroutine.create(function() coroutine.yield(1) end)
				if i % 2 == 0 then coroutine.resume(co) end
			end
			return 1`)
		if err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(2 * time.Second)
	for runtime.NumGoroutine() > before+5 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before+5 {
		t.Errorf("%d goroutines before, %d after: suspended coroutines leak", before, n)
	}
}

func TestConcurrentCalls(t *testing.T) {
	r := New(Options{Sandboxed: true})
	var wg sync.WaitGroup
	errs := make(chan error, 40)
	for i := 0; i < 40; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			code := `g = (g or 0) + parameters.n; local s = 0 for j = 1, 1000 do s = s + j end return g + s`
			if i%7 == 0 {
				code = `while true do end`
			}
			got, err := r.Call(context.Background(), Source{Lang: Lua, Code: code},
				Param{"parameters", map[string]any{"n": i}})
			if i%7 == 0 {
				if err == nil {
					errs <- fmt.Errorf("call %d: no limit error", i)
				}
				return
			}
			if err != nil || got != int64(i+500500) {
				errs <- fmt.Errorf("call %d: %v, %v", i, got, err)
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestBadInput(t *testing.T) {
	r := New(Options{Sandboxed: true})
	if _, err := r.Call(context.Background(), Source{Lang: "python", Code: "1"}); err == nil {
		t.Error("unknown language accepted")
	}
	if _, err := call(t, r, `return 1`, Param{"not a name", 1}); err == nil {
		t.Error("bad parameter name accepted")
	}
	if _, err := call(t, r, `return 1`, Param{"end", 1}); err == nil {
		t.Error("keyword parameter name accepted")
	}
	deep := any("x")
	for i := 0; i < 500; i++ {
		deep = []any{deep}
	}
	if _, err := call(t, r, `return 1`, Param{"p", deep}); err == nil {
		t.Error("absurdly deep parameters accepted")
	}
	// Code that closes the wrapper function early still runs sandboxed.
	if _, err := call(t, r, "return 1 end os.execute('id') local function f()"); err == nil {
		t.Error("wrapper escape compiled and ran")
	}
}

// TestOSExecuteUnsandboxed: golua has no os.execute; nb provides Lua 5.4's
// for unsandboxed functions, and the sandbox still has no os at all.
func TestOSExecuteUnsandboxed(t *testing.T) {
	r := New(Options{Sandboxed: false})
	for code, want := range map[string]any{
		`return os.execute()`: true,
		`local ok, how, n = os.execute("exit 3"); return {tostring(ok), how, n}`: []any{"nil", "exit", int64(3)},
		`local ok, how, n = os.execute("true"); return {ok, how, n}`:             []any{true, "exit", int64(0)},
	} {
		got, err := r.Call(context.Background(), Source{Lang: Lua, Code: code})
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %#v, %v; want %#v", code, got, err, want)
		}
	}
	sandboxed := New(Options{Sandboxed: true})
	if _, err := sandboxed.Call(context.Background(), Source{Lang: Lua, Code: `return os.execute("true")`}); err == nil {
		t.Error("os.execute ran sandboxed")
	}
}

// TestPopenWithoutSecrets: unsandboxed io.popen reads a command's output,
// and the child sees only the allow-listed variables of Options.Environ.
func TestPopenWithoutSecrets(t *testing.T) {
	environ := []string{"NB_TEST_API_KEY=sk-secret", "NB_TEST_PLAIN=not passed", "HOME=/home/x", "PATH=/usr/bin:/bin"}
	r := New(Options{Sandboxed: false, Environ: environ})
	for code, want := range map[string]any{
		`local f = io.popen("printf 'a\nb\n'"); local all = f:read("*a"); f:close(); return all`:                "a\nb\n",
		`local f = io.popen("printf 'x\ny'"); local l1 = f:read("l"); local l2 = f:read("*l"); return {l1, l2}`: []any{"x", "y"},
		`local out = {}; for l in io.popen("printf '1\n2\n'"):lines() do out[#out+1] = l end; return out`:       []any{"1", "2"},
		`local f = io.popen("echo \"[$NB_TEST_API_KEY][$NB_TEST_PLAIN][$HOME]\""); return f:read("l")`:          "[][][/home/x]",
		`return {os.getenv("HOME"), os.getenv("NB_TEST_API_KEY")}`:                                              []any{"/home/x"},
		`local f = io.popen("exit 4"); local ok, how, n = f:close(); return {tostring(ok), how, n}`:             []any{"nil", "exit", int64(4)},
		`local f = io.popen("cat > /dev/null", "w"); f:write("abc"); local ok = f:close(); return ok`:           true,
	} {
		got, err := r.Call(context.Background(), Source{Lang: Lua, Code: code})
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %#v, %v; want %#v", code, got, err, want)
		}
	}
}

// primeCount counts the primes up to n by trial division: ordinary work
// that takes Lua 5.4 half a second for n = 500,000.
const primeCount = `local function isprime(n)
  if n < 2 then return false end
  local i = 2
  while i * i <= n do
    if n % i == 0 then return false end
    i = i + 1
  end
  return true
end
local count = 0
for n = 1, parameters.n do
  if isprime(n) then count = count + 1 end
end
return count`

// TestUnsandboxedDefaults: the unsandboxed defaults let a prime count
// finish that the sandbox's stop (as the old unsandboxed defaults did).
func TestUnsandboxedDefaults(t *testing.T) {
	if raceEnabled {
		t.Skip("golua runs about ten times slower under the race detector")
	}
	params := Param{"parameters", map[string]any{"n": 150_000}}
	got, err := New(Options{Sandboxed: false}).Call(context.Background(), Source{Lang: Lua, Code: primeCount}, params)
	if err != nil || got != int64(13848) {
		t.Errorf("unsandboxed: %v, %v", got, err)
	}
	_, err = New(Options{Sandboxed: true}).Call(context.Background(), Source{Lang: Lua, Code: primeCount}, params)
	var le *LimitError
	if !errors.As(err, &le) || le.Kind != LimitCPU {
		t.Errorf("sandboxed: %v, want the CPU limit", err)
	}
	if !strings.Contains(err.Error(), "safety.functions.limits.cpu-seconds") {
		t.Errorf("the message does not say how to raise the limit: %v", err)
	}
	if d := DefaultUnsandboxedLimits(); d.CPU < 10*DefaultLimits().CPU || d.Timeout < time.Minute {
		t.Errorf("unsandboxed defaults %+v", d)
	}
	if CPUUnits(2.5) != 250_000_000 || CPUUnits(0) != 0 {
		t.Error("CPUUnits")
	}
}

// TestSandboxSaysWhatIsMissing: a sandboxed function that touches os or
// io learns that the sandbox does not offer them and how to allow them;
// the reference's own example tool (os.date) in Fennel included.
func TestSandboxSaysWhatIsMissing(t *testing.T) {
	r := New(Options{Sandboxed: true})
	tests := []struct {
		lang Lang
		code string
		want string
	}{
		{Lua, `return os.date()`, "bot.yml:3: attempt to index a nil value (os is not available to sandboxed functions"},
		{Lua, `local f = io.open("x") return f`, "bot.yml:3: attempt to index a nil value (io is not available"},
		{Lua, `local x = os and os.time() or 1 return io.write(x)`, "(io and os are not available"},
		{Lua, `print("x")`, "attempt to call a nil value (print is not available"},
		{Fennel, `(os.date)`, "bot.yml:3: attempt to index a nil value (os is not available"},
	}
	for _, tt := range tests {
		_, err := r.Call(context.Background(), Source{Lang: tt.lang, Code: tt.code, File: "bot.yml", Line: 3})
		if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "set safety: {functions: {sandboxed: false}} in the cartridge") {
			t.Errorf("%s: %v\nwant %q", tt.code, err, tt.want)
		}
	}
	// Other nil errors say nothing of the sandbox.
	_, err := r.Call(context.Background(), Source{Lang: Lua, Code: `return nothing.field`, File: "bot.yml", Line: 3})
	if err == nil || strings.Contains(err.Error(), "sandbox") {
		t.Errorf("plain nil: %v", err)
	}
}
