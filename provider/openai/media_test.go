package openai_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/nbots/nb/media"
	"github.com/nbots/nb/provider"
	"github.com/nbots/nb/provider/openai/openaitest"
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

// The wire format: image_url parts with {url} after the text; tool
// messages text only, their images in one user message after the round's
// tool messages, which says which call returned them.
func TestImageWire(t *testing.T) {
	p, fake := setup(t, providertest.Echo, nil)
	png := "data:image/png;base64," + base64.StdEncoding.EncodeToString(providertest.PNG.Data)
	gif := "data:image/gif;base64," + base64.StdEncoding.EncodeToString(providertest.GIF.Data)
	msgs := []provider.Message{
		{Role: provider.RoleUser, Content: "look", Images: []media.Image{providertest.PNG, providertest.ImageURL}},
		{Role: provider.RoleAssistant, ToolCalls: []provider.ToolCall{{ID: "call_1", Name: "shot", Arguments: "{}"}, {ID: "call_2", Name: "read", Arguments: "{}"}}},
		{Role: provider.RoleTool, ToolCallID: "call_1", ToolName: "shot", Content: "taken", Images: []media.Image{providertest.GIF}},
		{Role: provider.RoleTool, ToolCallID: "call_2", ToolName: "read", Content: "text only"},
	}
	if _, err := p.Complete(context.Background(), provider.Request{Messages: msgs}, nil); err != nil {
		t.Fatal(err)
	}
	var body struct{ Messages []any }
	json.Unmarshal(fake.Recorder.Bodies()[0], &body) //nolint:errcheck // checked below
	want := []any{
		map[string]any{"role": "user", "content": []any{
			map[string]any{"type": "text", "text": "look"},
			map[string]any{"type": "image_url", "image_url": map[string]any{"url": png}},
			map[string]any{"type": "image_url", "image_url": map[string]any{"url": "https://example.com/cat.jpg"}},
		}},
		map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{
			map[string]any{"id": "call_1", "type": "function", "function": map[string]any{"name": "shot", "arguments": "{}"}},
			map[string]any{"id": "call_2", "type": "function", "function": map[string]any{"name": "read", "arguments": "{}"}},
		}},
		map[string]any{"role": "tool", "tool_call_id": "call_1", "content": "taken"},
		map[string]any{"role": "tool", "tool_call_id": "call_2", "content": "text only"},
		map[string]any{"role": "user", "content": []any{
			map[string]any{"type": "text", "text": "The images returned by the tool shot (call call_1):"},
			map[string]any{"type": "image_url", "image_url": map[string]any{"url": gif}},
		}},
	}
	if diff := cmp.Diff(want, body.Messages); diff != "" {
		t.Errorf("messages (-want +got):\n%s", diff)
	}
}

// The fake refuses what the API refuses: images in a tool message, and a
// user message between an assistant's calls and their results.
func TestFakeRefusesToolImages(t *testing.T) {
	for name, body := range map[string]string{
		"image in tool message": `{"model":"m","messages":[{"role":"user","content":"x"},{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c","content":[{"type":"image_url","image_url":{"url":"https://example.com/a.png"}}]}]}`,
		"user before result":    `{"model":"m","messages":[{"role":"user","content":"x"},{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"user","content":"y"},{"role":"tool","tool_call_id":"c","content":"r"}]}`,
		"string image_url":      `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":"https://example.com/a.png"}]}]}`,
		"not an image":          `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:text/plain;base64,aGk="}}]}]}`,
	} {
		if _, err := openaitest.Decode([]byte(body)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestImagesInAssistantMessageRefused(t *testing.T) {
	p, fake := setup(t, providertest.Echo, nil)
	providertest.CheckUnsupported(t, p, provider.Request{Messages: []provider.Message{
		{Role: provider.RoleUser, Content: "x"}, {Role: provider.RoleAssistant, Content: "y", Images: []media.Image{providertest.PNG}},
	}}, func() int { return len(fake.Recorder.Bodies()) })
}

// stream_options: null in the settings leaves the usage request out, for
// compatible servers that refuse the field.
func TestStreamOptionsNull(t *testing.T) {
	p, fake := setup(t, providertest.Echo, map[string]any{"model": "gpt-4o", "stream_options": nil})
	resp, err := p.Complete(context.Background(), provider.Request{Messages: []provider.Message{{Role: provider.RoleUser, Content: "hi"}}, Stream: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, sent := fake.Recorder.Last()["stream_options"]; sent || resp.Usage != (provider.Usage{}) {
		t.Errorf("stream_options sent=%v usage %+v", sent, resp.Usage)
	}
	// Not streaming: never sent (the API refuses it), whatever the settings.
	p, fake = setup(t, providertest.Echo, map[string]any{"model": "gpt-4o", "stream_options": map[string]any{"include_usage": true}})
	if _, err := p.Complete(context.Background(), provider.Request{Messages: []provider.Message{{Role: provider.RoleUser, Content: "hi"}}}, nil); err != nil {
		t.Fatal(err)
	}
	if _, sent := fake.Recorder.Last()["stream_options"]; sent {
		t.Error("stream_options sent without streaming")
	}
}
