package matrix

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/nbots/nb/gateway/bus"
	"github.com/nbots/nb/gateway/channel"
)

func roomID(s string) (string, error) {
	if !strings.HasPrefix(s, "!") || !strings.Contains(s, ":") {
		return "", &channel.Undeliverable{Reason: fmt.Sprintf("%q is not a Matrix room id (!id:server)", s)}
	}
	return s, nil
}

// txnID names a piece of a turn's message the same way on every try, so
// the homeserver answers a repeated send (its answer lost to a reset)
// with the first event instead of posting twice; messages outside a turn
// get a fresh id.
func (c *Channel) txnID(m bus.Outbound, i int, piece string) string {
	if key, ok := channel.PieceKey(m, i, piece); ok {
		return key
	}
	return c.cli.txnID()
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
	if re := asAPIError(err); re != nil {
		switch {
		case re.Status == http.StatusForbidden, re.Code == "M_FORBIDDEN", re.Code == "M_NOT_FOUND",
			re.Code == "M_TOO_LARGE", re.Code == "M_BAD_JSON", re.Code == "M_NOT_JSON":
			return &channel.Undeliverable{Reason: fmt.Sprintf("%s: %s", re.Code, re.Message)}
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
func (c *Channel) sendFile(ctx context.Context, room string, f *channel.Attachment, txn string) (string, error) {
	if err := c.pacer.Wait(ctx, room); err != nil {
		return "", err
	}
	rctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	uri, err := c.cli.upload(rctx, f.Data, f.Type, f.Name)
	if err != nil {
		return "", c.deliveryError(room, err)
	}
	msgtype := msgFile
	switch {
	case strings.HasPrefix(f.Type, "image/"):
		msgtype = msgImage
	case strings.HasPrefix(f.Type, "audio/"):
		msgtype = msgAudio
	case strings.HasPrefix(f.Type, "video/"):
		msgtype = msgVideo
	}
	content := &messageContent{
		MsgType:  msgtype,
		Body:     f.Name,
		FileName: f.Name,
		URL:      uri,
		Info:     &fileInfo{MimeType: f.Type, Size: int64(len(f.Data))},
		Mentions: &mentions{},
	}
	return c.post(ctx, room, content, txn)
}

func (c *Channel) post(ctx context.Context, room string, content *messageContent, txn string) (string, error) {
	if err := c.pacer.Wait(ctx, room); err != nil {
		return "", err
	}
	rctx, cancel := context.WithTimeout(ctx, c.requestTimeout)
	defer cancel()
	id, err := c.cli.send(rctx, room, typeMessage, txn, content)
	if err != nil {
		return "", c.deliveryError(room, err)
	}
	return id, nil
}

func (c *Channel) edit(ctx context.Context, room string, original, piece string) error {
	if !strings.HasPrefix(original, "$") {
		return &channel.Undeliverable{Reason: fmt.Sprintf("%q is not a Matrix event id", original)}
	}
	nc := render(piece)
	content := &messageContent{
		MsgType:    msgText,
		Body:       "* " + piece,
		NewContent: nc,
		RelatesTo:  &relatesTo{Type: relReplace, EventID: original},
		Mentions:   &mentions{},
	}
	if nc.FormattedBody != "" {
		content.Format, content.FormattedBody = formatHTML, "* "+nc.FormattedBody
	}
	_, err := c.post(ctx, room, content, c.cli.txnID())
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
	c.mu.Lock()
	me := c.me
	c.mu.Unlock()
	if me == "" {
		return nil // not connected yet: whoami names the bot
	}
	if err := c.cli.typing(rctx, room, me, 30*time.Second); err != nil {
		return c.deliveryError(chat, err)
	}
	return nil
}

var (
	_ channel.Channel = (*Channel)(nil)
	_ channel.Editor  = (*Channel)(nil)
	_ channel.Typer   = (*Channel)(nil)
)
