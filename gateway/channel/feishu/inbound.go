package feishu

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/nbots/nb/gateway/bus"
	"github.com/nbots/nb/gateway/channel"
)

// envelope is an event of schema 2.0, as both the long connection and
// the callback carry it.
type envelope struct {
	Schema    string `json:"schema"`
	Type      string `json:"type"`      // "url_verification" on the callback
	Challenge string `json:"challenge"` // with it
	Token     string `json:"token"`     // with it
	Encrypt   string `json:"encrypt"`   // an encrypted callback body
	Header    struct {
		EventID   string `json:"event_id"`
		EventType string `json:"event_type"`
		Token     string `json:"token"`
	} `json:"header"`
	Event json.RawMessage `json:"event"`
}

// messageEvent is im.message.receive_v1's event.
type messageEvent struct {
	Sender struct {
		SenderID   userID `json:"sender_id"`
		SenderType string `json:"sender_type"`
	} `json:"sender"`
	Message struct {
		MessageID   string    `json:"message_id"`
		RootID      string    `json:"root_id"`
		ParentID    string    `json:"parent_id"`
		CreateTime  string    `json:"create_time"`
		ChatID      string    `json:"chat_id"`
		ChatType    string    `json:"chat_type"`
		MessageType string    `json:"message_type"`
		Content     string    `json:"content"`
		Mentions    []mention `json:"mentions"`
	} `json:"message"`
}

type userID struct {
	OpenID string `json:"open_id"`
	UserID string `json:"user_id"`
}

type mention struct {
	Key  string `json:"key"`
	ID   userID `json:"id"`
	Name string `json:"name"`
}

// event publishes what one event of the long connection carries, until
// the inbox takes it, and returns the id of the message published ("":
// none); ok is false only when ctx ended first.
func (c *Channel) event(ctx context.Context, in channel.Inbox, payload []byte) (id string, ok bool) {
	var env envelope
	if err := json.Unmarshal(payload, &env); err != nil {
		c.log.Warn("feishu: an unreadable event skipped", "err", err)
		return "", true
	}
	m, ok := c.inbound(ctx, in, env)
	if !ok {
		return "", true
	}
	if !channel.PublishDurably(ctx, in, m, c.log, c.backoff) {
		return "", false
	}
	return m.ID, true
}

// inbound turns a message event into the bus's form; ok is false for
// other events, the bot's own messages and empty ones.
func (c *Channel) inbound(ctx context.Context, in channel.Inbox, env envelope) (bus.Inbound, bool) {
	if env.Header.EventType != "im.message.receive_v1" {
		return bus.Inbound{}, false
	}
	var ev messageEvent
	if err := json.Unmarshal(env.Event, &ev); err != nil {
		c.log.Warn("feishu: an unreadable message event skipped", "err", err)
		return bus.Inbound{}, false
	}
	msg := ev.Message
	if ev.Sender.SenderType == "bot" || msg.MessageID == "" {
		return bus.Inbound{}, false
	}
	sender := ev.Sender.SenderID.OpenID
	group := msg.ChatType == "group"
	me := c.botID()
	mentioned := !group || strings.Contains(msg.Content, "@_all")
	var content struct {
		Text     string `json:"text"`
		ImageKey string `json:"image_key"`
		FileKey  string `json:"file_key"`
		FileName string `json:"file_name"`
	}
	json.Unmarshal([]byte(msg.Content), &content) //nolint:errcheck // a content it cannot read is empty
	text := content.Text
	var images []string
	switch msg.MessageType {
	case "text":
	case "post":
		text, images = postText(msg.Content)
	case "image", "audio", "file", "media":
		text = ""
	default:
		text = "[" + msg.MessageType + "]"
	}
	// Mentions come as placeholders (@_user_1): the bot's is removed,
	// anyone else's becomes their name.
	for _, mn := range msg.Mentions {
		if me != "" && mn.ID.OpenID == me {
			mentioned = true
			text = strings.ReplaceAll(text, mn.Key, "")
			continue
		}
		text = strings.ReplaceAll(text, mn.Key, "@"+mn.Name)
	}
	text = strings.TrimSpace(text)
	chatID := sender
	if group {
		chatID = msg.ChatID
	}
	m := bus.Inbound{
		Channel:   Name,
		ID:        msg.MessageID,
		SenderID:  sender,
		ChatID:    chatID,
		Timestamp: millis(msg.CreateTime),
		Metadata: map[string]any{
			channel.MetaGroup: group, channel.MetaMentioned: mentioned,
			"message_id": msg.MessageID, "chat_type": msg.ChatType, "msg_type": msg.MessageType,
			"chat_id": msg.ChatID, "parent_id": msg.ParentID, "root_id": msg.RootID,
		},
	}
	// Files only from whom the gateway lets in, and in a group only when
	// the bot is addressed: a stranger's file is never fetched.
	fetch := channel.Admits(in, m) && (mentioned || c.cfg.GroupPolicy == "open")
	var notes []string
	keys := images
	kind := "image"
	switch msg.MessageType {
	case "image":
		keys = []string{content.ImageKey}
	case "audio", "file", "media":
		keys, kind = []string{content.FileKey}, "file"
	}
	for _, key := range keys {
		if key == "" {
			continue
		}
		label := msg.MessageType
		if !fetch {
			notes = append(notes, "["+label+"]")
			continue
		}
		path, err := c.fetch(ctx, msg.MessageID, key, kind, content.FileName)
		if err != nil {
			c.log.Warn("feishu: a file not stored", "message", msg.MessageID, "err", err)
			notes = append(notes, fmt.Sprintf("[%s not received: %v]", label, err))
			continue
		}
		m.Media = append(m.Media, path)
		notes = append(notes, fmt.Sprintf("[%s: %s]", label, path))
	}
	m.Content = strings.TrimSpace(strings.Join(append([]string{text}, notes...), "\n"))
	if m.Content == "" && len(m.Media) == 0 {
		return bus.Inbound{}, false
	}
	return m, true
}

// postText is the text of a post (rich text) and the keys of its
// images; a post comes with or without its language level.
func postText(raw string) (string, []string) {
	type elem struct {
		Tag      string `json:"tag"`
		Text     string `json:"text"`
		Href     string `json:"href"`
		UserName string `json:"user_name"`
		ImageKey string `json:"image_key"`
	}
	type body struct {
		Title   string   `json:"title"`
		Content [][]elem `json:"content"`
	}
	var direct body
	var bodies []body
	if json.Unmarshal([]byte(raw), &direct) == nil && direct.Content != nil {
		bodies = append(bodies, direct)
	} else {
		var langs map[string]body
		json.Unmarshal([]byte(raw), &langs) //nolint:errcheck // an unreadable post is empty
		for _, l := range []string{"zh_cn", "en_us", "ja_jp"} {
			if b, ok := langs[l]; ok {
				bodies = append(bodies, b)
				break
			}
		}
		if len(bodies) == 0 {
			for _, b := range langs {
				bodies = append(bodies, b)
				break
			}
		}
	}
	var lines, images []string
	for _, b := range bodies {
		if b.Title != "" {
			lines = append(lines, b.Title)
		}
		for _, para := range b.Content {
			var line strings.Builder
			for _, e := range para {
				switch e.Tag {
				case "text", "code_block":
					line.WriteString(e.Text)
				case "a":
					line.WriteString(e.Text)
					if e.Href != "" && e.Href != e.Text {
						line.WriteString(" (" + e.Href + ")")
					}
				case "at":
					line.WriteString("@" + e.UserName)
				case "img":
					images = append(images, e.ImageKey)
				}
			}
			lines = append(lines, line.String())
		}
	}
	return strings.TrimSpace(strings.Join(lines, "\n")), images
}

func millis(s string) time.Time {
	ms, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Now().UTC()
	}
	return time.UnixMilli(ms).UTC()
}

// fetch downloads a message's image or file (kind "image" or "file")
// with the tenant token, through the egress guard, into the workspace.
func (c *Channel) fetch(ctx context.Context, messageID, key, kind, name string) (string, error) {
	tok, err := c.api.tenantToken(ctx)
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	src := c.api.base + "/open-apis/im/v1/messages/" + url.PathEscape(messageID) + "/resources/" + url.PathEscape(key) + "?type=" + kind
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, src, nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	dir, err := c.env.MediaDir(Name)
	if err != nil {
		return "", err
	}
	if name == "" {
		name = key
		if kind == "image" {
			name += ".jpg"
		}
	}
	path, err := channel.SaveMedia(c.media, req, dir, messageID+"_"+name, c.cfg.MaxMediaBytes)
	if channel.IsTooLarge(err) {
		return "", fmt.Errorf("%w (channels.feishu.maxMediaBytes)", err)
	}
	return path, err
}

// react adds the acknowledgement reaction (reactEmoji) to a message the
// gateway took; a failure only logs.
func (c *Channel) react(ctx context.Context, messageID string) {
	if c.emoji == "" {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	in := map[string]any{"reaction_type": map[string]string{"emoji_type": c.emoji}}
	if err := c.api.call(ctx, "reactions", http.MethodPost, "/open-apis/im/v1/messages/"+url.PathEscape(messageID)+"/reactions", in, nil); err != nil {
		c.log.Debug("feishu: reaction not added", "message", messageID, "err", err)
	}
}
