package qq

import (
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
	"github.com/nbots/nb/gateway/channel/qq/qqtest"
)

const (
	appID  = "102030405"
	secret = "qqSecret0123456789abcdef"
)

type harness struct {
	fake *qqtest.Server
	env  channel.Env
	ch   *Channel
	in   *channeltest.Inbox
	stop func()
}

func newFake(t *testing.T) *qqtest.Server {
	t.Helper()
	f, err := qqtest.New(appID, secret)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	return f
}

// start runs a channel against fake; env's folders are kept when given
// (a restart).
func start(t *testing.T, fake *qqtest.Server, env channel.Env, in *channeltest.Inbox, cfg Config) *harness {
	t.Helper()
	log, _ := channeltest.Logger(t, secret, "tok-0")
	env.Logger = log
	env = channeltest.Folders(t, env)
	cfg.AppID, cfg.Secret, cfg.APIBase = appID, secret, fake.URL
	c, err := New(cfg, env)
	if err != nil {
		t.Fatal(err)
	}
	c.retryBase = time.Millisecond
	if in == nil {
		in = &channeltest.Inbox{}
	}
	h := &harness{fake: fake, env: env, ch: c, in: in}
	h.stop = channeltest.Start(t, c, in)
	return h
}

// TestDirectMessage: a one-to-one message reaches the gateway with the
// user's openid; the answer is a passive reply naming it, each piece
// with its own msg_seq.
func TestDirectMessage(t *testing.T) {
	fake := newFake(t)
	h := start(t, fake, channel.Env{}, nil, Config{})
	if fake.Intents() != Intents {
		t.Errorf("identified with intents %d", fake.Intents())
	}
	said := fake.Say(qqtest.Message{User: "OPENID-ANN", Content: " hello "})
	m := h.in.Wait(t, 1)[0]
	if m.Channel != Name || m.SenderID != "OPENID-ANN" || m.ChatID != "OPENID-ANN" || m.Content != "hello" || m.ID != said.ID {
		t.Errorf("%+v", m)
	}
	if m.Metadata["group"] != false || m.Metadata["mentioned"] != true {
		t.Errorf("metadata %v", m.Metadata)
	}
	channeltest.Send(t, h.ch, bus.Outbound{ChatID: m.ChatID, Content: "Hi there", ReplyTo: m.ID})
	channeltest.Send(t, h.ch, bus.Outbound{ChatID: m.ChatID, Content: "and more", ReplyTo: m.ID})
	s := fake.Sent("OPENID-ANN")
	if len(s) != 2 || s[0].Content != "Hi there" || s[0].ReplyTo != said.ID || s[0].Seq != 1 || s[1].Seq != 2 || s[0].MsgType != 0 {
		t.Errorf("sent %+v", s)
	}
}

// TestGroupMessage: QQ hands the bot only the group messages that @ it;
// they are answered in the group.
func TestGroupMessage(t *testing.T) {
	fake := newFake(t)
	h := start(t, fake, channel.Env{}, nil, Config{MsgFormat: "markdown"})
	said := fake.Say(qqtest.Message{User: "MEMBER-ANN", Group: "GROUP-1", Content: " what is 2+2?"})
	m := h.in.Wait(t, 1)[0]
	if m.ChatID != "group:GROUP-1" || m.SenderID != "MEMBER-ANN" || m.Metadata["group"] != true || m.Metadata["mentioned"] != true || m.Content != "what is 2+2?" {
		t.Errorf("%+v", m)
	}
	channeltest.Send(t, h.ch, bus.Outbound{ChatID: m.ChatID, Content: "**4**", ReplyTo: m.ID})
	if s := fake.Sent("group:GROUP-1"); len(s) != 1 || s[0].MsgType != 2 || s[0].Content != "**4**" || s[0].ReplyTo != said.ID {
		t.Errorf("sent %+v", s)
	}
}

// TestRepliesBeyondTheLimitGoActive: a message takes five replies; the
// sixth goes as an active message rather than being refused.
func TestRepliesBeyondTheLimitGoActive(t *testing.T) {
	fake := newFake(t)
	h := start(t, fake, channel.Env{}, nil, Config{})
	said := fake.Say(qqtest.Message{User: "OPENID-ANN", Content: "talk"})
	h.in.Wait(t, 1)
	for range 6 {
		channeltest.Send(t, h.ch, bus.Outbound{ChatID: "OPENID-ANN", Content: "x", ReplyTo: said.ID})
	}
	s := fake.Sent("OPENID-ANN")
	if len(s) != 6 || s[4].ReplyTo != said.ID || s[4].Seq != 5 || s[5].ReplyTo != "" {
		t.Errorf("sent %+v", s)
	}
}

// TestLostAnswerSendsOnce: a reply whose answer was lost is sent again
// with the same msg_seq; QQ calls it a duplicate, and the channel counts
// it as sent: one message, not two.
func TestLostAnswerSendsOnce(t *testing.T) {
	fake := newFake(t)
	h := start(t, fake, channel.Env{}, nil, Config{})
	said := fake.Say(qqtest.Message{User: "OPENID-ANN", Content: "talk"})
	h.in.Wait(t, 1)
	// The first try is carried out, then its answer lost: emulate by
	// sending the same reply twice with the channel's counters unmoved.
	m := bus.Outbound{Kind: bus.Message, ChatID: "OPENID-ANN", Content: "once", ReplyTo: said.ID}
	id, seq, _ := h.ch.replyTo(m.ChatID, m.ReplyTo)
	if _, err := h.ch.post(context.Background(), m.ChatID, m.ReplyTo, map[string]any{"msg_type": 0, "content": "once"}); err != nil {
		t.Fatal(err)
	}
	h.ch.mu.Lock()
	h.ch.byID[id].replies = seq - 1 // the answer never arrived
	h.ch.mu.Unlock()
	channeltest.Send(t, h.ch, m)
	if s := fake.Sent("OPENID-ANN"); len(s) != 1 {
		t.Errorf("sent %d times: %+v", len(s), s)
	}
}

// TestFaultsLoseNothing: 100 dropped connections, reconnect requests,
// unanswered heartbeats and failed gateway requests; every message
// arrives once, resumed from the last durable sequence.
func TestFaultsLoseNothing(t *testing.T) {
	fake := newFake(t)
	h := start(t, fake, channel.Env{}, nil, Config{})
	const n = 100
	for i := range n {
		fake.Say(qqtest.Message{User: "OPENID-ANN", Content: "m" + string(rune('A'+i%26)) + string(rune('a'+i/26))})
		before := fake.Identifies() + fake.Resumes()
		switch i % 5 {
		case 0:
			fake.Reconnect()
		case 1:
			fake.Inject(qqtest.Gateway, channeltest.BadGateway, channeltest.Reset)
			fake.Drop()
		case 2:
			fake.CloseWith(4009, "session timed out")
		case 3:
			fake.Inject(qqtest.Token, channeltest.TooMany)
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
	seen := map[string]bool{}
	for _, m := range got {
		seen[m.Content] = true
	}
	if len(got) != n || len(seen) != n {
		t.Errorf("%d unique messages, %d contents, want %d", len(got), len(seen), n)
	}
	if fake.Identifies() != 1 {
		t.Errorf("%d identifies: every reconnection should have resumed", fake.Identifies())
	}
}

// TestSilentConnectionReplaced: a connection whose heartbeats go
// unanswered is replaced, and the session resumed.
func TestSilentConnectionReplaced(t *testing.T) {
	fake := newFake(t)
	h := start(t, fake, channel.Env{}, nil, Config{})
	fake.Silence(true)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	time.Sleep(700 * time.Millisecond) // beats at 200 ms: two go unanswered
	fake.Silence(false)
	if err := fake.WaitConnected(ctx, 2); err != nil {
		t.Fatal(err)
	}
	fake.Say(qqtest.Message{User: "OPENID-ANN", Content: "still there?"})
	h.in.Wait(t, 1)
}

// TestInvalidSessionIdentifiesAnew: a session QQ no longer knows is
// replaced by a new one.
func TestInvalidSessionIdentifiesAnew(t *testing.T) {
	fake := newFake(t)
	h := start(t, fake, channel.Env{}, nil, Config{})
	fake.ForgetSessions()
	fake.Drop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for fake.Identifies() < 2 && ctx.Err() == nil {
		time.Sleep(10 * time.Millisecond)
	}
	if fake.Identifies() != 2 {
		t.Fatalf("%d identifies", fake.Identifies())
	}
	fake.Say(qqtest.Message{User: "OPENID-ANN", Content: "new session"})
	if m := h.in.Wait(t, 1)[0]; m.Content != "new session" {
		t.Errorf("%+v", m)
	}
}

// TestRestartLosesNothing: a message the gateway could not take when the
// channel stopped, and one sent while it was down, reach the next run
// (which resumes the saved session), once each.
func TestRestartLosesNothing(t *testing.T) {
	fake := newFake(t)
	h := start(t, fake, channel.Env{}, nil, Config{})
	fake.Say(qqtest.Message{User: "OPENID-ANN", Content: "one"})
	h.in.Wait(t, 1)
	h.in.Refuse(-1)
	fake.Say(qqtest.Message{User: "OPENID-ANN", Content: "two"})
	time.Sleep(100 * time.Millisecond)
	h.stop()
	fake.Say(qqtest.Message{User: "OPENID-ANN", Content: "three"})
	h2 := start(t, fake, h.env, nil, Config{})
	h2.in.Wait(t, 2)
	time.Sleep(100 * time.Millisecond)
	if got := h2.in.Unique(); len(got) != 2 || got[0].Content != "two" || got[1].Content != "three" {
		t.Errorf("after the restart: %+v", got)
	}
	if fake.Resumes() == 0 {
		t.Error("the restart did not resume the session")
	}
}

// TestThrottled: QQ's 429 waits that chat, not the others.
func TestThrottled(t *testing.T) {
	fake := newFake(t)
	h := start(t, fake, channel.Env{}, nil, Config{})
	a := fake.Say(qqtest.Message{User: "OPENID-ANN", Content: "x"})
	b := fake.Say(qqtest.Message{User: "OPENID-BOB", Content: "y"})
	h.in.Wait(t, 2)
	fake.SetInterval(time.Second)
	channeltest.Send(t, h.ch, bus.Outbound{ChatID: "OPENID-ANN", Content: "one", ReplyTo: a.ID})
	_, err := h.ch.Send(context.Background(), bus.Outbound{Kind: bus.Message, ChatID: "OPENID-ANN", Content: "two", ReplyTo: a.ID})
	var ra *channel.RetryAfter
	if !errors.As(err, &ra) || ra.After != time.Second {
		t.Fatalf("a throttled send: %v", err)
	}
	t0 := time.Now()
	channeltest.Send(t, h.ch, bus.Outbound{ChatID: "OPENID-BOB", Content: "other", ReplyTo: b.ID})
	if d := time.Since(t0); d > 300*time.Millisecond {
		t.Errorf("another chat waited %s", d)
	}
	channeltest.Send(t, h.ch, bus.Outbound{ChatID: "OPENID-ANN", Content: "two", ReplyTo: a.ID})
	if d := time.Since(t0); d < 700*time.Millisecond {
		t.Errorf("the throttled chat was sent to after %s", d)
	}
	if s := fake.Sent("OPENID-ANN"); len(s) != 2 || s[1].Content != "two" || s[1].Seq != 2 {
		t.Errorf("sent %+v", s)
	}
}

// TestUndeliverable: a refused reply (a chat the message is not from)
// is undeliverable, with QQ's code.
func TestUndeliverable(t *testing.T) {
	fake := newFake(t)
	h := start(t, fake, channel.Env{}, nil, Config{})
	said := fake.Say(qqtest.Message{User: "OPENID-ANN", Content: "x"})
	h.in.Wait(t, 1)
	_, err := h.ch.Send(context.Background(), bus.Outbound{Kind: bus.Message, ChatID: "group:ELSEWHERE", Content: "hi", ReplyTo: said.ID})
	if !channel.IsUndeliverable(err) || !strings.Contains(err.Error(), "40034024") {
		t.Errorf("%v", err)
	}
}

// TestRefusedCredentials: a wrong secret is a final error naming the
// keys, not the secret.
func TestRefusedCredentials(t *testing.T) {
	fake := newFake(t)
	c, err := New(Config{AppID: appID, Secret: "wrong-secretXYZ", APIBase: fake.URL}, channeltest.Folders(t, channel.Env{}))
	if err != nil {
		t.Fatal(err)
	}
	err = c.Run(context.Background(), &channeltest.Inbox{}, func() { t.Error("ready") })
	if err == nil || !strings.Contains(err.Error(), "channels.qq.appId and secret") || strings.Contains(err.Error(), "secretXYZ") {
		t.Errorf("Run: %v", err)
	}
}

// TestBannedBotStops: the gateway's close codes that no reconnection
// cures end Run with an error.
func TestBannedBotStops(t *testing.T) {
	fake := newFake(t)
	c, err := New(Config{AppID: appID, Secret: secret, APIBase: fake.URL}, channeltest.Folders(t, channel.Env{}))
	if err != nil {
		t.Fatal(err)
	}
	c.retryBase = time.Millisecond
	errc := make(chan error, 1)
	go func() {
		errc <- c.Run(context.Background(), &channeltest.Inbox{}, func() { fake.CloseWith(4915, "banned") })
	}()
	select {
	case err := <-errc:
		if err == nil || !strings.Contains(err.Error(), "banned") {
			t.Errorf("Run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run went on after a ban")
	}
}

func TestConfigErrors(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{Secret: "s"}, "appId and secret"},
		{Config{AppID: "1"}, "appId and secret"},
		{Config{AppID: "1", Secret: "s", MsgFormat: "html"}, "msgFormat"},
		{Config{AppID: "1", Secret: "s", APIBase: "ftp://x"}, "apiBase"},
	} {
		if _, err := New(c.cfg, channel.Env{}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v", c.cfg, err)
		}
	}
}

// TestFilesBothWays: an allowed person's attachment is downloaded, a
// stranger's is not; the bot's files are uploaded and sent as media
// replies.
func TestFilesBothWays(t *testing.T) {
	fake := newFake(t)
	in := &channeltest.Inbox{Admit: func(m bus.Inbound) bool { return m.SenderID == "OPENID-ANN" }}
	h := start(t, fake, channel.Env{}, in, Config{})
	mine := fake.AddFile("photo.jpg", "image/jpeg", []byte("jpeg bytes"))
	said := fake.Say(qqtest.Message{User: "OPENID-ANN", Content: "see", Attachments: []qqtest.Attachment{mine}})
	theirs := fake.AddFile("junk.bin", "application/octet-stream", []byte("junk"))
	fake.Say(qqtest.Message{User: "OPENID-EVE", Content: "take", Attachments: []qqtest.Attachment{theirs}})
	got := h.in.Wait(t, 2)
	if len(got[0].Media) != 1 {
		t.Fatalf("the allowed person's message: %+v", got[0])
	}
	if b, err := os.ReadFile(got[0].Media[0]); err != nil || string(b) != "jpeg bytes" {
		t.Errorf("stored %q, %v", b, err)
	}
	if len(got[1].Media) != 0 || got[1].Content != "take" {
		t.Errorf("the stranger's message: %+v", got[1])
	}
	entries, _ := os.ReadDir(filepath.Join(h.env.Workspace, "media", "qq"))
	if len(entries) != 1 {
		t.Errorf("stored %v", entries)
	}
	out := filepath.Join(h.env.Workspace, "report.pdf")
	if err := os.WriteFile(out, []byte("%PDF-1.4 report"), 0o600); err != nil {
		t.Fatal(err)
	}
	channeltest.Send(t, h.ch, bus.Outbound{ChatID: "OPENID-ANN", Content: "here", Media: []string{out}, ReplyTo: said.ID})
	s := fake.Sent("OPENID-ANN")
	if len(s) != 2 || s[1].MsgType != 7 || string(s[1].File) != "%PDF-1.4 report" || s[1].ReplyTo != said.ID || s[1].Seq != 2 {
		t.Errorf("sent %+v", s)
	}
}

// TestTokenRefusedByGatewayRenewed: the gateway's 4004 (a token it no
// longer takes) makes the channel fetch another token and resume.
func TestTokenRefusedByGatewayRenewed(t *testing.T) {
	fake := newFake(t)
	h := start(t, fake, channel.Env{}, nil, Config{})
	before := fake.Calls(qqtest.Token)
	fake.CloseWith(4004, "invalid token")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := fake.WaitConnected(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if n := fake.Calls(qqtest.Token); n != before+1 {
		t.Errorf("%d token requests after the 4004, want 1", n-before)
	}
	fake.Say(qqtest.Message{User: "OPENID-ANN", Content: "still here"})
	h.in.Wait(t, 1)
}

// TestStatus: the channel reports connected once it receives, and
// connecting, with why, when the platform is gone.
func TestStatus(t *testing.T) {
	fake := newFake(t)
	h := start(t, fake, channel.Env{}, &channeltest.Inbox{}, Config{})
	channeltest.CheckStatus(t, h.ch, fake.Close)
}
