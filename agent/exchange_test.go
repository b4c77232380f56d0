package agent

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nbots/nb/cartridge"
	"github.com/nbots/nb/media"
	"github.com/nbots/nb/provider"
	"github.com/nbots/nb/state"
	"github.com/nbots/nb/tool"
)

// A history that breaks the providers' rules (two exchanges that
// interleaved on one key before exchanges held their key, failed
// exchanges, results without their call) is repaired when it is sent:
// the key is never left unusable.
func TestMessagesRepairBrokenHistories(t *testing.T) {
	callsOf := func(ids ...string) []state.ToolCall {
		var calls []state.ToolCall
		for _, id := range ids {
			calls = append(calls, state.ToolCall{ID: id, Name: "f", Arguments: "{}"})
		}
		return calls
	}
	result := func(id, text string) state.Event {
		return state.Event{Who: "tool", Message: text, Result: state.ToolResult{ID: id, Name: "f"}}
	}
	cases := []struct {
		name    string
		history []state.Event
		want    string
	}{
		{"interleaved exchanges", []state.Event{
			{Who: "user", Message: "q1"}, {Who: "user", Message: "q2"},
			{Who: "AI", ToolCalls: callsOf("A")}, {Who: "AI", ToolCalls: callsOf("B")},
			result("B", "rb"), result("A", "ra"),
			{Who: "AI", Message: "a1"}, {Who: "user", Message: "q3"},
		}, "u:q2 a: t:" + InterruptedText + " a: t:rb a:a1 u:q3"},
		{"failed exchanges are not resent", []state.Event{
			{Who: "user", Message: "q"}, {Who: "user", Message: "q"}, {Who: "AI", Message: "cut", Partial: true},
			{Who: "user", Message: "q"},
		}, "u:q"},
		{"orphan result", []state.Event{
			{Who: "user", Message: "q"}, result("X", "orphan"), {Who: "AI", Message: "a"},
		}, "u:q a:a"},
		{"result after a user turn", []state.Event{
			{Who: "user", Message: "q"}, {Who: "AI", ToolCalls: callsOf("A")}, {Who: "user", Message: "q2"}, result("A", "late"),
		}, "u:q a: t:" + InterruptedText + " u:q2"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Messages(tc.history, nil)
			if r := roles(got); r != tc.want {
				t.Errorf("messages =\n%s\nwant\n%s", r, tc.want)
			}
			// Every call is answered right after its message; no result
			// without its call.
			var pending map[string]bool
			for _, m := range got {
				switch m.Role {
				case provider.RoleAssistant:
					for id := range pending {
						t.Errorf("call %s unanswered", id)
					}
					pending = map[string]bool{}
					for _, c := range m.ToolCalls {
						pending[c.ID] = true
					}
				case provider.RoleTool:
					if !pending[m.ToolCallID] {
						t.Errorf("result %s without its call", m.ToolCallID)
					}
					delete(pending, m.ToolCallID)
				default:
					for id := range pending {
						t.Errorf("call %s unanswered before a user turn", id)
					}
					pending = nil
				}
			}
		})
	}
}

// The same call with the same arguments three times in a row is a loop
// at once, not after ten: the warning after the third, the stop after
// three more.
func TestSameCallThreeTimesStops(t *testing.T) {
	p := &scripted{forever: func(int) step { return step{calls: []provider.ToolCall{call("1", "a", `{"x":1}`)}} }}
	a := newTool("a", nil, nil)
	h := newHarness(t, unconfirmed, cartridge.Eval, p, nil, a)
	res := ask(t, h, "go")
	if res.Stopped != StopLoop || !strings.Contains(res.Notice, "same tool call (a)") {
		t.Fatalf("result = %+v", res)
	}
	if a.runs() != 6 || p.requestCount() != 6 {
		t.Errorf("runs = %d, requests = %d; want 6 and 6", a.runs(), p.requestCount())
	}
}

// A tool that returns NaN or ±Inf (a Lua division by zero) has its result
// stored and sent: nothing is lost to "json: unsupported value".
func TestNonFiniteResultsAreStoredAndSent(t *testing.T) {
	root := t.TempDir()
	st, _ := state.Files{Root: root}.Open(state.Bot{Author: "a", Name: "b"}, "u", "k")
	div := newTool("div", nil, func(context.Context, tool.Call) (any, error) {
		return map[string]any{"q": math.Inf(1), "list": []any{math.NaN(), math.Inf(-1), 2.5}}, nil
	})
	p := &scripted{steps: []step{{calls: []provider.ToolCall{call("1", "div", `{"a":1,"b":0}`)}}}}
	h := newHarness(t, unconfirmed, cartridge.Eval, p, nil, div)
	turn, err := st.Begin(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	h.agent.Conversation = turn
	ask(t, h, "divide")
	turn.End()
	got := toolMessages(p.request(1))
	if len(got) != 1 || got[0] != `1 div: {"list":["nan","-inf",2.5],"q":"inf"}` {
		t.Errorf("sent %q", got)
	}
	history, err := st.History(context.Background())
	if err != nil || len(history) != 4 {
		t.Fatalf("stored %+v, %v", history, err)
	}
}

// A huge tool output is stored head and tail with a note (the whole of it
// in a file beside the state), reaches the ToolEnd event whole, and the
// model gets the usual truncation.
func TestHugeOutputStoredBounded(t *testing.T) {
	big := strings.Repeat("a", 300_000) + strings.Repeat("z", 300_000)
	out := newTool("dump", nil, func(context.Context, tool.Call) (any, error) { return big, nil })
	p := &scripted{steps: []step{{calls: []provider.ToolCall{call("c1", "dump", "{}")}}}}
	h := newHarness(t, unconfirmed, cartridge.Eval, p, nil, out)
	dir := t.TempDir()
	h.agent.Conversation = &keeping{Memory: NewMemory(), dir: dir}
	ask(t, h, "go")
	var stored string
	for _, ev := range h.agent.History() {
		if ev.Who == "tool" {
			stored = ev.Message.(string)
		}
	}
	if len(stored) > DefaultMaxStored+500 || !strings.HasPrefix(stored, "aaa") || !strings.HasSuffix(stored, "zzz") {
		t.Errorf("stored %d bytes: %.80q...%.80q", len(stored), stored, stored[max(0, len(stored)-80):])
	}
	path := filepath.Join(dir, "c1.txt")
	if !strings.Contains(stored, "600000 bytes") || !strings.Contains(stored, path) {
		t.Errorf("the note does not say the size and where the whole output is: %q", stored[DefaultMaxStored/2-10:DefaultMaxStored/2+300])
	}
	if whole, err := os.ReadFile(path); err != nil || string(whole) != big {
		t.Errorf("the whole output was not kept: %v", err)
	}
	var ended any
	for _, ev := range h.events {
		if ev.Kind == ToolEnd {
			ended = ev.Output
		}
	}
	if ended != big {
		t.Error("the ToolEnd event does not carry the whole output")
	}
	if sent := toolMessages(p.request(1)); len(sent[0]) > 31_000 {
		t.Errorf("the model got %d characters", len(sent[0]))
	}
}

// keeping is a conversation in memory that keeps whole outputs in dir, as
// a stored conversation does.
type keeping struct {
	*Memory
	dir string
}

func (k *keeping) KeepOutput(id, text string) (string, error) {
	path := filepath.Join(k.dir, id+".txt")
	return path, os.WriteFile(path, []byte(text), 0o600)
}

// limitedTool has output limits of its own, and reads only.
type limitedTool struct{ *fakeTool }

func (limitedTool) OutputLimits() tool.Limits { return tool.Limits{Chars: 100} }
func (limitedTool) ReadOnly() bool            { return true }

// A read-only tool runs without being asked about, even when tools are
// confirmable; a tool's own output limits apply to what the model gets.
func TestReadOnlyAndToolLimits(t *testing.T) {
	read := limitedTool{newTool("read", nil, func(context.Context, tool.Call) (any, error) { return strings.Repeat("x", 1000), nil })}
	write := newTool("write", nil, nil)
	p := &scripted{steps: []step{{calls: []provider.ToolCall{call("1", "read", "{}"), call("2", "write", "{}")}}}}
	confirm := &answers{replies: []string{"n"}}
	h := newHarness(t, confirmed, cartridge.Eval, p, confirm, read, write)
	ask(t, h, "go")
	equal(t, "asked", confirm.asked, []string{"write {}"})
	sent := toolMessages(p.request(1))
	if len(sent) != 2 || !strings.Contains(sent[0], "Tool output was truncated") || len(sent[0]) > 400 {
		t.Errorf("read result = %.200q", sent[0])
	}
	if sent[1] != "2 write: "+DenialText {
		t.Errorf("write result = %q", sent[1])
	}
}

// A tool.Result reaches the model as text, with its images, and an error
// result is marked in the state.
func TestStructuredToolResult(t *testing.T) {
	img := media.Image{MediaType: "image/png", Data: []byte("png")}
	shot := newTool("shot", nil, func(context.Context, tool.Call) (any, error) {
		return &tool.Result{Text: "a picture", Images: []media.Image{img}}, nil
	})
	fail := newTool("fail", nil, func(context.Context, tool.Call) (any, error) {
		return tool.Result{Text: "no such file", IsError: true}, nil
	})
	p := &scripted{steps: []step{{calls: []provider.ToolCall{call("1", "shot", "{}"), call("2", "fail", "{}")}}}}
	h := newHarness(t, unconfirmed, cartridge.Eval, p, nil, shot, fail)
	ask(t, h, "go")
	var results []provider.Message
	for _, m := range p.request(1).Messages {
		if m.Role == provider.RoleTool {
			results = append(results, m)
		}
	}
	if len(results) != 2 || results[0].Content != "a picture" || len(results[0].Images) != 1 || string(results[0].Images[0].Data) != "png" {
		t.Fatalf("results = %+v", results)
	}
	if results[0].IsError || !results[1].IsError {
		t.Errorf("IsError = %v, %v; the provider must know the second call failed", results[0].IsError, results[1].IsError)
	}
	var stored []state.Event
	for _, ev := range h.agent.History() {
		if ev.Who == "tool" {
			stored = append(stored, ev)
		}
	}
	if !stored[1].Result.IsError || stored[0].Result.IsError {
		t.Errorf("is_error = %v, %v", stored[0].Result.IsError, stored[1].Result.IsError)
	}
}

// The client's own tools are offered to the model and never run here: a
// round that calls one runs the agent's other calls, then ends with the
// client's calls pending; Continue goes on once the client's results
// are recorded.
func TestExternalToolsArePending(t *testing.T) {
	mine := newTool("mine", nil, nil)
	p := &scripted{steps: []step{
		{chunks: []string{"let me see"}, calls: []provider.ToolCall{call("1", "mine", "{}"), call("2", "theirs", `{"q":"x"}`)}},
		{chunks: []string{"final"}},
	}}
	h := newHarness(t, unconfirmed, cartridge.Eval, p, nil, mine)
	h.agent.External = []tool.Spec{{Name: "theirs", Parameters: tool.DefaultParameters()}}
	res := ask(t, h, "go")
	if res.FinishReason != "tool_calls" || len(res.Pending) != 1 || res.Pending[0].ID != "2" || res.Pending[0].Arguments["q"] != "x" {
		t.Fatalf("result = %+v", res)
	}
	if mine.runs() != 1 {
		t.Errorf("the agent's own tool ran %d times", mine.runs())
	}
	var offered []string
	for _, sp := range p.request(0).Tools {
		offered = append(offered, sp.Name)
	}
	equal(t, "offered", offered, []string{"mine", "theirs"})
	h.agent.Conversation.Append(state.Event{Who: "tool", Message: "their answer", Result: state.ToolResult{ID: "2", Name: "theirs"}}) //nolint:errcheck // a Memory
	res, err := h.agent.Continue(context.Background())
	if err != nil || res.Text != "final" {
		t.Fatalf("Continue = %+v, %v", res, err)
	}
	equal(t, "results sent", toolMessages(p.request(1)), []string{"1 mine: mine ran with {}", "2 theirs: their answer"})
}

// Events: a round's start and end (with usage), each tool's start and
// end, and retries reported through the context.
func TestExchangeEvents(t *testing.T) {
	p := &usageProvider{scripted: scripted{steps: []step{{calls: []provider.ToolCall{call("1", "a", "{}")}}, {chunks: []string{"ok"}}}}}
	policy := provider.RetryPolicy{MaxRetries: 1, Sleep: func(context.Context, time.Duration) error { return nil }}
	h := newHarness(t, unconfirmed, cartridge.Eval, &scripted{}, nil, newTool("a", nil, nil))
	h.agent.Provider = provider.WithRetry(p, policy)
	res := ask(t, h, "go")
	var kinds []string
	for _, ev := range h.events {
		switch ev.Kind {
		case RoundStart:
			kinds = append(kinds, "start")
		case RoundEnd:
			kinds = append(kinds, "end:"+strings.Join(callNames(ev.Calls), ","))
		case ToolStart:
			kinds = append(kinds, "tool:"+ev.Call.Name)
		case ToolEnd:
			kinds = append(kinds, "done:"+Text(ev.Output))
		case Retry:
			kinds = append(kinds, "retry")
		}
	}
	equal(t, "events", kinds, []string{"start", "retry", "end:a", "tool:a", "done:a ran with {}", "start", "end:"})
	if res.Usage.InputTokens != 20 || res.Usage.OutputTokens != 4 || res.Rounds != 2 {
		t.Errorf("usage = %+v over %d rounds", res.Usage, res.Rounds)
	}
}

func callNames(calls []tool.Call) []string {
	var out []string
	for _, c := range calls {
		out = append(out, c.Name)
	}
	return out
}

// usageProvider reports usage, and fails its first request with a
// retryable error.
type usageProvider struct {
	scripted
	once sync.Once
}

func (p *usageProvider) Complete(ctx context.Context, req provider.Request, onEvent func(provider.Event)) (*provider.Response, error) {
	var err error
	p.once.Do(func() { err = &provider.Error{Provider: "fake", Status: 503, Message: "busy", Retryable: true} })
	if err != nil {
		return nil, err
	}
	resp, err := p.scripted.Complete(ctx, req, onEvent)
	if resp != nil {
		resp.Usage = provider.Usage{InputTokens: 10, OutputTokens: 2}
	}
	return resp, err
}

// Messages the user sent while a round of tool calls ran all reach the
// model in the next request: two of them are not a failed exchange
// followed by another (whose first question is not sent again).
func TestSteeringMessagesAllSent(t *testing.T) {
	p := &scripted{steps: []step{
		{calls: []provider.ToolCall{call("1", "a", "{}")}},
		{chunks: []string{"ok"}},
	}}
	h := newHarness(t, unconfirmed, cartridge.Eval, p, nil, newTool("a", nil, nil))
	steered := false
	h.agent.Steering = func() []string {
		if steered {
			return nil
		}
		steered = true
		return []string{"use metric units", "and be brief"}
	}
	ask(t, h, "go")
	var users []string
	for _, m := range p.request(1).Messages {
		if m.Role == provider.RoleUser {
			users = append(users, m.Content)
		}
	}
	joined := strings.Join(users, "\n")
	for _, want := range []string{"go", "use metric units", "and be brief"} {
		if !strings.Contains(joined, want) {
			t.Errorf("the second request's user messages %q lack %q", users, want)
		}
	}
}
