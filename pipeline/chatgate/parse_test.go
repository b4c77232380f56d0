package chatgate

import (
	"testing"

	"github.com/nbots/nb/pipeline/handler"
)

// TestParseAnswer: a choice's key (bare or in brackets, any case), its
// label, or its label without the key; a remark is no answer.
func TestParseAnswer(t *testing.T) {
	q := handler.Question{Type: handler.MultipleChoice,
		Options: []handler.Option{{Key: "A", Label: "[A] Approve"}, {Key: "F", Label: "[F] Fix"}}}
	for text, want := range map[string]string{"A": "A", "[f]": "F", " approve ": "A", "[F] Fix": "F", "fix": "F", "hmm": "", "": "", "[A] Fix": ""} {
		a, ok := parseAnswer(q, text)
		if ok != (want != "") || a.Value != want || (ok && (a.Selected == nil || a.Selected.Key != want)) {
			t.Errorf("parseAnswer(%q) = %+v, %v; want %q", text, a, ok, want)
		}
	}
}
