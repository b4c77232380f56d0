package google

import (
	"context"
	"strings"
	"testing"

	"github.com/nbots/nb/provider"
	"github.com/nbots/nb/provider/providertest"
)

// FuzzDecode: no body makes the Gemini decoders panic or hang.
func FuzzDecode(f *testing.F) {
	f.Add("data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"Hel\", \"thought\": false}],\"role\": \"model\"},\"index\": 0}]}\r\n\r\n" +
		"data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"plan\", \"thought\": true}, {\"functionCall\": {\"name\": \"f\", \"args\": {\"a\": 1}}, \"thoughtSignature\": \"sig\"}],\"role\": \"model\"},\"finishReason\": \"STOP\",\"index\": 0}],\"usageMetadata\": {\"promptTokenCount\": 8,\"candidatesTokenCount\": 2,\"totalTokenCount\": 10}}\r\n\r\n")
	f.Add("data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"\"}],\"role\": \"model\"},\"finishReason\": \"SAFETY\",\"index\": 0,\"safetyRatings\": [{\"category\": \"HARM_CATEGORY_DANGEROUS_CONTENT\",\"probability\": \"HIGH\",\"blocked\": true}]}]}\r\n\r\n")
	f.Add("data: {\"promptFeedback\": {\"blockReason\": \"OTHER\"}}\n\n")
	f.Add("{\"error\": {\"code\": 429, \"message\": \"quota\", \"status\": \"RESOURCE_EXHAUSTED\"}}")
	f.Add("{\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"hi\"}],\"role\": \"model\"},\"finishReason\": \"STOP\"}]}")
	f.Fuzz(func(t *testing.T, body string) {
		var events []provider.Event
		resp, err := newDecoder(func(ev provider.Event) { events = append(events, ev) }).stream(context.Background(), strings.NewReader(body))
		providertest.CheckDecoded(t, resp, err, events)
		resp, err = newDecoder(nil).whole([]byte(body))
		providertest.CheckDecoded(t, resp, err, nil)
	})
}
