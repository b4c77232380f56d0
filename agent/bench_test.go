package agent

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/nbots/nb/cartridge"
	"github.com/nbots/nb/provider"
	"github.com/nbots/nb/script"
	"github.com/nbots/nb/state"
	"github.com/nbots/nb/tool"
	"github.com/nbots/nb/tool/function"
)

const benchCartridge = `
safety: {tools: {confirmable: false}}
interfaces: {tools: {feedback: true}}
tools:
  - name: add
    description: Adds two numbers.
    parameters:
      type: object
      properties: {a: {type: integer}, b: {type: integer}}
      required: [a, b]
    lua: |
      return parameters.a + parameters.b
provider: {id: openai}
`

// benchAsk runs one exchange whose first answer asks for calls calls.
func benchAsk(b *testing.B, calls int) {
	c, err := cartridge.Parse([]byte(benchCartridge), "bench.yml", cartridge.FormatYAML, os.LookupEnv)
	if err != nil {
		b.Fatal(err)
	}
	rt := script.New(script.Options{Sandboxed: true})
	tools := &tool.Set{}
	for _, t := range function.FromCartridge(c, rt) {
		tools.Add(t)
	}
	var round []provider.ToolCall
	for i := 0; i < calls; i++ {
		round = append(round, provider.ToolCall{ID: fmt.Sprintf("call_%d", i), Name: "add", Arguments: fmt.Sprintf(`{"a":%d,"b":2}`, i)})
	}
	b.ReportAllocs()
	for b.Loop() {
		p := &scripted{}
		if calls > 0 {
			p.steps = []step{{calls: round}}
		}
		a := engine(c, cartridge.Eval, p, tools)
		a.Scripts, a.OnEvent = rt, func(Event) {}
		if _, err := a.Ask(context.Background(), "add them"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkExchangeNoTools is the baseline: one exchange answered at once.
func BenchmarkExchangeNoTools(b *testing.B) { benchAsk(b, 0) }

// BenchmarkToolRound10 is one exchange with a round of ten Lua tool calls
// (schema validation, parallel runs, feedback, history) before the answer.
// The goal: at most 2 ms more than BenchmarkExchangeNoTools.
func BenchmarkToolRound10(b *testing.B) { benchAsk(b, 10) }

// BenchmarkRequestUnderPressure builds the request of the 60th round of
// one long exchange whose history is well over its budget (60 tool
// outputs of 8,000 characters, ~120,000 estimated tokens, against a
// 100,000-token budget): the size measured, the oldest outputs abridged,
// the warning checked, what each round of such an exchange adds.
func BenchmarkRequestUnderPressure(b *testing.B) {
	c, err := cartridge.Parse([]byte(benchCartridge), "bench.yml", cartridge.FormatYAML, os.LookupEnv)
	if err != nil {
		b.Fatal(err)
	}
	a := engine(c, cartridge.Eval, &scripted{}, &tool.Set{})
	a.Budget = 100_000
	input := "fix the tests"
	a.record(state.Event{Who: state.RoleUser, Input: &input, Message: input}) //nolint:errcheck // a Memory
	out := strings.Repeat("0123456789abcdef ", 470)
	for i := range 60 {
		id := fmt.Sprintf("call_%d", i)
		a.record(state.Event{Who: state.RoleAI, ToolCalls: []state.ToolCall{{ID: id, Name: "read_file", Arguments: `{"path":"f.go"}`}}},
			state.Event{Who: state.RoleTool, Message: out, Result: state.ToolResult{ID: id, Name: "read_file"}}) //nolint:errcheck // a Memory
	}
	var p contextPressure
	b.ReportAllocs()
	for b.Loop() {
		req := a.request(c.Behavior("interaction"), false)
		p.check(a, req)
	}
	if a.abridged == 0 {
		b.Fatal("nothing was abridged")
	}
	b.ReportMetric(float64(p.tokens), "tokens-sent")
	b.ReportMetric(float64(a.abridged), "abridged")
}
