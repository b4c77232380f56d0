package agent

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nbots/nb/cartridge"
	"github.com/nbots/nb/provider"
	"github.com/nbots/nb/tool"
)

// Several calls in one round: each runs once, the results go back in call
// order (not completion order), the loop ends when the model answers
// without calls, and the responding feedback comes in call order too.
func TestRoundOfSeveralCallsKeepsCallOrder(t *testing.T) {
	slow := newTool("slow", nil, sleeper(150*time.Millisecond, "slow output"))
	fast := newTool("fast", nil, sleeper(0, "fast output"))
	p := &scripted{steps: []step{
		{calls: []provider.ToolCall{call("c1", "slow", `{"n":1}`), call("c2", "fast", `{}`), call("c3", "slow", `{"n":2}`)}},
		{chunks: []string{"all ", "done"}},
	}}
	h := newHarness(t, unconfirmed, cartridge.Eval, p, nil, slow, fast)
	res := ask(t, h, "go")
	if res.Text != "all done" {
		t.Errorf("answer = %q, want %q", res.Text, "all done")
	}
	if n := p.requestCount(); n != 2 {
		t.Fatalf("provider requests = %d, want 2", n)
	}
	equal(t, "tool results sent back", toolMessages(p.request(1)), []string{
		"c1 slow: slow output", "c2 fast: fast output", "c3 slow: slow output",
	})
	equal(t, "feedback", h.feedback(), []string{
		"responding: slow {\"n\":1}\nslow output",
		"responding: fast {}\nfast output",
		"responding: slow {\"n\":2}\nslow output",
	})
	// The assistant's calls are sent back before the results.
	msgs := p.request(1).Messages
	if len(msgs) != 5 || msgs[1].Role != provider.RoleAssistant || len(msgs[1].ToolCalls) != 3 {
		t.Fatalf("second request messages = %+v, want user, assistant with 3 calls, 3 tool results", msgs)
	}
	// The history keeps user, calls, 3 results, answer.
	var who []string
	for _, ev := range h.agent.History() {
		who = append(who, string(ev.Who))
	}
	equal(t, "history", who, []string{"user", "AI", "tool", "tool", "tool", "AI"})
}

// Two tools that each sleep 300 ms run in about the time of one.
func TestAllowedCallsRunInParallel(t *testing.T) {
	a := newTool("a", nil, sleeper(300*time.Millisecond, "A"))
	b := newTool("b", nil, sleeper(300*time.Millisecond, "B"))
	p := &scripted{steps: []step{{calls: []provider.ToolCall{call("1", "a", "{}"), call("2", "b", "{}")}}}}
	h := newHarness(t, confirmed, cartridge.Eval, p, &answers{replies: []string{"y", "y"}}, a, b)
	start := time.Now()
	ask(t, h, "go")
	if d := time.Since(start); d >= 500*time.Millisecond {
		t.Errorf("two 300 ms tools took %v, want < 500ms (parallel)", d)
	}
	if a.runs() != 1 || b.runs() != 1 {
		t.Errorf("runs = %d, %d, want 1, 1", a.runs(), b.runs())
	}
}

// The reference matches slug(name) with - as _: the model may spell the
// tool another way; the feedback shows the cartridge's spelling.
func TestCallsMatchToolsByNormalizedName(t *testing.T) {
	w := newTool("get-current-weather", nil, sleeper(0, "35.8°C"))
	for _, spelling := range []string{"get-current-weather", "get_current_weather", "Get Current Weather", "GET_CURRENT_WEATHER"} {
		t.Run(spelling, func(t *testing.T) {
			p := &scripted{steps: []step{{calls: []provider.ToolCall{call("1", spelling, `{"location":"Tokyo, Japan"}`)}}}}
			h := newHarness(t, unconfirmed, cartridge.Eval, p, nil, w)
			ask(t, h, "weather?")
			equal(t, "results", toolMessages(p.request(1)), []string{"1 " + spelling + ": 35.8°C"})
			equal(t, "feedback", h.feedback(), []string{"responding: get-current-weather {\"location\":\"Tokyo, Japan\"}\n35.8°C"})
		})
	}
}

// A call to a tool the cartridge does not have gets a result naming the
// tools that exist; the others in the round still run.
func TestUnknownToolResult(t *testing.T) {
	known := newTool("known", nil, nil)
	p := &scripted{steps: []step{{calls: []provider.ToolCall{call("1", "nope", "{}"), call("2", "known", "{}")}}}}
	h := newHarness(t, unconfirmed, cartridge.Eval, p, nil, known)
	ask(t, h, "go")
	equal(t, "results", toolMessages(p.request(1)), []string{
		"1 nope: Unknown tool: nope. The available tools are: known.",
		"2 known: known ran with {}",
	})
}

// Arguments are validated against the schema before anything runs (and
// before the user is asked); a violation goes back as the result, naming
// the field.
func TestSchemaViolationNamesTheField(t *testing.T) {
	schema := map[string]any{
		"type": "object",
		"properties": map[string]any{
			"location": map[string]any{"type": "string"},
			"days":     map[string]any{"type": "integer", "minimum": 1},
		},
		"required": []any{"location"},
	}
	cases := []struct {
		args, field string
	}{
		{`{"days":2}`, `missing properties: ["location"]`},
		{`{"location":5}`, "field location: "},
		{`{"location":"Paris","days":0}`, "field days: "},
		{`{"location":"Paris","days":"two"}`, "field days: "},
	}
	for _, tc := range cases {
		t.Run(tc.args, func(t *testing.T) {
			w := newTool("weather", schema, nil)
			p := &scripted{steps: []step{{calls: []provider.ToolCall{call("1", "weather", tc.args)}}}}
			confirm := &answers{replies: []string{"y"}}
			h := newHarness(t, confirmed, cartridge.Eval, p, confirm, w)
			ask(t, h, "go")
			if w.runs() != 0 {
				t.Errorf("the tool ran with invalid arguments")
			}
			if len(confirm.asked) != 0 {
				t.Errorf("the user was asked about invalid arguments: %q", confirm.asked)
			}
			got := toolMessages(p.request(1))
			if len(got) != 1 || !strings.HasPrefix(got[0], "1 weather: Invalid arguments for tool weather: ") || !strings.Contains(got[0], tc.field) {
				t.Errorf("result = %q, want an invalid-arguments message naming %q", got, tc.field)
			}
		})
	}
	t.Run("valid", func(t *testing.T) {
		w := newTool("weather", schema, nil)
		p := &scripted{steps: []step{{calls: []provider.ToolCall{call("1", "weather", `{"location":"Paris","days":3}`)}}}}
		h := newHarness(t, unconfirmed, cartridge.Eval, p, nil, w)
		ask(t, h, "go")
		if w.runs() != 1 {
			t.Fatalf("runs = %d, want 1", w.runs())
		}
		if got := w.calls[0].Arguments["days"]; got != int64(3) {
			t.Errorf("days = %#v, want int64(3) (integers stay integers for Lua)", got)
		}
	})
	t.Run("not an object", func(t *testing.T) {
		w := newTool("weather", schema, nil)
		p := &scripted{steps: []step{{calls: []provider.ToolCall{call("1", "weather", `[1,2]`)}}}}
		h := newHarness(t, unconfirmed, cartridge.Eval, p, nil, w)
		ask(t, h, "go")
		got := toolMessages(p.request(1))
		if w.runs() != 0 || len(got) != 1 || !strings.Contains(got[0], "not a JSON object") {
			t.Errorf("runs = %d, result = %q", w.runs(), got)
		}
	})
}

// Confirmation: each call is asked about one by one with the confirming
// text; answers are trimmed and case-insensitive; an empty answer is the
// default (n); anything not in yeses denies; a denied call gets the
// reference's text verbatim and shows no responding feedback.
func TestConfirmation(t *testing.T) {
	const denial = "We asked the user you're chatting with for permission, but the user did not allow you to run this tool or function."
	if DenialText != denial {
		t.Fatalf("DenialText = %q", DenialText)
	}
	cases := []struct {
		name    string
		cart    string
		answers []string
		allowed bool
	}{
		{"y", confirmed, []string{"y"}, true},
		{"yes", confirmed, []string{"yes"}, true},
		{"upper case", confirmed, []string{"YES"}, true},
		{"spaces", confirmed, []string{"  Y \t"}, true},
		{"n", confirmed, []string{"n"}, false},
		{"empty is the default n", confirmed, []string{""}, false},
		{"anything else", confirmed, []string{"sure"}, false},
		{"no terminal", confirmed, []string{noTerminal}, false},
		{"empty with default y", confirmed + "interfaces:\n  tools:\n    confirming:\n      default: 'Y'\n", []string{""}, true},
		{"upper-case yeses", confirmed + "interfaces:\n  tools:\n    confirming:\n      yeses: ['Sim', 'S']\n", []string{"sim"}, true},
		{"custom yeses replace y", confirmed + "interfaces:\n  tools:\n    confirming:\n      yeses: ['Sim', 'S']\n", []string{"y"}, false},
		{"per-mode yeses", confirmed + "interfaces:\n  eval:\n    tools:\n      confirming:\n        yeses: ['ok']\n", []string{"OK"}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := newTool("random-number", nil, sleeper(0, "21"))
			p := &scripted{steps: []step{{calls: []provider.ToolCall{call("c", "random_number", `{"from":15,"to":25}`)}}}}
			confirm := &answers{replies: tc.answers}
			h := newHarness(t, tc.cart, cartridge.Eval, p, confirm, r)
			ask(t, h, "go")
			equal(t, "asked", confirm.asked, []string{`random-number {"from":15,"to":25}`})
			want, feedback := "c random_number: "+denial, []string(nil)
			if tc.allowed {
				want = "c random_number: 21"
				feedback = []string{"responding: random-number {\"from\":15,\"to\":25}\n21"}
			}
			equal(t, "result", toolMessages(p.request(1)), []string{want})
			equal(t, "feedback", h.feedback(), feedback)
			if got := r.runs(); (got == 1) != tc.allowed {
				t.Errorf("runs = %d, allowed = %v", got, tc.allowed)
			}
		})
	}
}

// All calls are confirmed first, one by one, then the allowed ones run.
func TestConfirmAllFirstThenRun(t *testing.T) {
	a, b, c := newTool("a", nil, nil), newTool("b", nil, nil), newTool("c", nil, nil)
	p := &scripted{steps: []step{{calls: []provider.ToolCall{call("1", "a", "{}"), call("2", "b", `{"x":"<&>"}`), call("3", "c", "{}")}}}}
	confirm := &answers{replies: []string{"y", "n", "yes"}}
	h := newHarness(t, confirmed, cartridge.Eval, p, confirm, a, b, c)
	ask(t, h, "go")
	equal(t, "asked", confirm.asked, []string{"a {}", `b {"x":"<&>"}`, "c {}"})
	equal(t, "results", toolMessages(p.request(1)), []string{"1 a: a ran with {}", "2 b: " + DenialText, "3 c: c ran with {}"})
	if a.runs() != 1 || b.runs() != 0 || c.runs() != 1 {
		t.Errorf("runs = %d %d %d, want 1 0 1", a.runs(), b.runs(), c.runs())
	}
}

// Without a Confirmer (no front-end to ask) every confirmable call is denied.
func TestNoConfirmerDenies(t *testing.T) {
	r := newTool("r", nil, nil)
	p := &scripted{steps: []step{{calls: []provider.ToolCall{call("1", "r", "{}")}}}}
	h := newHarness(t, confirmed, cartridge.Eval, p, nil, r)
	ask(t, h, "go")
	equal(t, "results", toolMessages(p.request(1)), []string{"1 r: " + DenialText})
}

// A tool's error is its result; the conversation goes on.
func TestToolErrorBecomesResult(t *testing.T) {
	bad := newTool("bad", nil, func(context.Context, tool.Call) (any, error) {
		return nil, errors.New("test.yml:12: attempt to index a nil value (global 'os')")
	})
	p := &scripted{steps: []step{{calls: []provider.ToolCall{call("1", "bad", "{}")}}}}
	h := newHarness(t, unconfirmed, cartridge.Eval, p, nil, bad)
	ask(t, h, "go")
	equal(t, "results", toolMessages(p.request(1)), []string{"1 bad: test.yml:12: attempt to index a nil value (global 'os')"})
}

// A tool that panics does not take the program down: the panic is its result.
func TestToolPanicBecomesResult(t *testing.T) {
	bad := newTool("bad", nil, func(context.Context, tool.Call) (any, error) { panic("boom") })
	p := &scripted{steps: []step{{calls: []provider.ToolCall{call("1", "bad", "{}")}}}}
	h := newHarness(t, unconfirmed, cartridge.Eval, p, nil, bad)
	ask(t, h, "go")
	got := toolMessages(p.request(1))
	if len(got) != 1 || !strings.Contains(got[0], "boom") {
		t.Errorf("results = %q, want the panic's text", got)
	}
}

// Tool outputs of every JSON kind become text as Lua would print them.
func TestToolOutputText(t *testing.T) {
	cases := []struct {
		out  any
		want string
	}{
		{"text", "text"},
		{nil, ""},
		{int64(5), "5"},
		{5.0, "5.0"},
		{2.5, "2.5"},
		{true, "true"},
		{[]any{int64(1), "a"}, `[1,"a"]`},
		{map[string]any{"b": "<x>", "a": int64(1)}, `{"a":1,"b":"<x>"}`},
	}
	for _, tc := range cases {
		if got := Text(tc.out); got != tc.want {
			t.Errorf("Text(%#v) = %q, want %q", tc.out, got, tc.want)
		}
	}
}

// The round limit stops a model that never stops calling tools: the
// limit's provider calls are made, no more; the exchange ends without an
// error, with the conversation kept, a notice saying how to go on and a
// TurnLimit event; the next message continues the same conversation.
func TestRoundLimit(t *testing.T) {
	for _, tc := range []struct {
		cart   string
		rounds int
	}{
		{unconfirmed, 10},
		{"safety:\n  tools:\n    confirmable: false\n    rounds: 3\nprovider:\n  id: openai\n", 3},
	} {
		cart := tc.cart
		r := newTool("r", nil, nil)
		// Different arguments every time, so the loop detector stays quiet.
		p := &scripted{steps: make([]step, 0), forever: func(n int) step {
			if n > tc.rounds {
				return step{chunks: []string{"done"}}
			}
			return step{calls: []provider.ToolCall{call("1", "r", `{"n":`+strings.Repeat("1", n)+`}`)}}
		}}
		h := newHarness(t, cart, cartridge.Eval, p, nil, r)
		res := ask(t, h, "go")
		if res.Stopped != StopRoundLimit || res.FinishReason != StopRoundLimit || !strings.Contains(res.Notice, "continue") || res.Rounds != tc.rounds {
			t.Fatalf("rounds %d: result = %+v, want the round limit with a notice", tc.rounds, res)
		}
		if n := p.requestCount(); n != tc.rounds {
			t.Errorf("provider requests = %d, want %d", n, tc.rounds)
		}
		if r.runs() != tc.rounds {
			t.Errorf("tool runs = %d, want %d", r.runs(), tc.rounds)
		}
		// The conversation so far is kept.
		if len(h.agent.History()) != 1+2*tc.rounds {
			t.Errorf("history has %d events, want %d", len(h.agent.History()), 1+2*tc.rounds)
		}
		if got := h.kinds(TurnLimit); len(got) != 1 || got[0].Round != tc.rounds {
			t.Errorf("TurnLimit events = %+v, want one at round %d", got, tc.rounds)
		}
		// The next message goes on from there: the model sees its calls,
		// their results and the new message.
		if res := ask(t, h, "continue"); res.Text != "done" || res.Stopped != "" {
			t.Errorf("after the limit: result = %+v", res)
		}
		last := p.request(tc.rounds).Messages
		if n := len(last); n != 2+2*tc.rounds || last[n-1].Content != "continue" || last[n-2].Role != provider.RoleTool {
			t.Errorf("the request after the limit has %d messages, want the whole conversation and the new message", n)
		}
	}
}

// The loop detector first warns the model (the reference's text, as a
// user turn after the round's results, and a LoopDetection event); when
// the pattern goes on after the warning, the exchange stops with a
// message naming the calls, the conversation kept.
func TestLoopDetectionWarnsThenStops(t *testing.T) {
	cases := []struct {
		name    string
		rounds  [][]provider.ToolCall
		warning string
		want    string
	}{
		{"one call repeated", repeat(20, []provider.ToolCall{call("1", "a", `{"x":1}`)}),
			LoopWarning(3), "the model keeps repeating the same tool call (a)"},
		{"two calls alternating, one a round", repeat(10, []provider.ToolCall{call("1", "a", "{}")}, []provider.ToolCall{call("2", "b", "{}")}),
			LoopWarning(10), "the same 2 tool calls (a, b)"},
		{"three calls, a round each", repeat(8, []provider.ToolCall{call("1", "a", "{}")}, []provider.ToolCall{call("2", "b", "{}")}, []provider.ToolCall{call("3", "c", "{}")}),
			LoopWarning(10), "the same 3 tool calls"},
		{"three calls in one round", repeat(8, []provider.ToolCall{call("1", "a", "{}"), call("2", "b", "{}"), call("3", "c", "{}")}),
			LoopWarning(10), "the same 3 tool calls (a, b, c)"},
		{"key order does not matter", repeat(10, []provider.ToolCall{call("1", "a", `{"x":1,"y":2}`)}, []provider.ToolCall{call("1", "a", `{"y":2, "x":1}`)}),
			LoopWarning(3), "the same tool call (a)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var steps []step
			for _, r := range tc.rounds {
				steps = append(steps, step{calls: r})
			}
			p := &scripted{steps: steps}
			h := newHarness(t, "safety:\n  tools:\n    confirmable: false\n    rounds: 50\nprovider:\n  id: openai\n", cartridge.Eval, p, nil,
				newTool("a", nil, nil), newTool("b", nil, nil), newTool("c", nil, nil))
			res := ask(t, h, "go")
			if res.Stopped != StopLoop || !strings.Contains(res.Notice, tc.want) {
				t.Fatalf("result = %+v, want a loop message containing %q", res, tc.want)
			}
			got := h.kinds(LoopDetection)
			if len(got) != 2 || got[0].Text != tc.warning || got[1].Text != res.Notice {
				t.Fatalf("LoopDetection events = %+v, want the warning, then the stop", got)
			}
			warned := false
			for i := range p.requestCount() {
				msgs := p.request(i).Messages
				if m := msgs[len(msgs)-1]; m.Role == provider.RoleUser && m.Content == tc.warning {
					warned = true
				}
			}
			if !warned {
				t.Errorf("no request ends with the warning %q", tc.warning)
			}
		})
	}
	t.Run("varied calls are not a loop", func(t *testing.T) {
		var steps []step
		for i := range 12 {
			steps = append(steps, step{calls: []provider.ToolCall{call("1", "a", `{"i":`+strings.Repeat("1", i+1)+`}`)}})
		}
		p := &scripted{steps: steps}
		h := newHarness(t, "safety:\n  tools:\n    confirmable: false\n    rounds: 50\nprovider:\n  id: openai\n", cartridge.Eval, p, nil, newTool("a", nil, nil))
		ask(t, h, "go")
		if got := h.kinds(LoopDetection); len(got) != 0 {
			t.Errorf("LoopDetection events = %+v", got)
		}
	})
}

// A model that changes course after the warning answers: the exchange
// goes on.
func TestLoopWarningHeeded(t *testing.T) {
	steps := []step{}
	for range 3 {
		steps = append(steps, step{calls: []provider.ToolCall{call("1", "a", `{"x":1}`)}})
	}
	steps = append(steps, step{chunks: []string{"found it"}})
	p := &scripted{steps: steps}
	h := newHarness(t, unconfirmed, cartridge.Eval, p, nil, newTool("a", nil, nil))
	res := ask(t, h, "go")
	if res.Text != "found it" || res.Stopped != "" {
		t.Fatalf("result = %+v, want the answer", res)
	}
	msgs := p.request(3).Messages
	if m := msgs[len(msgs)-1]; m.Role != provider.RoleUser || m.Content != LoopWarning(3) {
		t.Errorf("the request after the loop ends with %+v, want the warning", m)
	}
}

func repeat(n int, rounds ...[]provider.ToolCall) [][]provider.ToolCall {
	var out [][]provider.ToolCall
	for range n {
		out = append(out, rounds...)
	}
	return out
}

// Ctrl-C while tools run or while the user is asked: the round's calls
// still get results in the history, so the next request is one a
// provider accepts (every call answered).
func TestInterruptedRoundLeavesNoCallUnanswered(t *testing.T) {
	t.Run("while running", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		started := make(chan struct{}, 2)
		block := newTool("block", nil, func(ctx context.Context, _ tool.Call) (any, error) {
			started <- struct{}{}
			<-ctx.Done()
			return nil, errors.New("canceled")
		})
		p := &scripted{steps: []step{{calls: []provider.ToolCall{call("1", "block", "{}"), call("2", "block", `{"x":1}`)}}}}
		h := newHarness(t, unconfirmed, cartridge.REPL, p, nil, block)
		go func() {
			<-started
			<-started
			cancel()
		}()
		if _, err := h.agent.Ask(ctx, "go"); !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want canceled", err)
		}
		ask(t, h, "again")
		equal(t, "results sent next time", toolMessages(p.request(1)), []string{"1 block: canceled", "2 block: canceled"})
	})
	t.Run("while asking", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		p := &scripted{steps: []step{{calls: []provider.ToolCall{call("1", "r", "{}"), call("2", "r", `{"x":1}`)}}}}
		r := newTool("r", nil, nil)
		h := newHarness(t, confirmed, cartridge.REPL, p, confirmFunc(func() (bool, error) { cancel(); return false, nil }), r)
		if _, err := h.agent.Ask(ctx, "go"); !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want canceled", err)
		}
		if r.runs() != 0 {
			t.Errorf("a tool ran after Ctrl-C")
		}
		ask(t, h, "again")
		// Ctrl-C at the question stops the answer: it is not a "no".
		equal(t, "results sent next time", toolMessages(p.request(1)), []string{"1 r: " + InterruptedText, "2 r: " + InterruptedText})
	})
}

type confirmFunc func() (bool, error)

func (f confirmFunc) Confirm(context.Context, tool.Call, string) (bool, error) { return f() }

// Tools a client describes (an agent-protocol run's, a websocket
// client's) bring schemas of their own: the compiled schemas kept for
// validation stay bounded however many a long-running server sees.
func TestSchemaCacheBounded(t *testing.T) {
	for i := range 3 * maxCachedSchemas {
		spec := tool.Spec{Name: "t", Parameters: map[string]any{"type": "object", "properties": map[string]any{
			fmt.Sprintf("p%d", i): map[string]any{"type": "string"}}}}
		if msg := validateArguments(spec, map[string]any{fmt.Sprintf("p%d", i): 1}); msg == "" {
			t.Fatalf("schema %d: a number passed for a string", i)
		}
	}
	schemaMu.Lock()
	n := len(schemaCache)
	schemaMu.Unlock()
	if n > maxCachedSchemas {
		t.Errorf("%d compiled schemas kept, want at most %d", n, maxCachedSchemas)
	}
}
