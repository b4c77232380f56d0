package mistral

import (
	"context"
	"strings"
	"testing"

	"github.com/nbots/nb/provider"
)

// FuzzDecode: no body makes Mistral's dialect of the Chat Completions
// decoders panic or hang.
func FuzzDecode(f *testing.F) {
	f.Add("data: {\"id\":\"m\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"Hi\"},\"finish_reason\":null}]}\n\n" +
		"data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"id\":\"abc123XYZ\",\"function\":{\"name\":\"f\",\"arguments\":{\"a\":1}}}]},\"finish_reason\":\"tool_calls\"}],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":2}}\n\n" +
		"data: [DONE]\n\n")
	f.Add("{\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":[{\"type\":\"thinking\",\"thinking\":[{\"type\":\"text\",\"text\":\"r\"}]},{\"type\":\"text\",\"text\":\"hi\"}]},\"finish_reason\":\"stop\"}]}")
	f.Add("data: {\"object\":\"error\",\"message\":\"bad\"}\n\n")
	f.Fuzz(func(t *testing.T, body string) {
		var events []provider.Event
		resp, err := dialect.DecodeStream(context.Background(), strings.NewReader(body), func(ev provider.Event) { events = append(events, ev) })
		checkDecoded(t, resp, err, events)
		resp, err = dialect.DecodeWhole(context.Background(), strings.NewReader(body))
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
