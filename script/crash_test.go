package script

import (
	"strings"
	"testing"
)

// metaRecursion is Lua code whose metamethod calls itself through the
// operation that invoked it: golua calls a metamethod from Go, so each
// level nests the interpreter on the Go stack.
func metaRecursion(event, body string) string {
	return "local m = {} local t = setmetatable({}, m) m." + event + " = function(a, b) return " + body + " end return "
}

// crashCases used to end the process with a fatal Go stack overflow (a
// gigabyte of stack first); each must now fail as an ordinary error,
// quickly and in little memory (goal: within 1 s and 100 MB).
var crashCases = []childCase{
	{name: "lua __len", lang: Lua, code: `local m={} local t=setmetatable({},m) m.__len=function(s) return #s end return #t`, want: "stack overflow"},
	{name: "lua __index", lang: Lua, code: metaRecursion("__index", "a[b]") + "t.x", want: "stack overflow"},
	{name: "lua __newindex", lang: Lua, code: `local m = {} local t = setmetatable({}, m) m.__newindex = function(s, k, v) s[k] = v end t.x = 1`, want: "stack overflow"},
	{name: "lua __concat", lang: Lua, code: metaRecursion("__concat", "a .. b") + "t .. 'x'", want: "stack overflow"},
	{name: "lua __lt", lang: Lua, code: metaRecursion("__lt", "a < b") + "t < t", want: "stack overflow"},
	{name: "lua __le", lang: Lua, code: metaRecursion("__le", "a <= b") + "t <= t", want: "stack overflow"},
	{name: "lua __eq", lang: Lua, code: "local m = {} m.__eq = function(a, b) return a == b end local t, u = setmetatable({}, m), setmetatable({}, m) return t == u", want: "stack overflow"},
	{name: "lua __add", lang: Lua, code: metaRecursion("__add", "a + b") + "t + 1", want: "stack overflow"},
	{name: "lua __unm", lang: Lua, code: metaRecursion("__unm", "-a") + "-t", want: "stack overflow"},
	{name: "lua __tostring", lang: Lua, code: metaRecursion("__tostring", "tostring(a)") + "tostring(t)", want: "stack overflow"},
	{name: "lua sort comparator", lang: Lua, code: `local function f() table.sort({3, 2, 1}, function(a, b) f() return a < b end) end f()`, want: "stack overflow"},
	{name: "lua gsub callback", lang: Lua, code: `local function f() return (string.gsub("x", "x", f)) end return f()`, want: "stack overflow"},
	{name: "lua pcall recursion", lang: Lua, code: `local function f() local ok, err = pcall(f) if not ok then error(err, 0) end end f()`, want: "stack overflow"},
	{name: "lua xpcall handler", lang: Lua, code: `local function h(e) return select(2, xpcall(error, h, e)) end return xpcall(error, h, "x")`, want: ""},
	{name: "lua pcall caught", lang: Lua, code: metaRecursion("__len", "#a") + "select(2, pcall(function() return #t end))", want: ""},
	// A source of a million nested parentheses is too long to compile
	// (maxSourceSize); within the size, nesting is refused past 200 levels.
	{name: "lua million parentheses", lang: Lua, gen: func() string {
		return "return " + strings.Repeat("(", 1_000_000) + "1" + strings.Repeat(")", 1_000_000)
	}, want: "the code is too long"},
	{name: "lua 30,000 parentheses", lang: Lua, gen: func() string { return "return " + strings.Repeat("(", 30_000) + "1" + strings.Repeat(")", 30_000) }, want: "nested too deeply"},
	{name: "lua 30,000 tables", lang: Lua, gen: func() string { return "return " + strings.Repeat("{", 30_000) + strings.Repeat("}", 30_000) }, want: "nested too deeply"},
	{name: "lua 2,000 functions", lang: Lua, gen: func() string {
		return strings.Repeat("return function() ", 2_000) + strings.Repeat("end ", 2_000)
	}, want: "nested too deeply"},
	{name: "lua 8,000 blocks", lang: Lua, gen: func() string { return strings.Repeat("do ", 8_000) + strings.Repeat("end ", 8_000) }, want: "nested too deeply"},
	{name: "lua 15,000 not", lang: Lua, gen: func() string { return "return " + strings.Repeat("not ", 15_000) + "1" }, want: "nested too deeply"},
	{name: "lua 20,000 concatenations", lang: Lua, gen: func() string { return "local a = 'x' return a" + strings.Repeat("..a", 20_000) }, want: "nested too deeply"},
	{name: "lua 30,000 fields", lang: Lua, gen: func() string { return "local a = {} return a" + strings.Repeat(".b", 30_000) }, want: "nested too deeply"},
	{name: "lua 30,000 calls", lang: Lua, gen: func() string { return "local f return f" + strings.Repeat("()", 30_000) }, want: "nested too deeply"},
	{name: "lua 30,000 powers", lang: Lua, gen: func() string { return "return 2" + strings.Repeat("^2", 30_000) }, want: "nested too deeply"},
	{name: "lua 500 nested ifs", lang: Lua, gen: func() string { return strings.Repeat("if x then ", 500) + strings.Repeat("end ", 500) }, want: "nested too deeply"},
	{name: "lua long flat expressions", lang: Lua, gen: func() string {
		return "local x = 1 return x" + strings.Repeat(" + x", 3_000) + strings.Repeat(" == 1 or x", 1_000)
	}, want: ""},
	{name: "lua 10,000 constants", lang: Lua, gen: func() string { return "return {" + strings.Repeat("1.5,", 10_000) + "}" }, want: ""},
	{name: "lua 300,000 constants", lang: Lua, gen: func() string { return "return {" + strings.Repeat("1.5,", 300_000) + "}" }, want: "the code is too long"},
	{name: "fennel macro making 9,000 long strings", lang: Fennel, code: `(macro big [] (let [t []] (for [i 1 9000] (table.insert t (.. "a string long enough to take space " i))) t)) (big)`, want: "too much Lua"},
	{name: "fennel __len", lang: Fennel, code: `(local m {}) (local t (setmetatable {} m)) (set m.__len (fn [s] (length s))) (length t)`, want: "stack overflow"},
	{name: "fennel __index", lang: Fennel, code: `(local m {}) (local t (setmetatable {} m)) (set m.__index (fn [s k] (. s k))) (. t :x)`, want: "stack overflow"},
	{name: "fennel million parentheses", lang: Fennel, gen: func() string { return strings.Repeat("(", 1_000_000) + strings.Repeat(")", 1_000_000) }, want: "the code is too long"},
	{name: "fennel 30,000 parentheses", lang: Fennel, gen: func() string { return strings.Repeat("(", 30_000) + strings.Repeat(")", 30_000) }, want: "too deeply nested"},
	{name: "fennel 60,000 brackets", lang: Fennel, gen: func() string { return strings.Repeat("[", 60_000) }, want: "too deeply nested"},
	{name: "fennel 60,000 quotes", lang: Fennel, gen: func() string { return strings.Repeat("'", 60_000) + "x" }, want: "too deeply nested"},
	{name: "fennel deep forms", lang: Fennel, gen: func() string { return strings.Repeat("(+ 1 ", 199) + "1" + strings.Repeat(")", 199) }, want: ""},
	{name: "fennel macro __len", lang: Fennel, code: `(macro m [] (let [mt {} t (setmetatable {} mt)] (set mt.__len (fn [s] (length s))) (length t))) (m)`, want: "stack overflow"},
	{name: "fennel recursive macro", lang: Fennel, code: `(macro m [x] ` + "`" + `(m ,x)) (m 1)`, want: "macro expansion too deep"},
	{name: "fennel macro nesting forms", lang: Fennel, code: `(macro deep [n] (var f 1) (for [i 1 n] (set f (list (sym :+) 1 f))) f) (deep 190)`, want: ""},
	{name: "unsandboxed load", lang: Lua, unsandbox: true, code: `local ok, err = load("return " .. string.rep("(", 500000) .. "1" .. string.rep(")", 500000))
		if ok or not err:find("nested too deeply") then error(tostring(err)) end
		ok, err = load(string.rep(" ", 2000000))
		if ok or not err:find("too long") then error(tostring(err)) end
		ok, err = load(string.dump(function() end))
		if ok or not err:find("binary chunks") then error(tostring(err)) end`, want: ""},
	{name: "unsandboxed coroutine __len", lang: Lua, unsandbox: true, code: `local co = coroutine.wrap(function() ` + metaRecursion("__len", "#a") + `#t end) return co()`, want: "stack overflow", racy: true},
	// A finalizer runs on golua's own thread for finalizers, which the
	// call hook did not watch: with a memory limit high enough, the
	// recursion reached the end of the Go stack first.
	{name: "lua __gc recursion", lang: Lua, limits: Limits{Memory: 4 << 30}, code: `local m = {} m.__len = function(s) return #s end
		local t = setmetatable({}, m)
		setmetatable({}, {__gc = function() return #t end})
		return 1`, want: "stack overflow"},
	{name: "unsandboxed __gc recursion", lang: Lua, unsandbox: true, limits: Limits{Memory: 4 << 30}, code: `local m = {} m.__len = function(s) return #s end
		local t = setmetatable({}, m)
		setmetatable({}, {__gc = function() return #t end})
		return 1`, want: "stack overflow"},
	// golua's string.format indexes past its arguments for "%p"; in a
	// coroutine, which runs on a goroutine of its own, that panic ended
	// the process.
	{name: "unsandboxed coroutine format %p", lang: Lua, unsandbox: true, code: `return coroutine.wrap(function() return string.format("%p") end)()`, want: "bad argument to 'format'", racy: true},
	{name: "lua format %p", lang: Lua, code: `return string.format("%p")`, want: "bad argument to 'format'"},
	{name: "unsandboxed debug.sethook", lang: Lua, unsandbox: true, code: `debug.sethook() ` + metaRecursion("__len", "#a") + `#t`, want: "debug.sethook is not available"},
}

func TestCrashInputsChild(t *testing.T) { childMain(t, crashCases) }

// TestCrashInputs runs each crash input in a child process and checks
// that the call failed with an ordinary error, within 1 s and 100 MB.
func TestCrashInputs(t *testing.T) {
	for _, c := range crashCases {
		t.Run(c.name, func(t *testing.T) {
			if c.racy && raceEnabled {
				t.Skip("golua's coroutines race when they end")
			}
			res := runChild(t, "TestCrashInputsChild", c.name)
			switch {
			case c.want == "" && res.Err != "":
				t.Errorf("error %q, want none", res.Err)
			case c.want != "" && !strings.Contains(res.Err, c.want):
				t.Errorf("error %q, want one with %q", res.Err, c.want)
			}
			if strings.Contains(res.Err, "inside the interpreter") {
				t.Errorf("a panic inside golua: %s", res.Err)
			}
			t.Logf("refused in %.1f ms, peak RSS %.1f MB (%.1f MB before the call): %.200s", res.Took, float64(res.MaxRSS)/1024, float64(res.BaseRSS)/1024, res.Err)
			if raceEnabled {
				return // the race detector's own memory and time
			}
			if res.Took > 1000 {
				t.Errorf("took %.0f ms, want at most 1 s", res.Took)
			}
			if res.MaxRSS > 100<<10 {
				t.Errorf("peak RSS %d KiB, want at most 100 MB", res.MaxRSS)
			}
		})
	}
}
