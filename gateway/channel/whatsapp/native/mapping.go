//go:build whatsmeow

package native

import (
	"fmt"
	"mime"
	"path/filepath"
	"strings"

	"go.mau.fi/whatsmeow"
	"go.mau.fi/whatsmeow/proto/waE2E"
	"go.mau.fi/whatsmeow/types"
	"go.mau.fi/whatsmeow/types/events"
	"google.golang.org/protobuf/proto"

	"github.com/nbots/nb/gateway/bus"
	"github.com/nbots/nb/gateway/channel"
	"github.com/nbots/nb/gateway/channel/whatsapp"
)

// identity is the account's own addresses: its phone-number JID and its
// LID, which mentions and replies name.
type identity struct {
	PN, LID types.JID
}

// is reports whether jid (a mention, a quoted message's author) is the
// account, by either address.
func (id identity) is(jid string) bool {
	j, err := types.ParseJID(jid)
	if err != nil || j.User == "" {
		return false
	}
	return (j.User == id.PN.User && j.Server == id.PN.Server) || (j.User == id.LID.User && j.Server == id.LID.Server)
}

// attachment is one file of an inbound message, to download when the
// sender is let in.
type attachment struct {
	msg  whatsmeow.DownloadableMessage
	kind string // "image", "file": the tag the text names it with, as the bridge's
	name string
	size uint64
}

// text is the message's words: the plain text, a reply's, or a file's
// caption.
func text(m *waE2E.Message) string {
	switch {
	case m.GetConversation() != "":
		return m.GetConversation()
	case m.GetExtendedTextMessage() != nil:
		return m.GetExtendedTextMessage().GetText()
	case m.GetImageMessage() != nil:
		return m.GetImageMessage().GetCaption()
	case m.GetVideoMessage() != nil:
		return m.GetVideoMessage().GetCaption()
	case m.GetDocumentMessage() != nil:
		return m.GetDocumentMessage().GetCaption()
	}
	return ""
}

// contextInfo is the message's mentions and quote, wherever it keeps them.
func contextInfo(m *waE2E.Message) *waE2E.ContextInfo {
	switch {
	case m.GetExtendedTextMessage() != nil:
		return m.GetExtendedTextMessage().GetContextInfo()
	case m.GetImageMessage() != nil:
		return m.GetImageMessage().GetContextInfo()
	case m.GetVideoMessage() != nil:
		return m.GetVideoMessage().GetContextInfo()
	case m.GetDocumentMessage() != nil:
		return m.GetDocumentMessage().GetContextInfo()
	case m.GetAudioMessage() != nil:
		return m.GetAudioMessage().GetContextInfo()
	}
	return nil
}

// extension is a file name's extension for a MIME type ("" if unknown).
func extension(mimetype string) string {
	base, _, _ := strings.Cut(mimetype, ";")
	switch strings.TrimSpace(base) {
	case "image/jpeg":
		return ".jpg"
	case "audio/ogg":
		return ".ogg"
	case "image/webp":
		return ".webp"
	case "video/mp4":
		return ".mp4"
	}
	if exts, _ := mime.ExtensionsByType(base); len(exts) > 0 {
		return exts[0]
	}
	return ""
}

// attachments are the files m carries.
func attachments(id types.MessageID, m *waE2E.Message) []attachment {
	name := func(given, mimetype string) string {
		if given != "" {
			return filepath.Base(given)
		}
		return string(id) + extension(mimetype)
	}
	var out []attachment
	if x := m.GetImageMessage(); x != nil {
		out = append(out, attachment{msg: x, kind: "image", name: name("", x.GetMimetype()), size: x.GetFileLength()})
	}
	if x := m.GetStickerMessage(); x != nil {
		out = append(out, attachment{msg: x, kind: "image", name: name("", x.GetMimetype()), size: x.GetFileLength()})
	}
	if x := m.GetVideoMessage(); x != nil {
		out = append(out, attachment{msg: x, kind: "file", name: name("", x.GetMimetype()), size: x.GetFileLength()})
	}
	if x := m.GetAudioMessage(); x != nil {
		out = append(out, attachment{msg: x, kind: "file", name: name("", x.GetMimetype()), size: x.GetFileLength()})
	}
	if x := m.GetDocumentMessage(); x != nil {
		out = append(out, attachment{msg: x, kind: "file", name: name(x.GetFileName(), x.GetMimetype()), size: x.GetFileLength()})
	}
	return out
}

// senderID picks the phone number among the sender's two addresses (a
// LID and a phone-number JID, either first), as the bridge mode does:
// else the LID mapped to its phone (lidMappings, or an earlier message
// that carried both), else the LID.
func (c *Channel) senderID(src types.MessageSource) string {
	var phone, lid string
	for _, j := range []types.JID{src.Sender, src.SenderAlt} {
		switch j.Server {
		case types.DefaultUserServer:
			phone = j.User
		case types.HiddenUserServer:
			lid = j.User
		}
	}
	if id := c.lids.Sender(phone, lid); id != "" {
		return id
	}
	return src.Sender.User
}

// inbound maps a whatsmeow message to the bus's form, with the files it
// carries; false drops it: the account's own messages, status updates,
// newsletters, edits, and messages with neither words nor files
// (reactions, receipts, protocol messages).
func (c *Channel) inbound(evt *events.Message, me identity) (bus.Inbound, []attachment, bool) {
	info := evt.Info
	if info.IsFromMe || info.Chat.Server == types.BroadcastServer || info.Chat.Server == types.NewsletterServer || evt.IsEdit || evt.Message == nil {
		return bus.Inbound{}, nil, false
	}
	msg := evt.Message
	content := text(msg)
	files := attachments(info.ID, msg)
	if strings.TrimSpace(content) == "" && len(files) == 0 {
		return bus.Inbound{}, nil, false
	}
	ci := contextInfo(msg)
	mentioned, replyToBot := false, false
	for _, j := range ci.GetMentionedJID() {
		if me.is(j) {
			mentioned = true
		}
	}
	if ci.GetStanzaID() != "" && me.is(ci.GetParticipant()) {
		replyToBot = true
	}
	if info.IsGroup && c.cfg.GroupPolicy == "mention" && !mentioned && !replyToBot {
		c.log.Debug("whatsapp: group message without a mention dropped", "chat", info.Chat.String())
		return bus.Inbound{}, nil, false
	}
	chat := info.Chat.ToNonAD().String()
	m := bus.Inbound{
		Channel:   whatsapp.Name,
		ID:        chat + "/" + string(info.ID),
		SenderID:  c.senderID(info.MessageSource),
		ChatID:    chat,
		Content:   content,
		Timestamp: info.Timestamp,
		Metadata: map[string]any{
			"message_id":          string(info.ID),
			"is_group":            info.IsGroup,
			"is_forwarded":        ci.GetIsForwarded(),
			"is_reply_to_bot":     replyToBot,
			"push_name":           info.PushName,
			channel.MetaGroup:     info.IsGroup,
			channel.MetaMentioned: mentioned || replyToBot || (info.IsGroup && c.cfg.GroupPolicy == "open"),
		},
	}
	if info.IsGroup {
		m.Metadata["participant"] = info.Sender.ToNonAD().String()
	}
	return m, files, true
}

// textMessage is an answer's text as WhatsApp's message: Markdown as
// written (WhatsApp renders *bold*, _italic_ and ``` blocks itself).
func textMessage(text string) *waE2E.Message {
	return &waE2E.Message{Conversation: proto.String(text)}
}

// mediaType is the kind of upload a file of type mimetype is sent as.
func mediaType(mimetype string) whatsmeow.MediaType {
	switch {
	case strings.HasPrefix(mimetype, "image/") && mimetype != "image/svg+xml" && mimetype != "image/gif":
		return whatsmeow.MediaImage
	case strings.HasPrefix(mimetype, "video/"):
		return whatsmeow.MediaVideo
	case strings.HasPrefix(mimetype, "audio/"):
		return whatsmeow.MediaAudio
	}
	return whatsmeow.MediaDocument
}

// fileMessage is an uploaded file as WhatsApp's message of its kind.
func fileMessage(t whatsmeow.MediaType, up whatsmeow.UploadResponse, mimetype, name string) *waE2E.Message {
	switch t {
	case whatsmeow.MediaImage:
		return &waE2E.Message{ImageMessage: &waE2E.ImageMessage{
			URL: proto.String(up.URL), DirectPath: proto.String(up.DirectPath), MediaKey: up.MediaKey,
			FileEncSHA256: up.FileEncSHA256, FileSHA256: up.FileSHA256, FileLength: proto.Uint64(up.FileLength),
			Mimetype: proto.String(mimetype),
		}}
	case whatsmeow.MediaVideo:
		return &waE2E.Message{VideoMessage: &waE2E.VideoMessage{
			URL: proto.String(up.URL), DirectPath: proto.String(up.DirectPath), MediaKey: up.MediaKey,
			FileEncSHA256: up.FileEncSHA256, FileSHA256: up.FileSHA256, FileLength: proto.Uint64(up.FileLength),
			Mimetype: proto.String(mimetype),
		}}
	case whatsmeow.MediaAudio:
		return &waE2E.Message{AudioMessage: &waE2E.AudioMessage{
			URL: proto.String(up.URL), DirectPath: proto.String(up.DirectPath), MediaKey: up.MediaKey,
			FileEncSHA256: up.FileEncSHA256, FileSHA256: up.FileSHA256, FileLength: proto.Uint64(up.FileLength),
			Mimetype: proto.String(mimetype),
		}}
	}
	return &waE2E.Message{DocumentMessage: &waE2E.DocumentMessage{
		URL: proto.String(up.URL), DirectPath: proto.String(up.DirectPath), MediaKey: up.MediaKey,
		FileEncSHA256: up.FileEncSHA256, FileSHA256: up.FileSHA256, FileLength: proto.Uint64(up.FileLength),
		Mimetype: proto.String(mimetype), FileName: proto.String(name), Title: proto.String(name),
	}}
}

// parseChat reads an outbound chat id (a JID, or a bare phone number).
func parseChat(chat string) (types.JID, error) {
	if !strings.Contains(chat, "@") {
		chat = strings.TrimPrefix(chat, "+") + "@" + types.DefaultUserServer
	}
	j, err := types.ParseJID(chat)
	if err != nil || j.User == "" {
		return types.JID{}, &channel.Undeliverable{Reason: fmt.Sprintf("%q is not a WhatsApp chat (a JID such as 15551234567@s.whatsapp.net)", chat)}
	}
	return j.ToNonAD(), nil
}
