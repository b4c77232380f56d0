package modelcall

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/nbots/nb/provider"
	"github.com/nbots/nb/provider/openai"
	"github.com/nbots/nb/tool"
)

// TestForcedToolChoice: the call names the tool the model must call, in
// OpenAI's shape, as nanobot forces save_memory; a server that refuses a
// forced choice is asked again without one (nanobot's fallback to auto).
func TestForcedToolChoice(t *testing.T) {
	for _, refuse := range []bool{false, true} {
		var mu sync.Mutex
		var choices []any
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			var body map[string]any
			json.Unmarshal(b, &body)
			mu.Lock()
			choices = append(choices, body["tool_choice"])
			mu.Unlock()
			if refuse && body["tool_choice"] != nil {
				w.WriteHeader(400)
				io.WriteString(w, `{"error": {"message": "tool_choice should be [\"none\", \"auto\"]", "type": "invalid_request_error"}}`)
				return
			}
			io.WriteString(w, `{"id": "c", "object": "chat.completion", "model": "m", "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "save_memory", "arguments": "{\"history_entry\": \"x\"}"}}]}}], "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}`)
		}))
		p, err := openai.New(provider.Config{ID: "openai", Credentials: map[string]any{"address": srv.URL, "access-token": "k"}, Settings: map[string]any{"model": "m"}, HTTPClient: srv.Client()})
		if err != nil {
			t.Fatal(err)
		}
		spec := tool.Spec{Name: "save_memory", Parameters: tool.DefaultParameters()}
		reply, err := Provider(p).Call(context.Background(), Request{System: "s", User: "u", Tools: []tool.Spec{spec}, ToolChoice: "save_memory"})
		srv.Close()
		if err != nil {
			t.Fatalf("refuse=%v: %v", refuse, err)
		}
		if len(reply.ToolCalls) != 1 || reply.ToolCalls[0].Name != "save_memory" {
			t.Fatalf("refuse=%v: %+v", refuse, reply)
		}
		forced := map[string]any{"type": "function", "function": map[string]any{"name": "save_memory"}}
		b1, _ := json.Marshal(choices[0])
		b2, _ := json.Marshal(forced)
		if string(b1) != string(b2) {
			t.Errorf("refuse=%v: first tool_choice %s, want %s", refuse, b1, b2)
		}
		if refuse && (len(choices) != 2 || choices[1] != nil) {
			t.Errorf("after a refusal: choices %v, want the forced one then none", choices)
		}
		if !refuse && len(choices) != 1 {
			t.Errorf("%d calls", len(choices))
		}
	}
}
