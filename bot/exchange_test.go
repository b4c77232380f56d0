package bot

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/nbots/nb/agent"
	"github.com/nbots/nb/cartridge"
	"github.com/nbots/nb/internal/testbuf"
	"github.com/nbots/nb/provider"
	"github.com/nbots/nb/provider/openai/openaitest"
	"github.com/nbots/nb/provider/providertest"
	"github.com/nbots/nb/tool"
)

// botWith builds a bot of the in-memory cartridge (see cartridgeFor:
// extra is added to it) on the OpenAI fake playing brain, as every
// front-end builds one; the recorder keeps the request bodies.
func botWith(t *testing.T, brain providertest.Brain, extra string) (*Bot, *providertest.Recorder) {
	t.Helper()
	fake := openaitest.New(brain)
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	b, err := New(context.Background(), cartridgeFor(t, srv.URL, extra), Host{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b, fake.Recorder
}

func reply(text string) providertest.Reply { return providertest.Reply{Chunks: []string{text}} }

// bodies decodes the request bodies the fake received.
func bodies(t *testing.T, r *providertest.Recorder) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, raw := range r.Bodies() {
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

// A ReAct exchange runs through the bot's one path: the tools are
// described in the system text (never offered as functions), the model
// is stopped before it writes an observation, the action runs, and the
// Final Answer is the answer. The exchange's override reaches every
// request.
func TestReActExchange(t *testing.T) {
	b, rec := botWith(t, providertest.Scripted(
		reply("Thought: look\nAction: slow\nAction Input: {}"),
		reply("Thought: done\nFinal Answer: 42")), "")
	temp := 0.25
	x := Exchange{Mode: cartridge.Eval, Loop: agent.LoopReAct, Tools: []tool.Tool{slowTool{}},
		Override: &provider.Override{Sampling: provider.Sampling{Temperature: &temp}, Settings: map[string]any{"seed": 7}}}
	res, err := b.Ask(context.Background(), x, "what is it?")
	if err != nil {
		t.Fatal(err)
	}
	if res.Text != "42" {
		t.Errorf("answer %q", res.Text)
	}
	sent := bodies(t, rec)
	if len(sent) != 2 {
		t.Fatalf("%d requests, want 2", len(sent))
	}
	for i, body := range sent {
		if body["tools"] != nil {
			t.Errorf("request %d offers functions: %v", i, body["tools"])
		}
		if stop, _ := body["stop"].([]any); len(stop) != 1 || stop[0] != agent.ReActStop {
			t.Errorf("request %d stop = %v", i, body["stop"])
		}
		if body["temperature"] != 0.25 || body["seed"] != 7.0 {
			t.Errorf("request %d: temperature %v, seed %v", i, body["temperature"], body["seed"])
		}
	}
	if raw := string(rec.Bodies()[1]); !strings.Contains(raw, "Observation: slept") || !strings.Contains(string(rec.Bodies()[0]), "- slow") {
		t.Errorf("the tool was not described or its result not observed:\n%s", raw)
	}
}

// A planner's exchange runs through the one path too: the plan's task
// runs on the exchange's tool and the plan is reported as it changes.
func TestPlanExchange(t *testing.T) {
	b, rec := botWith(t, providertest.Scripted(
		reply(`{"tasks":[{"task":"sleep","tool":"slow","input":{}}]}`),
		reply(`{"tasks":[]}`),
		reply("all done")), "")
	var plans []agent.Plan
	x := Exchange{Mode: cartridge.Eval, Loop: agent.LoopPlan, MaxTasks: 3, Tools: []tool.Tool{slowTool{}},
		OnPlan: func(p agent.Plan) { plans = append(plans, p) }}
	res, err := b.Ask(context.Background(), x, "sleep a little")
	if err != nil {
		t.Fatal(err)
	}
	if res.Text != "all done" || len(rec.Bodies()) != 3 {
		t.Errorf("answer %q after %d requests", res.Text, len(rec.Bodies()))
	}
	if n := len(plans); n == 0 || len(plans[n-1].Done) != 1 || plans[n-1].Done[0].Result != "slept" {
		t.Errorf("plans %+v", plans)
	}
}

// A panic in a ReAct or a plan run is that exchange's error, with the
// stack of the panic (the agent protocol's runtime used to wrap these
// loops outside the bot and dropped it); the bot goes on.
func TestPanicInLoopsKeepsItsStack(t *testing.T) {
	for _, tc := range []struct {
		loop  agent.Loop
		first string
		frame string
	}{
		{agent.LoopReAct, "Thought: look\nAction: slow\nAction Input: {}", "askReAct"},
		{agent.LoopPlan, `{"tasks":[{"task":"sleep","tool":"slow","input":{}}]}`, "askPlan"},
	} {
		t.Run(string(tc.loop), func(t *testing.T) {
			b, _ := botWith(t, providertest.Scripted(reply(tc.first)), "safety: {tools: {confirmable: true}}\n")
			x := Exchange{Mode: cartridge.Eval, Loop: tc.loop, Tools: []tool.Tool{slowTool{}}, Confirmer: panicky{}}
			_, err := b.Ask(context.Background(), x, "go")
			var pe *PanicError
			if !errors.As(err, &pe) || pe.Value != "boom" {
				t.Fatalf("err = %v, want a PanicError", err)
			}
			if !strings.Contains(string(pe.Stack), tc.frame) || !strings.Contains(string(pe.Stack), "panicky.Confirm") {
				t.Errorf("the stack does not show where it panicked:\n%s", pe.Stack)
			}
			if res, err := b.Ask(context.Background(), Exchange{Mode: cartridge.Eval}, "still there?"); err != nil || res.Text != "echo: still there?" {
				t.Errorf("after the panic: %v, %v", res, err)
			}
		})
	}
}

// An exchange's tool filter keeps the bot's tools it says yes to and all
// of the exchange's own; Start sees them before anything is sent, and
// its error stops the exchange there.
func TestToolFilterAndStart(t *testing.T) {
	b, rec := botWith(t, providertest.Echo, "tools:\n- name: kept\n  lua: return 'k'\n- name: dropped\n  lua: return 'd'\n")
	var seen []string
	x := Exchange{Mode: cartridge.Eval, Tools: []tool.Tool{slowTool{}},
		ToolFilter: func(t tool.Tool) bool { return t.Spec().Name == "kept" },
		Start: func(tools *tool.Set) error {
			for _, sp := range tools.Specs() {
				seen = append(seen, sp.Name)
			}
			return nil
		}}
	if _, err := b.Ask(context.Background(), x, "hi"); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(seen, " "); got != "kept slow" {
		t.Errorf("tools %q, want kept and slow", got)
	}
	offered, _ := bodies(t, rec)[0]["tools"].([]any)
	if len(offered) != 2 {
		t.Errorf("%d tools offered, want 2", len(offered))
	}
	refused := errors.New("lacks a tool")
	x.Start = func(*tool.Set) error { return refused }
	if _, err := b.Ask(context.Background(), x, "hi"); !errors.Is(err, refused) {
		t.Errorf("err = %v", err)
	}
	if n := len(rec.Bodies()); n != 1 {
		t.Errorf("%d requests, want 1: a refused start sent one", n)
	}
}

// A structured exchange's check has the model answer once more with the
// complaint, in the same conversation.
func TestCheckAsksOnceMore(t *testing.T) {
	b, rec := botWith(t, providertest.Scripted(reply("not json"), reply(`{"a":1}`)), "")
	x := Exchange{Mode: cartridge.Eval, Structured: &provider.OutputSchema{Name: "answer", Schema: map[string]any{"type": "object"}},
		Check: func(text string) string {
			if !json.Valid([]byte(text)) {
				return "that is not JSON"
			}
			return ""
		}}
	res, err := b.Ask(context.Background(), x, "give me JSON")
	if err != nil {
		t.Fatal(err)
	}
	if res.Text != `{"a":1}` {
		t.Errorf("answer %q", res.Text)
	}
	sent := bodies(t, rec)
	if len(sent) != 2 {
		t.Fatalf("%d requests, want 2", len(sent))
	}
	msgs, _ := sent[1]["messages"].([]any)
	last, _ := msgs[len(msgs)-1].(map[string]any)
	if last["content"] != "that is not JSON" || len(msgs) < 3 {
		t.Errorf("second request's messages: %v", msgs)
	}
	if sent[0]["response_format"] == nil {
		t.Errorf("the schema was not asked for: %v", sent[0])
	}
}

// A host's EventLog gets every exchange's events at debug level: their
// kinds and figures, never what the user or the model wrote.
func TestEventLog(t *testing.T) {
	fake := openaitest.New(providertest.Scripted(reply("the secret answer")))
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	var buf testbuf.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	b, err := New(context.Background(), cartridgeFor(t, srv.URL, ""), Host{EventLog: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	if _, err := b.Ask(context.Background(), Exchange{Mode: cartridge.Eval}, "my secret question"); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{"kind=session_start", "kind=user_input chars=18", "kind=round_start round=1 provider=openai model=gpt-4o", "kind=assistant_text_delta", "kind=session_end text=idle"} {
		if !strings.Contains(out, want) {
			t.Errorf("the log lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "secret") {
		t.Errorf("the log holds what was written:\n%s", out)
	}
}

// A command's live output reaches the event log as its length only, as
// every text does.
func TestEventLogLiveOutput(t *testing.T) {
	fake := openaitest.New(providertest.Scripted(
		providertest.Reply{Calls: []providertest.Call{{ID: "c1", Name: "exec", Arguments: `{"command":"printf 'the s\\145cret output\\n'"}`}}},
		reply("done")))
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	var buf testbuf.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	b, err := New(context.Background(), cartridgeFor(t, srv.URL, "builtins: {exec: {workspace: "+t.TempDir()+", sandbox: off}}\n"), Host{EventLog: log, Environ: []string{"PATH=/usr/bin:/bin"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	if _, err := b.Ask(context.Background(), Exchange{Mode: cartridge.Eval}, "run it"); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	if !strings.Contains(out, "kind=tool_call_output_delta tool=exec call=c1 chars=18") || strings.Contains(out, "secret") {
		t.Errorf("the log:\n%s", out)
	}
}
