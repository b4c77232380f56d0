package cohere_test

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

func TestImageRound(t *testing.T) {
	providertest.CheckImageRound(t, func(t *testing.T, brain providertest.Brain) provider.Provider {
		p, _ := setup(t, brain, nil, v2)
		return p
	}, true)
}

func TestUsageAndFinish(t *testing.T) {
	for _, options := range []map[string]any{v1, v2} {
		t.Run(options["api"].(string), func(t *testing.T) {
			providertest.CheckUsageAndFinish(t, func(t *testing.T, brain providertest.Brain) provider.Provider {
				p, _ := setup(t, brain, nil, options)
				return p
			}, "MAX_TOKENS")
		})
	}
}

// The v2 wire format: {type: image_url, image_url: {url}} parts after the
// text of a user message; tool messages take text and documents only, so
// the images of the round's tool results follow in a user message.
func TestImageWire(t *testing.T) {
	p, fake := setup(t, providertest.Echo, nil, v2)
	msgs := []provider.Message{
		{Role: provider.RoleUser, Content: "look", Images: []media.Image{providertest.PNG, providertest.ImageURL}},
		{Role: provider.RoleAssistant, ToolCalls: []provider.ToolCall{{ID: "shot_0", Name: "shot", Arguments: "{}"}}},
		{Role: provider.RoleTool, ToolCallID: "shot_0", ToolName: "shot", Content: "taken", Images: []media.Image{providertest.GIF}},
	}
	if _, err := p.Complete(context.Background(), provider.Request{Messages: msgs}, nil); err != nil {
		t.Fatal(err)
	}
	var body struct{ Messages []any }
	json.Unmarshal(fake.Recorder.Bodies()[0], &body) //nolint:errcheck // checked below
	want := []any{
		map[string]any{"role": "user", "content": []any{
			map[string]any{"type": "text", "text": "look"},
			map[string]any{"type": "image_url", "image_url": map[string]any{"url": "data:image/png;base64," + base64.StdEncoding.EncodeToString(providertest.PNG.Data)}},
			map[string]any{"type": "image_url", "image_url": map[string]any{"url": "https://example.com/cat.jpg"}},
		}},
		map[string]any{"role": "assistant", "tool_calls": []any{
			map[string]any{"id": "shot_0", "type": "function", "function": map[string]any{"name": "shot", "arguments": "{}"}},
		}},
		map[string]any{"role": "tool", "tool_call_id": "shot_0", "content": "taken"},
		map[string]any{"role": "user", "content": []any{
			map[string]any{"type": "text", "text": "The images returned by the tool shot (call shot_0):"},
			map[string]any{"type": "image_url", "image_url": map[string]any{"url": "data:image/gif;base64," + base64.StdEncoding.EncodeToString(providertest.GIF.Data)}},
		}},
	}
	if diff := cmp.Diff(want, body.Messages); diff != "" {
		t.Errorf("messages (-want +got):\n%s", diff)
	}
}

// v1 has no images: the request fails before it is sent, saying so.
func TestV1RefusesImages(t *testing.T) {
	p, fake := setup(t, providertest.Echo, nil, v1)
	providertest.CheckUnsupported(t, p, provider.Request{Messages: []provider.Message{{Role: provider.RoleUser, Content: "x", Images: []media.Image{providertest.PNG}}}},
		func() int { return len(fake.Recorder.Bodies()) })
	_, err := p.Complete(context.Background(), provider.Request{Messages: []provider.Message{{Role: provider.RoleUser, Content: "x", Images: []media.Image{providertest.PNG}}}}, nil)
	if want := "cohere: images are not supported (the v1 chat API takes text only; use options.api: v2 with a vision model such as command-a-vision)"; err.Error() != want {
		t.Errorf("got  %q\nwant %q", err, want)
	}
}
