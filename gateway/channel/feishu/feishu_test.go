package feishu

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nbots/nb/gateway/bus"
	"github.com/nbots/nb/gateway/channel"
	"github.com/nbots/nb/gateway/channel/channeltest"
	"github.com/nbots/nb/gateway/channel/feishu/feishutest"
)

const (
	appID     = "cli_a1b2c3d4e5f6a7b8"
	appSecret = "s3cret-FEISHU-app-secret"
	alice     = "ou_alice000000000000000000000000000"
	bob       = "ou_bob00000000000000000000000000000"
	group     = "oc_group0000000000000000000000000000"
)

type harness struct {
	ch   *Channel
	in   *channeltest.Inbox
	stop func()
	ws   string
}

func newFake(t *testing.T) *feishutest.Server {
	t.Helper()
	f := feishutest.New(appID, appSecret)
	t.Cleanup(f.Close)
	return f
}

// build makes a channel on the fake whose logs fail the test if they
// hold the app secret or a tenant token.
func build(t *testing.T, fake *feishutest.Server, cfg Config) *Channel {
	t.Helper()
	log, buf := channeltest.Logger(t, appSecret)
	t.Cleanup(func() {
		if strings.Contains(buf.String(), "t-") && strings.Contains(buf.String(), "Bearer") {
			t.Errorf("a token is in the logs:\n%s", buf)
		}
	})
	if cfg.AppID == "" {
		cfg.AppID, cfg.AppSecret = appID, appSecret
	}
	cfg.APIBase = fake.URL
	env := channeltest.Folders(t, channel.Env{Logger: log})
	c, err := New(cfg, env)
	if err != nil {
		t.Fatal(err)
	}
	c.backoff = 10 * time.Millisecond
	return c
}

func start(t *testing.T, fake *feishutest.Server, cfg Config) *harness {
	t.Helper()
	c := build(t, fake, cfg)
	h := &harness{ch: c, in: &channeltest.Inbox{}, ws: c.env.Workspace}
	h.stop = channeltest.Start(t, c, h.in)
	return h
}

func wait(t *testing.T, fake *feishutest.Server, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := fake.Wait(ctx, cond); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

func waitAcked(t *testing.T, fake *feishutest.Server) {
	t.Helper()
	wait(t, fake, "the acknowledgements", func() bool { return fake.Unacked() == 0 })
}

// TestConversation: a direct message is published with the sender as the
// chat and answered there; in a group, chatter is published without a
// mention and a message mentioning the bot with one, the mention
// removed, and the answer goes to the group's chat_id.
func TestConversation(t *testing.T) {
	fake := newFake(t)
	h := start(t, fake, Config{})
	dm := fake.Post(feishutest.Incoming{Sender: alice, Text: "hello"})
	fake.Post(feishutest.Incoming{Sender: bob, Chat: group, Text: "lunch?"})
	ask := fake.Post(feishutest.Incoming{Sender: bob, Chat: group, Text: "what time is it?", MentionBot: true})
	got := h.in.Wait(t, 3)
	if m := got[0]; m.ID != dm || m.SenderID != alice || m.ChatID != alice || m.Content != "hello" || m.Metadata[channel.MetaGroup] != false || m.Metadata[channel.MetaMentioned] != true {
		t.Errorf("direct message %+v", m)
	}
	if m := got[1]; m.ChatID != group || m.Metadata[channel.MetaGroup] != true || m.Metadata[channel.MetaMentioned] != false {
		t.Errorf("chatter %+v", m)
	}
	if m := got[2]; m.ID != ask || m.Content != "what time is it?" || m.Metadata[channel.MetaMentioned] != true {
		t.Errorf("mention %+v", m)
	}
	waitAcked(t, fake)
	wait(t, fake, "the reaction", func() bool { return fake.Reaction(dm) == "THUMBSUP" })

	channeltest.Send(t, h.ch, bus.Outbound{ChatID: alice, Content: "hi alice"})
	channeltest.Send(t, h.ch, bus.Outbound{ChatID: group, Content: "It is **noon**."})
	if s := fake.Sent(alice); len(s) != 1 || s[0].IDType != "open_id" || s[0].Type != "text" || s[0].Text() != "hi alice" {
		t.Errorf("to alice: %+v", s)
	}
	if s := fake.Sent(group); len(s) != 1 || s[0].IDType != "chat_id" || s[0].Type != "interactive" || s[0].Text() != "It is **noon**." {
		t.Errorf("to the group: %+v", s)
	}
}

// TestFormats: plain text as text, links as a post, Markdown as a card,
// as nanobot chooses them.
func TestFormats(t *testing.T) {
	for _, c := range []struct{ md, typ, want string }{
		{"just words", "text", `{"text":"just words"}`},
		{"see [docs](https://example.com/a)", "post", `{"zh_cn":{"content":[[{"tag":"text","text":"see "},{"href":"https://example.com/a","tag":"a","text":"docs"}]]}}`},
		{"# Title\n\n```go\nx := 1\n```", "interactive", `{"config":{"wide_screen_mode":true},"elements":[{"content":"**Title**\n\n` + "```go\\nx := 1\\n```" + `","tag":"markdown"}]}`},
		{"- one\n- two", "interactive", ""},
		{strings.Repeat("long ", 60), "post", ""},
	} {
		typ, body := format(c.md)
		if typ != c.typ || (c.want != "" && body != c.want) {
			t.Errorf("format(%q) = %s %s, want %s %s", c.md, typ, body, c.typ, c.want)
		}
		if !json.Valid([]byte(body)) {
			t.Errorf("format(%q): not JSON", c.md)
		}
	}
}

// TestProgressEditedInPlace: a turn's progress is one card, updated; the
// final answer replaces it.
func TestProgressEditedInPlace(t *testing.T) {
	fake := newFake(t)
	h := start(t, fake, Config{})
	for _, p := range []string{"thinking", "thinking harder"} {
		channeltest.Send(t, h.ch, bus.Outbound{ChatID: alice, Turn: "t1", Kind: bus.Progress, Content: p})
	}
	id := channeltest.Send(t, h.ch, bus.Outbound{ChatID: alice, Turn: "t1", Content: "done"})
	s := fake.Sent(alice)
	if len(s) != 1 || s[0].ID != id || s[0].Type != "interactive" || s[0].Edits != 2 || s[0].Text() != "done" {
		t.Errorf("sent %+v", s)
	}
}

// TestLongAnswerSplitWithoutBreakingCode: an answer past the limit goes
// in pieces, each within it, a code block never cut open.
func TestLongAnswerSplitWithoutBreakingCode(t *testing.T) {
	fake := newFake(t)
	h := start(t, fake, Config{})
	long := strings.Repeat("word ", 900) + "\n```\n" + strings.Repeat("code line\n", 100) + "```\n" + strings.Repeat("tail ", 200)
	channeltest.Send(t, h.ch, bus.Outbound{ChatID: alice, Content: long})
	s := fake.Sent(alice)
	if len(s) < 2 {
		t.Fatalf("%d pieces", len(s))
	}
	for _, m := range s {
		if n := len([]rune(m.Text())); n > MaxMessageLength+20 {
			t.Errorf("a piece of %d characters", n)
		}
		if strings.Count(m.Text(), "```")%2 != 0 {
			t.Errorf("a piece with an open code block: %.80q", m.Text())
		}
	}
}

// TestRateLimitPerChat: the platform's 429 for one chat is a RetryAfter
// of its x-ogw-ratelimit-reset, and the chat waits that long; the retry
// posts once.
func TestRateLimitPerChat(t *testing.T) {
	fake := newFake(t)
	h := start(t, fake, Config{})
	fake.Inject(feishutest.EPSend, channeltest.TooMany)
	_, err := h.ch.Send(context.Background(), bus.Outbound{Channel: Name, Kind: bus.Message, ChatID: alice, Turn: "t", Content: "hi"})
	var ra *channel.RetryAfter
	if !errors.As(err, &ra) || ra.After != time.Second {
		t.Fatalf("Send: %v", err)
	}
	begin := time.Now()
	channeltest.Send(t, h.ch, bus.Outbound{ChatID: alice, Turn: "t", Content: "hi"})
	if d := time.Since(begin); d < 900*time.Millisecond {
		t.Errorf("the retry went after %s, before the platform's second", d)
	}
	channeltest.Send(t, h.ch, bus.Outbound{ChatID: bob, Content: "not held up"})
	if s := fake.Sent(alice); len(s) != 1 {
		t.Errorf("sent %d", len(s))
	}
}

// TestRepeatedReplyPostedOnce: the same piece of the same answer sent
// again (a lost answer retried) is one message: the uuid makes the
// platform answer the first.
func TestRepeatedReplyPostedOnce(t *testing.T) {
	fake := newFake(t)
	h := start(t, fake, Config{})
	a := channeltest.Send(t, h.ch, bus.Outbound{ChatID: alice, Turn: "t9", Content: "once"})
	time.Sleep(250 * time.Millisecond)
	b := channeltest.Send(t, h.ch, bus.Outbound{ChatID: alice, Turn: "t9", Content: "once"})
	if a != b || len(fake.Sent(alice)) != 1 {
		t.Errorf("ids %s %s, %d messages", a, b, len(fake.Sent(alice)))
	}
}

func TestUndeliverable(t *testing.T) {
	fake := newFake(t)
	h := start(t, fake, Config{})
	_, err := h.ch.Send(context.Background(), bus.Outbound{Channel: Name, Kind: bus.Message, ChatID: "oc_gone", Content: "hi"})
	if !channel.IsUndeliverable(err) || !strings.Contains(err.Error(), "not in the chat") {
		t.Errorf("Send: %v", err)
	}
}

// TestHundredDisconnectsLoseNothing: a hundred connections lost, some
// with the endpoint failing or rate limiting the reconnection, and every
// message arrives once, acknowledged.
func TestHundredDisconnectsLoseNothing(t *testing.T) {
	fake := newFake(t)
	h := start(t, fake, Config{})
	const n = 100
	for i := range n {
		fake.Post(feishutest.Incoming{Sender: alice, Text: "m" + string(rune('A'+i%26)) + string(rune('a'+i/26))})
		before := fake.Connections()
		switch {
		case i%20 == 3: // the platform's wait (a second) is honoured: a few suffice
			fake.Inject(feishutest.EPEndpoint, channeltest.TooMany)
		case i%4 == 1:
			fake.Inject(feishutest.EPEndpoint, channeltest.BadGateway)
		case i%4 == 2:
			fake.Inject(feishutest.EPEndpoint, channeltest.Reset)
		}
		fake.Drop()
		wait(t, fake, "a reconnection", func() bool { return fake.Connections() > before })
	}
	got := h.in.Wait(t, n)
	waitAcked(t, fake)
	seen := map[string]bool{}
	for _, m := range got {
		seen[m.Content] = true
	}
	if len(got) != n || len(seen) != n {
		t.Errorf("%d unique messages, %d contents, want %d", len(got), len(seen), n)
	}
}

// TestRestartMidMessageLosesNothing: a message the gateway could not
// take is not acknowledged; after a restart the platform sends it again
// and it arrives, once.
func TestRestartMidMessageLosesNothing(t *testing.T) {
	fake := newFake(t)
	h := start(t, fake, Config{})
	fake.Post(feishutest.Incoming{Sender: alice, Text: "one"})
	h.in.Wait(t, 1)
	waitAcked(t, fake)
	h.in.Refuse(-1)
	fake.Post(feishutest.Incoming{Sender: alice, Text: "two"})
	time.Sleep(100 * time.Millisecond)
	h.stop()
	if fake.Unacked() != 1 {
		t.Fatalf("%d unacknowledged, want the refused one", fake.Unacked())
	}
	fake.Post(feishutest.Incoming{Sender: alice, Text: "three"})
	h2 := start(t, fake, Config{})
	h2.in.Wait(t, 2)
	waitAcked(t, fake)
	time.Sleep(100 * time.Millisecond)
	if got := h2.in.Messages(); len(got) != 2 || got[0].Content != "two" || got[1].Content != "three" {
		t.Errorf("after the restart: %+v", got)
	}
}

// TestSplitEventsJoined: an event the platform sends in pieces (out of
// order) is joined before it is read.
func TestSplitEventsJoined(t *testing.T) {
	fake := newFake(t)
	fake.Split = true
	h := start(t, fake, Config{})
	fake.Post(feishutest.Incoming{Sender: alice, Text: "a message long enough to be cut in three pieces"})
	if m := h.in.Wait(t, 1)[0]; m.Content != "a message long enough to be cut in three pieces" {
		t.Errorf("got %+v", m)
	}
	waitAcked(t, fake)
}

// TestPingsKeepTheConnection: the client pings with the service id and
// follows the interval the pongs set.
func TestPingsKeepTheConnection(t *testing.T) {
	fake := newFake(t)
	fake.PingInterval = 1
	start(t, fake, Config{})
	wait(t, fake, "three pings", func() bool { return fake.Pings() >= 3 })
}

// TestTenantTokenRefreshedBeforeExpiry: a token near its expiry is
// replaced before it is used, and one the platform calls expired is
// replaced and the call made again.
func TestTenantTokenRefreshedBeforeExpiry(t *testing.T) {
	fake := newFake(t)
	fake.TokenTTL = time.Hour
	h := start(t, fake, Config{ReactEmoji: new(string)})
	channeltest.Send(t, h.ch, bus.Outbound{ChatID: alice, Content: "one"})
	first := fake.Calls(feishutest.EPToken)
	channeltest.Send(t, h.ch, bus.Outbound{ChatID: bob, Content: "two"})
	if n := fake.Calls(feishutest.EPToken); n != first {
		t.Errorf("a valid token fetched again: %d calls, then %d", first, n)
	}
	fake.TokenTTL = 20 * time.Minute // within the refresh margin
	fake.ExpireTokens()
	channeltest.Send(t, h.ch, bus.Outbound{ChatID: alice, Content: "three"})
	second := fake.Calls(feishutest.EPToken)
	if second != first+1 {
		t.Errorf("after the platform expired the token: %d token calls, want %d", second, first+1)
	}
	time.Sleep(250 * time.Millisecond)
	channeltest.Send(t, h.ch, bus.Outbound{ChatID: alice, Content: "four"})
	if n := fake.Calls(feishutest.EPToken); n != second+1 {
		t.Errorf("a token with 20 minutes left was used: %d token calls, want %d", n, second+1)
	}
	if len(fake.Sent("")) != 4 {
		t.Errorf("sent %d", len(fake.Sent("")))
	}
}

func TestRefusedCredentials(t *testing.T) {
	fake := newFake(t)
	c := build(t, fake, Config{AppID: appID, AppSecret: "wrong-SECRETX"})
	err := c.Run(context.Background(), &channeltest.Inbox{}, func() { t.Error("ready") })
	if err == nil || !strings.Contains(err.Error(), "appSecret") || strings.Contains(err.Error(), "SECRETX") {
		t.Errorf("Run: %v", err)
	}
}

func TestConfigErrors(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{}, "appId and appSecret"},
		{Config{AppID: "a", AppSecret: "b", GroupPolicy: "all"}, "groupPolicy"},
		{Config{AppID: "a", AppSecret: "b", Domain: "larksuite"}, "domain"},
		{Config{AppID: "a", AppSecret: "b", Mode: "socket"}, "mode"},
		{Config{AppID: "a", AppSecret: "b", Mode: "webhook"}, "verificationToken"},
		{Config{AppID: "a", AppSecret: "b", Mode: "webhook", VerificationToken: "v", WebhookPath: "/ready"}, "webhookPath"},
		{Config{AppID: "a", AppSecret: "b", APIBase: "ftp://x"}, "apiBase"},
	} {
		if _, err := New(c.cfg, channel.Env{}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("New(%+v): %v, want %q", c.cfg, err, c.want)
		}
	}
}

// TestStrangersFilesNeverFetched: an image from a sender the gateway
// does not let in is not downloaded; the allowed sender's is.
func TestStrangersFilesNeverFetched(t *testing.T) {
	fake := newFake(t)
	c := build(t, fake, Config{})
	in := &channeltest.Inbox{Admit: func(m bus.Inbound) bool { return m.SenderID == alice }}
	channeltest.Start(t, c, in)
	// The files are there before the messages reach the channel (added
	// after a Post, the channel could ask for them first).
	fake.Post(feishutest.Incoming{Sender: bob, Type: "image", Content: `{"image_key":"img_bob"}`, Resources: map[string][]byte{"img_bob": []byte("junk")}})
	fake.Post(feishutest.Incoming{Sender: alice, Type: "file", Content: `{"file_key":"file_alice","file_name":"notes.txt"}`, Resources: map[string][]byte{"file_alice": []byte("notes")}})
	got := in.Wait(t, 2)
	by := map[string]bus.Inbound{}
	for _, m := range got {
		by[m.SenderID] = m
	}
	if m := by[bob]; len(m.Media) != 0 || m.Content != "[image]" {
		t.Errorf("the stranger's message: %+v", m)
	}
	m := by[alice]
	if len(m.Media) != 1 {
		t.Fatalf("the allowed sender's message: %+v", m)
	}
	if b, _ := os.ReadFile(m.Media[0]); string(b) != "notes" || !strings.HasPrefix(m.Media[0], filepath.Join(c.env.Workspace, "media", Name)) {
		t.Errorf("stored %s: %q", m.Media[0], b)
	}
	if n := fake.Calls(feishutest.EPResource); n != 1 {
		t.Errorf("%d downloads", n)
	}
}

// TestFilesSent: an answer's image goes as an image message, a document
// as a file message, after its text.
func TestFilesSent(t *testing.T) {
	fake := newFake(t)
	h := start(t, fake, Config{})
	os.WriteFile(filepath.Join(h.ws, "chart.png"), []byte("\x89PNG\r\n\x1a\nxx"), 0o600) //nolint:errcheck // checked by the send
	os.WriteFile(filepath.Join(h.ws, "report.pdf"), []byte("%PDF-1.4"), 0o600)           //nolint:errcheck // checked by the send
	channeltest.Send(t, h.ch, bus.Outbound{ChatID: group, Content: "here", Media: []string{"chart.png", "report.pdf"}})
	s := fake.Sent(group)
	if len(s) != 3 || s[0].Text() != "here" || s[1].Type != "image" || s[2].Type != "file" {
		t.Fatalf("sent %+v", s)
	}
	up := fake.Uploads()
	if len(up) != 2 || up[0].Name != "chart.png" || !bytes.HasPrefix(up[0].Data, []byte("\x89PNG")) || !strings.Contains(s[1].Content, up[0].Key) {
		t.Errorf("uploads %+v", up)
	}
}

// TestEventCallback: the webhook mode answers the URL check, refuses a
// request without the verification token, decrypts an encrypted event,
// refuses a wrong signature, and answers an event only once the gateway
// holds it.
func TestEventCallback(t *testing.T) {
	fake := newFake(t)
	const token, key = "v-TOKEN-feishu-verify", "e-KEY-feishu-encrypt"
	c := build(t, fake, Config{Mode: "webhook", VerificationToken: token, EncryptKey: key})
	if c.WebhookPath() != "/feishu/events" {
		t.Fatalf("path %q", c.WebhookPath())
	}
	in := &channeltest.Inbox{}
	channeltest.Start(t, c, in)
	srv := httptest.NewServer(c)
	defer srv.Close()
	iv := []byte("0123456789abcdef")
	post := func(plain []byte, sign bool, wrongSig bool) (*http.Response, string) {
		body, _ := json.Marshal(map[string]string{"encrypt": Encrypt(plain, key, iv)})
		req, _ := http.NewRequest(http.MethodPost, srv.URL, bytes.NewReader(body))
		if sign {
			sig := Signature("1700000000", "n1", key, body)
			if wrongSig {
				sig = Signature("1700000000", "n1", "other", body)
			}
			req.Header.Set("X-Lark-Request-Timestamp", "1700000000")
			req.Header.Set("X-Lark-Request-Nonce", "n1")
			req.Header.Set("X-Lark-Signature", sig)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out bytes.Buffer
		out.ReadFrom(resp.Body) //nolint:errcheck // compared below
		return resp, out.String()
	}
	resp, body := post([]byte(`{"challenge":"ch-42","token":"`+token+`","type":"url_verification"}`), false, false)
	if resp.StatusCode != 200 || !strings.Contains(body, `"challenge":"ch-42"`) {
		t.Errorf("url_verification: %d %s", resp.StatusCode, body)
	}
	if resp, _ := post([]byte(`{"challenge":"x","token":"wrong","type":"url_verification"}`), false, false); resp.StatusCode != 401 {
		t.Errorf("a wrong token: %d", resp.StatusCode)
	}
	plainReq, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(`{"challenge":"x","token":"`+token+`","type":"url_verification"}`))
	if resp, _ := http.DefaultClient.Do(plainReq); resp.StatusCode != 401 {
		t.Errorf("an unencrypted request: %d", resp.StatusCode)
	}
	_, ev := fake.Event(feishutest.Incoming{Sender: alice, Text: "by callback"}, token)
	if resp, _ := post(ev, true, true); resp.StatusCode != 401 {
		t.Errorf("a wrong signature: %d", resp.StatusCode)
	}
	in.Refuse(1)
	if resp, _ := post(ev, true, false); resp.StatusCode != 503 {
		t.Errorf("an event the gateway could not take: %d", resp.StatusCode)
	}
	if resp, _ := post(ev, true, false); resp.StatusCode != 200 {
		t.Errorf("the event: %d", resp.StatusCode)
	}
	if m := in.Wait(t, 1)[0]; m.Content != "by callback" || m.SenderID != alice {
		t.Errorf("published %+v", m)
	}
	_, other := fake.Event(feishutest.Incoming{Sender: alice, Text: "forged"}, "not-the-token")
	if resp, _ := post(other, true, false); resp.StatusCode != 401 {
		t.Errorf("an event with another token: %d", resp.StatusCode)
	}
}

// TestConnectionErrorHidesTicket: a long connection that cannot open is
// logged without its address's query, which carries the ticket.
func TestConnectionErrorHidesTicket(t *testing.T) {
	fake := newFake(t)
	c := build(t, fake, Config{})
	err := c.connect(context.Background(), &channeltest.Inbox{}, endpoint{URL: "ws://127.0.0.1:1/ws?service_id=7&ticket=TICKET-secret"}, func() { t.Error("connected") })
	if err == nil || strings.Contains(err.Error(), "TICKET") || !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Errorf("connect: %v", err)
	}
}

// FuzzEvent: no event the platform (or someone else, on the callback)
// sends makes the parsers panic.
func FuzzEvent(f *testing.F) {
	fake := feishutest.New(appID, appSecret)
	defer fake.Close()
	_, ev := fake.Event(feishutest.Incoming{Sender: alice, Chat: group, Text: "hi", MentionBot: true}, "")
	f.Add(ev, `{"zh_cn":{"title":"t","content":[[{"tag":"text","text":"a"},{"tag":"img","image_key":"k"}]]}}`)
	f.Add([]byte(`{"encrypt":"AAAA"}`), `{"content":[[{"tag":"a","text":"x","href":"y"}]]}`)
	c, err := New(Config{AppID: appID, AppSecret: appSecret, APIBase: "http://127.0.0.1:1"}, channel.Env{})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, payload []byte, post string) {
		postText(post)
		Decrypt(string(payload), "k") //nolint:errcheck // only panics matter
		var env envelope
		if json.Unmarshal(payload, &env) == nil {
			c.inbound(context.Background(), &channeltest.Inbox{Admit: func(bus.Inbound) bool { return false }}, env)
		}
	})
}

// TestPacedPerChat: seven messages to one chat in a row keep within the
// platform's five a second (the fake refuses a sixth within a second),
// and another chat is not held up by them.
func TestPacedPerChat(t *testing.T) {
	fake := newFake(t)
	h := start(t, fake, Config{})
	for i := range 7 {
		channeltest.Send(t, h.ch, bus.Outbound{ChatID: alice, Content: "n" + string(rune('0'+i))})
	}
	begin := time.Now()
	channeltest.Send(t, h.ch, bus.Outbound{ChatID: bob, Content: "other"})
	if d := time.Since(begin); d > 150*time.Millisecond {
		t.Errorf("another chat waited %s", d)
	}
	if n := len(fake.Sent(alice)); n != 7 {
		t.Errorf("%d sent", n)
	}
}

// TestStatus: the channel reports connected once it receives, and
// connecting, with why, when the platform is gone.
func TestStatus(t *testing.T) {
	fake := newFake(t)
	h := start(t, fake, Config{})
	channeltest.CheckStatus(t, h.ch, fake.Close)
}

// TestResetWait: x-ogw-ratelimit-reset is the wait, a second when it names
// none, and at most maxRetryAfter (it overflowed into a negative wait).
func TestResetWait(t *testing.T) {
	for h, want := range map[string]time.Duration{
		"3": 3 * time.Second, "": time.Second, "0": time.Second, "-2": time.Second, "soon": time.Second,
		"99999999999": maxRetryAfter, "9223372036854775807": maxRetryAfter,
	} {
		if got := resetWait(h); got != want {
			t.Errorf("x-ogw-ratelimit-reset %q: %v, want %v", h, got, want)
		}
	}
}
