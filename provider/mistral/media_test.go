package mistral_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/nbots/nb/media"
	"github.com/nbots/nb/provider"
	"github.com/nbots/nb/provider/mistral"
	"github.com/nbots/nb/provider/mistral/mistraltest"
	"github.com/nbots/nb/provider/providertest"
)

func newProvider(t *testing.T, brain providertest.Brain) provider.Provider {
	p, _ := setup(t, brain, nil)
	return p
}

func TestImageRound(t *testing.T) {
	providertest.CheckImageRound(t, newProvider, true)
}

func TestUsageAndFinish(t *testing.T) {
	providertest.CheckUsageAndFinish(t, newProvider, "length")
}

// The wire format: image_url chunks whose image_url is the URL itself;
// the images of a tool result are chunks of the tool message, because the
// API refuses a user message right after a tool message.
func TestImageWire(t *testing.T) {
	p, fake := setup(t, providertest.Echo, nil)
	id := mistral.CallID("call_1")
	msgs := []provider.Message{
		{Role: provider.RoleUser, Content: "look", Images: []media.Image{providertest.PNG, providertest.ImageURL}},
		{Role: provider.RoleAssistant, ToolCalls: []provider.ToolCall{{ID: "call_1", Name: "shot", Arguments: "{}"}}},
		{Role: provider.RoleTool, ToolCallID: "call_1", ToolName: "shot", Content: "taken", Images: []media.Image{providertest.GIF}},
	}
	if _, err := p.Complete(context.Background(), provider.Request{Messages: msgs}, nil); err != nil {
		t.Fatal(err)
	}
	var body struct{ Messages []any }
	json.Unmarshal(fake.Recorder.Bodies()[0], &body) //nolint:errcheck // checked below
	want := []any{
		map[string]any{"role": "user", "content": []any{
			map[string]any{"type": "text", "text": "look"},
			map[string]any{"type": "image_url", "image_url": "data:image/png;base64," + base64.StdEncoding.EncodeToString(providertest.PNG.Data)},
			map[string]any{"type": "image_url", "image_url": "https://example.com/cat.jpg"},
		}},
		map[string]any{"role": "assistant", "content": "", "tool_calls": []any{
			map[string]any{"id": id, "type": "function", "function": map[string]any{"name": "shot", "arguments": "{}"}},
		}},
		map[string]any{"role": "tool", "tool_call_id": id, "name": "shot", "content": []any{
			map[string]any{"type": "text", "text": "taken"},
			map[string]any{"type": "image_url", "image_url": "data:image/gif;base64," + base64.StdEncoding.EncodeToString(providertest.GIF.Data)},
		}},
	}
	if diff := cmp.Diff(want, body.Messages); diff != "" {
		t.Errorf("messages (-want +got):\n%s", diff)
	}
}

// The fake refuses a user message right after a tool message, as the API
// does ("Unexpected role 'user' after role 'tool'").
func TestFakeRefusesUserAfterTool(t *testing.T) {
	id := mistral.CallID("x")
	body := `{"model":"m","messages":[{"role":"user","content":"x"},{"role":"assistant","content":"","tool_calls":[{"id":"` + id + `","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"` + id + `","name":"f","content":"r"},{"role":"user","content":"y"}]}`
	if _, err := mistraltest.Decode([]byte(body)); err == nil {
		t.Error("accepted")
	}
}

func TestImagesInAssistantMessageRefused(t *testing.T) {
	p, fake := setup(t, providertest.Echo, nil)
	providertest.CheckUnsupported(t, p, provider.Request{Messages: []provider.Message{
		{Role: provider.RoleUser, Content: "x"}, {Role: provider.RoleAssistant, Content: "y", Images: []media.Image{providertest.PNG}},
	}}, func() int { return len(fake.Recorder.Bodies()) })
}
