package telegram

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/nbots/nb/gateway/bus"
	"github.com/nbots/nb/gateway/channel"
	"github.com/nbots/nb/gateway/channel/telegram/botapi"
)

// piece is one message's worth of an answer: its text and entities.
type piece struct {
	text     string
	entities []botapi.MessageEntity
	plain    string // the same text without formatting, for the retry
}

// Upload limits of the Bot API: photos up to 10 MB, other files 50 MB.
const (
	MaxPhotoBytes = 10 << 20
	MaxFileBytes  = 50 << 20
)

// photoTypes are the pictures sendPhoto takes; others go as documents.
var photoTypes = map[string]bool{"image/jpeg": true, "image/png": true, "image/webp": true}

var entityType = map[channel.SpanKind]string{
	channel.Bold: "bold", channel.Italic: "italic", channel.Strike: "strikethrough",
	channel.Code: "code", channel.Pre: "pre", channel.Link: "text_link", channel.Quote: "blockquote",
}

// pieces converts Markdown to text and entities and splits it on line
// boundaries into messages of at most MaxMessageLength.
func pieces(markdown string) []piece {
	var out []piece
	for _, r := range channel.SplitRich(channel.ParseMarkdown(markdown), MaxMessageLength, channel.UTF16Len) {
		p := piece{text: r.Text, plain: r.Text}
		for _, s := range r.Spans {
			e := botapi.MessageEntity{
				Type:   entityType[s.Kind],
				Offset: channel.UTF16Len(r.Text[:s.Start]),
				Length: channel.UTF16Len(r.Text[s.Start:s.End]),
			}
			switch s.Kind {
			case channel.Link:
				e.URL = s.URL
				if !strings.HasPrefix(s.URL, "http://") && !strings.HasPrefix(s.URL, "https://") && !strings.HasPrefix(s.URL, "tg://") {
					continue // Telegram refuses relative and other links
				}
			case channel.Pre:
				e.Language = s.Lang
			}
			p.entities = append(p.entities, e)
		}
		sort.SliceStable(p.entities, func(i, j int) bool { return p.entities[i].Offset < p.entities[j].Offset })
		out = append(out, p)
	}
	return out
}

func chatID(s string) (int64, error) {
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, &channel.Undeliverable{Reason: fmt.Sprintf("%q is %v", s, errNotChat)}
	}
	return id, nil
}

// messageID reads the platform id in an Inbound.ID ("<chat>:<message>")
// or a bare message id.
func messageID(s string) int64 {
	if i := strings.LastIndexByte(s, ':'); i >= 0 {
		s = s[i+1:]
	}
	id, _ := strconv.ParseInt(s, 10, 64)
	return id
}

// deliveryError sorts the API's answer: a 429 becomes *channel.RetryAfter
// (and holds the chat back), a chat that is gone or refuses the bot
// *channel.Undeliverable; the rest may be retried.
func (c *Channel) deliveryError(chat string, err error) error {
	var e *botapi.Error
	if !errors.As(err, &e) {
		return err
	}
	switch {
	case e.Code == http.StatusTooManyRequests:
		c.pacer.Defer(chat, e.RetryAfter)
		return &channel.RetryAfter{After: e.RetryAfter, Err: err}
	case e.Code == http.StatusForbidden, e.Code == http.StatusRequestEntityTooLarge:
		return &channel.Undeliverable{Reason: e.Description}
	case e.MigrateTo != 0:
		return &channel.Undeliverable{Reason: fmt.Sprintf("%s (the group is now chat %d)", e.Description, e.MigrateTo)}
	case e.Code == http.StatusBadRequest && (strings.Contains(e.Description, "chat not found") || strings.Contains(e.Description, "message is too long") || strings.Contains(e.Description, "text is empty")):
		return &channel.Undeliverable{Reason: e.Description}
	}
	return err
}

func badEntities(err error) bool {
	var e *botapi.Error
	return errors.As(err, &e) && e.Code == http.StatusBadRequest && strings.Contains(e.Description, "can't parse entities")
}

func notModified(err error) bool {
	var e *botapi.Error
	return errors.As(err, &e) && e.Code == http.StatusBadRequest && strings.Contains(e.Description, "message is not modified")
}

// Send delivers m. A Progress message of a turn is sent once and then
// edited in place; the turn's final message replaces it.
func (c *Channel) Send(ctx context.Context, m bus.Outbound) (string, error) {
	chat, err := chatID(m.ChatID)
	if err != nil {
		return "", err
	}
	post := func(i int, p piece) (string, error) {
		var reply *botapi.ReplyParameters
		if i == 0 && c.cfg.ReplyToMessage && m.ReplyTo != "" && m.Kind != bus.Progress {
			if id := messageID(m.ReplyTo); id > 0 {
				reply = &botapi.ReplyParameters{MessageID: id, AllowSendingWithoutReply: true}
			}
		}
		id, err := c.sendPiece(ctx, chat, m.ChatID, p, reply)
		return strconv.FormatInt(id, 10), err
	}
	edit := func(id string, p piece) error { return c.edit(ctx, chat, m.ChatID, messageID(id), p) }
	send := func(_ int, f *channel.Attachment) (string, error) {
		id, err := c.sendFile(ctx, chat, m.ChatID, f)
		return strconv.FormatInt(id, 10), err
	}
	content, files := c.env.Outgoing(m, MaxFileBytes)
	return channel.DeliverFiles(&c.turns, m, pieces(content), files, post, edit, send)
}

func (c *Channel) sendPiece(ctx context.Context, chat int64, dest string, p piece, reply *botapi.ReplyParameters) (int64, error) {
	if err := c.pacer.Wait(ctx, dest); err != nil {
		return 0, err
	}
	rctx, cancel := context.WithTimeout(ctx, c.requestTimeout)
	defer cancel()
	msg, err := c.api.SendMessage(rctx, botapi.SendMessage{ChatID: chat, Text: p.text, Entities: p.entities, ReplyParameters: reply})
	if badEntities(err) && len(p.entities) > 0 {
		c.log.Warn("telegram: formatting refused, sending as plain text", "chat", dest, "err", err)
		msg, err = c.api.SendMessage(rctx, botapi.SendMessage{ChatID: chat, Text: p.plain, ReplyParameters: reply})
	}
	if err != nil {
		return 0, c.deliveryError(dest, err)
	}
	return msg.MessageID, nil
}

// sendFile sends a picture with sendPhoto (up to MaxPhotoBytes) and any
// other file with sendDocument.
func (c *Channel) sendFile(ctx context.Context, chat int64, dest string, f *channel.Attachment) (int64, error) {
	if err := c.pacer.Wait(ctx, dest); err != nil {
		return 0, err
	}
	rctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	method, field := "sendDocument", "document"
	if photoTypes[f.Type] && len(f.Data) <= MaxPhotoBytes {
		method, field = "sendPhoto", "photo"
	}
	msg, err := c.api.SendFile(rctx, method, field, chat, f.Name, f.Data)
	if err != nil {
		return 0, c.deliveryError(dest, err)
	}
	return msg.MessageID, nil
}

func (c *Channel) edit(ctx context.Context, chat int64, dest string, id int64, p piece) error {
	if err := c.pacer.Wait(ctx, dest); err != nil {
		return err
	}
	rctx, cancel := context.WithTimeout(ctx, c.requestTimeout)
	defer cancel()
	_, err := c.api.EditMessageText(rctx, botapi.EditMessageText{ChatID: chat, MessageID: id, Text: p.text, Entities: p.entities})
	if badEntities(err) && len(p.entities) > 0 {
		_, err = c.api.EditMessageText(rctx, botapi.EditMessageText{ChatID: chat, MessageID: id, Text: p.plain})
	}
	if err == nil || notModified(err) {
		return nil
	}
	return c.deliveryError(dest, err)
}

// Edit replaces the text of a message the bot sent (its first piece, if
// the text is longer than one message).
func (c *Channel) Edit(ctx context.Context, chatIDs, id, content string) error {
	chat, err := chatID(chatIDs)
	if err != nil {
		return err
	}
	ps := pieces(content)
	if len(ps) == 0 {
		return nil
	}
	return c.edit(ctx, chat, chatIDs, messageID(id), ps[0])
}

// Typing shows "typing…" in the chat for a few seconds.
func (c *Channel) Typing(ctx context.Context, chatIDs string) error {
	chat, err := chatID(chatIDs)
	if err != nil {
		return err
	}
	rctx, cancel := context.WithTimeout(ctx, c.requestTimeout)
	defer cancel()
	if err := c.api.SendChatAction(rctx, chat, "typing"); err != nil {
		return c.deliveryError(chatIDs, err)
	}
	return nil
}

var (
	_ channel.Channel = (*Channel)(nil)
	_ channel.Editor  = (*Channel)(nil)
	_ channel.Typer   = (*Channel)(nil)
)
