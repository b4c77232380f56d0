package maritaca

import (
	"context"
	"strings"
	"testing"

	"github.com/nbots/nb/provider"
	"github.com/nbots/nb/provider/providertest"
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
		providertest.CheckDecoded(t, resp, err, events)
		resp, err = decodeLegacyWhole(context.Background(), strings.NewReader(body))
		providertest.CheckDecoded(t, resp, err, nil)
	})
}
