package matrix

import (
	"context"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/nbots/nb/gateway/bus"
	"github.com/nbots/nb/gateway/channel"
)

// inbound turns a room event into the bus's form, media fetched when
// inbox admits the sender. ok is false for what the channel does not
// carry: its own events, state, notices (other bots), edits, and
// encrypted messages it cannot read.
func (c *Channel) inbound(ctx context.Context, inbox channel.Inbox, e *event.Event) (bus.Inbound, bool) {
	c.mu.Lock()
	me := c.me
	c.mu.Unlock()
	if e.Sender == me || e.StateKey != nil {
		return bus.Inbound{}, false
	}
	if e.Type == event.EventEncrypted {
		c.warnEncrypted(e.RoomID)
		return bus.Inbound{}, false
	}
	if e.Type != event.EventMessage {
		return bus.Inbound{}, false
	}
	if err := e.Content.ParseRaw(e.Type); err != nil && e.Content.Parsed == nil {
		c.log.Warn("matrix: unreadable message", "room", e.RoomID, "event", e.ID, "err", err)
		return bus.Inbound{}, false
	}
	msg := e.Content.AsMessage()
	if msg.MsgType == event.MsgNotice || msg.NewContent != nil || (msg.RelatesTo != nil && msg.RelatesTo.Type == event.RelReplace) {
		return bus.Inbound{}, false
	}
	group := c.isGroup(ctx, e.RoomID)
	mentioned := !group || c.mentions(msg, me)
	if group && c.cfg.GroupPolicy == "allowlist" {
		mentioned = slices.Contains(c.cfg.GroupAllowFrom, string(e.RoomID))
	}
	text := msg.Body
	if msg.RelatesTo != nil && msg.RelatesTo.InReplyTo != nil {
		text = stripReplyFallback(text)
	}
	meta := map[string]any{
		"event_id":            string(e.ID),
		"msgtype":             string(msg.MsgType),
		channel.MetaGroup:     group,
		channel.MetaMentioned: mentioned,
	}
	in := bus.Inbound{
		Channel:   Name,
		ID:        string(e.ID),
		SenderID:  string(e.Sender),
		ChatID:    string(e.RoomID),
		Content:   text,
		Timestamp: time.UnixMilli(e.Timestamp).UTC(),
		Metadata:  meta,
	}
	switch msg.MsgType {
	case event.MsgImage, event.MsgFile, event.MsgAudio, event.MsgVideo:
		// The body is the file's name, or a caption when a filename is
		// given beside it.
		in.Content = ""
		if msg.FileName != "" && msg.Body != msg.FileName {
			in.Content = msg.Body
		}
		// Media only from whom the bot would answer: a room's chatter
		// that does not mention it costs no download, nor does a
		// stranger's message (never its files on our disk).
		if mentioned && !channel.Admits(inbox, in) {
			c.log.Info("matrix: media of a sender not allowed not downloaded", "event", e.ID)
		} else if mentioned {
			kind := strings.TrimPrefix(string(msg.MsgType), "m.")
			path, err := c.fetch(ctx, e, msg)
			note := fmt.Sprintf("[%s: %s]", kind, path)
			if err != nil {
				c.log.Warn("matrix: media not stored", "kind", kind, "event", e.ID, "err", err)
				note = fmt.Sprintf("[%s not received: %v]", kind, err)
			} else {
				in.Media = append(in.Media, path)
			}
			in.Content = strings.TrimSpace(in.Content + "\n" + note)
		}
	}
	return in, true
}

// stripReplyFallback removes the quoted lines ("> …") older clients put
// before a reply's text.
func stripReplyFallback(body string) string {
	if !strings.HasPrefix(body, "> ") {
		return body
	}
	lines := strings.Split(body, "\n")
	i := 0
	for i < len(lines) && strings.HasPrefix(lines[i], "> ") {
		i++
	}
	return strings.TrimLeft(strings.Join(lines[i:], "\n"), "\n")
}

// mentions tells whether a room message addresses the bot: its MXID in
// m.mentions (intentional mentions), an @room mention when allowed, or,
// from clients that send no m.mentions, the MXID or a matrix.to link to
// it in the text.
func (c *Channel) mentions(msg *event.MessageEventContent, me id.UserID) bool {
	if m := msg.Mentions; m != nil {
		return slices.Contains(m.UserIDs, me) || (c.cfg.AllowRoomMentions && m.Room)
	}
	if strings.Contains(msg.Body, string(me)) {
		return true
	}
	return msg.FormattedBody != "" && (strings.Contains(msg.FormattedBody, "matrix.to/#/"+string(me)) ||
		strings.Contains(msg.FormattedBody, "matrix.to/#/"+url.PathEscape(string(me))))
}

// isGroup tells whether the room has more than two joined members (a
// direct chat has the person and the bot). The count comes from the
// sync's room summaries, else from /joined_members once.
func (c *Channel) isGroup(ctx context.Context, room id.RoomID) bool {
	c.mu.Lock()
	n, ok := c.members[room]
	c.mu.Unlock()
	if ok {
		return n > 2
	}
	rctx, cancel := context.WithTimeout(ctx, c.requestTimeout)
	defer cancel()
	resp, err := c.cli.JoinedMembers(rctx, room)
	if err != nil {
		c.log.Warn("matrix: counting a room's members (taken as a group)", "room", room, "err", err)
		return true
	}
	c.mu.Lock()
	c.members[room] = len(resp.Joined)
	c.mu.Unlock()
	return len(resp.Joined) > 2
}

// warnEncrypted says, once per room, that its messages cannot be read.
func (c *Channel) warnEncrypted(room id.RoomID) {
	c.mu.Lock()
	seen := c.encrypted[room]
	c.encrypted[room] = true
	c.mu.Unlock()
	if !seen {
		c.log.Warn("matrix: an end-to-end encrypted message cannot be read (encryption is not supported); use an unencrypted room", "room", room)
	}
}

// fetch downloads an attachment from the homeserver's authenticated media
// API, through the egress guard, into the workspace.
func (c *Channel) fetch(ctx context.Context, e *event.Event, msg *event.MessageEventContent) (string, error) {
	limit := c.cfg.MaxMediaBytes
	if msg.File != nil {
		return "", fmt.Errorf("an encrypted attachment (encryption is not supported)")
	}
	if msg.Info != nil && int64(msg.Info.Size) > limit {
		return "", fmt.Errorf("%w (channels.matrix.maxMediaBytes)", &channel.TooLarge{Size: int64(msg.Info.Size), Limit: limit})
	}
	uri, err := msg.URL.Parse()
	if err != nil || uri.IsEmpty() {
		return "", fmt.Errorf("the message has no mxc:// URL")
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	u := c.base.JoinPath("_matrix", "client", "v1", "media", "download", uri.Homeserver, uri.FileID)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+c.cfg.AccessToken)
	dir, err := c.env.MediaDir(Name)
	if err != nil {
		return "", err
	}
	ext := filepath.Ext(msg.FileName)
	if ext == "" {
		ext = filepath.Ext(msg.Body)
	}
	if ext == "" && msg.Info != nil && msg.Info.MimeType != "" {
		if exts, _ := mime.ExtensionsByType(msg.Info.MimeType); len(exts) > 0 {
			ext = exts[0]
		}
	}
	if len(ext) > 10 {
		ext = ""
	}
	name := strings.TrimPrefix(string(e.ID), "$") + "_" + uri.FileID + ext
	path, err := channel.SaveMedia(c.media, req, dir, name, limit)
	if channel.IsTooLarge(err) {
		return "", fmt.Errorf("%w (channels.matrix.maxMediaBytes)", err)
	}
	return path, err
}
