// Package bus carries messages between the gateway's chat channels and its
// agent: inbound messages from people, outbound replies to them. It is
// nanobot's two queues (bus/events.py) with the same fields, behind an
// interface so that one process uses an in-process bus and replicas share
// one on NATS JetStream. A bus knows messages, not platforms or cartridges.
package bus

import (
	"context"
	"fmt"
	"time"
)

// Inbound is a message a person sent to the assistant through a channel
// (nanobot's InboundMessage).
type Inbound struct {
	// Channel names the channel it came through ("telegram", "web").
	Channel string `json:"channel"`
	// ID is the platform's id of the message, unique within the channel:
	// the bus drops a second message with the same (Channel, ID), so a
	// receive loop that replays after a reconnect answers nothing twice.
	// "" opts out of deduplication.
	ID string `json:"id,omitempty"`
	// SenderID is who sent it, as the channel's allowFrom names people.
	SenderID string `json:"sender_id"`
	// ChatID is where it was sent: the destination of the reply.
	ChatID string `json:"chat_id"`
	// Content is the message's text.
	Content   string    `json:"content"`
	Timestamp time.Time `json:"timestamp"`
	// Media are paths, under the workspace, of what came with the message
	// (photos, voice notes), already fetched and size-limited.
	Media []string `json:"media,omitempty"`
	// Metadata is channel-specific (a thread id, whether the bot was
	// mentioned, the sender's display name).
	Metadata map[string]any `json:"metadata,omitempty"`
	// SessionKeyOverride, when set, is the session instead of
	// "<channel>:<chat_id>" (a Slack thread is its own session).
	SessionKeyOverride string `json:"session_key_override,omitempty"`
}

// SessionKey is the session the message belongs to: nanobot's
// "<channel>:<chat_id>" unless the channel overrode it.
func (m Inbound) SessionKey() string {
	if m.SessionKeyOverride != "" {
		return m.SessionKeyOverride
	}
	return m.Channel + ":" + m.ChatID
}

// Kind tells what an Outbound carries.
type Kind string

// Outbound kinds. Channels deliver Message always; Progress and ToolHint only
// when the gateway's channels.sendProgress and sendToolHints ask for them.
const (
	// Message is a final reply, or a message the agent sent on its own (the
	// message tool, a cron job): it is delivered or logged as undeliverable.
	Message Kind = "message"
	// Progress is the answer so far while it streams; a channel that edits
	// messages replaces its previous progress message of the same turn.
	Progress Kind = "progress"
	// ToolHint says which tool the agent is running.
	ToolHint Kind = "tool_hint"
	// Error is a failure to tell the person about (a budget spent, a turn
	// that failed), in words meant for them.
	Error Kind = "error"
)

// Outbound is a message from the assistant to a chat (nanobot's
// OutboundMessage).
type Outbound struct {
	Kind    Kind   `json:"kind"`
	Channel string `json:"channel"`
	ChatID  string `json:"chat_id"`
	Content string `json:"content"`
	// ReplyTo is the platform id of the message this answers, if any.
	ReplyTo  string         `json:"reply_to,omitempty"`
	Media    []string       `json:"media,omitempty"`
	Metadata map[string]any `json:"metadata,omitempty"`
	// Turn identifies the turn that produced the message; with Channel and
	// ChatID it makes delivery idempotent: one final reply per turn and
	// destination, however often delivery is retried.
	Turn string `json:"turn,omitempty"`
}

// Bus moves messages between channels and the agent. Implementations are
// safe for concurrent use.
type Bus interface {
	// PublishInbound queues a message for the agent. It reports
	// duplicate=true, and queues nothing, when the (Channel, ID) pair was
	// seen before. It returns once the message is durable in the bus.
	PublishInbound(ctx context.Context, m Inbound) (duplicate bool, err error)
	// Inbound delivers queued messages to fn until ctx ends. A message is
	// acknowledged when fn returns nil; an error redelivers it later.
	// Messages of one session are delivered in order and one at a time;
	// different sessions run in parallel.
	Inbound(ctx context.Context, fn func(context.Context, Inbound) error) error
	// PublishOutbound queues a message for its channel. A final reply
	// (Message or Error) with a Turn is queued once per (Turn, Channel,
	// ChatID): a turn run again after a crash answers nothing twice.
	PublishOutbound(ctx context.Context, m Outbound) error
	// Outbound delivers queued messages of the named channel to fn until
	// ctx ends, with the same acknowledgement rule as Inbound.
	Outbound(ctx context.Context, channel string, fn func(context.Context, Outbound) error) error
	// Close releases the bus.
	Close() error
}

// Depther is a bus that knows the depth of its outbound queues: Local,
// one queue per destination; JetStream, one per destination partition
// (the destinations whose chat hashes to it), read from its stream.
type Depther interface {
	// OutboundDepth is how many messages of channel wait for delivery or
	// are being delivered: over all its destinations, and at the deepest.
	OutboundDepth(channel string) (total, deepest int)
}

// FinalKey is the key that makes a final reply idempotent, "" and false
// for a message that is not one (progress, tool hints, no turn).
func FinalKey(m Outbound) (string, bool) {
	if m.Turn == "" || (m.Kind != Message && m.Kind != Error && m.Kind != "") {
		return "", false
	}
	return m.Turn + "\x00" + m.Channel + "\x00" + m.ChatID, true
}

// QueueFull is PublishInbound's refusal of a message whose session
// already has Limit messages waiting for the agent (or being answered):
// the chat writes faster than its turns run. Nothing was queued.
type QueueFull struct {
	Session string
	Limit   int
}

func (e *QueueFull) Error() string {
	return fmt.Sprintf("%s already has %d messages waiting for the assistant (gateway.limits.queuedPerChat): this one is dropped", e.Session, e.Limit)
}
