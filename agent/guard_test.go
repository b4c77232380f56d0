package agent

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/nbots/nb/cartridge"
	"github.com/nbots/nb/provider"
	"github.com/nbots/nb/tool"
)

// The ReAct and plan loops keep the guards of the functions loop: the
// token budget (safety.tokens), the loop detector (safety.loops) and one
// compaction after a context-length refusal.

var contextRefusal = &provider.Error{Provider: "fake", Status: 400, Code: "context_length_exceeded", Message: "This model's maximum context length is 8192 tokens."}

func reactAction(n int) step {
	return step{chunks: []string{fmt.Sprintf("Thought: again\nAction: a\nAction Input: {\"n\": %d}", n)}, usage: provider.Usage{InputTokens: 300, OutputTokens: 100}}
}

func TestReActTokenBudget(t *testing.T) {
	p := &scripted{forever: reactAction}
	h := newHarness(t, "safety: {tools: {confirmable: false}, tokens: 1000}\nprovider: {id: openai}\n", cartridge.Eval, p, nil, newTool("a", nil, nil))
	h.agent.Loop = LoopReAct
	res := ask(t, h, "go")
	if res.Stopped != StopTokenLimit || res.Rounds != 3 || !strings.Contains(res.Notice, "stopped after 3 ReAct steps: they used 1200 tokens, the budget is 1000 (safety.tokens") {
		t.Errorf("result %+v", res)
	}
	if n := p.requestCount(); n != 3 {
		t.Errorf("%d requests", n)
	}
	if got := h.kinds(TurnLimit); len(got) != 1 {
		t.Errorf("TurnLimit events %+v", got)
	}
}

func TestReActLoopDetection(t *testing.T) {
	same := func(int) step {
		return step{chunks: []string{"Thought: again\nAction: a\nAction Input: {\"n\": 1}"}}
	}
	p := &scripted{forever: same}
	h := newHarness(t, unconfirmed, cartridge.Eval, p, nil, newTool("a", nil, nil))
	h.agent.Loop = LoopReAct
	res := ask(t, h, "go")
	got := h.kinds(LoopDetection)
	if len(got) != 2 || got[0].Text != LoopWarning(3) || !got[1].IsError {
		t.Fatalf("loop events %+v", got)
	}
	if res.Stopped != StopLoop || res.Rounds != 6 {
		t.Errorf("result %+v", res)
	}
	// The warning reaches the model with the observation.
	if last := p.request(3).Messages; !strings.Contains(last[len(last)-1].Content, LoopWarning(3)) {
		t.Errorf("the fourth request ends with %+v", last[len(last)-1])
	}
}

func TestReActContextLengthCompacts(t *testing.T) {
	big := strings.Repeat("0123456789", 2000)
	p := &scripted{steps: []step{reactAction(1), reactAction(2), reactAction(3), {err: contextRefusal}, {chunks: []string{"Final Answer: ok"}}}}
	h := newHarness(t, unconfirmed, cartridge.Eval, p, nil, newTool("a", nil, func(context.Context, tool.Call) (any, error) { return big, nil }))
	h.agent.Loop = LoopReAct
	if res := ask(t, h, "go on"); res.Text != "ok" {
		t.Fatalf("answer %+v", res)
	}
	size := func(r provider.Request) int { return requestTokens(provider.Request{Messages: r.Messages}) }
	if refused, retry := p.request(3), p.request(4); size(retry) > size(refused)/2 {
		t.Errorf("the retry is %d estimated tokens, the refused request %d", size(retry), size(refused))
	}
	var warned []string
	for _, ev := range h.kinds(Warning) {
		warned = append(warned, ev.Text)
	}
	if !strings.Contains(strings.Join(warned, "\n"), "The provider refused the conversation as longer than the model's context: it was compacted from") {
		t.Errorf("warnings %q", warned)
	}
}

// planOf is a planning answer handing out task n (the same input each
// time when same).
func planOf(n int, same bool) step {
	if same {
		n = 1
	}
	return step{chunks: []string{fmt.Sprintf(`{"tasks": [{"task": "t%d", "tool": "a", "input": {"n": %d}}]}`, n, n)}, usage: provider.Usage{InputTokens: 300, OutputTokens: 100}}
}

func TestPlanTokenBudget(t *testing.T) {
	p := &scripted{forever: func(n int) step { return planOf(n, false) }}
	h := newHarness(t, "safety: {tools: {confirmable: false}, tokens: 1000}\nprovider: {id: openai}\n", cartridge.Eval, p, nil, newTool("a", nil, nil))
	h.agent.Loop, h.agent.MaxTasks = LoopPlan, 50
	res := ask(t, h, "go")
	if res.Stopped != StopTokenLimit || res.Rounds != 3 || !strings.Contains(res.Notice, "stopped after 3 planning steps: they used 1200 tokens") {
		t.Errorf("result %+v", res)
	}
	if n := p.requestCount(); n != 3 {
		t.Errorf("%d requests", n)
	}
}

func TestPlanLoopDetection(t *testing.T) {
	p := &scripted{forever: func(n int) step { return planOf(n, true) }}
	h := newHarness(t, unconfirmed, cartridge.Eval, p, nil, newTool("a", nil, nil))
	h.agent.Loop, h.agent.MaxTasks = LoopPlan, 50
	res := ask(t, h, "go")
	got := h.kinds(LoopDetection)
	if len(got) != 2 || got[0].Text != LoopWarning(3) || !got[1].IsError || res.Stopped != StopLoop {
		t.Fatalf("result %+v, loop events %+v", res, got)
	}
	// The planner is told of the loop in its next step.
	if msg := p.request(3).Messages[0].Content; !strings.Contains(msg, LoopWarning(3)) {
		t.Errorf("the fourth planning step says %q", msg)
	}
}

func TestPlanContextLengthCompacts(t *testing.T) {
	big := strings.Repeat("0123456789", 2000)
	p := &scripted{steps: []step{planOf(1, false), planOf(2, false), {chunks: []string{`{"tasks": []}`}}, {err: contextRefusal}, {chunks: []string{"the answer"}}}}
	h := newHarness(t, unconfirmed, cartridge.Eval, p, nil, newTool("a", nil, func(context.Context, tool.Call) (any, error) { return big, nil }))
	h.agent.Loop = LoopPlan
	res := ask(t, h, "go")
	if res.Text != "the answer" {
		t.Fatalf("result %+v", res)
	}
	size := func(r provider.Request) int { return requestTokens(provider.Request{Messages: r.Messages}) }
	if refused, retry := p.request(3), p.request(4); size(retry) > size(refused)/2 {
		t.Errorf("the retry is %d estimated tokens, the refused request %d", size(retry), size(refused))
	}
	var warned []string
	for _, ev := range h.kinds(Warning) {
		warned = append(warned, ev.Text)
	}
	if !strings.Contains(strings.Join(warned, "\n"), "it was compacted from") {
		t.Errorf("warnings %q", warned)
	}
}

type waitingTool struct{ *fakeTool }

func (waitingTool) Repeatable() bool { return true }

// A tool that waits (Repeatable) may be called again and again with the
// same arguments: the loop detector leaves it out.
func TestRepeatableToolIsNoLoop(t *testing.T) {
	p := &scripted{forever: func(n int) step {
		if n > 8 {
			return step{chunks: []string{"done"}}
		}
		return step{calls: []provider.ToolCall{call(fmt.Sprint(n), "wait", `{"agent_id": "agent-1"}`)}}
	}}
	h := newHarness(t, unconfirmed, cartridge.Eval, p, nil, waitingTool{newTool("wait", nil, nil)})
	if res := ask(t, h, "go"); res.Text != "done" {
		t.Errorf("result %+v", res)
	}
	if got := h.kinds(LoopDetection); len(got) != 0 {
		t.Errorf("loop events %+v", got)
	}
}
