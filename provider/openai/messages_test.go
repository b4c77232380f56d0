package openai

import (
	"encoding/json"
	"fmt"
	"testing"

	sjson "github.com/segmentio/encoding/json"

	"github.com/nbots/nb/provider"
)

// mapMessages is what Messages sent before its commonest messages became
// structs: a map each (the reference for the bytes).
func mapMessages(d Dialect, req provider.Request) []any {
	out := []any{map[string]any{"role": "system", "content": req.System}}
	if req.Backdrop != "" {
		out = append(out, map[string]any{"role": "user", "content": req.Backdrop})
	}
	for _, m := range req.Messages {
		switch m.Role {
		case provider.RoleAssistant:
			msg := map[string]any{"role": "assistant", "content": m.Content}
			if len(m.ToolCalls) > 0 {
				calls := make([]any, len(m.ToolCalls))
				for i, tc := range m.ToolCalls {
					calls[i] = map[string]any{"id": tc.ID, "type": "function",
						"function": map[string]any{"name": tc.Name, "arguments": tc.Arguments}}
				}
				msg["tool_calls"] = calls
			}
			out = append(out, msg)
		case provider.RoleTool:
			msg := map[string]any{"role": "tool", "tool_call_id": m.ToolCallID, "content": m.Content}
			if d.ToolName {
				msg["name"] = m.ToolName
			}
			out = append(out, msg)
		default:
			out = append(out, map[string]any{"role": "user", "content": m.Content})
		}
	}
	return out
}

// TestMessagesEncodeAsMaps: the history's messages encode to the bytes
// their maps did, with provider.Send's encoder and with encoding/json
// (keys sorted, HTML escaped, invalid UTF-8 replaced), for every role,
// with and without the tool's name.
func TestMessagesEncodeAsMaps(t *testing.T) {
	req := provider.Request{System: "be <brief> & kind", Backdrop: "the day's notes", Messages: []provider.Message{
		{Role: provider.RoleUser, Content: "hello \u2028 <b>\xff"},
		{Role: provider.RoleAssistant, Content: "hi \"there\""},
		{Role: provider.RoleAssistant, Content: "let me look", ToolCalls: []provider.ToolCall{{ID: "c1", Name: "read_file", Arguments: `{"path":"a&b"}`}}},
		{Role: provider.RoleTool, ToolCallID: "c1", ToolName: "read_file", Content: "<contents>"},
		{Role: provider.RoleTool, ToolCallID: "c2", ToolName: "exec", Content: ""},
		{Role: provider.RoleAssistant, Content: "done"},
		{Role: provider.RoleUser, Content: ""},
	}}
	for _, d := range []Dialect{{ID: ID}, {ID: "named", ToolName: true}} {
		got, err := d.Messages(req)
		if err != nil {
			t.Fatal(err)
		}
		want := mapMessages(d, req)
		for name, marshal := range map[string]func(any) ([]byte, error){"segmentio": sjson.Marshal, "encoding/json": json.Marshal} {
			g, err := marshal(map[string]any{"messages": got})
			if err != nil {
				t.Fatal(err)
			}
			w, err := marshal(map[string]any{"messages": want})
			if err != nil {
				t.Fatal(err)
			}
			if string(g) != string(w) {
				t.Errorf("%s, tool names %v, %s:\n got %s\nwant %s", d.ID, d.ToolName, name, g, w)
			}
		}
	}
}

// TestMessagesAllocations: a history of text messages costs one
// allocation a message and the list, not a map each (two allocations
// and keys sorted again at every request's encoding).
func TestMessagesAllocations(t *testing.T) {
	var msgs []provider.Message
	for i := range 50 {
		msgs = append(msgs, provider.Message{Role: provider.RoleUser, Content: fmt.Sprintf("question %d", i)},
			provider.Message{Role: provider.RoleAssistant, Content: fmt.Sprintf("answer %d", i)})
	}
	req := provider.Request{System: "s", Messages: msgs}
	d := Dialect{ID: ID}
	n := testing.AllocsPerRun(20, func() {
		if _, err := d.Messages(req); err != nil {
			t.Fatal(err)
		}
	})
	if max := float64(len(msgs) + 2); n > max {
		t.Errorf("%.0f allocations for %d messages, want at most %.0f", n, len(msgs), max)
	}
}
