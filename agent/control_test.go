package agent

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/nbots/nb/cartridge"
	"github.com/nbots/nb/provider"
	"github.com/nbots/nb/state"
	"github.com/nbots/nb/tool"
)

// An exchange's events come between SessionStart and SessionEnd, with
// the user's input, the steering injected after a tool round, and, when
// it fails, an Error.
func TestSessionEvents(t *testing.T) {
	p := &scripted{steps: []step{{calls: []provider.ToolCall{call("1", "a", "{}")}}, {chunks: []string{"ok"}}}}
	h := newHarness(t, unconfirmed, cartridge.Eval, p, nil, newTool("a", nil, nil))
	sent := false
	h.agent.Steering = func() []string {
		if sent || p.requestCount() == 0 {
			return nil
		}
		sent = true
		return []string{"be brief"}
	}
	ask(t, h, "go")
	var kinds []string
	for _, ev := range h.events {
		switch ev.Kind {
		case SessionStart, SessionEnd, UserInput, SteeringInjected, ToolStart, ToolEnd:
			kinds = append(kinds, ev.Kind.String()+":"+ev.Text)
		}
	}
	equal(t, "events", kinds, []string{"session_start:", "user_input:go", "tool_call_start:", "tool_call_end:", "steering_injected:be brief", "session_end:idle"})

	failing := &scripted{steps: []step{{err: errors.New("the provider is down")}}}
	h = newHarness(t, unconfirmed, cartridge.Eval, failing, nil)
	if _, err := h.agent.Ask(context.Background(), "go"); err == nil {
		t.Fatal("no error")
	}
	errs, ends := h.kinds(Error), h.kinds(SessionEnd)
	if len(errs) != 1 || !strings.Contains(errs[0].Text, "the provider is down") || len(ends) != 1 || ends[0].Text != SessionFailed {
		t.Errorf("Error events %+v, SessionEnd %+v", errs, ends)
	}
}

// The usage of every round is summed and kept with the answer in the
// state, where it reads back the same.
func TestUsageStoredWithTheAnswer(t *testing.T) {
	p := &scripted{steps: []step{
		{calls: []provider.ToolCall{call("1", "a", "{}")}, usage: provider.Usage{InputTokens: 100, OutputTokens: 10, CacheWriteTokens: 90}},
		{chunks: []string{"ok"}, usage: provider.Usage{InputTokens: 120, OutputTokens: 5, CacheReadTokens: 90, ReasoningTokens: 3}},
	}}
	h := newHarness(t, unconfirmed, cartridge.Eval, p, nil, newTool("a", nil, nil))
	res := ask(t, h, "go")
	want := state.Usage{InputTokens: 220, OutputTokens: 15, CacheReadTokens: 90, CacheWriteTokens: 90, ReasoningTokens: 3}
	if u := res.Usage; u.InputTokens != 220 || u.CacheReadTokens != 90 || u.CacheWriteTokens != 90 {
		t.Errorf("result usage = %+v", u)
	}
	hist := h.agent.History()
	last := hist[len(hist)-1]
	if last.Usage == nil || *last.Usage != want {
		t.Fatalf("stored usage = %+v, want %+v", last.Usage, want)
	}
	rec := last.JSON()
	if got, _ := rec.Meta["usage"].(map[string]any); got["input_tokens"] != 220 || got["cache_read_tokens"] != 90 {
		t.Errorf("meta.usage = %v", rec.Meta["usage"])
	}
	data, err := last.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	var back state.Event
	if err := back.UnmarshalJSON(data); err != nil || back.Usage == nil || *back.Usage != want {
		t.Errorf("read back: %+v (%v) from %s", back.Usage, err, data)
	}
}

// A long exchange nears the budget: a Warning at 80%, then the oldest
// tool outputs are abridged (head and tail) before any turn is dropped;
// the last round's results and the stored outputs stay whole.
func TestContextPressure(t *testing.T) {
	big := func(c byte) string { return strings.Repeat(string(c), 8000) } // ~2,000 tokens each
	outputs := []string{big('a'), big('b'), big('c'), big('d')}
	n := 0
	tl := newTool("read", nil, func(context.Context, tool.Call) (any, error) {
		n++
		return outputs[n-1], nil
	})
	var steps []step
	for i := range 4 {
		steps = append(steps, step{calls: []provider.ToolCall{call("c"+string(rune('1'+i)), "read", `{"i":`+strings.Repeat("1", i+1)+`}`)}})
	}
	steps = append(steps, step{chunks: []string{"ok"}})
	p := &scripted{steps: steps}
	h := newHarness(t, unconfirmed, cartridge.Eval, p, nil, tl)
	h.agent.Budget = 6000
	res := ask(t, h, "go")
	if res.ContextBudget != 6000 || res.ContextTokens == 0 || res.ContextTokens > 6000 {
		t.Errorf("result context figures: %d of %d", res.ContextTokens, res.ContextBudget)
	}
	warnings := h.kinds(Warning)
	var usage, abridged bool
	for _, w := range warnings {
		usage = usage || strings.HasPrefix(w.Text, "Context usage at ~")
		abridged = abridged || strings.Contains(w.Text, "abridged")
	}
	if !usage || !abridged {
		t.Fatalf("warnings = %+v, want the usage warning and the abridging one", warnings)
	}
	last := p.request(4).Messages
	if last[0].Role != provider.RoleUser || last[0].Content != "go" {
		t.Errorf("the first turn was dropped: %+v", last[0])
	}
	tools := toolMessages(p.request(4))
	if len(tools) != 4 {
		t.Fatalf("tool results sent: %d, want 4", len(tools))
	}
	if !strings.Contains(tools[0], "abridged to fit the context") || len(tools[0]) > 1500 {
		t.Errorf("the oldest output was not abridged: %d characters", len(tools[0]))
	}
	if !strings.HasSuffix(tools[3], big('d')) {
		t.Error("the last round's output was abridged")
	}
	for _, ev := range h.agent.History() {
		if ev.Who == state.RoleTool && len(Text(ev.Message)) != 8000 {
			t.Errorf("a stored output has %d characters, want 8000", len(Text(ev.Message)))
		}
	}
}

// A message the user sent before the first request (queued while
// nothing ran) joins the input in the first request, as one user turn,
// after it; nothing waits for a tool round that may never come.
func TestSteeringBeforeTheFirstRequest(t *testing.T) {
	p := &scripted{steps: []step{{chunks: []string{"ok"}}}}
	h := newHarness(t, unconfirmed, cartridge.Eval, p, nil)
	queued := []string{"in French"}
	h.agent.SteerFirst = true
	h.agent.Steering = func() []string {
		s := queued
		queued = nil
		return s
	}
	ask(t, h, "hello")
	msgs := p.request(0).Messages
	if last := msgs[len(msgs)-1]; last.Role != provider.RoleUser || last.Content != "hello\n\nin French" {
		t.Errorf("the first request ends with %+v", last)
	}
	var kinds []string
	for _, ev := range h.events {
		if ev.Kind == UserInput || ev.Kind == SteeringInjected {
			kinds = append(kinds, ev.Kind.String()+":"+ev.Text)
		}
	}
	equal(t, "events", kinds, []string{"user_input:hello", "steering_injected:in French"})
}

// Without SteerFirst (the gateway), a message queued before the first
// request is not joined to the input: it stays queued for its sender's
// next turn, so that each message is answered on its own.
func TestSteeringNotBeforeTheFirstRequest(t *testing.T) {
	p := &scripted{steps: []step{{chunks: []string{"ok"}}}}
	h := newHarness(t, unconfirmed, cartridge.Eval, p, nil)
	queued := []string{"in French"}
	h.agent.Steering = func() []string {
		s := queued
		queued = nil
		return s
	}
	ask(t, h, "hello")
	msgs := p.request(0).Messages
	if last := msgs[len(msgs)-1]; last.Content != "hello" {
		t.Errorf("the first request ends with %+v", last)
	}
	equal(t, "still queued", queued, []string{"in French"})
}

// Every call gets a start event and an end event, the ones that cannot
// run too: an unknown tool, arguments that break the schema, arguments
// that are not JSON; the end carries the error given to the model.
func TestEveryCallStartsAndEnds(t *testing.T) {
	schema := map[string]any{"type": "object", "properties": map[string]any{"n": map[string]any{"type": "integer"}}, "required": []any{"n"}}
	p := &scripted{steps: []step{{calls: []provider.ToolCall{
		call("1", "nope", "{}"), call("2", "count", `{"n":"x"}`), call("3", "count", `{"n":`), call("4", "count", `{"n":2}`),
	}}}}
	h := newHarness(t, unconfirmed, cartridge.Eval, p, nil, newTool("count", schema, nil))
	ask(t, h, "go")
	started, ended := map[string]bool{}, map[string]bool{}
	for _, ev := range h.events {
		switch ev.Kind {
		case ToolStart:
			if ended[ev.Call.ID] {
				t.Errorf("call %s started after it ended", ev.Call.ID)
			}
			started[ev.Call.ID] = true
		case ToolEnd:
			if !started[ev.Call.ID] {
				t.Errorf("call %s ended without a start", ev.Call.ID)
			}
			ended[ev.Call.ID] = true
			if want := ev.Call.ID != "4"; ev.IsError != want {
				t.Errorf("call %s: IsError %v (%v)", ev.Call.ID, ev.IsError, ev.Output)
			}
		}
	}
	for _, id := range []string{"1", "2", "3", "4"} {
		if !started[id] || !ended[id] {
			t.Errorf("call %s: start %v, end %v", id, started[id], ended[id])
		}
	}
}

// A provider that refuses the conversation as longer than the model's
// context (its estimate fit nb's budget) gets it once more, compacted to
// half: old tool outputs abridged, then the oldest turns left out; a
// Warning says so. A second refusal fails the exchange: one retry only.
func TestContextLengthCompactsAndRetries(t *testing.T) {
	refusal := &provider.Error{Provider: "fake", Status: 400, Code: "context_length_exceeded", Message: "This model's maximum context length is 8192 tokens."}
	big := strings.Repeat("0123456789", 2000)
	history := func() *Memory {
		var evs []state.Event
		for i := range 6 {
			q := fmt.Sprintf("question %d", i)
			evs = append(evs,
				state.Event{Who: state.RoleUser, Input: &q, Message: q},
				state.Event{Who: state.RoleAI, ToolCalls: []state.ToolCall{{ID: fmt.Sprint(i), Name: "a", Arguments: "{}"}}},
				state.Event{Who: state.RoleTool, Message: big, Result: state.ToolResult{ID: fmt.Sprint(i), Name: "a"}},
				state.Event{Who: state.RoleAI, Message: "answer"})
		}
		return NewMemory(evs...)
	}
	p := &scripted{steps: []step{{err: refusal}, {chunks: []string{"ok"}}}}
	h := newHarness(t, unconfirmed, cartridge.Eval, p, nil, newTool("a", nil, nil))
	h.agent.Conversation = history()
	if res := ask(t, h, "go on"); res.Text != "ok" {
		t.Fatalf("answer %q", res.Text)
	}
	size := func(r provider.Request) int { return requestTokens(provider.Request{Messages: r.Messages}) }
	first, second := p.request(0), p.request(1)
	if size(second) > size(first)/2 {
		t.Errorf("the retry is %d estimated tokens, the refused request %d", size(second), size(first))
	}
	if last := second.Messages[len(second.Messages)-1]; last.Content != "go on" {
		t.Errorf("the retry ends with %+v", last)
	}
	var warned []string
	for _, ev := range h.kinds(Warning) {
		warned = append(warned, ev.Text)
	}
	if len(warned) == 0 || !strings.Contains(strings.Join(warned, "\n"), "The provider refused the conversation as longer than the model's context: it was compacted from") {
		t.Errorf("warnings %q", warned)
	}

	p = &scripted{steps: []step{{err: refusal}, {err: refusal}, {chunks: []string{"never"}}}}
	h = newHarness(t, unconfirmed, cartridge.Eval, p, nil, newTool("a", nil, nil))
	h.agent.Conversation = history()
	if _, err := h.agent.Ask(context.Background(), "go on"); !errors.Is(err, refusal) {
		t.Errorf("a second refusal: %v", err)
	}
	if n := p.requestCount(); n != 2 {
		t.Errorf("%d requests", n)
	}
}

// A cartridge that writes files or runs commands gets the coding limit
// (a coding task takes 50 to 200 rounds); one that only reads, or has
// no built-ins, the reference's 10; safety.tools.rounds wins over both.
func TestCodingRoundLimit(t *testing.T) {
	for src, want := range map[string]int{
		"provider: {id: openai}\n":                                                           DefaultRounds,
		"builtins: {files: {write: false}}\n":                                                DefaultRounds,
		"builtins: {files: true}\n":                                                          CodingRounds,
		"builtins: {exec: true}\n":                                                           CodingRounds,
		"builtins: {files: {write: false}, exec: true}\n":                                    CodingRounds,
		"builtins: {files: true}\nsafety: {tools: {rounds: 30}}\n":                           30,
		"builtins: {exec: {timeout: 5}}\nsafety: {tools: {rounds: 7, confirmable: false}}\n": 7,
	} {
		if got := MaxRounds(parse(t, src)); got != want {
			t.Errorf("%q: %d rounds, want %d", src, got, want)
		}
	}
	if CodingRounds < 50 {
		t.Errorf("CodingRounds %d", CodingRounds)
	}
}

// safety.tokens bounds an exchange's tokens: once its rounds used the
// budget, no further request is made and the exchange stops, as at the
// round limit, with the conversation kept.
func TestTokenBudget(t *testing.T) {
	cart := "safety: {tools: {confirmable: false}, tokens: 1000}\nprovider: {id: openai}\n"
	p := &scripted{forever: func(n int) step {
		return step{calls: []provider.ToolCall{call(fmt.Sprint(n), "r", fmt.Sprintf(`{"n":%d}`, n))}, usage: provider.Usage{InputTokens: 300, OutputTokens: 100}}
	}}
	h := newHarness(t, cart, cartridge.Eval, p, nil, newTool("r", nil, nil))
	res := ask(t, h, "go")
	if res.Stopped != StopTokenLimit || res.Rounds != 3 || !strings.Contains(res.Notice, "1200 tokens, the budget is 1000 (safety.tokens") {
		t.Errorf("result %+v", res)
	}
	if n := p.requestCount(); n != 3 {
		t.Errorf("%d requests", n)
	}
	if got := h.kinds(TurnLimit); len(got) != 1 {
		t.Errorf("TurnLimit events %+v", got)
	}
}

// safety.loops sets the loop detector's window: a two-call cycle is
// caught after four calls with a window of 4, not before ten with the
// default.
func TestLoopWindowSetting(t *testing.T) {
	cycle := func(n int) step {
		name := "a"
		if n%2 == 0 {
			name = "b"
		}
		if n > 6 {
			return step{chunks: []string{"done"}}
		}
		return step{calls: []provider.ToolCall{call(fmt.Sprint(n), name, "{}")}}
	}
	for cart, want := range map[string]int{
		"safety: {tools: {confirmable: false}, loops: 4}\nprovider: {id: openai}\n": 1,
		unconfirmed: 0,
	} {
		p := &scripted{forever: cycle}
		h := newHarness(t, cart, cartridge.Eval, p, nil, newTool("a", nil, nil), newTool("b", nil, nil))
		ask(t, h, "go")
		got := h.kinds(LoopDetection)
		if len(got) != want {
			t.Errorf("%q: %d loop warnings %+v", cart, len(got), got)
		}
		if want == 1 && got[0].Text != LoopWarning(4) {
			t.Errorf("warning %q", got[0].Text)
		}
	}
}
