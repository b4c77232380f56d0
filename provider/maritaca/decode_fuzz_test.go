package maritaca

import (
	"context"
	"strings"
	"testing"

	"github.com/nbots/nb/provider"
)

// FuzzDecode: no body makes Maritaca's legacy decoders panic or hang (the
// current API is OpenAI's, fuzzed in package openai).
func FuzzDecode(f *testing.F) {
	f.Add("data: {\"text\": \"Ol\"}\n\ndata: {\"text\": \"á\"}\n\ndata: [DONE]\n\n")
	f.Add("data: {\"detail\": \"model overloaded\"}\n\n")
	f.Add("{\"answer\": \"Olá\", \"usage\": {\"prompt_tokens\": 1, \"completion_tokens\": 1}}")
	f.Fuzz(func(t *testing.T, body string) {
		var events []provider.Event
		resp, err := decodeLegacyStream(context.Background(), strings.NewReader(body), func(ev provider.Event) { events = append(events, ev) })
		checkDecoded(t, resp, err, events)
		resp, err = decodeLegacyWhole(context.Background(), strings.NewReader(body))
		checkDecoded(t, resp, err, nil)
	})
}

// checkDecoded holds for every decoder: an answer or an error, never
// both or neither, and the streamed text is the answer's text.
func checkDecoded(t *testing.T, resp *provider.Response, err error, events []provider.Event) {
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
