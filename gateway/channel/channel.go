// Package channel defines what a chat platform implements to carry the
// gateway's conversations: a receive loop that publishes what people write,
// and delivery of what the assistant answers. One package per platform
// (gateway/channel/telegram, …) implements it, each with a fake of the
// platform's API for its tests. A channel knows its platform and nothing of
// cartridges, sessions or the agent.
package channel

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/nbots/nb/gateway/bus"
)

// Markdown names the formatting dialect a channel renders.
type Markdown string

// Dialects.
const (
	// Plain renders no formatting: Markdown is sent as written.
	Plain Markdown = "plain"
	// CommonMark renders standard Markdown (the web chat, Matrix's HTML
	// conversion, Discord's subset).
	CommonMark Markdown = "commonmark"
	// Telegram takes entities (or its MarkdownV2).
	Telegram Markdown = "telegram"
	// Slack takes mrkdwn.
	Slack Markdown = "slack"
)

// Capabilities says what a channel can do, so the gateway shapes replies
// for it: splitting long text, converting Markdown, streaming by edits.
type Capabilities struct {
	// MaxMessageLength is the longest text of one platform message, in
	// characters (Telegram 4,096, Discord 2,000); 0 is unlimited. The
	// channel splits longer text itself, on line boundaries.
	MaxMessageLength int
	Markdown         Markdown
	// Edits is true when the channel can replace a message it sent
	// (streamed progress).
	Edits bool
	// Typing is true when the channel can show that the assistant types.
	Typing bool
	// Media is true when the channel receives and sends attachments.
	Media bool
}

// Channel is one account on one chat platform (one Telegram bot, one Slack
// app). The gateway starts it once, sends through it from many goroutines,
// and stops it by cancelling Run's context.
type Channel interface {
	// Name is the channel's configuration name ("telegram", "web"): the
	// Channel field of the messages it carries.
	Name() string
	// Capabilities says what it can do.
	Capabilities() Capabilities
	// Run connects and receives until ctx ends, publishing every message
	// to in. It reconnects by itself after the platform's failures and
	// returns nil when ctx ends; an error it returns is final (a revoked
	// token, a refused consent) and says why in the user's words.
	// Run calls ready once, when it has connected the first time.
	Run(ctx context.Context, in Inbox, ready func()) error
	// Send delivers one message to its chat and returns the platform's id
	// of the (last) message it created. It returns a *RetryAfter when the
	// platform asked to slow down for that destination, and a
	// *Undeliverable when retrying cannot help (a chat that blocked the
	// bot, a deleted channel).
	Send(ctx context.Context, m bus.Outbound) (id string, err error)
}

// Inbox receives what a channel reads. Publish returns once the message is
// durable: only then may the channel advance its platform offset.
type Inbox interface {
	Publish(ctx context.Context, m bus.Inbound) error
}

// Editor is implemented by channels whose messages can be replaced
// (Capabilities.Edits): streamed progress edits one message in place.
type Editor interface {
	Edit(ctx context.Context, chatID, id, content string) error
}

// Typer is implemented by channels that show typing (Capabilities.Typing).
type Typer interface {
	Typing(ctx context.Context, chatID string) error
}

// RetryAfter is the platform's "too many requests" for one destination:
// deliver nothing more to it before After has passed.
type RetryAfter struct {
	After time.Duration
	Err   error
}

func (e *RetryAfter) Error() string {
	return fmt.Sprintf("rate limited: retry after %s: %v", e.After, e.Err)
}

func (e *RetryAfter) Unwrap() error { return e.Err }

// Undeliverable is a delivery that cannot succeed by retrying; Reason is
// the platform's own words.
type Undeliverable struct {
	Reason string
}

func (e *Undeliverable) Error() string { return "undeliverable: " + e.Reason }

// IsUndeliverable reports whether err is, or wraps, an *Undeliverable.
func IsUndeliverable(err error) bool {
	var u *Undeliverable
	return errors.As(err, &u)
}

// Webhook is implemented by channels that can receive by the platform's
// HTTP requests: when WebhookPath is not "", the gateway serves the
// channel at that path on its listener, outside the listener's token
// check; the channel authenticates the platform itself (a shared secret).
type Webhook interface {
	http.Handler
	WebhookPath() string
}

// Admitter is implemented by the gateway's inbox: it tells a channel,
// before the channel downloads what a message carries, whether the
// message's sender is let in now (allowFrom, or an approved pairing).
// The access check itself comes later, on the bus; this one only keeps a
// stranger's files off the disk.
type Admitter interface {
	Admits(m bus.Inbound) bool
}

// Admits reports whether in admits m's sender (see Admitter): a channel
// downloads a message's media only then. An inbox that cannot tell
// admits nobody: media are fetched for known senders only.
func Admits(in Inbox, m bus.Inbound) bool {
	a, ok := in.(Admitter)
	return ok && a.Admits(m)
}
