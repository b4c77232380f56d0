package agent

import "testing"

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
