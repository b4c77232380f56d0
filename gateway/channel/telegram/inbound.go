package telegram

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	"unicode/utf16"

	"github.com/nbots/nb/gateway/bus"
	"github.com/nbots/nb/gateway/channel"
	"github.com/nbots/nb/gateway/channel/telegram/botapi"
)

// SenderID is the identity allowFrom matches: "<id>|<username>", or
// "<id>" for a person without a username.
func SenderID(u botapi.User) string {
	id := strconv.FormatInt(u.ID, 10)
	if u.Username != "" {
		return id + "|" + u.Username
	}
	return id
}

// inbound turns a message into the bus's form, media fetched when in
// admits the sender. ok is false for messages the channel does not carry
// (its own, a channel's posts without a sender).
func (c *Channel) inbound(ctx context.Context, in channel.Inbox, m *botapi.Message) (bus.Inbound, bool) {
	c.mu.Lock()
	me := c.me
	c.mu.Unlock()
	if m.From == nil || m.From.ID == me.ID {
		return bus.Inbound{}, false
	}
	text, ents := m.Text, m.Entities
	if text == "" {
		text, ents = m.Caption, m.CaptionEntities
	}
	group := m.Chat.Type == botapi.Group || m.Chat.Type == botapi.Supergroup
	mentioned := !group || mentions(text, ents, me) ||
		(m.ReplyToMessage != nil && m.ReplyToMessage.From != nil && m.ReplyToMessage.From.ID == me.ID)
	meta := map[string]any{
		"message_id": m.MessageID,
		"chat_type":  m.Chat.Type,
		"group":      group,
		"mentioned":  mentioned,
		"first_name": m.From.FirstName,
	}
	if m.From.Username != "" {
		meta["username"] = m.From.Username
	}
	msg := bus.Inbound{
		Channel:   Name,
		ID:        strconv.FormatInt(m.Chat.ID, 10) + ":" + strconv.FormatInt(m.MessageID, 10),
		SenderID:  SenderID(*m.From),
		ChatID:    strconv.FormatInt(m.Chat.ID, 10),
		Content:   text,
		Timestamp: time.Unix(m.Date, 0).UTC(),
		Metadata:  meta,
	}
	// Media only from whom the bot would answer: a group's chatter that
	// does not mention it costs no download, nor does a stranger's
	// message (it gets a pairing code, never its files on our disk).
	files := attachments(m)
	if !mentioned || len(files) == 0 {
		return msg, true
	}
	if !channel.Admits(in, msg) {
		c.log.Info("telegram: media of a sender not allowed not downloaded", "message", msg.ID, "files", len(files))
		return msg, true
	}
	var notes []string
	for _, f := range files {
		path, err := c.fetch(ctx, m, f)
		if err != nil {
			c.log.Warn("telegram: media not stored", "kind", f.kind, "message", msg.ID, "err", err)
			notes = append(notes, fmt.Sprintf("[%s not received: %v]", f.kind, err))
			continue
		}
		msg.Media = append(msg.Media, path)
		notes = append(notes, fmt.Sprintf("[%s: %s]", f.kind, path))
	}
	if len(notes) > 0 {
		msg.Content = strings.TrimSpace(msg.Content + "\n" + strings.Join(notes, "\n"))
	}
	return msg, true
}

// mentions reports whether the entities name the bot: @username, a
// text mention of its id, or a /command@username.
func mentions(text string, ents []botapi.MessageEntity, me botapi.User) bool {
	if me.Username == "" && me.ID == 0 {
		return false
	}
	units := utf16.Encode([]rune(text))
	for _, e := range ents {
		if e.Offset < 0 || e.Length <= 0 || e.Offset+e.Length > len(units) {
			continue
		}
		s := string(utf16.Decode(units[e.Offset : e.Offset+e.Length]))
		switch e.Type {
		case "mention":
			if me.Username != "" && strings.EqualFold(s, "@"+me.Username) {
				return true
			}
		case "text_mention":
			if e.User != nil && e.User.ID == me.ID {
				return true
			}
		case "bot_command":
			if _, who, ok := strings.Cut(s, "@"); ok && strings.EqualFold(who, me.Username) {
				return true
			}
		}
	}
	return false
}

type attachment struct {
	kind     string // photo, voice, audio, document
	fileID   string
	uniqueID string
	size     int64
	ext      string
}

func attachments(m *botapi.Message) []attachment {
	var out []attachment
	if n := len(m.Photo); n > 0 {
		p := m.Photo[n-1] // the largest size comes last
		out = append(out, attachment{"photo", p.FileID, p.FileUniqueID, p.FileSize, ".jpg"})
	}
	if v := m.Voice; v != nil {
		out = append(out, attachment{"voice", v.FileID, v.FileUniqueID, v.FileSize, ".ogg"})
	}
	if a := m.Audio; a != nil {
		out = append(out, attachment{"audio", a.FileID, a.FileUniqueID, a.FileSize, ""})
	}
	if d := m.Document; d != nil {
		out = append(out, attachment{"document", d.FileID, d.FileUniqueID, d.FileSize, filepath.Ext(d.FileName)})
	}
	return out
}

// fetch downloads one attachment through the egress guard into the
// workspace, refusing what exceeds the size limit before and while it
// downloads.
func (c *Channel) fetch(ctx context.Context, m *botapi.Message, a attachment) (string, error) {
	limit := c.cfg.MaxMediaBytes
	if a.size > limit {
		return "", fmt.Errorf("%d bytes, over the limit of %d (channels.telegram.maxMediaBytes)", a.size, limit)
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	f, err := c.api.GetFile(ctx, a.fileID)
	if err != nil {
		return "", err
	}
	if f.FileSize > limit {
		return "", fmt.Errorf("%d bytes, over the limit of %d (channels.telegram.maxMediaBytes)", f.FileSize, limit)
	}
	u, err := c.api.FileURL(f.FilePath)
	if err != nil {
		return "", err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return "", c.api.Redact(err)
	}
	dir, err := c.env.MediaDir(Name)
	if err != nil {
		return "", err
	}
	ext := a.ext
	if ext == "" {
		ext = filepath.Ext(f.FilePath)
	}
	path, err := channel.SaveMedia(c.media, req, dir, fmt.Sprintf("%d_%d_%s%s", m.Chat.ID, m.MessageID, a.uniqueID, ext), limit)
	if channel.IsTooLarge(err) {
		return "", fmt.Errorf("%w (channels.telegram.maxMediaBytes)", err)
	}
	if err != nil {
		return "", c.api.Redact(err)
	}
	return path, nil
}

var errNotChat = errors.New("not a Telegram chat id")
