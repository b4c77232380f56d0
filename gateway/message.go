package gateway

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"

	"github.com/nbots/nb/builtin/files"
	"github.com/nbots/nb/gateway/access"
	"github.com/nbots/nb/gateway/bus"
	"github.com/nbots/nb/tool"
)

// messageTool is nanobot's message tool: send to the user, or to another
// allowed chat, now.
type messageTool struct {
	g      *Gateway
	from   Direct
	onSent func(channel, chat string)
}

func (t *messageTool) Spec() tool.Spec {
	return tool.Spec{
		Name:        "message",
		Description: "Send a message to the user, or to another chat, now. Use it only to reach a specific chat channel; reply to the conversation with plain text.",
		Parameters:  messageParams(),
	}
}

// messageParams is message's schema, built once on first use: a spec's Parameters are read-only
// (tool.Spec), and a turn asks every tool for its spec.
var messageParams = sync.OnceValue(func() map[string]any {
	return map[string]any{
		"type": "object",
		"properties": map[string]any{
			"content": map[string]any{"type": "string", "description": "The message content to send"},
			"channel": map[string]any{"type": "string", "description": "Optional: target channel (telegram, discord, etc.)"},
			"chat_id": map[string]any{"type": "string", "description": "Optional: target chat/user ID"},
			"media":   map[string]any{"type": "array", "items": map[string]any{"type": "string"}, "description": "Optional: list of file paths to attach (images, audio, documents)"},
		},
		"required": []any{"content"},
	}
})

func (t *messageTool) Run(ctx context.Context, call tool.Call) (any, error) {
	content, _ := call.Arguments["content"].(string)
	ch, _ := call.Arguments["channel"].(string)
	chat, _ := call.Arguments["chat_id"].(string)
	if ch == "" {
		ch = t.from.Channel
	}
	if chat == "" {
		chat = t.from.ChatID
	}
	if ch == "" || chat == "" {
		return "Error: No target channel/chat specified", nil
	}
	if t.from.Role != access.Owner && (ch != t.from.Channel || chat != t.from.ChatID) {
		// A guest's turn speaks in the guest's own chat only: never in
		// the owner's, nor another guest's.
		return fmt.Sprintf("Error: sending to %s:%s is not allowed: in this chat the message tool sends here only", ch, chat), nil
	}
	if d := t.g.Access.Authorize(ctx, access.Request{Entry: access.MessageTool, Channel: ch, ChatID: chat}); d.Verdict != access.Allow {
		return fmt.Sprintf("Error: sending to %s:%s is not allowed (%s)", ch, chat, d.Reason), nil
	}
	var media []string
	if list, ok := call.Arguments["media"].([]any); ok {
		for _, m := range list {
			if s, ok := m.(string); ok {
				// An attachment is a file read for the chat: the turn's
				// file policy decides, as for read_file.
				// A relative path is checked as the workspace's and as
				// the process's (where a channel would open it).
				places := []string{filepath.Join(t.g.workspace(), s)}
				if abs, err := filepath.Abs(s); err == nil {
					places = append(places, abs)
				}
				for _, abs := range places {
					if err := files.Readable(ctx, abs); err != nil {
						return fmt.Sprintf("Error: the attachment %s cannot be sent: %v", s, err), nil
					}
				}
				media = append(media, s)
			}
		}
	}
	if err := t.g.Bus.PublishOutbound(ctx, bus.Outbound{Kind: bus.Message, Channel: ch, ChatID: chat, Content: content, Media: media, Turn: newID()}); err != nil {
		return nil, fmt.Errorf("message not sent: %w", err)
	}
	if t.onSent != nil {
		t.onSent(ch, chat)
	}
	out := fmt.Sprintf("Message sent to %s:%s", ch, chat)
	if len(media) > 0 {
		out += fmt.Sprintf(" with %d attachments", len(media))
	}
	return out, nil
}
