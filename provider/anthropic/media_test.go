package anthropic_test

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
	providertest.CheckUsageAndFinish(t, newProvider, "max_tokens")
}

// The wire format: image blocks after the text of a user turn (base64 or
// url sources), and inside the tool_result block of a tool message.
func TestImageWire(t *testing.T) {
	p, fake := setup(t, providertest.Echo, nil)
	msgs := []provider.Message{
		{Role: provider.RoleUser, Content: "look", Images: []media.Image{providertest.PNG, providertest.ImageURL}},
		{Role: provider.RoleAssistant, ToolCalls: []provider.ToolCall{{ID: "toolu_1", Name: "shot", Arguments: "{}"}}},
		{Role: provider.RoleTool, ToolCallID: "toolu_1", ToolName: "shot", Content: "taken", Images: []media.Image{providertest.GIF}},
	}
	if _, err := p.Complete(context.Background(), provider.Request{Messages: msgs}, nil); err != nil {
		t.Fatal(err)
	}
	var body struct{ Messages []any }
	json.Unmarshal(fake.Recorder.Bodies()[0], &body) //nolint:errcheck // checked below
	want := []any{
		map[string]any{"role": "user", "content": []any{
			map[string]any{"type": "text", "text": "look"},
			map[string]any{"type": "image", "source": map[string]any{"type": "base64", "media_type": "image/png", "data": base64.StdEncoding.EncodeToString(providertest.PNG.Data)}},
			map[string]any{"type": "image", "source": map[string]any{"type": "url", "url": "https://example.com/cat.jpg"}},
		}},
		map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "tool_use", "id": "toolu_1", "name": "shot", "input": map[string]any{}}}},
		map[string]any{"role": "user", "content": []any{map[string]any{"type": "tool_result", "tool_use_id": "toolu_1", "content": []any{
			map[string]any{"type": "text", "text": "taken"},
			map[string]any{"type": "image", "source": map[string]any{"type": "base64", "media_type": "image/gif", "data": base64.StdEncoding.EncodeToString(providertest.GIF.Data)}},
		}}}},
	}
	if diff := cmp.Diff(want, body.Messages); diff != "" {
		t.Errorf("messages (-want +got):\n%s", diff)
	}
}

// A failed tool call's result says so: is_error on its tool_result block.
func TestToolErrorWire(t *testing.T) {
	p, fake := setup(t, providertest.Echo, nil)
	msgs := []provider.Message{
		{Role: provider.RoleUser, Content: "read it"},
		{Role: provider.RoleAssistant, ToolCalls: []provider.ToolCall{{ID: "toolu_1", Name: "read", Arguments: "{}"}, {ID: "toolu_2", Name: "read", Arguments: "{}"}}},
		{Role: provider.RoleTool, ToolCallID: "toolu_1", ToolName: "read", Content: "no such file", IsError: true},
		{Role: provider.RoleTool, ToolCallID: "toolu_2", ToolName: "read", Content: "text"},
	}
	if _, err := p.Complete(context.Background(), provider.Request{Messages: msgs}, nil); err != nil {
		t.Fatal(err)
	}
	var body struct{ Messages []any }
	json.Unmarshal(fake.Recorder.Bodies()[0], &body) //nolint:errcheck // checked below
	want := map[string]any{"role": "user", "content": []any{
		map[string]any{"type": "tool_result", "tool_use_id": "toolu_1", "content": "no such file", "is_error": true},
		map[string]any{"type": "tool_result", "tool_use_id": "toolu_2", "content": "text"},
	}}
	if len(body.Messages) != 3 {
		t.Fatalf("messages: %v", body.Messages)
	}
	if diff := cmp.Diff(want, body.Messages[2]); diff != "" {
		t.Errorf("tool results (-want +got):\n%s", diff)
	}
}

func TestImagesInAssistantMessageRefused(t *testing.T) {
	p, fake := setup(t, providertest.Echo, nil)
	providertest.CheckUnsupported(t, p, provider.Request{Messages: []provider.Message{
		{Role: provider.RoleUser, Content: "x"}, {Role: provider.RoleAssistant, Content: "y", Images: []media.Image{providertest.PNG}},
	}}, func() int { return len(fake.Recorder.Bodies()) })
}
