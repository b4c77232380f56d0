package wecom

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nbots/nb/gateway/bus"
	"github.com/nbots/nb/gateway/channel"
	"github.com/nbots/nb/gateway/channel/channeltest"
	"github.com/nbots/nb/gateway/channel/wecom/wecomtest"
)

const (
	botID  = "aibBOT0001"
	secret = "wecom-SECRET-of-the-bot"
	group  = "wrkSFfCgAAxxxxGROUP"
)

type harness struct {
	ch   *Channel
	in   *channeltest.Inbox
	stop func()
}

func newFake(t *testing.T) *wecomtest.Server {
	t.Helper()
	f := wecomtest.New(botID, secret)
	t.Cleanup(f.Close)
	return f
}

func build(t *testing.T, fake *wecomtest.Server, cfg Config) *Channel {
	t.Helper()
	log, _ := channeltest.Logger(t, secret)
	if cfg.BotID == "" {
		cfg.BotID, cfg.Secret = botID, secret
	}
	cfg.WSURL = fake.URL
	c, err := New(cfg, channeltest.Folders(t, channel.Env{Logger: log}))
	if err != nil {
		t.Fatal(err)
	}
	c.backoff, c.answerWait = 10*time.Millisecond, 500*time.Millisecond
	return c
}

func start(t *testing.T, fake *wecomtest.Server, cfg Config) *harness {
	t.Helper()
	c := build(t, fake, cfg)
	h := &harness{ch: c, in: &channeltest.Inbox{}}
	h.stop = channeltest.Start(t, c, h.in)
	return h
}

func wait(t *testing.T, fake *wecomtest.Server, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := fake.Wait(ctx, cond); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

// TestConversation: a direct message is answered on its own req_id as a
// finished stream; a group message (the platform passes on mentions
// only) is published as a mention with the bot's name removed, and
// answered in the group.
func TestConversation(t *testing.T) {
	fake := newFake(t)
	h := start(t, fake, Config{})
	dm, dmReq := fake.Post(wecomtest.Incoming{Sender: "alice", Text: "hello"})
	gm, gmReq := fake.Post(wecomtest.Incoming{Sender: "bob", Chat: group, Text: "@nb what time is it?"})
	got := h.in.Wait(t, 2)
	if m := got[0]; m.ID != dm || m.SenderID != "alice" || m.ChatID != "alice" || m.Content != "hello" || m.Metadata[channel.MetaGroup] != false {
		t.Errorf("direct message %+v", m)
	}
	if m := got[1]; m.ID != gm || m.ChatID != group || m.Content != "what time is it?" || m.Metadata[channel.MetaGroup] != true || m.Metadata[channel.MetaMentioned] != true {
		t.Errorf("group message %+v", m)
	}
	channeltest.Send(t, h.ch, bus.Outbound{ChatID: "alice", ReplyTo: dm, Content: "hi alice"})
	channeltest.Send(t, h.ch, bus.Outbound{ChatID: group, Content: "It is **noon**."})
	if st := fake.Stream(dmReq); st == nil || !st.Finished || st.Content != "hi alice" {
		t.Errorf("the answer to alice: %+v", st)
	}
	if st := fake.Stream(gmReq); st == nil || !st.Finished || st.Content != "It is **noon**." {
		t.Errorf("the answer in the group: %+v", st)
	}
	// A second answer to the same message (a scheduled one) is pushed.
	channeltest.Send(t, h.ch, bus.Outbound{ChatID: "alice", Content: "reminder"})
	if p := fake.Pushes("alice"); len(p) != 1 || p[0].Content != "reminder" {
		t.Errorf("pushed %+v", p)
	}
}

// TestProgressStreamsThenFinishes: a turn's progress updates the
// message's stream in place; the answer finishes it.
func TestProgressStreamsThenFinishes(t *testing.T) {
	fake := newFake(t)
	h := start(t, fake, Config{})
	id, req := fake.Post(wecomtest.Incoming{Sender: "alice", Text: "think"})
	h.in.Wait(t, 1)
	sid := channeltest.Send(t, h.ch, bus.Outbound{ChatID: "alice", ReplyTo: id, Turn: "t", Kind: bus.Progress, Content: "thinking"})
	if err := h.ch.Edit(context.Background(), "alice", sid, "thinking harder"); err != nil {
		t.Fatal(err)
	}
	if st := fake.Stream(req); st == nil || st.Finished || st.Content != "thinking harder" {
		t.Errorf("progress %+v", st)
	}
	channeltest.Send(t, h.ch, bus.Outbound{ChatID: "alice", ReplyTo: id, Turn: "t", Content: "done"})
	if st := fake.Stream(req); st == nil || !st.Finished || st.Content != "done" || st.Updates != 3 {
		t.Errorf("answer %+v", st)
	}
	if err := h.ch.Edit(context.Background(), "alice", sid, "late"); err == nil {
		t.Error("a finished stream edited")
	}
	if len(fake.Pushes("")) != 0 {
		t.Errorf("pushed %+v", fake.Pushes(""))
	}
}

// TestLongAnswerSplit: the first piece finishes the stream, the rest is
// pushed, each piece within the limit and no code block cut open.
func TestLongAnswerSplit(t *testing.T) {
	fake := newFake(t)
	h := start(t, fake, Config{})
	id, req := fake.Post(wecomtest.Incoming{Sender: "alice", Text: "long"})
	h.in.Wait(t, 1)
	long := strings.Repeat("字", 1000) + "\n```\n" + strings.Repeat("code\n", 300) + "```\n" + strings.Repeat("尾", 500)
	channeltest.Send(t, h.ch, bus.Outbound{ChatID: "alice", ReplyTo: id, Content: long})
	st := fake.Stream(req)
	pushes := fake.Pushes("alice")
	if st == nil || !st.Finished || len(pushes) < 1 {
		t.Fatalf("stream %+v, %d pushes", st, len(pushes))
	}
	for _, text := range append([]string{st.Content}, func() (s []string) {
		for _, p := range pushes {
			s = append(s, p.Content)
		}
		return
	}()...) {
		if n := len([]rune(text)); n > MaxMessageLength {
			t.Errorf("a piece of %d characters", n)
		}
		if strings.Count(text, "```")%2 != 0 {
			t.Errorf("a piece with an open code block")
		}
	}
}

// TestRateLimitedPush: errcode 45009 is a RetryAfter for that chat; the
// retry pushes once.
func TestRateLimitedPush(t *testing.T) {
	fake := newFake(t)
	h := start(t, fake, Config{})
	fake.Inject(wecomtest.EPSend, channeltest.TooMany)
	_, err := h.ch.Send(context.Background(), bus.Outbound{Channel: Name, Kind: bus.Message, ChatID: "alice", Turn: "t", Content: "hi"})
	var ra *channel.RetryAfter
	if !errors.As(err, &ra) {
		t.Fatalf("Send: %v", err)
	}
	channeltest.Send(t, h.ch, bus.Outbound{ChatID: "alice", Turn: "t", Content: "hi"})
	if p := fake.Pushes("alice"); len(p) != 1 {
		t.Errorf("pushed %+v", p)
	}
}

// TestLostAnswerRetriedOnce: a reply whose answer was lost is sent again
// on the same stream: one message.
func TestLostAnswerRetriedOnce(t *testing.T) {
	fake := newFake(t)
	h := start(t, fake, Config{})
	id, req := fake.Post(wecomtest.Incoming{Sender: "alice", Text: "q"})
	h.in.Wait(t, 1)
	fake.Inject(wecomtest.EPRespond, channeltest.LoseAnswer)
	m := bus.Outbound{Channel: Name, Kind: bus.Message, ChatID: "alice", ReplyTo: id, Turn: "t", Content: "answer"}
	if _, err := h.ch.Send(context.Background(), m); err == nil {
		t.Fatal("a lost answer reported as delivered")
	}
	channeltest.Send(t, h.ch, m)
	if st := fake.Stream(req); st == nil || !st.Finished || st.Content != "answer" || len(fake.Pushes("")) != 0 {
		t.Errorf("stream %+v, pushes %+v", st, fake.Pushes(""))
	}
}

// TestHundredDisconnectsLoseNothing: messages sent between a hundred
// dropped connections all arrive, once.
func TestHundredDisconnectsLoseNothing(t *testing.T) {
	fake := newFake(t)
	h := start(t, fake, Config{})
	const n = 100
	for i := range n {
		fake.Post(wecomtest.Incoming{Sender: "alice", Text: "m" + string(rune('A'+i%26)) + string(rune('a'+i/26))})
		h.in.Wait(t, i+1)
		before := fake.Connections()
		fake.Drop()
		wait(t, fake, "a reconnection", func() bool { return fake.Connections() > before })
	}
	got := h.in.Unique()
	seen := map[string]bool{}
	for _, m := range got {
		seen[m.Content] = true
	}
	if len(got) != n || len(seen) != n {
		t.Errorf("%d messages, %d contents, want %d", len(got), len(seen), n)
	}
}

// TestBusOutageLosesNothing: the platform sends a message once and takes
// no acknowledgement, so a message the gateway cannot take yet is held
// (the next ones wait behind it) until it can: nothing lost, in order.
func TestBusOutageLosesNothing(t *testing.T) {
	fake := newFake(t)
	h := start(t, fake, Config{})
	h.in.Refuse(3)
	fake.Post(wecomtest.Incoming{Sender: "alice", Text: "one"})
	fake.Post(wecomtest.Incoming{Sender: "alice", Text: "two"})
	got := h.in.Wait(t, 2)
	if got[0].Content != "one" || got[1].Content != "two" || len(h.in.Messages()) != 2 {
		t.Errorf("got %+v", h.in.Messages())
	}
}

func TestWelcome(t *testing.T) {
	fake := newFake(t)
	start(t, fake, Config{WelcomeMessage: "Hi, I am nb."})
	fake.EnterChat("alice")
	wait(t, fake, "the welcome", func() bool { return len(fake.Welcomes()) == 1 })
	if w := fake.Welcomes(); w[0] != "Hi, I am nb." {
		t.Errorf("welcome %q", w)
	}
}

func TestPings(t *testing.T) {
	fake := newFake(t)
	c := build(t, fake, Config{})
	c.ping = 50 * time.Millisecond
	channeltest.Start(t, c, &channeltest.Inbox{})
	wait(t, fake, "pings", func() bool { return fake.Pings() >= 3 })
}

func TestRefusedCredentials(t *testing.T) {
	fake := newFake(t)
	c := build(t, fake, Config{BotID: botID, Secret: "wrong-SECRETX"})
	err := c.Run(context.Background(), &channeltest.Inbox{}, func() { t.Error("ready") })
	if err == nil || !strings.Contains(err.Error(), "botId and secret") || strings.Contains(err.Error(), "SECRETX") {
		t.Errorf("Run: %v", err)
	}
}

// TestTakenOver: another connection for the same bot closes this one
// with disconnected_event; the channel stops instead of fighting it.
func TestTakenOver(t *testing.T) {
	fake := newFake(t)
	c := build(t, fake, Config{})
	errc := make(chan error, 1)
	ready := make(chan struct{})
	go func() { errc <- c.Run(context.Background(), &channeltest.Inbox{}, func() { close(ready) }) }()
	<-ready
	other := build(t, fake, Config{})
	channeltest.Start(t, other, &channeltest.Inbox{})
	select {
	case err := <-errc:
		if !errors.Is(err, errTakenOver) {
			t.Errorf("Run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the replaced connection did not stop")
	}
}

// TestStrangersFilesNeverFetched: a stranger's image is not downloaded;
// an allowed sender's file is, decrypted with its aeskey.
func TestStrangersFilesNeverFetched(t *testing.T) {
	fake := newFake(t)
	c := build(t, fake, Config{})
	in := &channeltest.Inbox{Admit: func(m bus.Inbound) bool { return m.SenderID == "alice" }}
	channeltest.Start(t, c, in)
	fake.Post(wecomtest.Incoming{Sender: "eve", Type: "image", Body: map[string]any{"image": fake.AddFile([]byte("junk"))}})
	f := fake.AddFile([]byte("the notes"))
	f["name"] = "notes.txt"
	fake.Post(wecomtest.Incoming{Sender: "alice", Type: "file", Body: map[string]any{"file": f}})
	got := in.Wait(t, 2)
	if m := got[0]; len(m.Media) != 0 || m.Content != "[image]" {
		t.Errorf("the stranger's message %+v", m)
	}
	m := got[1]
	if len(m.Media) != 1 {
		t.Fatalf("the allowed sender's message %+v", m)
	}
	if b, _ := os.ReadFile(m.Media[0]); string(b) != "the notes" || !strings.HasPrefix(m.Media[0], filepath.Join(c.env.Workspace, "media", Name)) {
		t.Errorf("stored %s: %q", m.Media[0], b)
	}
}

func TestConfigErrors(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{}, "botId and secret"},
		{Config{BotID: "a", Secret: "b", WSURL: "https://x"}, "wsUrl"},
	} {
		if _, err := New(c.cfg, channel.Env{}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("New(%+v): %v, want %q", c.cfg, err, c.want)
		}
	}
}

// FuzzDecrypt: no file and key make the decryption panic.
func FuzzDecrypt(f *testing.F) {
	f.Add([]byte("0123456789abcdef0123456789abcdef"), []byte("0123456789abcdef0123456789abcdef"))
	f.Fuzz(func(t *testing.T, data, key []byte) {
		Decrypt(data, key) //nolint:errcheck // only panics matter
	})
}

// TestStatus: the channel reports connected once it receives, and
// connecting, with why, when the platform is gone.
func TestStatus(t *testing.T) {
	fake := newFake(t)
	h := start(t, fake, Config{})
	channeltest.CheckStatus(t, h.ch, fake.Close)
}

// TestSendFiles: files the assistant sends go after the text, each
// uploaded in 512 KiB chunks and pushed by its media_id as the type the
// platform has for it (a PNG as an image, anything else as a file), byte
// for byte; a file too small for the platform, or outside the workspace,
// is named in the text instead. A rate limit in the middle of an upload
// is retried without sending the text or an earlier file twice.
func TestSendFiles(t *testing.T) {
	fake := newFake(t)
	c := build(t, fake, Config{})
	c.answerWait = 10 * time.Second // a chunk is 700 KB of JSON: slow under -race
	h := &harness{ch: c, in: &channeltest.Inbox{}}
	h.stop = channeltest.Start(t, c, h.in)
	ws := h.ch.env.Workspace
	picture := append([]byte("\x89PNG\r\n\x1a\n"), bytes.Repeat([]byte("p"), 600<<10)...)
	files := map[string][]byte{"picture.png": picture, "notes.txt": []byte("the meeting's notes"), "tiny.txt": []byte("abc")}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(ws, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	id, req := fake.Post(wecomtest.Incoming{Sender: "alice", Text: "send me the files"})
	h.in.Wait(t, 1)
	fake.Inject("aibot_upload_media_chunk", 0, channeltest.TooMany) // the picture's first chunk
	m := bus.Outbound{Channel: Name, Kind: bus.Message, ChatID: "alice", ReplyTo: id, Turn: "t1", Content: "here they are",
		Media: []string{"notes.txt", "picture.png", "tiny.txt", "/etc/passwd"}}
	_, err := h.ch.Send(context.Background(), m)
	var ra *channel.RetryAfter
	if !errors.As(err, &ra) {
		t.Fatalf("Send: %v, want the chunk's rate limit", err)
	}
	channeltest.Send(t, h.ch, m)
	st := fake.Stream(req)
	if st == nil || !st.Finished || !strings.HasPrefix(st.Content, "here they are") ||
		!strings.Contains(st.Content, "(tiny.txt not attached: 3 bytes, and WeCom takes files of 5 bytes or more)") ||
		!strings.Contains(st.Content, "(passwd not attached: outside the workspace)") || st.Updates != 1 {
		t.Errorf("stream %+v", st)
	}
	pushes := fake.Pushes("alice")
	if len(pushes) != 2 {
		t.Fatalf("%d pushes, want the two files once each: %+v", len(pushes), pushes)
	}
	for i, want := range []struct{ typ, name string }{{"file", "notes.txt"}, {"image", "picture.png"}} {
		p := pushes[i]
		if p.Type != want.typ || p.Name != want.name || !bytes.Equal(p.Data, files[want.name]) {
			t.Errorf("push %d: %s %s (%d bytes), want %s %s (%d bytes)", i, p.Type, p.Name, len(p.Data), want.typ, want.name, len(files[want.name]))
		}
	}
	if n := fake.Calls("aibot_upload_media_chunk"); n != 4 { // notes 1, the picture 1 refused, then 2
		t.Errorf("%d chunks sent, want 4", n)
	}
}

// TestMediaType: the platform's type for each file, by its extension and
// size.
func TestMediaType(t *testing.T) {
	for _, tc := range []struct {
		name string
		size int
		want string
	}{
		{"a.png", 100, "image"}, {"a.JPG", 10 << 20, "image"}, {"a.png", 10<<20 + 1, "file"},
		{"a.amr", 2 << 20, "voice"}, {"a.amr", 2<<20 + 1, "file"},
		{"a.mp4", 100, "video"}, {"a.mp4", 10<<20 + 1, "file"},
		{"a.gif", 100, "file"}, {"a.pdf", 100, "file"},
	} {
		if got := mediaType(&channel.Attachment{Name: tc.name, Data: make([]byte, tc.size)}); got != tc.want {
			t.Errorf("%s of %d bytes: %s, want %s", tc.name, tc.size, got, tc.want)
		}
	}
}
