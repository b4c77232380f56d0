package ollama

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/nbots/nb/provider"
	"github.com/nbots/nb/provider/providertest"
)

// bodyTransport answers every request with the same body, without a
// network: Ollama's decoder is not separate from Complete.
type bodyTransport string

func (b bodyTransport) RoundTrip(*http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/x-ndjson"}}, Body: io.NopCloser(strings.NewReader(string(b)))}, nil
}

// FuzzDecode: no body makes Ollama's NDJSON decoding panic or hang,
// streamed or not.
func FuzzDecode(f *testing.F) {
	f.Add("{\"model\":\"m\",\"message\":{\"role\":\"assistant\",\"content\":\"Hel\",\"thinking\":\"hm\"},\"done\":false}\n" +
		"{\"model\":\"m\",\"message\":{\"role\":\"assistant\",\"content\":\"lo\",\"tool_calls\":[{\"function\":{\"name\":\"f\",\"arguments\":{\"a\":1}}}]},\"done\":false}\n" +
		"{\"model\":\"m\",\"message\":{\"role\":\"assistant\",\"content\":\"\"},\"done\":true,\"done_reason\":\"stop\",\"prompt_eval_count\":3,\"eval_count\":2}\n")
	f.Add("{\"error\":\"model not found\"}\n")
	f.Add("{\"message\":{\"tool_calls\":[{\"function\":{\"name\":\"f\",\"arguments\":\"{\\\"a\\\":1}\"}}]},\"done\":true}")
	f.Fuzz(func(t *testing.T, body string) {
		p, err := New(provider.Config{ID: ID, Settings: map[string]any{"model": "m"}, HTTPClient: &http.Client{Transport: bodyTransport(body)}})
		if err != nil {
			t.Fatal(err)
		}
		for _, stream := range []bool{true, false} {
			var events []provider.Event
			req := provider.Request{Messages: []provider.Message{{Role: provider.RoleUser, Content: "hi"}}, Stream: stream}
			resp, err := p.Complete(context.Background(), req, func(ev provider.Event) { events = append(events, ev) })
			providertest.CheckDecoded(t, resp, err, events)
		}
	})
}
