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

// FuzzDecodeResponses: no body makes the Responses API decoders panic or
// hang.
func FuzzDecodeResponses(f *testing.F) {
	f.Add("event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":\"resp_1\",\"status\":\"in_progress\",\"output\":[]}}\n\n" +
		"event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"output_index\":0,\"item\":{\"type\":\"function_call\",\"id\":\"fc_1\",\"call_id\":\"call_1\",\"name\":\"f\",\"arguments\":\"\"}}\n\n" +
		"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"Hi\"}\n\n" +
		"event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"resp_1\",\"status\":\"completed\",\"output\":[{\"type\":\"reasoning\",\"id\":\"rs_1\",\"summary\":[{\"type\":\"summary_text\",\"text\":\"r\"}],\"encrypted_content\":\"e\"},{\"type\":\"message\",\"content\":[{\"type\":\"output_text\",\"text\":\"Hi\"}]},{\"type\":\"function_call\",\"call_id\":\"call_1\",\"name\":\"f\",\"arguments\":\"{}\"}],\"usage\":{\"input_tokens\":3,\"output_tokens\":2,\"output_tokens_details\":{\"reasoning_tokens\":1}}}}\n\n")
	f.Add("event: error\ndata: {\"type\":\"error\",\"code\":\"server_error\",\"message\":\"boom\"}\n\n")
	f.Add("{\"id\":\"resp_1\",\"status\":\"incomplete\",\"incomplete_details\":{\"reason\":\"max_output_tokens\"},\"output\":[]}")
	f.Add("{\"id\":\"resp_1\",\"status\":\"failed\",\"error\":{\"code\":\"server_error\",\"message\":\"x\"},\"output\":[]}")
	f.Fuzz(func(t *testing.T, body string) {
		var events []provider.Event
		resp, err := decodeResponsesStream(context.Background(), strings.NewReader(body), func(ev provider.Event) { events = append(events, ev) })
		providertest.CheckDecoded(t, resp, err, events)
		resp, err = decodeResponsesWhole(context.Background(), strings.NewReader(body))
		providertest.CheckDecoded(t, resp, err, nil)
	})
}
