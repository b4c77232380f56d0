package dingtalk

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
	"github.com/nbots/nb/gateway/channel/dingtalk/dingtalktest"
)

const (
	clientID     = "dingabcdef123"
	clientSecret = "secretSEC-0123456789"
)

type harness struct {
	fake *dingtalktest.Server
	env  channel.Env
	ch   *Channel
	in   *channeltest.Inbox
	stop func()
}

func newFake(t *testing.T) *dingtalktest.Server {
	t.Helper()
	f, err := dingtalktest.New(clientID, clientSecret)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	return f
}

func start(t *testing.T, fake *dingtalktest.Server, in *channeltest.Inbox) *harness {
	t.Helper()
	log, _ := channeltest.Logger(t, clientSecret, "signed-secret", "at-0")
	env := channeltest.Folders(t, channel.Env{Logger: log})
	c, err := New(Config{ClientID: clientID, ClientSecret: clientSecret, APIBase: fake.URL}, env)
	if err != nil {
		t.Fatal(err)
	}
	c.retryBase, c.throttled = time.Millisecond, 10*time.Millisecond
	if in == nil {
		in = &channeltest.Inbox{}
	}
	h := &harness{fake: fake, env: env, ch: c, in: in}
	h.stop = channeltest.Start(t, c, in)
	return h
}

func waitAcked(t *testing.T, fake *dingtalktest.Server) {
	t.Helper()
	for i := 0; fake.Unacked() > 0; i++ {
		if i > 1000 {
			t.Fatalf("%d messages never acknowledged", fake.Unacked())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func ann(text string) dingtalktest.Message {
	return dingtalktest.Message{SenderStaffID: "staff-ann", SenderID: "$:LWCP_v1:$ann", SenderNick: "Ann", Text: &dingtalktest.Text{Content: text}}
}

// TestDirectMessage: a one-to-one message reaches the gateway as the
// staff id's chat, is acknowledged, and is answered by its session
// webhook; once the webhook has expired, by the robot API.
func TestDirectMessage(t *testing.T) {
	fake := newFake(t)
	h := start(t, fake, nil)
	said := fake.Say(ann(" hello "))
	m := h.in.Wait(t, 1)[0]
	if m.Channel != Name || m.SenderID != "staff-ann" || m.ChatID != "staff-ann" || m.Content != "hello" || m.ID != said.MsgID {
		t.Errorf("%+v", m)
	}
	if m.Metadata["group"] != false || m.Metadata["mentioned"] != true || m.Metadata["sender_name"] != "Ann" {
		t.Errorf("metadata %v", m.Metadata)
	}
	waitAcked(t, fake)
	channeltest.Send(t, h.ch, bus.Outbound{ChatID: m.ChatID, Content: "Hi **there**"})
	fake.ExpireWebhooks()
	channeltest.Send(t, h.ch, bus.Outbound{ChatID: m.ChatID, Content: "again"})
	channeltest.Send(t, h.ch, bus.Outbound{ChatID: m.ChatID, Content: "and again"})
	s := fake.Sent("staff-ann")
	if len(s) != 3 || s[0].Via != "webhook" || s[0].Text != "Hi **there**" || s[1].Via != "api" || s[1].Key != "sampleMarkdown" || s[1].Text != "again" || s[2].Via != "api" {
		t.Errorf("sent %+v", s)
	}
}

// TestGroupMentionRule: a group message says whether it called the
// robot (isInAtList); the answer goes to the group.
func TestGroupMentionRule(t *testing.T) {
	fake := newFake(t)
	h := start(t, fake, nil)
	chatter := ann("lunch?")
	chatter.ConversationType, chatter.ConversationID = "2", "cidGROUP1"
	fake.Say(chatter)
	asked := ann("what is 2+2?")
	asked.ConversationType, asked.ConversationID, asked.IsInAtList = "2", "cidGROUP1", true
	fake.Say(asked)
	got := h.in.Wait(t, 2)
	if got[0].ChatID != "group:cidGROUP1" || got[0].Metadata["group"] != true || got[0].Metadata["mentioned"] != false {
		t.Errorf("chatter: %+v", got[0])
	}
	if got[1].Metadata["mentioned"] != true || got[1].SenderID != "staff-ann" {
		t.Errorf("mention: %+v", got[1])
	}
	channeltest.Send(t, h.ch, bus.Outbound{ChatID: "group:cidGROUP1", Content: "4"})
	fake.ExpireWebhooks()
	channeltest.Send(t, h.ch, bus.Outbound{ChatID: "group:cidGROUP1", Content: "still 4"})
	if s := fake.Sent("group:cidGROUP1"); len(s) != 2 || s[0].Via != "webhook" || s[1].Via != "api" || s[1].Text != "still 4" {
		t.Errorf("sent %+v", s)
	}
}

// TestPingsAnswered: the gateway's SYSTEM pings are answered with their
// own data, even while a message waits for the gateway to take it.
func TestPingsAnswered(t *testing.T) {
	fake := newFake(t)
	in := &channeltest.Inbox{}
	h := start(t, fake, in)
	// The fake takes the socket in after the handshake the channel saw.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := fake.WaitConnected(ctx, 1); err != nil {
		t.Fatal(err)
	}
	in.Refuse(-1)
	fake.Say(ann("stuck for now"))
	for range 3 {
		fake.Ping()
	}
	deadline := time.Now().Add(5 * time.Second)
	for fake.Pongs() < 3 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if p := fake.Pongs(); p != 3 {
		t.Errorf("%d pings answered, want 3", p)
	}
	if fake.Unacked() != 1 {
		t.Errorf("a message the gateway did not take was acknowledged")
	}
	in.Refuse(0)
	h.in.Wait(t, 1)
	waitAcked(t, fake)
}

// TestHundredDisconnectsLoseNothing: disconnect notices, dropped sockets
// and failed ticket requests; every message arrives once.
func TestHundredDisconnectsLoseNothing(t *testing.T) {
	fake := newFake(t)
	h := start(t, fake, nil)
	const n = 100
	for i := range n {
		fake.Say(ann("m" + string(rune('A'+i%26)) + string(rune('a'+i/26))))
		before := fake.Connections()
		switch i % 4 {
		case 0:
			fake.Disconnect()
		case 1:
			fake.Inject(dingtalktest.Open, channeltest.BadGateway, channeltest.Reset)
			fake.Drop()
		case 2:
			fake.Inject(dingtalktest.Open, channeltest.TooMany)
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
	seen := map[string]bool{}
	for _, m := range got {
		seen[m.Content] = true
	}
	if len(got) != n || len(seen) != n {
		t.Errorf("%d unique messages, %d contents, want %d", len(got), len(seen), n)
	}
}

// TestRestartLosesNothing: a message the gateway could not take when
// the channel stopped is delivered to the next run, once.
func TestRestartLosesNothing(t *testing.T) {
	fake := newFake(t)
	h := start(t, fake, nil)
	fake.Say(ann("one"))
	h.in.Wait(t, 1)
	waitAcked(t, fake)
	h.in.Refuse(-1) // the gateway cannot take the next one: it stays unacknowledged
	fake.Say(ann("two"))
	time.Sleep(100 * time.Millisecond)
	h.stop()
	fake.Say(ann("three"))
	h2 := start(t, fake, nil)
	h2.in.Wait(t, 2)
	waitAcked(t, fake)
	time.Sleep(100 * time.Millisecond)
	if got := h2.in.Unique(); len(got) != 2 || got[0].Content != "two" || got[1].Content != "three" {
		t.Errorf("after the restart: %+v", got)
	}
}

// TestThrottled: DingTalk's QPS refusal waits that chat, not the others.
func TestThrottled(t *testing.T) {
	fake := newFake(t)
	h := start(t, fake, nil)
	fake.Say(ann("x"))
	bob := ann("y")
	bob.SenderStaffID = "staff-bob"
	fake.Say(bob)
	h.in.Wait(t, 2)
	fake.ExpireWebhooks()
	fake.SetInterval(time.Second)
	channeltest.Send(t, h.ch, bus.Outbound{ChatID: "staff-ann", Content: "one"})
	_, err := h.ch.Send(context.Background(), bus.Outbound{Kind: bus.Message, ChatID: "staff-ann", Content: "two"})
	var ra *channel.RetryAfter
	if !errors.As(err, &ra) || ra.After != time.Second {
		t.Fatalf("a throttled send: %v", err)
	}
	t0 := time.Now()
	channeltest.Send(t, h.ch, bus.Outbound{ChatID: "staff-bob", Content: "other"})
	if d := time.Since(t0); d > 300*time.Millisecond {
		t.Errorf("another chat waited %s", d)
	}
	channeltest.Send(t, h.ch, bus.Outbound{ChatID: "staff-ann", Content: "two"})
	if d := time.Since(t0); d < 700*time.Millisecond {
		t.Errorf("the throttled chat was sent to after %s", d)
	}
	if s := fake.Sent("staff-ann"); len(s) != 2 || s[1].Text != "two" {
		t.Errorf("sent %+v", s)
	}
}

// TestSplitAnswerRetriedSendsTheRest: a long answer goes in pieces of at
// most MaxMessageLength; a piece refused by throttling is sent again,
// and none of those before it twice.
func TestSplitAnswerRetriedSendsTheRest(t *testing.T) {
	fake := newFake(t)
	h := start(t, fake, nil)
	fake.Say(ann("x"))
	h.in.Wait(t, 1)
	fake.ExpireWebhooks()
	var b strings.Builder
	for i := range 300 {
		b.WriteString(strings.Repeat("word ", 5) + string(rune('a'+i%26)) + "\n")
	}
	m := bus.Outbound{Kind: bus.Message, ChatID: "staff-ann", Content: b.String(), Turn: "t1"}
	fake.Inject(dingtalktest.Robot, 0, channeltest.TooMany)
	_, err := h.ch.Send(context.Background(), m)
	var ra *channel.RetryAfter
	if !errors.As(err, &ra) {
		t.Fatalf("want a retry: %v", err)
	}
	time.Sleep(ra.After)
	channeltest.Send(t, h.ch, m)
	s := fake.Sent("staff-ann")
	var joined strings.Builder
	for _, p := range s {
		if len([]rune(p.Text)) > MaxMessageLength {
			t.Errorf("a piece of %d characters", len([]rune(p.Text)))
		}
		joined.WriteString(p.Text + "\n")
	}
	if len(s) < 3 || strings.Count(joined.String(), "word") != 1500 {
		t.Errorf("%d pieces, %d words", len(s), strings.Count(joined.String(), "word"))
	}
}

// TestUndeliverable: a group the robot is not in cannot be sent to.
func TestUndeliverable(t *testing.T) {
	fake := newFake(t)
	h := start(t, fake, nil)
	_, err := h.ch.Send(context.Background(), bus.Outbound{Kind: bus.Message, ChatID: "group:cidNOWHERE", Content: "hi"})
	if !channel.IsUndeliverable(err) || !strings.Contains(err.Error(), "resource.not.found") {
		t.Errorf("unknown group: %v", err)
	}
}

// TestRefusedCredentials: a wrong secret is a final error that names the
// keys to check and not the secret.
func TestRefusedCredentials(t *testing.T) {
	fake := newFake(t)
	c, err := New(Config{ClientID: clientID, ClientSecret: "wrong-secretXYZ", APIBase: fake.URL}, channel.Env{})
	if err != nil {
		t.Fatal(err)
	}
	err = c.Run(context.Background(), &channeltest.Inbox{}, func() { t.Error("ready") })
	if err == nil || !strings.Contains(err.Error(), "clientSecret") || strings.Contains(err.Error(), "secretXYZ") {
		t.Errorf("Run: %v", err)
	}
}

func TestConfigErrors(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{ClientSecret: "s"}, "clientId and clientSecret"},
		{Config{ClientID: "id"}, "clientId and clientSecret"},
		{Config{ClientID: "id", ClientSecret: "s", APIBase: "ftp://x"}, "apiBase"},
	} {
		if _, err := New(c.cfg, channel.Env{}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v", c.cfg, err)
		}
	}
}

// TestFilesBothWays: an allowed person's file is downloaded into the
// workspace, a stranger's is not fetched at all; the robot's files go by
// the media upload and the robot API.
func TestFilesBothWays(t *testing.T) {
	fake := newFake(t)
	in := &channeltest.Inbox{Admit: func(m bus.Inbound) bool { return m.SenderID == "staff-ann" }}
	h := start(t, fake, in)
	code := fake.AddFile([]byte("quarterly numbers"))
	mine := ann("")
	mine.Text, mine.MsgType, mine.Content = nil, "file", &dingtalktest.Content{DownloadCode: code, FileName: "report.txt"}
	fake.Say(mine)
	evil := fake.AddFile([]byte("junk"))
	theirs := dingtalktest.Message{SenderStaffID: "staff-eve", MsgType: "picture", Content: &dingtalktest.Content{DownloadCode: evil}, Text: &dingtalktest.Text{Content: "look"}}
	fake.Say(theirs)
	got := h.in.Wait(t, 2)
	if len(got[0].Media) != 1 || !strings.Contains(got[0].Content, "[file: ") {
		t.Fatalf("the allowed person's file: %+v", got[0])
	}
	if b, err := os.ReadFile(got[0].Media[0]); err != nil || string(b) != "quarterly numbers" {
		t.Errorf("stored %q, %v", b, err)
	}
	if len(got[1].Media) != 0 || got[1].Content != "look" {
		t.Errorf("the stranger's message: %+v", got[1])
	}
	if n := fake.Calls(dingtalktest.Download); n != 1 {
		t.Errorf("%d download codes exchanged, want 1 (the stranger's is never fetched)", n)
	}
	out := filepath.Join(h.env.Workspace, "chart.png")
	png := append([]byte("\x89PNG\r\n\x1a\n"), make([]byte, 64)...)
	if err := os.WriteFile(out, png, 0o600); err != nil {
		t.Fatal(err)
	}
	doc := filepath.Join(h.env.Workspace, "notes.md")
	os.WriteFile(doc, []byte("# notes"), 0o600) //nolint:errcheck // checked by what is sent
	channeltest.Send(t, h.ch, bus.Outbound{ChatID: "staff-ann", Content: "here", Media: []string{out, doc}})
	s := fake.Sent("staff-ann")
	if len(s) != 3 || s[1].Key != "sampleImageMsg" || string(s[1].File) != string(png) || s[2].Key != "sampleFile" || s[2].Param["fileName"] != "notes.md" || s[2].Param["fileType"] != "md" || string(s[2].File) != "# notes" {
		t.Errorf("sent %+v", s)
	}
}

// TestExpiredTokenRenewed: the robot API's 401 drops the access token;
// the retry fetches another and goes through.
func TestExpiredTokenRenewed(t *testing.T) {
	fake := newFake(t)
	h := start(t, fake, nil)
	fake.Say(ann("x"))
	h.in.Wait(t, 1)
	fake.ExpireWebhooks()
	channeltest.Send(t, h.ch, bus.Outbound{ChatID: "staff-ann", Content: "one"})
	fake.ExpireTokens()
	_, err := h.ch.Send(context.Background(), bus.Outbound{Kind: bus.Message, ChatID: "staff-ann", Content: "two"})
	if err == nil || channel.IsUndeliverable(err) || !strings.Contains(err.Error(), "fetched again") {
		t.Fatalf("a refused token: %v", err)
	}
	channeltest.Send(t, h.ch, bus.Outbound{ChatID: "staff-ann", Content: "two"})
	if s := fake.Sent("staff-ann"); len(s) != 2 || s[1].Text != "two" {
		t.Errorf("sent %+v", s)
	}
}

// TestWebhookThrottled: the session webhook's "send too fast" (130101)
// is a wait for that chat, not a failure and not a fallback to the
// robot API.
func TestWebhookThrottled(t *testing.T) {
	fake := newFake(t)
	h := start(t, fake, nil)
	fake.Say(ann("x"))
	h.in.Wait(t, 1)
	fake.SetInterval(time.Minute)
	channeltest.Send(t, h.ch, bus.Outbound{ChatID: "staff-ann", Content: "one"})
	_, err := h.ch.Send(context.Background(), bus.Outbound{Kind: bus.Message, ChatID: "staff-ann", Content: "two"})
	var ra *channel.RetryAfter
	if !errors.As(err, &ra) || ra.After != 3*time.Second {
		t.Fatalf("a throttled webhook: %v", err)
	}
	if s := fake.Sent("staff-ann"); len(s) != 1 || s[0].Via != "webhook" {
		t.Errorf("sent %+v", s)
	}
}

// TestStatus: the channel reports connected once it receives, and
// connecting, with why, when the platform is gone.
func TestStatus(t *testing.T) {
	fake := newFake(t)
	h := start(t, fake, &channeltest.Inbox{})
	channeltest.CheckStatus(t, h.ch, fake.Close)
}
