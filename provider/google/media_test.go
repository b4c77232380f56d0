package google_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/nbots/nb/media"
	"github.com/nbots/nb/provider"
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
	providertest.CheckUsageAndFinish(t, newProvider, "MAX_TOKENS")
}

// The wire format: inlineData parts (base64) and fileData parts (a URL
// with its type) after the text of a user content; the images of tool
// results after the round's functionResponse parts, in the same content,
// introduced by a text part naming the tool.
func TestImageWire(t *testing.T) {
	p, fake := setup(t, providertest.Echo, nil)
	msgs := []provider.Message{
		{Role: provider.RoleUser, Content: "look", Images: []media.Image{providertest.PNG, providertest.ImageURL}},
		{Role: provider.RoleAssistant, ToolCalls: []provider.ToolCall{{ID: "c1", Name: "shot", Arguments: "{}"}, {ID: "c2", Name: "read", Arguments: "{}"}}},
		{Role: provider.RoleTool, ToolCallID: "c1", ToolName: "shot", Content: "taken", Images: []media.Image{providertest.GIF}},
		{Role: provider.RoleTool, ToolCallID: "c2", ToolName: "read", Content: "text"},
	}
	if _, err := p.Complete(context.Background(), provider.Request{Messages: msgs}, nil); err != nil {
		t.Fatal(err)
	}
	var body struct{ Contents []any }
	json.Unmarshal(fake.Recorder.Bodies()[0], &body) //nolint:errcheck // checked below
	want := []any{
		map[string]any{"role": "user", "parts": []any{
			map[string]any{"text": "look"},
			map[string]any{"inlineData": map[string]any{"mimeType": "image/png", "data": base64.StdEncoding.EncodeToString(providertest.PNG.Data)}},
			map[string]any{"fileData": map[string]any{"mimeType": "image/jpeg", "fileUri": "https://example.com/cat.jpg"}},
		}},
		map[string]any{"role": "model", "parts": []any{
			map[string]any{"functionCall": map[string]any{"name": "shot", "args": map[string]any{}}, "thoughtSignature": "skip_thought_signature_validator"},
			map[string]any{"functionCall": map[string]any{"name": "read", "args": map[string]any{}}},
		}},
		map[string]any{"role": "user", "parts": []any{
			map[string]any{"functionResponse": map[string]any{"name": "shot", "response": map[string]any{"output": "taken"}}},
			map[string]any{"functionResponse": map[string]any{"name": "read", "response": map[string]any{"output": "text"}}},
			map[string]any{"text": "The images returned by the tool shot:"},
			map[string]any{"inlineData": map[string]any{"mimeType": "image/gif", "data": base64.StdEncoding.EncodeToString(providertest.GIF.Data)}},
		}},
	}
	if diff := cmp.Diff(want, body.Contents); diff != "" {
		t.Errorf("contents (-want +got):\n%s", diff)
	}
}

func TestUnsupportedImages(t *testing.T) {
	for name, m := range map[string]provider.Message{
		"assistant":          {Role: provider.RoleAssistant, Content: "y", Images: []media.Image{providertest.PNG}},
		"URL without a type": {Role: provider.RoleUser, Content: "y", Images: []media.Image{{URL: "https://example.com/a"}}},
	} {
		t.Run(name, func(t *testing.T) {
			p, fake := setup(t, providertest.Echo, nil)
			providertest.CheckUnsupported(t, p, provider.Request{Messages: []provider.Message{{Role: provider.RoleUser, Content: "x"}, m}},
				func() int { return len(fake.Recorder.Bodies()) })
		})
	}
}
