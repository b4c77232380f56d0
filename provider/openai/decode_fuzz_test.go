package openai

import (
	"context"
	"strings"
	"testing"

	"github.com/nbots/nb/provider"
)

// FuzzDecode: no body makes the Chat Completions decoders panic or hang.
func FuzzDecode(f *testing.F) {
	f.Add("data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"Hel\"},\"finish_reason\":null}]}\n\n" +
		"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"lo<think>x</think>\"},\"finish_reason\":null}]}\n\n" +
		"data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"call_1\",\"type\":\"function\",\"function\":{\"name\":\"f\",\"arguments\":\"{\\\"a\\\"\"}}]},\"finish_reason\":null}]}\n\n" +
		"data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\":1}\"}}]},\"finish_reason\":\"tool_calls\"}],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":2}}\n\n" +
		"data: [DONE]\n\n")
	f.Add("data: {\"error\":{\"message\":\"overloaded\",\"type\":\"server_error\"}}\n\n")
	f.Add("{\"id\":\"c\",\"object\":\"chat.completion\",\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":\"hi\",\"reasoning_content\":\"r\"},\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":1}}")
	f.Add(": keep-alive\n\ndata: {\"choices\":[]}\n\n")
	f.Fuzz(func(t *testing.T, body string) {
		for _, d := range []Dialect{official, {ID: "compatible"}} {
			var events []provider.Event
			resp, err := d.DecodeStream(context.Background(), strings.NewReader(body), func(ev provider.Event) { events = append(events, ev) })
			checkDecoded(t, resp, err, events)
			resp, err = d.DecodeWhole(context.Background(), strings.NewReader(body))
			checkDecoded(t, resp, err, nil)
		}
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
