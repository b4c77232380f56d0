package telegram

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nbots/nb/gateway/bus"
	"github.com/nbots/nb/gateway/channel"
	"github.com/nbots/nb/gateway/channel/channeltest"
	"github.com/nbots/nb/gateway/channel/telegram/botapi"
	"github.com/nbots/nb/gateway/channel/telegram/telegramtest"
	"github.com/nbots/nb/internal/testbuf"
)

const token = "123456789:AAE-secret_TOKEN-value"

var (
	alice = botapi.User{ID: 42, FirstName: "Alice", Username: "alice"}
	bob   = botapi.User{ID: 43, FirstName: "Bob"}
)

// inbox records what the channel publishes; fail makes the next
// publishes fail.

type harness struct {
	fake *telegramtest.Server
	ch   *Channel
	in   *channeltest.Inbox
	logs *testbuf.Buffer
	env  channel.Env
	stop func()
}

func newFake(t *testing.T) *telegramtest.Server {
	t.Helper()
	f, err := telegramtest.New(token)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	return f
}

func newChannel(t *testing.T, fake *telegramtest.Server, env channel.Env, cfg Config) (*Channel, *testbuf.Buffer) {
	t.Helper()
	var logs *testbuf.Buffer
	env.Logger, logs = channeltest.Logger(t, "secret_TOKEN")
	if cfg.Token == "" {
		cfg.Token = token
	}
	cfg.APIBase = fake.URL
	if cfg.PollTimeout == 0 {
		cfg.PollTimeout = 1
	}
	c, err := New(cfg, env)
	if err != nil {
		t.Fatal(err)
	}
	c.retryBase, c.retryMax = time.Millisecond, 5*time.Millisecond
	c.requestTimeout = 5 * time.Second
	c.pollDeadline = 1500 * time.Millisecond
	return c, logs
}

// start runs a channel on fake with a fresh workspace and state folder
// (or env's).
func start(t *testing.T, fake *telegramtest.Server, env channel.Env, cfg Config) *harness {
	t.Helper()
	env = channeltest.Folders(t, env)
	c, logs := newChannel(t, fake, env, cfg)
	h := &harness{fake: fake, ch: c, in: &channeltest.Inbox{}, logs: logs, env: env}
	h.stop = channeltest.Start(t, c, h.in)
	return h
}

func send(t *testing.T, c *Channel, m bus.Outbound) string {
	t.Helper()
	return channeltest.Send(t, c, m)
}

func TestConversation(t *testing.T) {
	fake := newFake(t)
	h := start(t, fake, channel.Env{}, Config{})
	fake.Say(alice, "hello bot")
	fake.Say(bob, "hi")
	got := h.in.Wait(t, 2)
	a, b := got[0], got[1]
	if a.Channel != "telegram" || a.SenderID != "42|alice" || a.ChatID != "42" || a.Content != "hello bot" || a.ID != "42:1" {
		t.Errorf("first message: %+v", a)
	}
	if a.Metadata["group"] != false || a.Metadata["mentioned"] != true {
		t.Errorf("a private message is addressed to the bot: %v", a.Metadata)
	}
	if b.SenderID != "43" {
		t.Errorf("a person without a username is known by id alone: %q", b.SenderID)
	}
	id := send(t, h.ch, bus.Outbound{ChatID: a.ChatID, Content: "Hello, Alice!"})
	sent := fake.Sent(42)
	if len(sent) != 1 || sent[0].Text != "Hello, Alice!" || id != "2" {
		t.Errorf("sent %+v, id %q", sent, id)
	}
	h.stop()
}

func TestReplyToMessage(t *testing.T) {
	fake := newFake(t)
	h := start(t, fake, channel.Env{}, Config{ReplyToMessage: true})
	fake.Say(alice, "question")
	m := h.in.Wait(t, 1)[0]
	send(t, h.ch, bus.Outbound{ChatID: m.ChatID, Content: "answer", ReplyTo: m.ID})
	if s := fake.Sent(42); len(s) != 1 || s[0].ReplyToMessage == nil || s[0].ReplyToMessage.MessageID != 1 {
		t.Errorf("the answer does not quote the question: %+v", s)
	}
}

func TestGroupMention(t *testing.T) {
	fake := newFake(t)
	h := start(t, fake, channel.Env{}, Config{})
	group := botapi.Chat{ID: -100123, Type: botapi.Supergroup, Title: "team"}
	botMsg := botapi.Message{MessageID: 1, From: &fake.Bot, Chat: group}
	cases := []struct {
		name string
		msg  botapi.Message
		want bool
	}{
		{"chatter", botapi.Message{Text: "lunch?"}, false},
		{"@mention", botapi.Message{Text: "@nb_test_bot what time is it", Entities: []botapi.MessageEntity{{Type: "mention", Offset: 0, Length: 12}}}, true},
		{"someone else", botapi.Message{Text: "@carol what time", Entities: []botapi.MessageEntity{{Type: "mention", Offset: 0, Length: 6}}}, false},
		{"mention after emoji", botapi.Message{Text: "🙂 @NB_test_bot hi", Entities: []botapi.MessageEntity{{Type: "mention", Offset: 3, Length: 12}}}, true},
		{"text_mention", botapi.Message{Text: "nb, hi", Entities: []botapi.MessageEntity{{Type: "text_mention", Offset: 0, Length: 2, User: &fake.Bot}}}, true},
		{"command", botapi.Message{Text: "/new@nb_test_bot", Entities: []botapi.MessageEntity{{Type: "bot_command", Offset: 0, Length: 16}}}, true},
		{"reply to the bot", botapi.Message{Text: "and then?", ReplyToMessage: &botMsg}, true},
		{"caption mention", botapi.Message{Caption: "@nb_test_bot look", CaptionEntities: []botapi.MessageEntity{{Type: "mention", Offset: 0, Length: 12}}}, true},
	}
	for _, c := range cases {
		c.msg.From, c.msg.Chat = &alice, group
		fake.Post(c.msg)
	}
	got := h.in.Wait(t, len(cases))
	for i, c := range cases {
		if got[i].Metadata["group"] != true || got[i].Metadata["mentioned"] != c.want {
			t.Errorf("%s: metadata %v, want mentioned=%v", c.name, got[i].Metadata, c.want)
		}
		if got[i].ChatID != "-100123" || got[i].SenderID != "42|alice" {
			t.Errorf("%s: chat %q sender %q", c.name, got[i].ChatID, got[i].SenderID)
		}
	}
}

func TestLongAnswerSplitOnLines(t *testing.T) {
	fake := newFake(t)
	h := start(t, fake, channel.Env{}, Config{})
	fake.Say(alice, "long please")
	h.in.Wait(t, 1)
	var lines []string
	for i := 0; len(strings.Join(lines, "\n")) < 10_000; i++ {
		lines = append(lines, strings.Repeat("word ", 9)+"🙂 line "+string(rune('a'+i%26)))
	}
	answer := strings.Join(lines, "\n")
	send(t, h.ch, bus.Outbound{ChatID: "42", Content: answer})
	sent := fake.Sent(42)
	if len(sent) < 3 {
		t.Fatalf("%d messages for %d characters", len(sent), len(answer))
	}
	var back []string
	for _, m := range sent {
		if n := channel.UTF16Len(m.Text); n > MaxMessageLength {
			t.Errorf("a message of %d UTF-16 units", n)
		}
		back = append(back, m.Text)
		last := m.Text[strings.LastIndexByte(m.Text, '\n')+1:]
		if !strings.Contains(answer, last+"\n") && !strings.HasSuffix(answer, last) {
			t.Errorf("a message ends inside a line: %q", last)
		}
	}
	if strings.Join(back, "\n") != answer {
		t.Error("the pieces joined by line breaks are not the answer")
	}
}

func TestMarkdownAsEntities(t *testing.T) {
	fake := newFake(t)
	h := start(t, fake, channel.Env{}, Config{})
	fake.Say(alice, "format")
	h.in.Wait(t, 1)
	send(t, h.ch, bus.Outbound{ChatID: "42", Content: "**Bold** 🙂 and `code` [site](https://example.com)\n\n```go\nx := 1\n```"})
	m := fake.Sent(42)[0]
	if m.Text != "Bold 🙂 and code site\n\nx := 1" {
		t.Fatalf("text %q", m.Text)
	}
	want := []botapi.MessageEntity{
		{Type: "bold", Offset: 0, Length: 4},
		{Type: "code", Offset: 12, Length: 4},
		{Type: "text_link", Offset: 17, Length: 4, URL: "https://example.com"},
		{Type: "pre", Offset: 23, Length: 6, Language: "go"},
	}
	if len(m.Entities) != len(want) {
		t.Fatalf("entities %+v", m.Entities)
	}
	for i := range want {
		if m.Entities[i] != want[i] {
			t.Errorf("entity %d: %+v, want %+v", i, m.Entities[i], want[i])
		}
	}
}

func TestUnparsableEntitiesRetriedAsPlainText(t *testing.T) {
	fake := newFake(t)
	h := start(t, fake, channel.Env{}, Config{})
	fake.Say(alice, "x")
	h.in.Wait(t, 1)
	fake.RejectEntities(true)
	send(t, h.ch, bus.Outbound{ChatID: "42", Content: "**important** answer"})
	sent := fake.Sent(42)
	if len(sent) != 1 || sent[0].Text != "important answer" || len(sent[0].Entities) != 0 {
		t.Fatalf("sent %+v", sent)
	}
	if n := fake.Calls("sendMessage"); n != 2 {
		t.Errorf("%d sendMessage calls, want the refused one and its plain retry", n)
	}
	if !strings.Contains(h.logs.String(), "can't parse entities") {
		t.Error("the refusal is not logged")
	}
}

func TestProgressEditedInPlace(t *testing.T) {
	fake := newFake(t)
	h := start(t, fake, channel.Env{}, Config{})
	fake.Say(alice, "x")
	h.in.Wait(t, 1)
	p1 := send(t, h.ch, bus.Outbound{Kind: bus.Progress, ChatID: "42", Turn: "t1", Content: "Thinking"})
	p2 := send(t, h.ch, bus.Outbound{Kind: bus.Progress, ChatID: "42", Turn: "t1", Content: "Thinking about it"})
	send(t, h.ch, bus.Outbound{Kind: bus.Progress, ChatID: "42", Turn: "t1", Content: "Thinking about it"}) // not modified
	final := send(t, h.ch, bus.Outbound{ChatID: "42", Turn: "t1", Content: "The **answer**"})
	sent := fake.Sent(42)
	if len(sent) != 1 || p1 != p2 || final != p1 {
		t.Fatalf("progress made %d messages (ids %s %s %s)", len(sent), p1, p2, final)
	}
	if sent[0].Text != "The answer" || sent[0].EditDate == 0 || len(sent[0].Entities) != 1 {
		t.Errorf("final %+v", sent[0])
	}
	// Another turn starts a new message.
	send(t, h.ch, bus.Outbound{Kind: bus.Progress, ChatID: "42", Turn: "t2", Content: "Next"})
	if len(fake.Sent(42)) != 2 {
		t.Error("a new turn edited the last turn's message")
	}
	if err := h.ch.Edit(context.Background(), "42", p1, "edited"); err != nil || fake.Sent(42)[0].Text != "edited" {
		t.Errorf("Edit: %v", err)
	}
	if err := h.ch.Typing(context.Background(), "42"); err != nil || fake.Calls("sendChatAction") != 1 {
		t.Errorf("Typing: %v", err)
	}
}

func TestMediaFetchedIntoWorkspace(t *testing.T) {
	fake := newFake(t)
	ws := t.TempDir()
	h := start(t, fake, channel.Env{Workspace: ws}, Config{MaxMediaBytes: 1000})
	photo := fake.AddFile([]byte("JPEG-bytes"))
	voice := fake.AddFile([]byte("OGG-bytes"))
	big := fake.AddFile(make([]byte, 1001))
	fake.Post(botapi.Message{From: &alice, Chat: botapi.Chat{ID: 42, Type: botapi.Private}, Caption: "look",
		Photo: []botapi.PhotoSize{{FileID: "small", FileUniqueID: "s"}, {FileID: photo, FileUniqueID: "ph1", FileSize: 10}}})
	fake.Post(botapi.Message{From: &alice, Chat: botapi.Chat{ID: 42, Type: botapi.Private}, Voice: &botapi.Voice{FileID: voice, FileUniqueID: "vo1", Duration: 2}})
	// The size announced in the message is wrong; getFile's is checked too.
	fake.Post(botapi.Message{From: &alice, Chat: botapi.Chat{ID: 42, Type: botapi.Private}, Document: &botapi.Document{FileID: big, FileUniqueID: "bg", FileName: "x.pdf", FileSize: 5}})
	fake.Post(botapi.Message{From: &alice, Chat: botapi.Chat{ID: 42, Type: botapi.Private}, Document: &botapi.Document{FileID: big, FileUniqueID: "bg", FileName: "x.pdf", FileSize: 1001}})
	got := h.in.Wait(t, 4)
	for i, want := range []string{"JPEG-bytes", "OGG-bytes"} {
		if len(got[i].Media) != 1 {
			t.Fatalf("message %d: media %v", i, got[i].Media)
		}
		p := got[i].Media[0]
		if !strings.HasPrefix(p, filepath.Join(ws, "media", "telegram")+string(filepath.Separator)) {
			t.Errorf("stored outside the workspace's media folder: %s", p)
		}
		if b, err := os.ReadFile(p); err != nil || string(b) != want {
			t.Errorf("stored %q, %v", b, err)
		}
	}
	if filepath.Ext(got[0].Media[0]) != ".jpg" || filepath.Ext(got[1].Media[0]) != ".ogg" || !strings.HasPrefix(got[0].Content, "look\n[photo: ") {
		t.Errorf("photo %s voice %s content %q", got[0].Media[0], got[1].Media[0], got[0].Content)
	}
	for _, m := range got[2:] {
		if len(m.Media) != 0 || !strings.Contains(m.Content, "[document not received:") || !strings.Contains(m.Content, "maxMediaBytes") {
			t.Errorf("an oversized file: %+v", m)
		}
	}
	if fake.Calls("getFile") != 3 {
		t.Errorf("getFile called %d times: the file announced too big must not be asked for", fake.Calls("getFile"))
	}
}

func TestMediaThroughGuard(t *testing.T) {
	fake := newFake(t)
	c, _ := newChannel(t, fake, channel.Env{Workspace: t.TempDir()}, Config{})
	// The fake's host is allowed because the operator named it in apiBase;
	// the guard refuses loopback otherwise.
	c.api.Base = strings.Replace(fake.URL, "127.0.0.1", "localhost", 1)
	id := fake.AddFile([]byte("x"))
	_, err := c.fetch(context.Background(), &botapi.Message{Chat: botapi.Chat{ID: 1}, MessageID: 1}, attachment{kind: "photo", fileID: id, uniqueID: "u"})
	if err == nil || !strings.Contains(err.Error(), "only public addresses") {
		t.Fatalf("a file from a loopback host not named in apiBase: %v", err)
	}
	if strings.Contains(err.Error(), "secret_TOKEN") {
		t.Errorf("the token is in the error: %v", err)
	}
}

func TestRetryAfterPerChat(t *testing.T) {
	fake := newFake(t)
	h := start(t, fake, channel.Env{}, Config{})
	fake.Say(alice, "x")
	fake.Say(bob, "y")
	h.in.Wait(t, 2)
	fake.Inject("sendMessage", channeltest.TooMany)
	_, err := h.ch.Send(context.Background(), bus.Outbound{Kind: bus.Message, ChatID: "42", Content: "one"})
	var ra *channel.RetryAfter
	if !errors.As(err, &ra) || ra.After != time.Second {
		t.Fatalf("a 429: %v", err)
	}
	// Another chat is not held back.
	t0 := time.Now()
	send(t, h.ch, bus.Outbound{ChatID: "43", Content: "other chat"})
	if d := time.Since(t0); d > 300*time.Millisecond {
		t.Errorf("another chat waited %s", d)
	}
	// The limited chat waits out its retry_after.
	send(t, h.ch, bus.Outbound{ChatID: "42", Content: "one"})
	if d := time.Since(t0); d < 800*time.Millisecond {
		t.Errorf("the limited chat was sent to after %s, before its retry_after", d)
	}
	if s := fake.Sent(42); len(s) != 1 || s[0].Text != "one" {
		t.Errorf("sent %+v", s)
	}
}

func TestRetryAfterMidAnswerSendsTheRest(t *testing.T) {
	fake := newFake(t)
	h := start(t, fake, channel.Env{}, Config{})
	fake.Say(alice, "x")
	h.in.Wait(t, 1)
	long := strings.Repeat("a line of text\n", 600) // 9,000 characters: three messages
	fake.Inject("sendMessage", 0, channeltest.TooMany)
	m := bus.Outbound{Kind: bus.Message, ChatID: "42", Turn: "t9", Content: long}
	if _, err := h.ch.Send(context.Background(), m); err == nil {
		t.Fatal("no error on a 429")
	}
	send(t, h.ch, m)
	sent := fake.Sent(42)
	var all []string
	for _, s := range sent {
		all = append(all, s.Text)
	}
	if len(sent) != 3 || strings.Join(all, "\n") != strings.TrimSpace(long) {
		t.Errorf("%d messages after the retry: a piece was sent twice or lost", len(sent))
	}
}

func TestUndeliverable(t *testing.T) {
	fake := newFake(t)
	h := start(t, fake, channel.Env{}, Config{})
	fake.Say(alice, "x")
	h.in.Wait(t, 1)
	fake.Block(42)
	_, err := h.ch.Send(context.Background(), bus.Outbound{Kind: bus.Message, ChatID: "42", Content: "hi"})
	if !channel.IsUndeliverable(err) || !strings.Contains(err.Error(), "bot was blocked by the user") {
		t.Errorf("a blocked chat: %v", err)
	}
	_, err = h.ch.Send(context.Background(), bus.Outbound{Kind: bus.Message, ChatID: "999", Content: "hi"})
	if !channel.IsUndeliverable(err) || !strings.Contains(err.Error(), "chat not found") {
		t.Errorf("an unknown chat: %v", err)
	}
	_, err = h.ch.Send(context.Background(), bus.Outbound{Kind: bus.Message, ChatID: "web:1", Content: "hi"})
	if !channel.IsUndeliverable(err) {
		t.Errorf("not a chat id: %v", err)
	}
}

func TestHundredDisconnectsLoseNothing(t *testing.T) {
	fake := newFake(t)
	h := start(t, fake, channel.Env{}, Config{})
	var faults []channeltest.Fault
	for i := range 100 {
		switch {
		case i%20 == 7:
			faults = append(faults, channeltest.Hang) // 5 polls that hang past their deadline
		case i == 50:
			faults = append(faults, channeltest.TooMany)
		case i%2 == 0:
			faults = append(faults, channeltest.Reset)
		default:
			faults = append(faults, channeltest.BadGateway)
		}
	}
	fake.Inject("getUpdates", faults...)
	const n = 60
	go func() {
		for i := range n {
			fake.Say(alice, "message "+string(rune('A'+i%26))+string(rune('a'+i/26)))
			time.Sleep(5 * time.Millisecond)
		}
	}()
	got := h.in.Wait(t, n)
	time.Sleep(200 * time.Millisecond)
	got = h.in.Messages()
	if len(got) != n {
		t.Errorf("%d messages published, want %d exactly once", len(got), n)
	}
	for i, m := range got {
		if want := "message " + string(rune('A'+i%26)) + string(rune('a'+i/26)); m.Content != want {
			t.Fatalf("message %d is %q, want %q (lost or out of order)", i, m.Content, want)
		}
	}
	if fake.Calls("getUpdates") < 100 {
		t.Errorf("only %d polls: the faults were not all met", fake.Calls("getUpdates"))
	}
	h.stop()
	if p := fake.Pending(); p != 0 {
		t.Errorf("%d updates left unconfirmed", p)
	}
}

func TestRestartNeitherReplaysNorSkips(t *testing.T) {
	fake := newFake(t)
	env := channel.Env{Workspace: t.TempDir(), StateDir: t.TempDir()}
	h := start(t, fake, env, Config{})
	h.in.Refuse(2) // the bus is down for a moment: the offset must not move past
	fake.Say(alice, "one")
	fake.Say(alice, "two")
	h.in.Wait(t, 2)
	h.stop()
	fake.Say(alice, "three") // while the gateway is down
	fake.Say(alice, "four")
	// A fresh fake would not know what was confirmed: the offset file is
	// all the second run has; give it one holding every update again.
	h2 := start(t, fake, env, Config{})
	got := h2.in.Wait(t, 2)
	time.Sleep(300 * time.Millisecond)
	got = h2.in.Messages()
	if len(got) != 2 || got[0].Content != "three" || got[1].Content != "four" {
		t.Errorf("after the restart: %+v", got)
	}
	b, err := os.ReadFile(filepath.Join(env.StateDir, "telegram.cursor"))
	if err != nil || strings.TrimSpace(string(b)) != "100005" {
		t.Errorf("offset file %q, %v", b, err)
	}
}

func TestOffsetFileIsTheOnlyMemory(t *testing.T) {
	// A server that still holds updates the channel published (the crash
	// came before the next poll confirmed them) gets them skipped by the
	// saved offset, not published again.
	fake := newFake(t)
	env := channel.Env{Workspace: t.TempDir(), StateDir: t.TempDir()}
	fake.Say(alice, "old 1")
	fake.Say(alice, "old 2")
	fake.Say(alice, "new")
	if err := os.WriteFile(filepath.Join(env.StateDir, "telegram.cursor"), []byte("100003\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	h := start(t, fake, env, Config{})
	got := h.in.Wait(t, 1)
	time.Sleep(200 * time.Millisecond)
	if got = h.in.Messages(); len(got) != 1 || got[0].Content != "new" {
		t.Errorf("published %+v", got)
	}
}

func TestTokenNeverPrinted(t *testing.T) {
	fake := newFake(t)
	c, logs := newChannel(t, fake, channel.Env{Workspace: t.TempDir(), StateDir: t.TempDir()}, Config{})
	fake.Close() // every call now fails at the transport, whose errors quote the URL
	_, err := c.Send(context.Background(), bus.Outbound{Kind: bus.Message, ChatID: "42", Content: "hi"})
	if err == nil || strings.Contains(err.Error(), "secret_TOKEN") || !strings.Contains(err.Error(), "telegram sendMessage") {
		t.Errorf("Send: %v", err)
	}
	if err := c.Typing(context.Background(), "42"); err == nil || strings.Contains(err.Error(), "secret_TOKEN") {
		t.Errorf("Typing: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if err := c.Run(ctx, &channeltest.Inbox{}, func() {}); err != nil {
		t.Errorf("Run with an unreachable server: %v", err)
	}
	if !strings.Contains(logs.String(), "telegram getMe") {
		t.Errorf("the failures are not logged:\n%s", logs)
	}
	if strings.Contains(logs.String(), "secret_TOKEN") || strings.Contains(logs.String(), "123456789:") {
		t.Errorf("the token is in the logs:\n%s", logs)
	}
}

func TestRefusedTokenIsFinal(t *testing.T) {
	fake := newFake(t)
	c, _ := newChannel(t, fake, channel.Env{Workspace: t.TempDir(), StateDir: t.TempDir()}, Config{Token: "999:revoked-secret"})
	err := c.Run(context.Background(), &channeltest.Inbox{}, func() { t.Error("ready with a refused token") })
	if err == nil || !strings.Contains(err.Error(), "401 Unauthorized") || !strings.Contains(err.Error(), "channels.telegram.token") || strings.Contains(err.Error(), "revoked-secret") {
		t.Errorf("Run: %v", err)
	}
}

func TestConfigErrors(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{}, "channels.telegram.token is empty"},
		{Config{Token: "a/b"}, "not a bot token"},
		{Config{Token: "t", APIBase: "ftp://x"}, "channels.telegram.apiBase"},
		{Config{Token: "t", Proxy: "::"}, "channels.telegram.proxy"},
		{Config{Token: "t", GroupPolicy: "all"}, "channels.telegram.groupPolicy"},
	} {
		if _, err := New(c.cfg, channel.Env{}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.cfg, err, c.want)
		}
	}
}

func TestProxy(t *testing.T) {
	fake := newFake(t)
	target, _ := url.Parse(fake.URL)
	var mu sync.Mutex
	var proxied []string
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		proxied = append(proxied, r.URL.Path)
		mu.Unlock()
		httputil.NewSingleHostReverseProxy(target).ServeHTTP(w, r)
	}))
	defer proxy.Close()
	h := start(t, fake, channel.Env{}, Config{Proxy: proxy.URL})
	fake.Say(alice, "through the proxy")
	m := h.in.Wait(t, 1)[0]
	send(t, h.ch, bus.Outbound{ChatID: m.ChatID, Content: "answer"})
	mu.Lock()
	defer mu.Unlock()
	if len(proxied) < 3 || !strings.HasSuffix(proxied[0], "/getMe") {
		t.Errorf("through the proxy: %v", proxied)
	}
}

func TestFilesSent(t *testing.T) {
	fake := newFake(t)
	h := start(t, fake, channel.Env{}, Config{})
	fake.Say(alice, "send me the files")
	h.in.Wait(t, 1)
	ws := h.env.Workspace
	os.WriteFile(filepath.Join(ws, "chart.png"), []byte("\x89PNG\r\n\x1a\nchart"), 0o600)
	os.WriteFile(filepath.Join(ws, "report.pdf"), []byte("%PDF-1.4"), 0o600)
	send(t, h.ch, bus.Outbound{ChatID: "42", Turn: "t1", Content: "Here.", Media: []string{"chart.png", "report.pdf", "../escape.txt"}})
	sent := fake.Sent(42)
	if len(sent) != 3 {
		t.Fatalf("sent %+v", sent)
	}
	if !strings.HasPrefix(sent[0].Text, "Here.") || !strings.Contains(sent[0].Text, "(escape.txt not attached:") {
		t.Errorf("text %q", sent[0].Text)
	}
	if p := sent[1].Photo; len(p) != 1 || string(fake.FileContent(p[0].FileID)) != "\x89PNG\r\n\x1a\nchart" {
		t.Errorf("photo %+v", sent[1])
	}
	if d := sent[2].Document; d == nil || d.FileName != "report.pdf" || string(fake.FileContent(d.FileID)) != "%PDF-1.4" {
		t.Errorf("document %+v", sent[2])
	}
}

// At connection the channel sets the command menu with setMyCommands,
// in the Bot API's format (the fake refuses what Telegram refuses).
func TestCommandMenu(t *testing.T) {
	fake := newFake(t)
	h := start(t, fake, channel.Env{}, Config{})
	fake.Say(alice, "hello")
	h.in.Wait(t, 1)
	var names []string
	for _, c := range fake.Commands() {
		names = append(names, c.Command)
	}
	if strings.Join(names, ",") != "start,new,stop,status,help,restart" {
		t.Fatalf("menu %v (requests %v)", names, fake.Requests())
	}
	h.stop()
	api := &botapi.Client{Base: fake.URL, Token: token}
	if err := api.SetMyCommands(context.Background(), []botapi.BotCommand{{Command: "/Start", Description: "x"}}); err == nil || !strings.Contains(err.Error(), "BOT_COMMAND_INVALID") {
		t.Fatalf("an invalid command was accepted: %v", err)
	}
}
