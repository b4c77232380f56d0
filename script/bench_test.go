package script

import (
	"context"
	"sync"
	"testing"
)

// BenchmarkLuaAdapter is one output adapter call (goal: at most 50 µs).
func BenchmarkLuaAdapter(b *testing.B) {
	r := New(Options{Sandboxed: true})
	src := Source{Lang: Lua, Code: "return \"```\" .. content .. \"```\"", File: "bot.yml", Line: 12}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.Call(ctx, src, Param{"content", "Hello! How may I assist you today?"}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkToolRound10 is one round of ten Lua tool calls run in
// parallel, as the agent runs them (goal: at most 2 ms).
func BenchmarkToolRound10(b *testing.B) {
	r := New(Options{Sandboxed: true})
	src := Source{Lang: Lua, Code: `local from, to = parameters["from"], parameters["to"]
local s = 0
for i = from, to do s = s + i end
return {sum = s, text = string.format("%d..%d", from, to)}`, File: "bot.yml", Line: 20}
	ctx := context.Background()
	args := map[string]any{"from": float64(15), "to": float64(25)}
	b.ReportAllocs()
	for b.Loop() {
		var wg sync.WaitGroup
		for range 10 {
			wg.Go(func() {
				if _, err := r.Call(ctx, src, Param{"parameters", args}); err != nil {
					b.Error(err)
				}
			})
		}
		wg.Wait()
	}
}
