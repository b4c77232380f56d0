package openai_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/nbots/nb/provider"
	"github.com/nbots/nb/provider/providertest"
)

// TestUsageDetails reads the cached and reasoning tokens of OpenAI's usage
// object, in the streamed usage chunk and in a whole answer, as the API
// documents them (prompt_tokens_details, completion_tokens_details).
func TestUsageDetails(t *testing.T) {
	const details = `"usage":{"prompt_tokens":2006,"completion_tokens":300,"total_tokens":2306,"prompt_tokens_details":{"cached_tokens":1920,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":256,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}`
	want := provider.Usage{InputTokens: 2006, OutputTokens: 300, CacheReadTokens: 1920, ReasoningTokens: 256}
	for name, tc := range map[string]struct {
		stream bool
		body   string
	}{
		"stream": {true, `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"o4-mini","choices":[{"index":0,"delta":{"role":"assistant","content":"Hi"},"finish_reason":null}]}` + "\n\n" +
			`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"o4-mini","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n" +
			`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"o4-mini","choices":[],` + details + "}\n\n" +
			"data: [DONE]\n\n"},
		"whole": {false, `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"o4-mini","choices":[{"index":0,"message":{"role":"assistant","content":"Hi"},"finish_reason":"stop"}],` + details + `}`},
	} {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if tc.stream {
					w.Header().Set("Content-Type", "text/event-stream")
				} else {
					w.Header().Set("Content-Type", "application/json")
				}
				providertest.WriteSplit(w, tc.body, 7)
			}))
			defer srv.Close()
			p, err := provider.New(provider.Config{ID: "openai", Credentials: map[string]any{"address": srv.URL, "access-token": "k"}, Settings: map[string]any{"model": "o4-mini"}, HTTPClient: srv.Client()})
			if err != nil {
				t.Fatal(err)
			}
			resp, err := p.Complete(context.Background(), provider.Request{Messages: []provider.Message{{Role: provider.RoleUser, Content: "hi"}}, Stream: tc.stream}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if resp.Text != "Hi" || resp.Usage != want {
				t.Errorf("text %q usage %+v, want %+v", resp.Text, resp.Usage, want)
			}
		})
	}
}
