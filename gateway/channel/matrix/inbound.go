package matrix

import (
	"context"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/nbots/nb/gateway/bus"
	"github.com/nbots/nb/gateway/channel"
)

// inbound turns a room event into the bus's form, media fetched when
// inbox admits the sender. ok is false for what the channel does not
// carry: its own events, state, notices (other bots), edits, and
// encrypted messages it cannot read.
func (c *Channel) inbound(ctx context.Context, inbox channel.Inbox, e *clientEvent) (bus.Inbound, bool) {
	c.mu.Lock()
	me := c.me
	c.mu.Unlock()
	if e.Sender == me || e.StateKey != nil {
		return bus.Inbound{}, false
	}
	if e.Type == typeEncrypted {
		c.warnEncrypted(e.RoomID)
		return bus.Inbound{}, false
	}
	if e.Type != typeMessage {
		return bus.Inbound{}, false
	}
	msg := &messageContent{}
	if err := json.Unmarshal(e.Content, msg); err != nil {
		c.log.Warn("matrix: unreadable message", "room", e.RoomID, "event", e.ID, "err", err)
		return bus.Inbound{}, false
	}
	if msg.MsgType == msgNotice || msg.NewContent != nil || (msg.RelatesTo != nil && msg.RelatesTo.Type == relReplace) {
		return bus.Inbound{}, false
	}
	group := c.isGroup(ctx, e.RoomID)
	mentioned := !group || c.mentions(msg, me)
	if group && c.cfg.GroupPolicy == "allowlist" {
		mentioned = slices.Contains(c.cfg.GroupAllowFrom, e.RoomID)
	}
	text := msg.Body
	if msg.RelatesTo != nil && msg.RelatesTo.InReplyTo != nil {
		text = stripReplyFallback(text)
	}
	meta := map[string]any{
		"event_id":            e.ID,
		"msgtype":             msg.MsgType,
		channel.MetaGroup:     group,
		channel.MetaMentioned: mentioned,
	}
	in := bus.Inbound{
		Channel:   Name,
		ID:        e.ID,
		SenderID:  e.Sender,
		ChatID:    e.RoomID,
		Content:   text,
		Timestamp: time.UnixMilli(e.Timestamp).UTC(),
		Metadata:  meta,
	}
	switch msg.MsgType {
	case msgImage, msgFile, msgAudio, msgVideo:
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
			kind := strings.TrimPrefix(msg.MsgType, "m.")
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
func (c *Channel) mentions(msg *messageContent, me string) bool {
	if m := msg.Mentions; m != nil {
		return slices.Contains(m.UserIDs, me) || (c.cfg.AllowRoomMentions && m.Room)
	}
	if strings.Contains(msg.Body, me) {
		return true
	}
	return msg.FormattedBody != "" && (strings.Contains(msg.FormattedBody, "matrix.to/#/"+me) ||
		strings.Contains(msg.FormattedBody, "matrix.to/#/"+url.PathEscape(me)))
}

// isGroup tells whether the room has more than two joined members (a
// direct chat has the person and the bot). The count comes from the
// sync's room summaries, else from /joined_members once.
func (c *Channel) isGroup(ctx context.Context, room string) bool {
	c.mu.Lock()
	n, ok := c.members[room]
	c.mu.Unlock()
	if ok {
		return n > 2
	}
	rctx, cancel := context.WithTimeout(ctx, c.requestTimeout)
	defer cancel()
	n, err := c.cli.joinedMembers(rctx, room)
	if err != nil {
		c.log.Warn("matrix: counting a room's members (taken as a group)", "room", room, "err", err)
		return true
	}
	c.mu.Lock()
	c.members[room] = n
	c.mu.Unlock()
	return n > 2
}

// warnEncrypted says, once per room, that its messages cannot be read.
func (c *Channel) warnEncrypted(room string) {
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
func (c *Channel) fetch(ctx context.Context, e *clientEvent, msg *messageContent) (string, error) {
	limit := c.cfg.MaxMediaBytes
	if len(msg.File) != 0 && string(msg.File) != "null" {
		return "", fmt.Errorf("an encrypted attachment (encryption is not supported)")
	}
	if msg.Info != nil && msg.Info.Size > limit {
		return "", fmt.Errorf("%w (channels.matrix.maxMediaBytes)", &channel.TooLarge{Size: msg.Info.Size, Limit: limit})
	}
	server, mediaID, ok := parseMXC(msg.URL)
	if !ok {
		return "", fmt.Errorf("the message has no mxc:// URL")
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	u := c.base.JoinPath("_matrix", "client", "v1", "media", "download", server, mediaID)
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
	name := strings.TrimPrefix(e.ID, "$") + "_" + mediaID + ext
	path, err := channel.SaveMedia(c.media, req, dir, name, limit)
	if channel.IsTooLarge(err) {
		return "", fmt.Errorf("%w (channels.matrix.maxMediaBytes)", err)
	}
	return path, err
}
