package script

import (
	"strings"
	"testing"
)

// memoryBombs grow without end; each must stop at the memory limit
// before the process grows much past it. The CPU limit is raised so that
// memory, not CPU, is what stops them.
var memoryBombs = []childCase{
	{name: "table of tables", lang: Lua, code: `local t = {} for i = 1, 1e9 do t[i] = {i} end`},
	{name: "table of records", lang: Lua, code: `local t = {} for i = 1, 1e9 do t[i] = {a = i, b = i, c = i} end`},
	{name: "hash of strings", lang: Lua, code: `local t = {} for i = 1, 1e9 do t["k" .. i] = true end`},
	{name: "chain of one-element tables", lang: Lua, code: `local x for i = 1, 1e9 do x = {x} end`},
	{name: "chain of closures", lang: Lua, code: `local x for i = 1, 1e9 do local y = x x = function() return y end end`},
	{name: "chain of metatables", lang: Lua, code: `local x = {} for i = 1, 1e9 do x = setmetatable({}, x) end`},
	{name: "table of strings", lang: Lua, code: `local t = {} for i = 1, 1e9 do t[i] = tostring(i) end`},
	{name: "string doubling", lang: Lua, code: `local s = "x" while true do s = s .. s end`},
	{name: "string.rep", lang: Lua, code: `return string.rep("x", 1e9)`},
	{name: "table.concat", lang: Lua, code: `local t = {} for i = 1, 1e9 do t[i] = "0123456789" if i % 1000 == 0 then t = {table.concat(t)} end end`},
	{name: "deep recursion", lang: Lua, code: `local function f(n) return 1 + f(n + 1) end return f(1)`},
	{name: "fennel table of tables", lang: Fennel, code: `(let [t []] (for [i 1 1000000000] (tset t i [i])))`},
	{name: "unsandboxed table of tables", lang: Lua, unsandbox: true, code: `local t = {} for i = 1, 1e9 do t[i] = {i} end`},
	{name: "unsandboxed coroutines", lang: Lua, unsandbox: true, racy: true, code: `local t = {} for i = 1, 1e9 do local co = coroutine.create(function() coroutine.yield() end) coroutine.resume(co) t[i] = co end`},
}

func init() {
	for i := range memoryBombs {
		memoryBombs[i].want = "memory limit exceeded"
		memoryBombs[i].limits = Limits{CPU: 20_000_000_000}
	}
}

func TestMemoryLimitChild(t *testing.T) { childMain(t, memoryBombs) }

// TestMemoryLimit measures the peak resident memory of a process that
// runs each bomb with the default limits: the call must stop with a
// memory error before the process has grown by one and a half times its
// limit (measured: at most 1.1 times, for a chain of closures).
func TestMemoryLimit(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's own memory makes the measure meaningless")
	}
	for _, c := range memoryBombs {
		t.Run(strings.ReplaceAll(c.name, " ", "_"), func(t *testing.T) {
			res := runChild(t, "TestMemoryLimitChild", c.name)
			limit := DefaultLimits().Memory
			if c.unsandbox {
				limit = DefaultUnsandboxedLimits().Memory
			}
			grew := (res.MaxRSS - res.BaseRSS) << 10
			t.Logf("stopped after %.0f ms; peak RSS %.1f MB, %.1f MB over the %.1f MB before the call (limit %d MiB): %s",
				res.Took, float64(res.MaxRSS)/1024, float64(grew)/(1<<20), float64(res.BaseRSS)/1024, limit>>20, res.Err)
			if !strings.Contains(res.Err, c.want) {
				t.Errorf("error %q, want a memory limit", res.Err)
			}
			if grew > int64(limit+limit/2) {
				t.Errorf("the process grew by %d MiB, more than one and a half times its %d MiB limit", grew>>20, limit>>20)
			}
		})
	}
}
