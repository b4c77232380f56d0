package agent

import (
	"context"
	"strings"
	"testing"

	"github.com/nbots/nb/cartridge"
	"github.com/nbots/nb/provider"
	"github.com/nbots/nb/tool"
)

// printer is a tool that prints its output in pieces as it runs, as exec
// does, and returns the whole.
func printer(pieces ...string) func(context.Context, tool.Call) (any, error) {
	return func(ctx context.Context, _ tool.Call) (any, error) {
		live := tool.LiveOutputFrom(ctx)
		for _, p := range pieces {
			if live != nil {
				live("stdout", p)
			}
		}
		return strings.Join(pieces, ""), nil
	}
}

// TestToolOutputEvents: what a tool prints while it runs comes as
// ToolOutput events between its ToolStart and its ToolEnd (the calls of a
// round, run in parallel, each with its own); the model gets the result.
// Each round's text begins with AssistantTextStart.
func TestToolOutputEvents(t *testing.T) {
	a := newTool("a", nil, printer("one\n", "two\n"))
	b := newTool("b", nil, printer("three\n"))
	p := &scripted{steps: []step{
		{chunks: []string{"Let me ", "look."}, calls: []provider.ToolCall{call("c1", "a", "{}"), call("c2", "b", "{}")}},
		{chunks: []string{"Done."}},
	}}
	h := newHarness(t, unconfirmed, cartridge.Eval, p, nil, a, b)
	ask(t, h, "go")
	equal(t, "tool results sent back", toolMessages(p.request(1)), []string{"c1 a: one\ntwo\n", "c2 b: three\n"})

	h.mu.Lock()
	defer h.mu.Unlock()
	live := map[string]string{}
	started, ended := map[string]bool{}, map[string]bool{}
	var seq []string
	for _, ev := range h.events {
		switch ev.Kind {
		case ToolStart:
			started[ev.Call.ID] = true
		case ToolEnd:
			ended[ev.Call.ID] = true
		case ToolOutput:
			if !started[ev.Call.ID] || ended[ev.Call.ID] || ev.Stream != "stdout" {
				t.Errorf("output of %s outside its run (started %v, ended %v) or stream %q", ev.Call.ID, started[ev.Call.ID], ended[ev.Call.ID], ev.Stream)
			}
			live[ev.Call.ID] += ev.Text
		case AssistantTextStart, TextDelta, RoundStart:
			seq = append(seq, ev.Kind.String())
		}
	}
	if live["c1"] != "one\ntwo\n" || live["c2"] != "three\n" {
		t.Errorf("live output %q", live)
	}
	equal(t, "text events", seq, []string{"round_start", "assistant_text_start", "assistant_text_delta", "assistant_text_delta",
		"round_start", "assistant_text_start", "assistant_text_delta"})
}
