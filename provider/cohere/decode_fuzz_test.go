package cohere

import (
	"context"
	"strings"
	"testing"

	"github.com/nbots/nb/provider"
	"github.com/nbots/nb/provider/providertest"
)

// FuzzDecode: no body makes the v1 or v2 Chat decoders panic or hang.
func FuzzDecode(f *testing.F) {
	f.Add("event: message-start\ndata: {\"type\":\"message-start\",\"id\":\"x\",\"delta\":{\"message\":{\"role\":\"assistant\"}}}\n\n" +
		"event: content-delta\ndata: {\"type\":\"content-delta\",\"index\":0,\"delta\":{\"message\":{\"content\":{\"thinking\":\"hm\"}}}}\n\n" +
		"event: content-delta\ndata: {\"type\":\"content-delta\",\"index\":1,\"delta\":{\"message\":{\"content\":{\"text\":\"Hi\"}}}}\n\n" +
		"event: tool-call-start\ndata: {\"type\":\"tool-call-start\",\"index\":0,\"delta\":{\"message\":{\"tool_calls\":{\"id\":\"c1\",\"type\":\"function\",\"function\":{\"name\":\"f\",\"arguments\":\"\"}}}}}\n\n" +
		"event: tool-call-delta\ndata: {\"type\":\"tool-call-delta\",\"index\":0,\"delta\":{\"message\":{\"tool_calls\":{\"function\":{\"arguments\":\"{}\"}}}}}\n\n" +
		"event: message-end\ndata: {\"type\":\"message-end\",\"delta\":{\"finish_reason\":\"TOOL_CALL\",\"usage\":{\"billed_units\":{\"input_tokens\":3,\"output_tokens\":2}}}}\n\n" +
		"data: [DONE]\n\n")
	f.Add("{\"is_finished\":false,\"event_type\":\"stream-start\",\"generation_id\":\"g\"}\n" +
		"{\"is_finished\":false,\"event_type\":\"text-generation\",\"text\":\"Hi\"}\n" +
		"{\"is_finished\":false,\"event_type\":\"tool-calls-generation\",\"tool_calls\":[{\"name\":\"f\",\"parameters\":{\"a\":1}}]}\n" +
		"{\"is_finished\":true,\"event_type\":\"stream-end\",\"finish_reason\":\"COMPLETE\",\"response\":{\"text\":\"Hi\",\"meta\":{\"billed_units\":{\"input_tokens\":1,\"output_tokens\":1}}}}\n")
	f.Add("{\"id\":\"x\",\"finish_reason\":\"COMPLETE\",\"message\":{\"role\":\"assistant\",\"content\":[{\"type\":\"text\",\"text\":\"hi\"}]},\"usage\":{\"billed_units\":{\"input_tokens\":1,\"output_tokens\":1}}}")
	f.Add("{\"text\":\"hi\",\"finish_reason\":\"COMPLETE\",\"meta\":{\"billed_units\":{\"input_tokens\":1,\"output_tokens\":1}}}")
	f.Fuzz(func(t *testing.T, body string) {
		for _, decode := range []func(context.Context, *strings.Reader, func(provider.Event)) (*provider.Response, error){
			func(ctx context.Context, r *strings.Reader, emit func(provider.Event)) (*provider.Response, error) {
				return decodeStreamV1(ctx, r, emit)
			},
			func(ctx context.Context, r *strings.Reader, emit func(provider.Event)) (*provider.Response, error) {
				return decodeStreamV2(ctx, r, emit)
			},
		} {
			var events []provider.Event
			resp, err := decode(context.Background(), strings.NewReader(body), func(ev provider.Event) { events = append(events, ev) })
			providertest.CheckDecoded(t, resp, err, events)
		}
		resp, err := decodeWholeV1(context.Background(), strings.NewReader(body))
		providertest.CheckDecoded(t, resp, err, nil)
		resp, err = decodeWholeV2(context.Background(), strings.NewReader(body))
		providertest.CheckDecoded(t, resp, err, nil)
	})
}
