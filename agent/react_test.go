package agent

import (
	"strings"
	"testing"

	"github.com/nbots/nb/cartridge"
)

func TestParseReAct(t *testing.T) {
	cases := []struct {
		text               string
		action, input, fin string
		err                bool
	}{
		{"Thought: look\nAction: read\nAction Input: {\"path\": \"a\"}", "read", `{"path": "a"}`, "", false},
		{"Thought: look\nAction: `read`\nAction Input:\n{\n  \"path\": \"a\"\n}\n", "read", "{\n  \"path\": \"a\"\n}", "", false},
		{"Thought: done\nFinal Answer: 42\nand more", "", "", "42\nand more", false},
		{"Action: read\nAction Input: {}\nObservation: x\nFinal Answer: 1", "read", "{}", "", false},
		{"Final Answer: 1\nAction: read\nAction Input: {}", "", "", "1\nAction: read\nAction Input: {}", false},
		{"I think the answer is 4", "", "", "", true},
		{"Thought: x\nAction: read", "read", "", "", true},
		{"action: read\naction input: {}", "read", "{}", "", false},
	}
	for _, tc := range cases {
		m := ParseReAct(tc.text)
		fin := ""
		if m.Final != nil {
			fin = *m.Final
		}
		if m.Action != tc.action || (m.Err == "" && m.Input != tc.input) || fin != tc.fin || (m.Err != "") != tc.err {
			t.Errorf("%q: %+v (final %q)", tc.text, m, fin)
		}
	}
}

func TestCutObservation(t *testing.T) {
	if got := cutObservation("Action: a\nAction Input: {}\nObservation: made up\nThought: more"); got != "Action: a\nAction Input: {}" {
		t.Errorf("got %q", got)
	}
}

// A ReAct model that never gives a Final Answer stops at the round
// limit with the conversation kept and a notice, as the functions loop.
func TestReActRoundLimit(t *testing.T) {
	p := &scripted{forever: func(n int) step {
		return step{chunks: []string{"Thought: again\nAction: a\nAction Input: {\"n\": " + strings.Repeat("1", n) + "}"}}
	}}
	h := newHarness(t, "safety:\n  tools:\n    confirmable: false\n    rounds: 3\nprovider:\n  id: openai\n", cartridge.Eval, p, nil, newTool("a", nil, nil))
	h.agent.Loop = LoopReAct
	res := ask(t, h, "go")
	if res.Stopped != StopRoundLimit || !strings.Contains(res.Notice, "stopped after 3 ReAct steps") || p.requestCount() != 3 {
		t.Fatalf("result %+v after %d requests", res, p.requestCount())
	}
	if got := h.kinds(TurnLimit); len(got) != 1 {
		t.Errorf("TurnLimit events: %+v", got)
	}
}
