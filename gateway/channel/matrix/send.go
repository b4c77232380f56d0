package matrix

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/format"
	"maunium.net/go/mautrix/id"

	"github.com/nbots/nb/gateway/bus"
	"github.com/nbots/nb/gateway/channel"
)

// render is one message's content: the Markdown as body, its HTML as
// formatted_body. Mentions are only what the text links to, never @room.
func render(md string) *event.MessageEventContent {
	c := format.RenderMarkdown(md, true, false)
	c.Body = md
	if c.Mentions == nil {
		c.Mentions = &event.Mentions{}
	}
	c.Mentions.Room = false
	return &c
}

func roomID(s string) (id.RoomID, error) {
	if !strings.HasPrefix(s, "!") || !strings.Contains(s, ":") {
		return "", &channel.Undeliverable{Reason: fmt.Sprintf("%q is not a Matrix room id (!id:server)", s)}
	}
	return id.RoomID(s), nil
}

// txnID names a piece of a turn's message the same way on every try, so
// the homeserver answers a repeated send (its answer lost to a reset)
// with the first event instead of posting twice; messages outside a turn
// get a fresh id.
func (c *Channel) txnID(m bus.Outbound, i int, piece string) string {
	if key, ok := channel.PieceKey(m, i, piece); ok {
		return key
	}
	return c.cli.TxnID()
}

// deliveryError sorts the homeserver's answer: 429 M_LIMIT_EXCEEDED
// becomes *channel.RetryAfter (and holds the room back), a room the bot
// is not in or an event too large *channel.Undeliverable; the rest may
// be retried.
func (c *Channel) deliveryError(room string, err error) error {
	if d, ok := retryAfter(err, 5*time.Second); ok {
		c.pacer.Defer(room, d)
		return &channel.RetryAfter{After: d, Err: fmt.Errorf("matrix: %w", err)}
	}
	re, status := respError(err)
	if re != nil {
		switch {
		case status == http.StatusForbidden, re.ErrCode == "M_FORBIDDEN", re.ErrCode == "M_NOT_FOUND",
			re.ErrCode == "M_TOO_LARGE", re.ErrCode == "M_BAD_JSON", re.ErrCode == "M_NOT_JSON":
			return &channel.Undeliverable{Reason: fmt.Sprintf("%s: %s", re.ErrCode, re.Err)}
		}
	}
	return fmt.Errorf("matrix: %w", err)
}

// MaxFileBytes bounds a file the bot sends: Synapse's default upload
// limit (m.upload.size), 50 MiB.
const MaxFileBytes = 50 << 20

// Send delivers m: its text, then its files (uploaded, then sent as
// m.image, m.audio, m.video or m.file). A Progress message of a turn is
// sent once and then edited in place (m.replace); the turn's final
// message replaces it.
func (c *Channel) Send(ctx context.Context, m bus.Outbound) (string, error) {
	room, err := roomID(m.ChatID)
	if err != nil {
		return "", err
	}
	content, files := c.env.Outgoing(m, MaxFileBytes)
	post := func(i int, text string) (string, error) {
		return c.post(ctx, room, render(text), c.txnID(m, i, text))
	}
	edit := func(id string, text string) error { return c.edit(ctx, room, id, text) }
	send := func(i int, f *channel.Attachment) (string, error) {
		return c.sendFile(ctx, room, f, c.txnID(m, i, fmt.Sprintf("file\x00%s\x00%d", f.Name, len(f.Data))))
	}
	return channel.DeliverFiles(&c.turns, m, channel.SplitFenced(content, MaxMessageLength), files, post, edit, send)
}

// sendFile uploads a file to the homeserver's media repository and posts
// it in the room.
func (c *Channel) sendFile(ctx context.Context, room id.RoomID, f *channel.Attachment, txn string) (string, error) {
	if err := c.pacer.Wait(ctx, string(room)); err != nil {
		return "", err
	}
	rctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	up, err := c.cli.UploadBytesWithName(rctx, f.Data, f.Type, f.Name)
	if err != nil {
		return "", c.deliveryError(string(room), err)
	}
	msgtype := event.MsgFile
	switch {
	case strings.HasPrefix(f.Type, "image/"):
		msgtype = event.MsgImage
	case strings.HasPrefix(f.Type, "audio/"):
		msgtype = event.MsgAudio
	case strings.HasPrefix(f.Type, "video/"):
		msgtype = event.MsgVideo
	}
	content := &event.MessageEventContent{
		MsgType:  msgtype,
		Body:     f.Name,
		FileName: f.Name,
		URL:      up.ContentURI.CUString(),
		Info:     &event.FileInfo{MimeType: f.Type, Size: len(f.Data)},
		Mentions: &event.Mentions{},
	}
	return c.post(ctx, room, content, txn)
}

func (c *Channel) post(ctx context.Context, room id.RoomID, content *event.MessageEventContent, txn string) (string, error) {
	if err := c.pacer.Wait(ctx, string(room)); err != nil {
		return "", err
	}
	rctx, cancel := context.WithTimeout(ctx, c.requestTimeout)
	defer cancel()
	resp, err := c.cli.SendMessageEvent(rctx, room, event.EventMessage, content, mautrix.ReqSendEvent{TransactionID: txn})
	if err != nil {
		return "", c.deliveryError(string(room), err)
	}
	return string(resp.EventID), nil
}

func (c *Channel) edit(ctx context.Context, room id.RoomID, original, piece string) error {
	if !strings.HasPrefix(original, "$") {
		return &channel.Undeliverable{Reason: fmt.Sprintf("%q is not a Matrix event id", original)}
	}
	nc := render(piece)
	content := &event.MessageEventContent{
		MsgType:    event.MsgText,
		Body:       "* " + piece,
		NewContent: nc,
		RelatesTo:  (&event.RelatesTo{}).SetReplace(id.EventID(original)),
		Mentions:   &event.Mentions{},
	}
	if nc.FormattedBody != "" {
		content.Format, content.FormattedBody = event.FormatHTML, "* "+nc.FormattedBody
	}
	_, err := c.post(ctx, room, content, c.cli.TxnID())
	return err
}

// Edit replaces the text of a message the bot sent (its first piece, if
// the text is longer than one message).
func (c *Channel) Edit(ctx context.Context, chat, id, content string) error {
	room, err := roomID(chat)
	if err != nil {
		return err
	}
	ps := channel.SplitFenced(content, MaxMessageLength)
	if len(ps) == 0 {
		return nil
	}
	return c.edit(ctx, room, id, ps[0])
}

// Typing shows that the bot types, for up to 30 seconds.
func (c *Channel) Typing(ctx context.Context, chat string) error {
	room, err := roomID(chat)
	if err != nil {
		return err
	}
	rctx, cancel := context.WithTimeout(ctx, c.requestTimeout)
	defer cancel()
	if _, err := c.cli.UserTyping(rctx, room, true, 30*time.Second); err != nil {
		return c.deliveryError(chat, err)
	}
	return nil
}

var (
	_ channel.Channel = (*Channel)(nil)
	_ channel.Editor  = (*Channel)(nil)
	_ channel.Typer   = (*Channel)(nil)
)
