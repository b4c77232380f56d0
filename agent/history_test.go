package agent

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/nbots/nb/cartridge"
	"github.com/nbots/nb/provider"
	"github.com/nbots/nb/script"
	"github.com/nbots/nb/state"
	"github.com/nbots/nb/tool"
)

func TestTruncationCharactersHeadAndTail(t *testing.T) {
	tr := Truncation{MaxChars: 10}
	if got := tr.Apply("0123456789"); got != "0123456789" {
		t.Errorf("at the limit: %q", got)
	}
	want := "01234\n\n[WARNING: Tool output was truncated. 6 characters were removed from the middle. " +
		"If you need to see specific parts, call the tool with more targeted parameters.]\n\nBCDEF"
	if got := tr.Apply("0123456789ABCDEF"); got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	// Characters, not bytes: a multi-byte text is cut on characters.
	got := tr.Apply("ééééééééééééééé") // 15 characters, 30 bytes
	if !strings.HasPrefix(got, "ééééé\n\n[WARNING") || !strings.HasSuffix(got, "]\n\nééééé") || !strings.Contains(got, " 5 characters were removed") {
		t.Errorf("multi-byte: %q", got)
	}
}

func TestTruncationLines(t *testing.T) {
	tr := Truncation{MaxLines: 4}
	if got := tr.Apply("1\n2\n3\n4"); got != "1\n2\n3\n4" {
		t.Errorf("at the limit: %q", got)
	}
	if got, want := tr.Apply("1\n2\n3\n4\n5\n6\n7"), "1\n2\n[... 3 lines omitted ...]\n6\n7"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	tr = Truncation{MaxLines: 5}
	if got, want := tr.Apply("1\n2\n3\n4\n5\n6\n7"), "1\n2\n[... 2 lines omitted ...]\n5\n6\n7"; got != want {
		t.Errorf("odd limit: got %q, want %q", got, want)
	}
}

// Characters are cut first, always, then lines: a long single line is cut
// by characters even when the line limit alone would let it through, and
// the line limit then applies to what is left.
func TestTruncationCharactersThenLines(t *testing.T) {
	tr := Truncation{MaxChars: 100, MaxLines: 6}
	line := strings.Repeat("x", 1000)
	got := tr.Apply(line)
	if len(got) > 400 || !strings.Contains(got, "900 characters were removed") {
		t.Errorf("a long line: %q", got)
	}
	many := strings.Repeat("ab\n", 200) // 600 characters, 201 lines
	got = tr.Apply(many)
	// The characters' note sits in the middle, so the line cut drops it
	// (the agent-loop specification's order, kept as written).
	if want := "ab\nab\nab\n[... 32 lines omitted ...]\nab\nab\n"; got != want {
		t.Errorf("characters, then lines: got %q, want %q", got, want)
	}
	if n := strings.Count(got, "\n") + 1; n != 7 {
		t.Errorf("lines after both cuts = %d, want 7 (6 kept and the note): %q", n, got)
	}
}

// The model receives the truncated output; the state and the feedback
// keep all of it.
func TestTruncatedOutputStaysWholeInStateAndFeedback(t *testing.T) {
	big := strings.Repeat("0123456789", 4000) // 40,000 characters
	w := newTool("big", nil, sleeper(0, big))
	p := &scripted{steps: []step{{calls: []provider.ToolCall{call("1", "big", "{}")}}}}
	h := newHarness(t, unconfirmed, cartridge.Eval, p, nil, w)
	ask(t, h, "go")
	sent := toolMessages(p.request(1))
	if len(sent) != 1 || len(sent[0]) > 31_000 || !strings.Contains(sent[0], "10000 characters were removed from the middle") {
		t.Errorf("sent %d bytes: %.200q", len(sent[0]), sent)
	}
	var stored string
	for _, ev := range h.agent.History() {
		if ev.Who == "tool" {
			stored = Text(ev.Message)
		}
	}
	if stored != big {
		t.Errorf("the state keeps %d characters, want %d", len(stored), len(big))
	}
	fb := h.feedback()
	if len(fb) != 1 || !strings.HasSuffix(fb[0], "\n"+big) {
		t.Errorf("feedback does not hold the whole output")
	}
}

// The §3.6 table: which feedback is shown for each cartridge and mode.
func TestFeedbackCascade(t *testing.T) {
	const row4 = "interfaces:\n  tools:\n    executing:\n      feedback: false\n    responding:\n      feedback: true\n"
	row5 := func(mode string) string {
		return row4 + "  " + mode + ":\n    tools:\n      executing:\n        feedback: true\n      responding:\n        feedback: false\n"
	}
	cases := []struct {
		name                           string
		cart                           string
		replExec, evalExec, replR, evR bool
	}{
		{"{}", "", false, false, true, true},
		{"feedback false", "interfaces:\n  tools:\n    feedback: false\n", false, false, false, false},
		{"feedback true", "interfaces:\n  tools:\n    feedback: true\n", true, true, true, true},
		{"per action", row4, false, false, true, true},
		{"repl override", row5("repl"), true, false, false, true},
		{"eval override", row5("eval"), false, true, true, false},
	}
	for _, tc := range cases {
		for _, mode := range []cartridge.Mode{cartridge.REPL, cartridge.Eval} {
			t.Run(tc.name+"/"+string(mode), func(t *testing.T) {
				p := &scripted{steps: []step{{calls: []provider.ToolCall{call("1", "f", `{"a":1}`)}}}}
				h := newHarness(t, unconfirmed+tc.cart, mode, p, nil, newTool("f", nil, sleeper(0, "out")))
				ask(t, h, "go")
				var want []string
				exec, resp := tc.evalExec, tc.evR
				if mode == cartridge.REPL {
					exec, resp = tc.replExec, tc.replR
				}
				if exec {
					want = append(want, `executing: f {"a":1}`)
				}
				if resp {
					want = append(want, "responding: f {\"a\":1}\nout")
				}
				equal(t, "feedback", h.feedback(), want)
			})
		}
	}
}

// Feedback adapters get id, name, parameters, parameters_as_json and
// output; their result is the feedback text.
func TestFeedbackAdapters(t *testing.T) {
	cart := unconfirmed + `interfaces:
  tools:
    confirming:
      adapter:
        lua: return "may I run " .. name .. " " .. parameters_as_json .. "?"
    executing:
      feedback: true
      adapter:
        lua: return "running " .. id .. " " .. name .. " with from=" .. parameters.from
    responding:
      adapter:
        fennel: (.. name " said " output)
`
	p := &scripted{steps: []step{{calls: []provider.ToolCall{call("call_1", "random_number", `{"from":15,"to":25}`)}}}}
	h := newHarness(t, cart, cartridge.Eval, p, nil, newTool("random-number", nil, sleeper(0, "21")))
	h.agent.Scripts = script.New(script.Options{Sandboxed: true})
	ask(t, h, "go")
	equal(t, "feedback", h.feedback(), []string{
		"executing: running call_1 random-number with from=15",
		"responding: random-number said 21",
	})
	// Confirming goes through the adapter too.
	cart = strings.Replace(cart, "confirmable: false", "confirmable: true", 1)
	p = &scripted{steps: []step{{calls: []provider.ToolCall{call("call_1", "random_number", `{"from":15,"to":25}`)}}}}
	confirm := &answers{replies: []string{"n"}}
	h = newHarness(t, cart, cartridge.Eval, p, confirm, newTool("random-number", nil, nil))
	h.agent.Scripts = script.New(script.Options{Sandboxed: true})
	ask(t, h, "go")
	equal(t, "asked", confirm.asked, []string{`may I run random-number {"from":15,"to":25}?`})
}

// The default feedback text shows the arguments as the model sent them:
// its key order, no HTML escaping.
func TestFeedbackArgumentsAsSent(t *testing.T) {
	p := &scripted{steps: []step{{calls: []provider.ToolCall{call("1", "f", `{ "to": 25, "from": 15, "q": "a<b & c>d" }`)}}}}
	h := newHarness(t, unconfirmed, cartridge.Eval, p, nil, newTool("f", nil, sleeper(0, "ok")))
	ask(t, h, "go")
	equal(t, "feedback", h.feedback(), []string{"responding: f {\"to\":25,\"from\":15,\"q\":\"a<b & c>d\"}\nok"})
}

func msg(role provider.Role, content string) provider.Message {
	return provider.Message{Role: role, Content: content}
}

func roles(msgs []provider.Message) string {
	var out []string
	for _, m := range msgs {
		out = append(out, string(m.Role)[:1]+":"+m.Content)
	}
	return strings.Join(out, " ")
}

// Fit drops whole turns from the oldest, never separating a tool call from
// its result, and always keeps the last turn.
func TestFit(t *testing.T) {
	long := strings.Repeat("x", 400) // 100 tokens
	calls := provider.Message{Role: provider.RoleAssistant, ToolCalls: []provider.ToolCall{call("1", "f", "{}")}, Content: "c"}
	msgs := []provider.Message{
		msg(provider.RoleUser, "u1"), calls, {Role: provider.RoleTool, Content: long, ToolCallID: "1"}, msg(provider.RoleAssistant, "a1"),
		msg(provider.RoleUser, "u2"), msg(provider.RoleAssistant, "a2"),
		msg(provider.RoleUser, "u3"), calls, {Role: provider.RoleTool, Content: "r", ToolCallID: "1"}, msg(provider.RoleAssistant, "a3"),
	}
	cases := []struct {
		budget int
		want   string
	}{
		{0, roles(msgs)},
		{10_000, roles(msgs)},
		{60, "u:u2 a:a2 u:u3 a:c t:r a:a3"},
		{30, "u:u3 a:c t:r a:a3"},
		{1, "u:u3 a:c t:r a:a3"}, // the last turn stays whatever its size
	}
	for _, tc := range cases {
		if got := roles(Fit(msgs, tc.budget)); got != tc.want {
			t.Errorf("budget %d:\ngot  %s\nwant %s", tc.budget, got, tc.want)
		}
	}
	// A last turn that is one long tool loop is kept whole.
	loop := []provider.Message{msg(provider.RoleUser, "u"), calls, {Role: provider.RoleTool, Content: long}, calls, {Role: provider.RoleTool, Content: long}}
	if got := Fit(loop, 10); len(got) != len(loop) {
		t.Errorf("kept %d of the last turn's %d messages", len(got), len(loop))
	}
}

// The agent sends what fits its budget.
func TestRequestFitsTheBudget(t *testing.T) {
	p := &scripted{}
	h := newHarness(t, unconfirmed, cartridge.Eval, p, nil)
	for i := range 5 {
		ask(t, h, fmt.Sprintf("message %d %s", i, strings.Repeat("y", 400)))
	}
	h.agent.Budget = 300
	ask(t, h, "last")
	got := p.request(5).Messages
	if len(got) == 0 || got[len(got)-1].Content != "last" || len(got) >= 11 {
		t.Fatalf("sent %d messages: %s", len(got), roles(got))
	}
	if got[0].Role != provider.RoleUser {
		t.Errorf("the first message sent is not a user message: %s", roles(got))
	}
}

// A directive larger than the whole budget leaves room for the last turn
// only; it does not turn the budget off.
func TestRequestFitsTheBudgetWithALongDirective(t *testing.T) {
	p := &scripted{}
	cart := unconfirmed + "behaviors:\n  interaction:\n    directive: " + strings.Repeat("d", 2000) + "\n"
	h := newHarness(t, cart, cartridge.Eval, p, nil)
	for i := range 5 {
		ask(t, h, fmt.Sprintf("message %d %s", i, strings.Repeat("y", 400)))
	}
	h.agent.Budget = 300 // the directive alone is 500 tokens
	ask(t, h, "last")
	got := p.request(5).Messages
	if len(got) != 1 || got[0].Content != "last" {
		t.Errorf("sent %d messages, want the last turn only: %.120s", len(got), roles(got))
	}
}

// An answer cut short is kept with partial: true and never sent back.
func TestPartialAnswerStoredNotSent(t *testing.T) {
	cut := errors.New("the stream was cut")
	p := &scripted{steps: []step{{chunks: []string{"Hel", "lo"}, err: cut}}}
	h := newHarness(t, unconfirmed, cartridge.Eval, p, nil)
	var streamed strings.Builder
	h.agent.OnEvent = func(ev Event) {
		if ev.Kind == TextDelta {
			streamed.WriteString(ev.Text)
		}
	}
	if _, err := h.agent.Ask(context.Background(), "first"); !errors.Is(err, cut) {
		t.Fatalf("err = %v, want the provider's", err)
	}
	if streamed.String() != "Hello" {
		t.Errorf("streamed %q", streamed.String())
	}
	last := h.agent.History()[len(h.agent.History())-1]
	if last.Who != "AI" || !last.Partial || Text(last.Message) != "Hello" {
		t.Errorf("last event = %+v, want a partial AI answer", last)
	}
	ask(t, h, "second")
	// The first question never got a complete answer: it is kept in the
	// history, but not sent again.
	if got := roles(p.request(1).Messages); got != "u:second" {
		t.Errorf("second request = %s, want the partial answer and its unanswered question left out", got)
	}
}

// Streamed answers arrive as deltas; the history holds the whole text once.
func TestStreamedAnswerStoredOnce(t *testing.T) {
	p := &scripted{steps: []step{{chunks: []string{"Hel", "lo"}}}}
	h := newHarness(t, unconfirmed, cartridge.Eval, p, nil)
	res := ask(t, h, "hi")
	if !res.Streamed || res.Text != "Hello" {
		t.Errorf("result = %+v", res)
	}
	var deltas []string
	for _, ev := range h.events {
		if ev.Kind == TextDelta {
			deltas = append(deltas, ev.Text)
		}
	}
	equal(t, "deltas", deltas, []string{"Hel", "lo"})
	var ais []state.Event
	for _, ev := range h.agent.History() {
		if ev.Who == "AI" {
			ais = append(ais, ev)
		}
	}
	if len(ais) != 1 || Text(ais[0].Message) != "Hello" || ais[0].Output == nil || *ais[0].Output != "Hello\n" {
		t.Errorf("stored answers = %+v", ais)
	}
}

// A stored round whose results are missing (a state written by an
// interrupted run) still gives every call a result when sent.
func TestMessagesAnswerEveryCall(t *testing.T) {
	calls := []state.ToolCall{{ID: "1", Name: "a", Arguments: "{}"}, {ID: "2", Name: "b", Arguments: "{}"}}
	history := []state.Event{
		{Who: "user", Message: "go"},
		{Who: "AI", ToolCalls: calls},
		{Who: "tool", Message: "A", Result: state.ToolResult{ID: "1", Name: "a"}},
		{Who: "user", Message: "again"},
	}
	got := Messages(history, nil)
	if r := roles(got); r != "u:go a: t:A t:"+InterruptedText+" u:again" {
		t.Fatalf("messages = %s", r)
	}
	if got[3].ToolCallID != "2" || got[3].ToolName != "b" {
		t.Errorf("the synthesized result answers %s %s, want 2 b", got[3].ToolCallID, got[3].ToolName)
	}
	// A complete round is left as it is.
	history = append(history[:3:3], state.Event{Who: "tool", Message: "B", Result: state.ToolResult{ID: "2", Name: "b"}}, history[3])
	if r := roles(Messages(history, nil)); r != "u:go a: t:A t:B u:again" {
		t.Errorf("messages = %s", r)
	}
}

// A client's system text follows the cartridge's directive and
// instruction.
func TestRequestClientSystemAfterTheCartridge(t *testing.T) {
	p := &scripted{}
	cart := unconfirmed + "behaviors:\n  interaction:\n    directive: D\n    instruction: I\n"
	h := newHarness(t, cart, cartridge.Eval, p, nil)
	h.agent.System = "client"
	ask(t, h, "hi")
	if got := p.request(0).System; got != "D\n\nI\n\nclient" {
		t.Errorf("system = %q", got)
	}
}

// A client's sampling settings travel with every request of the exchange.
func TestRequestCarriesSampling(t *testing.T) {
	p := &scripted{}
	h := newHarness(t, unconfirmed, cartridge.Eval, p, nil)
	temp := 0.5
	h.agent.Override = &provider.Override{Sampling: provider.Sampling{Temperature: &temp}}
	ask(t, h, "hi")
	if o := p.request(0).Override; o == nil || *o.Sampling.Temperature != 0.5 {
		t.Errorf("override %+v", o)
	}
}

// An answer wanted whole is not streamed from the provider, even when
// the cartridge streams.
func TestWholeAnswerNotStreamed(t *testing.T) {
	p := &scripted{}
	h := newHarness(t, unconfirmed, cartridge.Eval, p, nil)
	ask(t, h, "hi")
	if !p.request(0).Stream {
		t.Fatal("the cartridge does not stream")
	}
	h.agent.Whole = true
	ask(t, h, "again")
	if p.request(1).Stream {
		t.Error("an answer wanted whole was streamed")
	}
}

// The reference's tail mode keeps the end of an output (grep, glob and
// the editing tools), with a note of how much was cut from its start.
func TestTruncationTail(t *testing.T) {
	tr := Truncation{MaxChars: 10, Tail: true}
	if got := tr.Apply("0123456789"); got != "0123456789" {
		t.Errorf("at the limit: %q", got)
	}
	want := "[WARNING: Tool output was truncated. The first 6 characters were removed. If you need them, call the tool with more targeted parameters.]\n\n6789ABCDEF"
	if got := tr.Apply("0123456789ABCDEF"); got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	if got := tr.Apply("ééééééééééééééé"); !strings.HasSuffix(got, "]\n\néééééééééé") || !strings.Contains(got, "first 5 characters") {
		t.Errorf("multi-byte: %q", got)
	}
}

// Each built-in tool's output is cut as the reference's table says:
// grep, glob and the editing tools keep the tail; builtins.limits
// changes a tool's characters, lines and mode, by name.
func TestToolLimitModes(t *testing.T) {
	big := strings.Repeat("0123456789", 5000)
	limited := func(name string, lim tool.Limits) tool.Tool {
		return &ownLimits{fakeTool: newTool(name, nil, nil), lim: lim}
	}
	set := &tool.Set{}
	set.Add(limited("grep", tool.Limits{Chars: 20_000, Lines: 200, Tail: true}))
	set.Add(limited("read_file", tool.Limits{Chars: 50_000}))
	set.Add(limited("exec", tool.Limits{Chars: 30_000, Lines: 256}))
	a := engine(parse(t, "builtins:\n  limits:\n    exec: {chars: 100, mode: tail}\n    read-file: 40\nprovider: {id: openai}\n"), cartridge.Eval, nil, set)
	if got := a.limitsFor("grep").Apply(big); !strings.HasPrefix(got, "[WARNING: Tool output was truncated. The first 30000 characters") {
		t.Errorf("grep: %.100q", got)
	}
	if got := a.limitsFor("exec").Apply(big); !strings.HasPrefix(got, "[WARNING: Tool output was truncated. The first 49900 characters") || !strings.HasSuffix(got, "]\n\n"+big[len(big)-100:]) {
		t.Errorf("exec with builtins.limits: %.200q", got)
	}
	if got := a.limitsFor("read_file").Apply(big); !strings.HasPrefix(got, "01234567890123456789\n\n[WARNING: Tool output was truncated. 49960 characters were removed from the middle") {
		t.Errorf("read_file with builtins.limits: %.200q", got)
	}
}

type ownLimits struct {
	*fakeTool
	lim tool.Limits
}

func (t *ownLimits) OutputLimits() tool.Limits { return t.lim }

// TestMessagesSizedOnce: converting a history costs one allocation, not
// one per doubling of its length (each turn converts the whole
// unconsolidated tail).
func TestMessagesSizedOnce(t *testing.T) {
	var h []state.Event
	for i := range 50 {
		q := fmt.Sprintf("question %d", i)
		h = append(h, state.Event{Who: state.RoleUser, Message: q, Input: &q}, state.Event{Who: state.RoleAI, Message: "answer"})
	}
	if n := testing.AllocsPerRun(20, func() { Messages(h, nil) }); n > 1 {
		t.Errorf("Messages of %d events: %.0f allocations, want 1", len(h), n)
	}
}
