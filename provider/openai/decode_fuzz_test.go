package openai

import (
	"context"
	"strings"
	"testing"

	"github.com/nbots/nb/provider"
	"github.com/nbots/nb/provider/providertest"
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
			providertest.CheckDecoded(t, resp, err, events)
			resp, err = d.DecodeWhole(context.Background(), strings.NewReader(body))
			providertest.CheckDecoded(t, resp, err, nil)
		}
	})
}
