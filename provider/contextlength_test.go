package provider

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
)

// Each provider's answer to a request longer than the model's context
// is told apart from its other refusals, as its API writes it.
func TestIsContextLength(t *testing.T) {
	cases := []struct {
		provider string
		status   int
		body     string
		want     bool
	}{
		{"openai", 400, `{"error":{"message":"This model's maximum context length is 128000 tokens. However, your messages resulted in 204308 tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`, true},
		{"openai", 400, `{"error":{"message":"Your input exceeds the context window of this model. Please adjust your input and try again.","type":"invalid_request_error","param":"input","code":"context_length_exceeded"}}`, true},
		{"anthropic", 400, `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 208310 tokens > 200000 maximum"}}`, true},
		{"anthropic", 413, `{"type":"error","error":{"type":"request_too_large","message":"Request exceeds the maximum allowed number of bytes."}}`, true},
		{"google", 400, `{"error":{"code":400,"message":"The input token count (1054016) exceeds the maximum number of tokens allowed (1048576).","status":"INVALID_ARGUMENT"}}`, true},
		{"mistral", 400, `{"object":"error","message":"Prompt contains 40321 tokens and 0 draft tokens, too large for model with 32768 maximum context length","type":"invalid_request_message_error","param":null,"code":null}`, true},
		{"cohere", 400, `{"message":"too many tokens: total number of tokens in the prompt cannot exceed 128000 - received 131514. Try using a shorter prompt"}`, true},
		{"ollama", 400, `{"error":"the input length exceeds the context length"}`, true},
		{"openai", 400, `{"error":{"message":"Invalid value for 'temperature'.","type":"invalid_request_error","param":"temperature","code":"invalid_value"}}`, false},
		{"anthropic", 400, `{"type":"error","error":{"type":"invalid_request_error","message":"messages: roles must alternate"}}`, false},
		{"openai", 429, `{"error":{"message":"Rate limit reached: too many tokens per min","type":"tokens","code":"rate_limit_exceeded"}}`, false},
		{"openai", 500, `{"error":{"message":"maximum context length"}}`, false},
	}
	for _, tc := range cases {
		resp := &http.Response{StatusCode: tc.status, Header: http.Header{}, Body: io.NopCloser(strings.NewReader(tc.body))}
		err := ErrorFromResponse(tc.provider, resp)
		if got := IsContextLength(err); got != tc.want {
			t.Errorf("%s %d %s: %v, want %v", tc.provider, tc.status, tc.body, got, tc.want)
		}
	}
	if IsContextLength(errors.New("maximum context length")) || IsContextLength(&Error{Status: 400, Message: "prompt is too long", Streamed: true}) {
		t.Error("not a provider's refusal before the answer")
	}
}
