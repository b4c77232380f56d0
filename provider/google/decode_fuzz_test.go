package google

import (
	"context"
	"strings"
	"testing"

	"github.com/nbots/nb/provider"
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
		checkDecoded(t, resp, err, events)
		resp, err = newDecoder(nil).whole([]byte(body))
		checkDecoded(t, resp, err, nil)
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
