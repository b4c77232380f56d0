package providertest

import (
	"strings"
	"testing"

	"github.com/nbots/nb/provider"
)

// CheckDecoded holds for every decoder of a provider's answers (the fuzz
// targets call it on whatever a body decodes to): an answer or an error,
// never both or neither, an error that says something, and the streamed
// text (events, nil for a whole answer) is the answer's text.
func CheckDecoded(t *testing.T, resp *provider.Response, err error, events []provider.Event) {
	t.Helper()
	if (resp == nil) == (err == nil) {
		t.Fatalf("response %v and error %v", resp, err)
	}
	if err != nil {
		if err.Error() == "" {
			t.Fatal("an empty error")
		}
		return
	}
	var text strings.Builder
	for _, ev := range events {
		if ev.Kind == provider.TextDelta {
			text.WriteString(ev.Text)
		}
	}
	if len(events) > 0 && text.String() != resp.Text {
		t.Fatalf("streamed %q, answered %q", text.String(), resp.Text)
	}
}
