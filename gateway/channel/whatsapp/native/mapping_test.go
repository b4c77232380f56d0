//go:build whatsmeow

package native

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.mau.fi/whatsmeow"
	"go.mau.fi/whatsmeow/proto/waE2E"
	"go.mau.fi/whatsmeow/types"
	"go.mau.fi/whatsmeow/types/events"
	"google.golang.org/protobuf/proto"

	"github.com/nbots/nb/gateway/bus"
	"github.com/nbots/nb/gateway/channel"
	"github.com/nbots/nb/gateway/channel/channeltest"
	"github.com/nbots/nb/gateway/channel/whatsapp"
)

var (
	ann      = types.NewJID("15551234567", types.DefaultUserServer)
	annLID   = types.NewJID("4242", types.HiddenUserServer)
	group    = types.NewJID("120363000000000001", types.GroupServer)
	testMe   = identity{PN: types.NewJID("15550000000", types.DefaultUserServer), LID: types.NewJID("99990000", types.HiddenUserServer)}
	mentionM = "15550000000@s.whatsapp.net"
)

func testChannel(t *testing.T, cfg whatsapp.Config) *Channel {
	t.Helper()
	c, err := newChannel(cfg, channel.Env{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func groupMsg(m *waE2E.Message) *events.Message {
	return &events.Message{Info: types.MessageInfo{
		MessageSource: types.MessageSource{Chat: group, Sender: annLID, SenderAlt: ann, IsGroup: true, AddressingMode: types.AddressingModeLID},
		ID:            "G1", Timestamp: time.Unix(1_700_000_100, 0),
	}, Message: m}
}

func TestInboundText(t *testing.T) {
	c := testChannel(t, whatsapp.Config{})
	evt := &events.Message{Info: types.MessageInfo{
		MessageSource: types.MessageSource{Chat: annLID, Sender: annLID, SenderAlt: ann},
		ID:            "ABC", Timestamp: time.Unix(1_700_000_000, 0), PushName: "Ann",
	}, Message: &waE2E.Message{Conversation: proto.String("hello *there*")}}
	m, files, ok := c.inbound(evt, testMe)
	if !ok || len(files) != 0 {
		t.Fatalf("dropped (%v) or files %v", ok, files)
	}
	want := bus.Inbound{Channel: "whatsapp", ID: "4242@lid/ABC", SenderID: "15551234567", ChatID: "4242@lid", Content: "hello *there*", Timestamp: time.Unix(1_700_000_000, 0)}
	if m.Channel != want.Channel || m.ID != want.ID || m.SenderID != want.SenderID || m.ChatID != want.ChatID || m.Content != want.Content || !m.Timestamp.Equal(want.Timestamp) {
		t.Errorf("got %+v\nwant %+v", m, want)
	}
	if m.Metadata["message_id"] != "ABC" || m.Metadata[channel.MetaGroup] != false || m.Metadata["push_name"] != "Ann" {
		t.Errorf("metadata %v", m.Metadata)
	}
	// The LID learnt with its phone maps a later message that has the LID alone.
	evt.Info.SenderAlt = types.JID{}
	if m, _, _ := c.inbound(evt, testMe); m.SenderID != "15551234567" {
		t.Errorf("LID alone: sender %q, want the phone learnt before", m.SenderID)
	}
	// lidMappings does the same from the configuration.
	c = testChannel(t, whatsapp.Config{LidMappings: map[string]string{"4242@lid": "15557654321"}})
	if m, _, _ := c.inbound(evt, testMe); m.SenderID != "15557654321" {
		t.Errorf("lidMappings: sender %q", m.SenderID)
	}
	// Unknown LID: the LID itself.
	c = testChannel(t, whatsapp.Config{})
	if m, _, _ := c.inbound(evt, testMe); m.SenderID != "4242" {
		t.Errorf("unknown LID: sender %q", m.SenderID)
	}
}

func TestInboundGroupMention(t *testing.T) {
	mention := &waE2E.Message{ExtendedTextMessage: &waE2E.ExtendedTextMessage{
		Text: proto.String("@15550000000 what time is it?"), ContextInfo: &waE2E.ContextInfo{MentionedJID: []string{mentionM}},
	}}
	mentionLID := &waE2E.Message{ExtendedTextMessage: &waE2E.ExtendedTextMessage{
		Text: proto.String("@99990000 hi"), ContextInfo: &waE2E.ContextInfo{MentionedJID: []string{"99990000@lid"}},
	}}
	reply := &waE2E.Message{ExtendedTextMessage: &waE2E.ExtendedTextMessage{
		Text: proto.String("and you?"), ContextInfo: &waE2E.ContextInfo{StanzaID: proto.String("3EB01"), Participant: proto.String("99990000@lid")},
	}}
	other := &waE2E.Message{ExtendedTextMessage: &waE2E.ExtendedTextMessage{
		Text: proto.String("@15559999999 hi"), ContextInfo: &waE2E.ContextInfo{MentionedJID: []string{"15559999999@s.whatsapp.net"}},
	}}
	plain := &waE2E.Message{Conversation: proto.String("chatter")}
	for _, tc := range []struct {
		name            string
		policy          string
		msg             *waE2E.Message
		kept, mentioned bool
		replyToBot      bool
	}{
		{"mention by phone", "mention", mention, true, true, false},
		{"mention by LID", "mention", mentionLID, true, true, false},
		{"reply to the bot", "mention", reply, true, true, true},
		{"someone else mentioned", "mention", other, false, false, false},
		{"no mention", "mention", plain, false, false, false},
		{"open policy", "open", plain, true, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := testChannel(t, whatsapp.Config{GroupPolicy: tc.policy})
			m, _, ok := c.inbound(groupMsg(tc.msg), testMe)
			if ok != tc.kept {
				t.Fatalf("kept %v, want %v", ok, tc.kept)
			}
			if !ok {
				return
			}
			if m.ChatID != group.String() || m.SenderID != "15551234567" || m.Metadata[channel.MetaGroup] != true || m.Metadata["participant"] != "4242@lid" {
				t.Errorf("got %+v", m)
			}
			if m.Metadata[channel.MetaMentioned] != tc.mentioned || m.Metadata["is_reply_to_bot"] != tc.replyToBot {
				t.Errorf("mentioned %v reply %v, want %v %v", m.Metadata[channel.MetaMentioned], m.Metadata["is_reply_to_bot"], tc.mentioned, tc.replyToBot)
			}
		})
	}
}

func TestInboundDropped(t *testing.T) {
	c := testChannel(t, whatsapp.Config{})
	src := types.MessageSource{Chat: ann, Sender: ann}
	for name, evt := range map[string]*events.Message{
		"own":        {Info: types.MessageInfo{MessageSource: types.MessageSource{Chat: ann, Sender: testMe.PN, IsFromMe: true}, ID: "1"}, Message: &waE2E.Message{Conversation: proto.String("mine")}},
		"status":     {Info: types.MessageInfo{MessageSource: types.MessageSource{Chat: types.StatusBroadcastJID, Sender: ann}, ID: "2"}, Message: &waE2E.Message{Conversation: proto.String("story")}},
		"reaction":   {Info: types.MessageInfo{MessageSource: src, ID: "3"}, Message: &waE2E.Message{ReactionMessage: &waE2E.ReactionMessage{Text: proto.String("👍")}}},
		"edit":       {Info: types.MessageInfo{MessageSource: src, ID: "4"}, Message: &waE2E.Message{Conversation: proto.String("fixed")}, IsEdit: true},
		"newsletter": {Info: types.MessageInfo{MessageSource: types.MessageSource{Chat: types.NewJID("1", types.NewsletterServer), Sender: ann}, ID: "5"}, Message: &waE2E.Message{Conversation: proto.String("news")}},
	} {
		if m, _, ok := c.inbound(evt, testMe); ok {
			t.Errorf("%s: published %+v", name, m)
		}
	}
}

// inboxAdmitting admits everyone, so that files are downloaded.
func TestInboundMedia(t *testing.T) {
	p := newPlatform()
	env := channeltest.Folders(t, channel.Env{Workspace: t.TempDir()})
	c := p.channelOn(t, whatsapp.Config{}, env, nil)
	fc := &fakeClient{p: p, files: map[string][]byte{"/v/img": []byte("\xff\xd8jpeg"), "/v/doc": []byte("%PDF-1.7")}}
	evt := &events.Message{Info: types.MessageInfo{MessageSource: types.MessageSource{Chat: ann, Sender: ann}, ID: "M1"}, Message: &waE2E.Message{
		ImageMessage: &waE2E.ImageMessage{Caption: proto.String("look"), Mimetype: proto.String("image/jpeg"), DirectPath: proto.String("/v/img"), FileLength: proto.Uint64(6)},
	}}
	m, files, ok := c.inbound(evt, testMe)
	if !ok || len(files) != 1 || files[0].kind != "image" || files[0].name != "M1.jpg" {
		t.Fatalf("ok %v files %+v", ok, files)
	}
	in := &channeltest.Inbox{}
	c.attach(context.Background(), in, fc, &m, files)
	if len(m.Media) != 1 || !strings.HasPrefix(m.Content, "look\n[image: ") || filepath.Dir(m.Media[0]) != filepath.Join(env.Workspace, "media", "whatsapp") {
		t.Fatalf("content %q media %v", m.Content, m.Media)
	}
	if b, _ := os.ReadFile(m.Media[0]); string(b) != "\xff\xd8jpeg" {
		t.Errorf("stored %q", b)
	}
	// A document keeps its name; one WhatsApp no longer has is named as not received.
	doc := &events.Message{Info: types.MessageInfo{MessageSource: types.MessageSource{Chat: ann, Sender: ann}, ID: "M2"}, Message: &waE2E.Message{
		DocumentMessage: &waE2E.DocumentMessage{FileName: proto.String("../report.pdf"), Mimetype: proto.String("application/pdf"), DirectPath: proto.String("/v/doc")},
	}}
	m, files, _ = c.inbound(doc, testMe)
	c.attach(context.Background(), in, fc, &m, files)
	if len(m.Media) != 1 || filepath.Base(m.Media[0]) != "report.pdf" || !strings.Contains(m.Content, "[file: ") {
		t.Errorf("document: content %q media %v", m.Content, m.Media)
	}
	gone := &events.Message{Info: types.MessageInfo{MessageSource: types.MessageSource{Chat: ann, Sender: ann}, ID: "M3"}, Message: &waE2E.Message{
		AudioMessage: &waE2E.AudioMessage{Mimetype: proto.String("audio/ogg; codecs=opus"), DirectPath: proto.String("/v/gone"), PTT: proto.Bool(true)},
	}}
	m, files, _ = c.inbound(gone, testMe)
	c.attach(context.Background(), in, fc, &m, files)
	if len(m.Media) != 0 || !strings.Contains(m.Content, "[file M3.ogg not received") {
		t.Errorf("lost file: content %q media %v", m.Content, m.Media)
	}
	// A stranger's files are not downloaded.
	strangers := &channeltest.Inbox{Admit: func(bus.Inbound) bool { return false }}
	m, files, _ = c.inbound(evt, testMe)
	c.attach(context.Background(), strangers, fc, &m, files)
	if len(m.Media) != 0 || m.Content != "look" {
		t.Errorf("stranger: content %q media %v", m.Content, m.Media)
	}
}

func TestOutbound(t *testing.T) {
	if got := textMessage("*hi*"); got.GetConversation() != "*hi*" {
		t.Errorf("text: %v", got)
	}
	up := whatsmeow.UploadResponse{URL: "https://mmg/x", DirectPath: "/v/x", MediaKey: []byte{1}, FileEncSHA256: []byte{2}, FileSHA256: []byte{3}, FileLength: 9}
	for _, tc := range []struct {
		mime string
		want whatsmeow.MediaType
		get  func(*waE2E.Message) interface {
			GetDirectPath() string
			GetMimetype() string
		}
	}{
		{"image/png", whatsmeow.MediaImage, func(m *waE2E.Message) interface {
			GetDirectPath() string
			GetMimetype() string
		} {
			return m.GetImageMessage()
		}},
		{"video/mp4", whatsmeow.MediaVideo, func(m *waE2E.Message) interface {
			GetDirectPath() string
			GetMimetype() string
		} {
			return m.GetVideoMessage()
		}},
		{"audio/mpeg", whatsmeow.MediaAudio, func(m *waE2E.Message) interface {
			GetDirectPath() string
			GetMimetype() string
		} {
			return m.GetAudioMessage()
		}},
		{"application/pdf", whatsmeow.MediaDocument, func(m *waE2E.Message) interface {
			GetDirectPath() string
			GetMimetype() string
		} {
			return m.GetDocumentMessage()
		}},
		{"image/svg+xml", whatsmeow.MediaDocument, func(m *waE2E.Message) interface {
			GetDirectPath() string
			GetMimetype() string
		} {
			return m.GetDocumentMessage()
		}},
	} {
		mt := mediaType(tc.mime)
		if mt != tc.want {
			t.Errorf("%s: media type %s, want %s", tc.mime, mt, tc.want)
			continue
		}
		m := fileMessage(mt, up, tc.mime, "a.bin")
		x := tc.get(m)
		if x == nil || x.GetDirectPath() != "/v/x" || x.GetMimetype() != tc.mime {
			t.Errorf("%s: message %v", tc.mime, m)
		}
	}
	if d := fileMessage(whatsmeow.MediaDocument, up, "application/pdf", "r.pdf").GetDocumentMessage(); d.GetFileName() != "r.pdf" || d.GetFileLength() != 9 || string(d.GetMediaKey()) != "\x01" {
		t.Errorf("document: %v", d)
	}
	for in, want := range map[string]string{"15551234567@s.whatsapp.net": "15551234567@s.whatsapp.net", "+15551234567": "15551234567@s.whatsapp.net", "15551234567:3@s.whatsapp.net": "15551234567@s.whatsapp.net", group.String(): group.String()} {
		if j, err := parseChat(in); err != nil || j.String() != want {
			t.Errorf("parseChat(%q) = %v, %v; want %s", in, j, err, want)
		}
	}
	if _, err := parseChat("@"); !channel.IsUndeliverable(err) {
		t.Errorf("parseChat(@): %v", err)
	}
}

func TestSendErrors(t *testing.T) {
	var ra *channel.RetryAfter
	if err := sendError(whatsmeow.ErrIQRateOverLimit); !errors.As(err, &ra) || ra.After <= 0 {
		t.Errorf("rate-overlimit: %v", err)
	}
	if err := sendError(whatsmeow.ErrBroadcastListUnsupported); !channel.IsUndeliverable(err) {
		t.Errorf("broadcast list: %v", err)
	}
	if err := sendError(whatsmeow.ErrNotConnected); errors.As(err, &ra) || channel.IsUndeliverable(err) {
		t.Errorf("not connected is retried by the gateway: %v", err)
	}
}

// A file the assistant sends is uploaded as its kind and sent after the
// text; one outside the workspace is named as not attached.
func TestSendFile(t *testing.T) {
	p := newPlatform()
	env := channeltest.Folders(t, channel.Env{Workspace: t.TempDir()})
	os.WriteFile(filepath.Join(env.Workspace, "chart.png"), []byte("\x89PNG"), 0o600)
	var fc *fakeClient
	c := p.channelOn(t, whatsapp.Config{}, env, func(f *fakeClient) { fc = f })
	channeltest.Start(t, c, &channeltest.Inbox{})
	channeltest.WaitStatus(t, c, channel.Connected)
	channeltest.Send(t, c, bus.Outbound{Kind: bus.Message, ChatID: ann.String(), Content: "here", Media: []string{"chart.png", "/etc/passwd"}})
	p.mu.Lock()
	sent := p.sent[ann.String()]
	p.mu.Unlock()
	if len(sent) != 2 || !strings.HasPrefix(sent[0].GetConversation(), "here") || !strings.Contains(sent[0].GetConversation(), "passwd not attached: outside the workspace") || sent[1].GetImageMessage().GetFileLength() != 4 {
		t.Fatalf("sent %v", sent)
	}
	if len(fc.uploads) != 1 || fc.uploads[0] != whatsmeow.MediaImage {
		t.Errorf("uploads %v", fc.uploads)
	}
}
