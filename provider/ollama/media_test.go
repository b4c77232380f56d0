package ollama_test

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
	p, _ := setup(t, brain)
	return p
}

// Ollama takes bytes only: no image URLs in the round.
func TestImageRound(t *testing.T) {
	providertest.CheckImageRound(t, newProvider, false)
}

func TestUsageAndFinish(t *testing.T) {
	providertest.CheckUsageAndFinish(t, newProvider, "length")
}

// The wire format: the images field of the user or tool message, plain
// base64 (no data: prefix).
func TestImageWire(t *testing.T) {
	p, fake := setup(t, providertest.Echo)
	msgs := []provider.Message{
		{Role: provider.RoleUser, Content: "look", Images: []media.Image{providertest.PNG}},
		{Role: provider.RoleAssistant, ToolCalls: []provider.ToolCall{{ID: "c1", Name: "shot", Arguments: "{}"}}},
		{Role: provider.RoleTool, ToolCallID: "c1", ToolName: "shot", Content: "taken", Images: []media.Image{providertest.GIF}},
	}
	if _, err := p.Complete(context.Background(), provider.Request{Messages: msgs}, nil); err != nil {
		t.Fatal(err)
	}
	var body struct{ Messages []any }
	json.Unmarshal(fake.Recorder.Bodies()[0], &body) //nolint:errcheck // checked below
	want := []any{
		map[string]any{"role": "user", "content": "look", "images": []any{base64.StdEncoding.EncodeToString(providertest.PNG.Data)}},
		map[string]any{"role": "assistant", "content": "", "tool_calls": []any{map[string]any{"function": map[string]any{"name": "shot", "arguments": map[string]any{}}}}},
		map[string]any{"role": "tool", "content": "taken", "tool_name": "shot", "images": []any{base64.StdEncoding.EncodeToString(providertest.GIF.Data)}},
	}
	if diff := cmp.Diff(want, body.Messages); diff != "" {
		t.Errorf("messages (-want +got):\n%s", diff)
	}
}

// An image given by URL is refused before anything is sent: Ollama needs
// the bytes, and fetching is not the provider's decision.
func TestUnsupportedImages(t *testing.T) {
	for name, m := range map[string]provider.Message{
		"URL":       {Role: provider.RoleUser, Content: "y", Images: []media.Image{providertest.ImageURL}},
		"assistant": {Role: provider.RoleAssistant, Content: "y", Images: []media.Image{providertest.PNG}},
	} {
		t.Run(name, func(t *testing.T) {
			p, fake := setup(t, providertest.Echo)
			providertest.CheckUnsupported(t, p, provider.Request{Messages: []provider.Message{{Role: provider.RoleUser, Content: "x"}, m}},
				func() int { return len(fake.Recorder.Bodies()) })
		})
	}
}
