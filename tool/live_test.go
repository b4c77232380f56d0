package tool_test

import (
	"strings"
	"testing"

	"github.com/nbots/nb/tool"
)

// TestLiveWriterRunes: a rune cut between two writes is passed on whole;
// an invalid byte is passed on as it is.
func TestLiveWriterRunes(t *testing.T) {
	var got []string
	w := tool.NewLiveWriter(func(_, text string) { got = append(got, text) }, "stdout")
	for _, p := range [][]byte{[]byte("a\xe2"), []byte("\x82"), []byte("\xac b"), []byte("\xf0\x9f")} {
		w.Write(p)
	}
	w.Flush()
	if strings.Join(got, "|") != "a|€ b|\xf0\x9f" {
		t.Errorf("pieces %q", got)
	}
}
