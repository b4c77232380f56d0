package stylesheet

import (
	"strings"
	"testing"
)

// The §8.6 example with S10(b)'s additions.
const example = `
            * { llm_model: claude-sonnet-4-5; llm_provider: anthropic; }
            box { reasoning_effort: low; }
            .code { llm_model: claude-opus-4-6; llm_provider: anthropic; }
            #critical_review { llm_model: gpt-5.2; llm_provider: openai; reasoning_effort: high; }
            .loop-a { llm_model: "m" }
`

func TestResolve(t *testing.T) {
	s, err := Parse(example)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		id, shape string
		classes   []string
		want      map[string]string
	}{
		{"plan", "box", []string{"planning"}, map[string]string{"llm_model": "claude-sonnet-4-5", "llm_provider": "anthropic", "reasoning_effort": "low"}},
		{"implement", "box", []string{"code"}, map[string]string{"llm_model": "claude-opus-4-6", "llm_provider": "anthropic", "reasoning_effort": "low"}},
		{"critical_review", "box", []string{"code"}, map[string]string{"llm_model": "gpt-5.2", "llm_provider": "openai", "reasoning_effort": "high"}},
		{"P", "box", []string{"loop-a"}, map[string]string{"llm_model": "m", "llm_provider": "anthropic", "reasoning_effort": "low"}},
		{"gate", "hexagon", nil, map[string]string{"llm_model": "claude-sonnet-4-5", "llm_provider": "anthropic"}},
	}
	for _, tt := range tests {
		got := s.Resolve(tt.id, tt.shape, tt.classes)
		if len(got) != len(tt.want) {
			t.Errorf("%s: %v", tt.id, got)
		}
		for k, v := range tt.want {
			if got[k].Value != v {
				t.Errorf("%s.%s = %q (%s), want %q", tt.id, k, got[k].Value, got[k].Selector, v)
			}
		}
	}
}

// TestLaterRuleWins pins §8.3: on equal specificity the later rule wins,
// and a less specific later rule does not.
func TestLaterRuleWins(t *testing.T) {
	s, err := Parse(`.a { llm_model: one } .b { llm_model: two } #n { llm_model: three } .a { llm_model: four } * { llm_model: five }`)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Resolve("x", "box", []string{"a", "b"})["llm_model"].Value; got != "four" {
		t.Errorf("got %q", got)
	}
	if got := s.Resolve("n", "box", []string{"a"})["llm_model"].Value; got != "three" {
		t.Errorf("got %q", got)
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		src, msg string
		off      int
	}{
		{"* { llm_model gpt-5.2 }", "expected : after llm_model", 14},
		{"* { model: x }", "unknown property", 4},
		{".class_name { llm_model: x }", "lowercase", 0},
		{".Code { llm_model: x }", "lowercase", 0},
		{"* llm_model: x", "expected {", 2},
		{"* { llm_model: x", "never closed", 2},
		{"* { llm_model: x llm_provider: y }", "expected ; or }", 17},
		{"* { }", "sets nothing", 2},
		{"> { llm_model: x }", "expected a selector", 0},
		{`* { llm_model: "x }`, "unterminated", 15},
	}
	for _, tt := range tests {
		_, err := Parse(tt.src)
		e, ok := err.(*Error)
		if !ok || !strings.Contains(e.Msg, tt.msg) || e.Offset != tt.off {
			t.Errorf("Parse(%q) = %v (%+v), want %q at %d", tt.src, err, e, tt.msg, tt.off)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add(example)
	f.Add("* { llm_model gpt }")
	f.Fuzz(func(t *testing.T, s string) {
		sh, err := Parse(s)
		if err != nil {
			if e, ok := err.(*Error); !ok || e.Offset < 0 || e.Offset > len(s) {
				t.Fatalf("bad error %v", err)
			}
			return
		}
		sh.Resolve("a", "box", []string{"x"})
	})
}
