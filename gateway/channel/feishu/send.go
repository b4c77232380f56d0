package feishu

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"sync"

	"github.com/nbots/nb/gateway/bus"
	"github.com/nbots/nb/gateway/channel"
)

// undeliverable are the platform's codes that retrying cannot cure.
var undeliverable = map[int]string{
	230001: "the message is refused as invalid",
	230002: "the bot is not in the chat",
	230006: "the app has no bot ability",
	230013: "the user is outside the app's availability",
	230017: "the chat is muted for the bot",
	230025: "the message is too long",
	230027: "the app lacks permission to send here",
	230035: "the chat refuses the bot",
}

func (c *Channel) deliveryError(chatID string, err error) error {
	var e *apiError
	if errors.As(err, &e) {
		if e.rateLimited() {
			c.pacer.Defer(chatID, e.RetryAfter)
			return &channel.RetryAfter{After: e.RetryAfter, Err: err}
		}
		if why, ok := undeliverable[e.Code]; ok {
			return &channel.Undeliverable{Reason: fmt.Sprintf("%s (feishu code %d: %s)", why, e.Code, e.Msg)}
		}
	}
	return err
}

// idType is the receive_id_type of a chat id, as nanobot decides it.
func idType(chatID string) string {
	if strings.HasPrefix(chatID, "oc_") {
		return "chat_id"
	}
	return "open_id"
}

// Send delivers m to its chat: its text as text, rich text (post) or a
// card as nanobot chooses them, then its files. A turn's progress is a
// card updated in place, which the final answer replaces.
func (c *Channel) Send(ctx context.Context, m bus.Outbound) (string, error) {
	content, files := c.env.Outgoing(m, MaxFileBytes)
	pieces := channel.SplitFenced(strings.TrimSpace(content), MaxMessageLength)
	if len(pieces) == 1 && pieces[0] == "" {
		pieces = nil
	}
	post := func(i int, md string) (string, error) {
		typ, body := format(md)
		if m.Kind == bus.Progress {
			typ, body = "interactive", card(md)
		}
		key, _ := channel.PieceKey(m, i, md)
		return c.post(ctx, m.ChatID, typ, body, key)
	}
	edit := func(id, md string) error { return c.Edit(ctx, m.ChatID, id, md) }
	send := func(i int, f *channel.Attachment) (string, error) {
		key, _ := channel.PieceKey(m, i, f.Name)
		return c.sendFile(ctx, m.ChatID, f, key)
	}
	return channel.DeliverFiles(&c.turns, m, pieces, files, post, edit, send)
}

func (c *Channel) post(ctx context.Context, chatID, typ, body, key string) (string, error) {
	if err := c.pacer.Wait(ctx, chatID); err != nil {
		return "", err
	}
	id, err := c.api.sendMessage(ctx, idType(chatID), chatID, typ, body, key)
	if err != nil {
		return "", c.deliveryError(chatID, err)
	}
	return id, nil
}

// Edit replaces the card of a message the bot sent (its progress).
func (c *Channel) Edit(ctx context.Context, chatID, id, content string) error {
	pieces := channel.SplitFenced(strings.TrimSpace(content), MaxMessageLength)
	if len(pieces) == 0 || pieces[0] == "" {
		return nil
	}
	if err := c.pacer.Wait(ctx, chatID); err != nil {
		return err
	}
	if err := c.api.patchCard(ctx, id, card(pieces[0])); err != nil {
		return c.deliveryError(chatID, err)
	}
	return nil
}

var imageExts = map[string]bool{".png": true, ".jpg": true, ".jpeg": true, ".gif": true, ".bmp": true, ".webp": true, ".ico": true, ".tiff": true, ".tif": true}

// fileTypes are the upload's file_type by extension (nanobot's map);
// anything else is a "stream".
var fileTypes = map[string]string{".opus": "opus", ".mp4": "mp4", ".pdf": "pdf", ".doc": "doc", ".docx": "doc", ".xls": "xls", ".xlsx": "xls", ".ppt": "ppt", ".pptx": "ppt"}

// sendFile uploads a file and posts it: an image as an image, audio and
// video as media (played inline), anything else as a file.
func (c *Channel) sendFile(ctx context.Context, chatID string, f *channel.Attachment, key string) (string, error) {
	ext := strings.ToLower(filepath.Ext(f.Name))
	kind, msgType, field := "file", "file", "file_key"
	if imageExts[ext] {
		kind, msgType, field = "image", "image", "image_key"
	} else if ext == ".opus" || ext == ".mp4" || ext == ".mov" || ext == ".avi" {
		msgType = "media"
	}
	ft := fileTypes[ext]
	if ft == "" {
		ft = "stream"
	}
	if err := c.pacer.Wait(ctx, chatID); err != nil {
		return "", err
	}
	fk, err := c.api.upload(ctx, kind, ft, f.Name, f.Data)
	if err != nil {
		return "", c.deliveryError(chatID, err)
	}
	body, _ := json.Marshal(map[string]string{field: fk})
	return c.post(ctx, chatID, msgType, string(body), key)
}

var (
	complexMD = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile("(?m)(^```|^#{1,6} |^\\|.*\\|\\s*$)") })
	simpleMD  = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`(\*\*.+?\*\*|__.+?__|~~.+?~~|(^|[^*])\*[^*\s][^*]*\*)`)
	})
	listMD    = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(?m)^\s*([-*+]|\d+\.)\s+`) })
	linkMD    = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\[([^\]]+)\]\((https?://[^)\s]+)\)`) })
	headingMD = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(?m)^#{1,6}[ \t]+(.+?)[ \t]*#*[ \t]*$`) })
)

// format chooses the message type for an answer's piece as nanobot
// does: a card for Markdown a post cannot show (code, headings, tables,
// emphasis, lists) or long text, a post for links, plain text for the
// rest; it returns the type and the message's content.
func format(md string) (typ, body string) {
	switch {
	case complexMD().MatchString(md) || simpleMD().MatchString(md) || listMD().MatchString(md) || len([]rune(md)) > 2000:
		return "interactive", card(md)
	case linkMD().MatchString(md) || len([]rune(md)) > 200:
		return "post", richText(md)
	}
	b, _ := json.Marshal(map[string]string{"text": md})
	return "text", string(b)
}

// card is an interactive card showing md in a markdown element; the
// card's Markdown has no headings, so they become bold lines.
func card(md string) string {
	md = headingMD().ReplaceAllString(md, "**$1**")
	b, _ := json.Marshal(map[string]any{
		"config":   map[string]any{"wide_screen_mode": true},
		"elements": []any{map[string]string{"tag": "markdown", "content": md}},
	})
	return string(b)
}

// richText is a post of md's lines, its links as links.
func richText(md string) string {
	var paras [][]map[string]string
	for _, line := range strings.Split(md, "\n") {
		var els []map[string]string
		last := 0
		for _, loc := range linkMD().FindAllStringSubmatchIndex(line, -1) {
			if loc[0] > last {
				els = append(els, map[string]string{"tag": "text", "text": line[last:loc[0]]})
			}
			els = append(els, map[string]string{"tag": "a", "text": line[loc[2]:loc[3]], "href": line[loc[4]:loc[5]]})
			last = loc[1]
		}
		if last < len(line) || len(els) == 0 {
			els = append(els, map[string]string{"tag": "text", "text": line[last:]})
		}
		paras = append(paras, els)
	}
	b, _ := json.Marshal(map[string]any{"zh_cn": map[string]any{"content": paras}})
	return string(b)
}
