package condition

import (
	"strings"
	"testing"
)

func ctxOf(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := m[k]
		return v, ok
	}
}

// TestEval pins §10.4–10.6's semantics, the spec's own examples and S3's
// clauses.
func TestEval(t *testing.T) {
	ctx := ctxOf(map[string]string{
		"tests_passed":        "true",
		"context.loop_state":  "running",
		"tool.output":         "yes",
		"flag":                "false",
		"context.shadow":      "qualified",
		"shadow":              "plain",
		"human.gate.selected": "A",
	})
	tests := []struct {
		cond, outcome, pref string
		want                bool
	}{
		{"", "fail", "", true},
		{"   ", "fail", "", true},
		{"outcome=success", "success", "", true},
		{"outcome=success", "fail", "", false},
		{"outcome=SUCCESS", "success", "", false}, // case-sensitive (S3)
		{"outcome=fail", "fail", "", true},
		{"outcome!=success", "fail", "", true},
		{"outcome!=success", "success", "", false},
		{"outcome=success && context.tests_passed=true", "success", "", true},
		{"context.loop_state!=exhausted", "success", "", true},
		{"preferred_label=Fix", "success", "Fix", true},
		{"preferred_label=Fix", "success", "fix", false},
		// §10.4: context.x tries "context.x", then "x".
		{"context.tool.output=yes", "success", "", true},
		{"context.shadow=qualified", "success", "", true},
		// unqualified keys are looked up directly (D10).
		{"tool.output=yes", "success", "", true},
		{"shadow=plain", "success", "", true},
		// missing keys compare as "".
		{`context.nope=""`, "success", "", true},
		{"context.nope=", "success", "", true},
		{"context.nope!=x", "success", "", true},
		// quoted literals are unquoted and unescaped.
		{`tool.output="yes" && `, "success", "", true},
		{`context.tool.output="y\"s"`, "success", "", false},
		// bare keys are truthy when non-empty, "false" included (§10.5's bool(string)).
		{"context.flag", "success", "", true},
		{"context.nope", "success", "", false},
		{"human.gate.selected=A && outcome=success && ", "success", "", true},
		{"context.tool.output=yes && context.nope!=x", "success", "", true},
	}
	for _, tt := range tests {
		e, err := Parse(tt.cond)
		if err != nil {
			t.Errorf("Parse(%q): %v", tt.cond, err)
			continue
		}
		if got := e.Eval(tt.outcome, tt.pref, ctx); got != tt.want {
			t.Errorf("Eval(%q, outcome=%s, pref=%q) = %v, want %v", tt.cond, tt.outcome, tt.pref, got, tt.want)
		}
	}
}

// TestParseRejects pins D10's lints: what §10 does not define is a
// syntax error, with the offset of the problem.
func TestParseRejects(t *testing.T) {
	tests := []struct {
		cond, msg string
		off       int
	}{
		{"outcome=success || outcome=fail", "`||`", 16},
		{"outcome==success", "`==`", 7},
		{"a=1 && outcome==success", "`==`", 14},
		{"=success", "no key", 0},
		{"context.=x", "empty part", 0},
		{"score>3", `">"`, 5},
		{"score >= 3", `">"`, 6},
		{"context.x contains y", `"contains"`, 10},
		{"NOT outcome=success", `"NOT"`, 0},
		{`context.x="abc`, "unclosed quote", 10},
		{`context.x="abc\"`, "unclosed quote", 10},
		{"outcome=success extra", "not one word", 15},
		{"out come=x", "not a name", 0},
		{`context.x="a && b"`, "cannot hold &&", 10},
	}
	for _, tt := range tests {
		_, err := Parse(tt.cond)
		se, ok := err.(*SyntaxError)
		if !ok {
			t.Errorf("Parse(%q) = %v, want a SyntaxError", tt.cond, err)
			continue
		}
		if !strings.Contains(se.Msg, tt.msg) || se.Offset != tt.off {
			t.Errorf("Parse(%q) = %q at %d, want %q at %d", tt.cond, se.Msg, se.Offset, tt.msg, tt.off)
		}
	}
}

func TestStringRoundTrip(t *testing.T) {
	for _, s := range []string{"outcome=success", `context.x!="a b" && preferred_label=Fix`, "context.flag", `a=""`} {
		e, err := Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		e2, err := Parse(e.String())
		if err != nil || e2.String() != e.String() {
			t.Errorf("round trip of %q: %q, %v", s, e.String(), err)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"outcome=success", `a="x\"" && b!=c`, "a||b", "context.x", `"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		e, err := Parse(s)
		if err != nil {
			if se, ok := err.(*SyntaxError); !ok || se.Offset < 0 || se.Offset > len(s) {
				t.Fatalf("Parse(%q): bad error %v", s, err)
			}
			return
		}
		e.Eval("success", "", func(string) (string, bool) { return "", false })
	})
}
