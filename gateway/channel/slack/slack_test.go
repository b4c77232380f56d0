package slack

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nbots/nb/gateway/bus"
	"github.com/nbots/nb/gateway/channel"
	"github.com/nbots/nb/gateway/channel/channeltest"
	"github.com/nbots/nb/gateway/channel/slack/slacktest"
	"github.com/nbots/nb/internal/testbuf"
)

const (
	botToken = "xoxb-1111-2222-secretBOT"
	appToken = "xapp-1-A0001-3333-secretAPP"
)

type harness struct {
	fake *slacktest.Server
	env  channel.Env
	ch   *Channel
	in   *channeltest.Inbox
	stop func()
}

func newFake(t *testing.T) *slacktest.Server {
	t.Helper()
	f, err := slacktest.New(botToken, appToken)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	return f
}

func start(t *testing.T, fake *slacktest.Server, cfg Config) *harness {
	t.Helper()
	return startWith(t, fake, cfg, nil)
}

// startWith is start with tune, when not nil, called on the channel
// before it runs.
func startWith(t *testing.T, fake *slacktest.Server, cfg Config, tune func(*Channel)) *harness {
	t.Helper()
	logs := &testbuf.Buffer{}
	if cfg.BotToken == "" {
		cfg.BotToken, cfg.AppToken = botToken, appToken
	}
	cfg.APIBase = fake.URL
	env := channeltest.Folders(t, channel.Env{Logger: slog.New(slog.NewTextHandler(logs, nil))})
	c, err := New(cfg, env)
	if err != nil {
		t.Fatal(err)
	}
	c.retryBase = time.Millisecond
	if tune != nil {
		tune(c)
	}
	h := &harness{fake: fake, env: env, ch: c, in: &channeltest.Inbox{}}
	t.Cleanup(func() {
		if l := logs.String(); strings.Contains(l, "secretBOT") || strings.Contains(l, "secretAPP") {
			t.Errorf("a token is in the logs:\n%s", l)
		}
	})
	h.stop = channeltest.Start(t, c, h.in)
	return h
}

func send(t *testing.T, c *Channel, m bus.Outbound) string {
	t.Helper()
	return channeltest.Send(t, c, m)
}

func waitAcked(t *testing.T, fake *slacktest.Server) {
	t.Helper()
	for i := 0; fake.Unacked() > 0; i++ {
		if i > 500 {
			t.Fatalf("%d envelopes never acknowledged", fake.Unacked())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestDirectMessage(t *testing.T) {
	fake := newFake(t)
	h := start(t, fake, Config{})
	ev := fake.Post(slacktest.Event{Channel: "D0001", ChannelType: "im", User: "U0001", Text: "hello"})
	m := h.in.Wait(t, 1)[0]
	if m.Channel != "slack" || m.SenderID != "U0001" || m.ChatID != "D0001" || m.Content != "hello" || m.ID != "D0001:"+ev.TS {
		t.Errorf("%+v", m)
	}
	if m.Metadata["group"] != false || m.Metadata["mentioned"] != true {
		t.Errorf("metadata %v", m.Metadata)
	}
	waitAcked(t, fake)
	for _, d := range fake.AckLatencies() {
		if d > 3*time.Second {
			t.Errorf("acknowledged after %s: Slack wants 3 s", d)
		}
	}
	send(t, h.ch, bus.Outbound{ChatID: m.ChatID, Content: "Hi **there**"})
	if s := fake.Sent("D0001"); len(s) != 1 || s[0].Text != "Hi *there*" || s[0].ThreadTS != "" {
		t.Errorf("sent %+v", s)
	}
}

func TestChannelMentionAndThreads(t *testing.T) {
	fake := newFake(t)
	h := start(t, fake, Config{})
	chatter := fake.Post(slacktest.Event{Channel: "C0001", ChannelType: "channel", User: "U0001", Text: "lunch?"})
	asked := fake.Post(slacktest.Event{Channel: "C0001", ChannelType: "channel", User: "U0002", Text: "<@UBOT0001> what is 2+2?"})
	inThread := fake.Post(slacktest.Event{Channel: "C0001", ChannelType: "channel", User: "U0002", Text: "and 3+3?", ThreadTS: asked.TS})
	fake.Post(slacktest.Event{Channel: "C0001", ChannelType: "channel", User: "UBOT0001", Text: "my own"})
	fake.Post(slacktest.Event{Channel: "C0001", ChannelType: "channel", User: "U0003", Text: "a bot", BotID: "B9"})
	fake.Post(slacktest.Event{Channel: "C0001", ChannelType: "channel", User: "U0003", Text: "edited", Subtype: "message_changed"})
	got := h.in.Wait(t, 3)
	waitAcked(t, fake)
	if len(h.in.Unique()) != 3 {
		t.Errorf("the app's own, a bot's and an edit's messages were carried: %+v", h.in.Unique())
	}
	if got[0].Metadata["mentioned"] != false || got[0].Metadata["group"] != true || got[0].ChatID != "C0001:"+chatter.TS {
		t.Errorf("chatter %+v", got[0])
	}
	if got[1].Metadata["mentioned"] != true || got[1].Content != "what is 2+2?" || got[1].ChatID != "C0001:"+asked.TS {
		t.Errorf("mention %+v", got[1])
	}
	if got[2].ChatID != "C0001:"+asked.TS || got[2].ID != "C0001:"+inThread.TS {
		t.Errorf("a thread reply is the thread's session: %+v", got[2])
	}
	send(t, h.ch, bus.Outbound{ChatID: got[1].ChatID, Content: "4"})
	if s := fake.Sent("C0001"); len(s) != 1 || s[0].ThreadTS != asked.TS {
		t.Errorf("not answered in the thread: %+v", s)
	}
	// app_mention for the same message: the same id, which the bus drops.
	fake.Post(slacktest.Event{Type: "app_mention", Channel: "C0002", User: "U0002", Text: "<@UBOT0001> hi"})
	m := h.in.Wait(t, 4)[3]
	if m.Metadata["mentioned"] != true || m.Metadata["group"] != true {
		t.Errorf("app_mention %+v", m)
	}
}

func TestReplyInThreadOff(t *testing.T) {
	fake := newFake(t)
	off := false
	h := start(t, fake, Config{ReplyInThread: &off})
	fake.Post(slacktest.Event{Channel: "C0001", ChannelType: "channel", User: "U0001", Text: "<@UBOT0001> hi"})
	if m := h.in.Wait(t, 1)[0]; m.ChatID != "C0001" {
		t.Errorf("chat %q", m.ChatID)
	}
}

func TestMrkdwn(t *testing.T) {
	cases := map[string]string{
		"**bold** *it* ~~gone~~ `c`":        "*bold* _it_ ~gone~ `c`",
		"[site](https://example.com) a<b&c": "<https://example.com|site> a&lt;b&amp;c",
		"```\nx > 1\n```":                   "```\nx &gt; 1\n```",
		"> quoted\n> twice":                 "> quoted\n> twice",
		"- **a**\n- b":                      "• *a*\n• b",
	}
	for md, want := range cases {
		if got := mrkdwn(channel.ParseMarkdown(md)); got != want {
			t.Errorf("%q: %q, want %q", md, got, want)
		}
	}
}

func TestProgressUpdatedInPlace(t *testing.T) {
	fake := newFake(t)
	h := start(t, fake, Config{})
	fake.Post(slacktest.Event{Channel: "D0001", ChannelType: "im", User: "U0001", Text: "x"})
	h.in.Wait(t, 1)
	p := send(t, h.ch, bus.Outbound{Kind: bus.Progress, ChatID: "D0001", Turn: "t1", Content: "Work"})
	send(t, h.ch, bus.Outbound{Kind: bus.Progress, ChatID: "D0001", Turn: "t1", Content: "Working on it"})
	f := send(t, h.ch, bus.Outbound{ChatID: "D0001", Turn: "t1", Content: "Done"})
	s := fake.Sent("D0001")
	if len(s) != 1 || f != p || s[0].Text != "Done" || !s[0].Edited {
		t.Errorf("sent %+v (%s %s)", s, p, f)
	}
	if err := h.ch.Edit(context.Background(), "D0001", p, "again"); err != nil || fake.Sent("D0001")[0].Text != "again" {
		t.Errorf("Edit: %v", err)
	}
}

func TestRateLimitPerChannel(t *testing.T) {
	fake := newFake(t)
	h := start(t, fake, Config{})
	fake.Post(slacktest.Event{Channel: "D0001", ChannelType: "im", User: "U0001", Text: "x"})
	fake.Post(slacktest.Event{Channel: "D0002", ChannelType: "im", User: "U0002", Text: "y"})
	h.in.Wait(t, 2)
	fake.SetChannelInterval(time.Second)
	send(t, h.ch, bus.Outbound{ChatID: "D0001", Content: "one"})
	_, err := h.ch.Send(context.Background(), bus.Outbound{Kind: bus.Message, ChatID: "D0001", Content: "two"})
	var ra *channel.RetryAfter
	if !errors.As(err, &ra) || ra.After != time.Second {
		t.Fatalf("a 429: %v", err)
	}
	t0 := time.Now()
	send(t, h.ch, bus.Outbound{ChatID: "D0002", Content: "other"})
	if d := time.Since(t0); d > 300*time.Millisecond {
		t.Errorf("another channel waited %s", d)
	}
	send(t, h.ch, bus.Outbound{ChatID: "D0001", Content: "two"})
	if d := time.Since(t0); d < 700*time.Millisecond {
		t.Errorf("the limited channel was posted to after %s", d)
	}
}

func TestUndeliverable(t *testing.T) {
	fake := newFake(t)
	h := start(t, fake, Config{})
	fake.Post(slacktest.Event{Channel: "C0009", ChannelType: "channel", User: "U0001", Text: "x"})
	h.in.Wait(t, 1)
	fake.Archive("C0009", "is_archived")
	if _, err := h.ch.Send(context.Background(), bus.Outbound{Kind: bus.Message, ChatID: "C0009", Content: "hi"}); !channel.IsUndeliverable(err) || !strings.Contains(err.Error(), "is_archived") || !strings.Contains(err.Error(), "chat.postMessage") {
		t.Errorf("archived: %v", err)
	}
	if _, err := h.ch.Send(context.Background(), bus.Outbound{Kind: bus.Message, ChatID: "C4040", Content: "hi"}); !channel.IsUndeliverable(err) {
		t.Errorf("unknown: %v", err)
	}
}

func TestHundredDisconnectsLoseNothing(t *testing.T) {
	fake := newFake(t)
	h := start(t, fake, Config{})
	const n = 100
	for i := range n {
		fake.Post(slacktest.Event{Channel: "D0001", ChannelType: "im", User: "U0001", Text: "m" + string(rune('A'+i%26)) + string(rune('a'+i/26))})
		before := fake.Connections()
		switch {
		case i%4 == 0:
			fake.Disconnect()
		case i%4 == 2:
			fake.Drop()
		case i%4 == 1:
			fake.Fail("apps.connections.open", 1) // and the reconnection fails once
			fake.Drop()
		default:
			fake.Drop()
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := fake.WaitConnected(ctx, before+1)
		cancel()
		if err != nil {
			t.Fatalf("no reconnection after fault %d: %v", i, err)
		}
	}
	got := h.in.Wait(t, n)
	waitAcked(t, fake)
	if c := fake.Connections(); c < n {
		t.Errorf("only %d connections", c)
	}
	seen := map[string]bool{}
	for _, m := range got {
		seen[m.Content] = true
	}
	if len(got) != n || len(seen) != n {
		t.Errorf("%d unique messages, %d contents, want %d", len(got), len(seen), n)
	}
}

func TestRestartLosesNothing(t *testing.T) {
	fake := newFake(t)
	h := start(t, fake, Config{})
	fake.Post(slacktest.Event{Channel: "D0001", ChannelType: "im", User: "U0001", Text: "one"})
	h.in.Wait(t, 1)
	waitAcked(t, fake)
	h.in.Refuse(-1) // the gateway cannot take the next one: it stays unacknowledged
	fake.Post(slacktest.Event{Channel: "D0001", ChannelType: "im", User: "U0001", Text: "two"})
	time.Sleep(100 * time.Millisecond)
	h.stop()
	fake.Post(slacktest.Event{Channel: "D0001", ChannelType: "im", User: "U0001", Text: "three"})
	h2 := start(t, fake, Config{})
	got := h2.in.Wait(t, 2)
	waitAcked(t, fake)
	time.Sleep(100 * time.Millisecond)
	if got = h2.in.Unique(); len(got) != 2 || got[0].Content != "two" || got[1].Content != "three" {
		t.Errorf("after the restart: %+v", got)
	}
}

func TestRefusedToken(t *testing.T) {
	fake := newFake(t)
	c, err := New(Config{BotToken: "xoxb-wrong-secretX", AppToken: appToken, APIBase: fake.URL}, channel.Env{})
	if err != nil {
		t.Fatal(err)
	}
	err = c.Run(context.Background(), &channeltest.Inbox{}, func() { t.Error("ready") })
	if err == nil || !strings.Contains(err.Error(), "invalid_auth") || strings.Contains(err.Error(), "secretX") {
		t.Errorf("Run: %v", err)
	}
	c, _ = New(Config{BotToken: botToken, AppToken: "xapp-wrong-secretY", APIBase: fake.URL}, channel.Env{})
	err = c.Run(context.Background(), &channeltest.Inbox{}, func() {})
	if err == nil || !strings.Contains(err.Error(), "appToken") || strings.Contains(err.Error(), "secretY") {
		t.Errorf("Run with a wrong app token: %v", err)
	}
}

func TestConfigErrors(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{}, "channels.slack.botToken"},
		{Config{BotToken: "xoxb-1"}, "channels.slack.appToken"},
		{Config{BotToken: "xoxb-1", AppToken: "xapp-1", Mode: "http"}, "channels.slack.mode"},
		{Config{BotToken: "xoxb-1", AppToken: "xapp-1", GroupPolicy: "x"}, "channels.slack.groupPolicy"},
		{Config{BotToken: "xoxb-1", AppToken: "xapp-1", APIBase: "x"}, "channels.slack.apiBase"},
	} {
		if _, err := New(c.cfg, channel.Env{}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v", c.cfg, err)
		}
	}
}

func TestFilesBothWays(t *testing.T) {
	fake := newFake(t)
	h := start(t, fake, Config{MaxMediaBytes: 100})
	ws := h.env.Workspace
	pic := fake.AddFile("cat.png", "image/png", []byte("PNG-bytes"))
	big := fake.AddFile("big.bin", "application/octet-stream", make([]byte, 101))
	fake.Post(slacktest.Event{Channel: "D0001", ChannelType: "im", User: "U0001", Text: "look", Subtype: "file_share", Files: []slacktest.File{pic, big}})
	fake.Post(slacktest.Event{Channel: "C0001", ChannelType: "channel", User: "U0002", Text: "chatter", Subtype: "file_share", Files: []slacktest.File{pic}})
	got := h.in.Wait(t, 2)
	m := got[0]
	if len(m.Media) != 1 || !strings.HasPrefix(m.Media[0], filepath.Join(ws, "media", "slack")+string(filepath.Separator)) {
		t.Fatalf("media %q (%q)", m.Media, m.Content)
	}
	if b, err := os.ReadFile(m.Media[0]); err != nil || string(b) != "PNG-bytes" {
		t.Errorf("stored %q %v", b, err)
	}
	if m.Content != "look\n[file: "+m.Media[0]+"]\n[file big.bin not received: 101 bytes, over the limit of 100 (channels.slack.maxMediaBytes)]" {
		t.Errorf("content %q", m.Content)
	}
	if len(got[1].Media) != 0 {
		t.Error("a file in chatter that does not mention the app was downloaded")
	}

	os.WriteFile(filepath.Join(ws, "report.pdf"), []byte("%PDF-1.4"), 0o600)
	send(t, h.ch, bus.Outbound{ChatID: "D0001", Content: "Here.", Media: []string{"report.pdf", "../x"}})
	sent := fake.Sent("D0001")
	if len(sent) != 2 || !strings.HasPrefix(sent[0].Text, "Here.") || !strings.Contains(sent[0].Text, "(x not attached:") {
		t.Fatalf("sent %+v", sent)
	}
	if f := sent[1].Files; len(f) != 1 || f[0].Name != "report.pdf" || string(f[0].Data) != "%PDF-1.4" {
		t.Errorf("shared %+v", sent[1])
	}
	if fake.Calls("files.getUploadURLExternal") != 1 || fake.Calls("files.completeUploadExternal") != 1 {
		t.Error("not the external upload flow")
	}
}

func TestFileTokenOnlyToSlack(t *testing.T) {
	fake := newFake(t)
	h := start(t, fake, Config{})
	_, err := h.ch.fetch(context.Background(), "D1", "1.2", file{ID: "F1", Name: "x", URLPrivateDownload: "http://127.0.0.1:1/evil"})
	if err == nil || !strings.Contains(err.Error(), "not a Slack host") {
		t.Errorf("a file elsewhere: %v", err)
	}
}

// dropped posts the events that the policies must drop, then one they
// admit, and checks that only that one reached the gateway (and that
// every envelope was acknowledged, so Slack does not send them again).
func dropped(t *testing.T, fake *slacktest.Server, h *harness, drop []slacktest.Event, admit slacktest.Event) bus.Inbound {
	t.Helper()
	for _, ev := range drop {
		fake.Post(ev)
	}
	fake.Post(admit)
	h.in.Wait(t, 1)
	waitAcked(t, fake)
	time.Sleep(50 * time.Millisecond)
	got := h.in.Unique()
	if want := strings.TrimSpace(strings.ReplaceAll(admit.Text, "<@UBOT0001>", "")); len(got) != 1 || got[0].Content != want {
		t.Fatalf("carried %+v, want only %q", got, admit.Text)
	}
	return got[0]
}

func TestDMDisabled(t *testing.T) {
	fake := newFake(t)
	off := false
	h := start(t, fake, Config{DM: DMConfig{Enabled: &off}})
	pic := fake.AddFile("cat.png", "image/png", []byte("PNG"))
	dropped(t, fake, h, []slacktest.Event{
		{Channel: "D0001", ChannelType: "im", User: "U0001", Text: "hello"},
		{Channel: "D0001", ChannelType: "im", User: "U0001", Text: "a file", Subtype: "file_share", Files: []slacktest.File{pic}},
	}, slacktest.Event{Channel: "C0001", ChannelType: "channel", User: "U0001", Text: "<@UBOT0001> in a channel"})
	if entries, _ := os.ReadDir(filepath.Join(h.env.Workspace, "media", "slack")); len(entries) != 0 {
		t.Errorf("a refused direct message's file was downloaded: %v", entries)
	}
}

func TestDMAllowlist(t *testing.T) {
	fake := newFake(t)
	h := start(t, fake, Config{DM: DMConfig{Policy: "allowlist", AllowFrom: []string{"U0002"}}})
	dropped(t, fake, h, []slacktest.Event{
		{Channel: "D0001", ChannelType: "im", User: "U0001", Text: "not listed"},
	}, slacktest.Event{Channel: "D0002", ChannelType: "im", User: "U0002", Text: "listed"})
}

func TestGroupAllowlist(t *testing.T) {
	fake := newFake(t)
	h := start(t, fake, Config{GroupPolicy: "allowlist", GroupAllowFrom: []string{"C0002"}})
	m := dropped(t, fake, h, []slacktest.Event{
		// The attack: a mention in a channel that is not on the list.
		{Channel: "C0001", ChannelType: "channel", User: "U0001", Text: "<@UBOT0001> answer me"},
		{Type: "app_mention", Channel: "C0001", User: "U0001", Text: "<@UBOT0001> answer me too"},
		{Channel: "C0001", ChannelType: "channel", User: "U0001", Text: "chatter"},
	}, slacktest.Event{Channel: "C0002", ChannelType: "channel", User: "U0001", Text: "no mention needed here"})
	if m.Metadata["mentioned"] != true || m.Metadata["group"] != true {
		t.Errorf("a listed channel's message is not answered: %v", m.Metadata)
	}
	// Direct messages are not channels: the group list does not apply.
	fake.Post(slacktest.Event{Channel: "D0001", ChannelType: "im", User: "U0001", Text: "dm"})
	if got := h.in.Wait(t, 2); got[1].Content != "dm" {
		t.Errorf("%+v", got[1])
	}
}

func TestDMPolicyConfigError(t *testing.T) {
	_, err := New(Config{BotToken: "xoxb-1", AppToken: "xapp-1", DM: DMConfig{Policy: "closed"}}, channel.Env{})
	if err == nil || !strings.Contains(err.Error(), "channels.slack.dm.policy") {
		t.Errorf("%v", err)
	}
}

// TestStrangersFilesNeverFetched: under the open dm.policy a stranger's
// direct message reaches the gateway (which answers it with a pairing
// code), but its files are neither downloaded nor stored; the allowed
// sender's are.
func TestStrangersFilesNeverFetched(t *testing.T) {
	fake := newFake(t)
	h := start(t, fake, Config{MaxMediaBytes: 1 << 20})
	h.in.Admit = func(m bus.Inbound) bool { return m.SenderID == "U0001" }
	pic := fake.AddFile("cat.png", "image/png", []byte("PNG-bytes"))
	for range 5 {
		fake.Post(slacktest.Event{Channel: "D0002", ChannelType: "im", User: "U0666", Text: "take this", Subtype: "file_share", Files: []slacktest.File{pic}})
	}
	fake.Post(slacktest.Event{Channel: "D0001", ChannelType: "im", User: "U0001", Text: "mine", Subtype: "file_share", Files: []slacktest.File{pic}})
	got := h.in.Wait(t, 6)
	for _, m := range got[:5] {
		if len(m.Media) != 0 || m.Content != "take this" {
			t.Fatalf("a stranger's message: %+v", m)
		}
	}
	if len(got[5].Media) != 1 {
		t.Fatalf("the allowed sender's file: %+v", got[5])
	}
	entries, _ := os.ReadDir(filepath.Join(h.env.Workspace, "media", "slack"))
	if len(entries) != 1 {
		t.Errorf("%d files stored, want only the allowed sender's", len(entries))
	}
}
