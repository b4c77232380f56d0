package mistral

import (
	"context"
	"strings"
	"testing"

	"github.com/nbots/nb/provider"
	"github.com/nbots/nb/provider/providertest"
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
		providertest.CheckDecoded(t, resp, err, events)
		resp, err = dialect.DecodeWhole(context.Background(), strings.NewReader(body))
		providertest.CheckDecoded(t, resp, err, nil)
	})
}
