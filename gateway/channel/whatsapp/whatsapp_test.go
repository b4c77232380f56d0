package whatsapp

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nbots/nb/gateway/bus"
	"github.com/nbots/nb/gateway/channel"
	"github.com/nbots/nb/gateway/channel/channeltest"
	"github.com/nbots/nb/gateway/channel/whatsapp/whatsapptest"
)

const token = "secret-BRIDGE-token-0123456789"

const (
	alicePhone = "15551230001"
	aliceJID   = alicePhone + "@s.whatsapp.net"
	bobLID     = "987654321012345@lid"
	groupJID   = "120363000000000001@g.us"
)

type harness struct {
	ch     *Channel
	in     *channeltest.Inbox
	bridge *whatsapptest.Bridge
	ws     string
	media  string
	stop   func()
}

// start runs a channel against a fresh fake bridge; cfg's BridgeURL and
// BridgeToken are filled in.
func start(t *testing.T, cfg Config, admit func(bus.Inbound) bool) *harness {
	t.Helper()
	b := whatsapptest.New(t, token)
	return startWith(t, b, cfg, admit)
}

func startWith(t *testing.T, b *whatsapptest.Bridge, cfg Config, admit func(bus.Inbound) bool) *harness {
	t.Helper()
	log, _ := channeltest.Logger(t, token)
	h := &harness{bridge: b, ws: t.TempDir(), media: t.TempDir(), in: &channeltest.Inbox{Admit: admit}}
	if cfg.BridgeURL == "" {
		cfg.BridgeURL = b.URL
	}
	if cfg.BridgeToken == "" {
		cfg.BridgeToken = token
	}
	cfg.BridgeMediaDir = h.media
	c, err := New(cfg, channel.Env{Workspace: h.ws, StateDir: t.TempDir(), Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	c.retryBase = 10 * time.Millisecond
	c.pacer.Interval = nil
	h.ch = c
	h.stop = channeltest.Start(t, c, h.in)
	b.WaitClient(t)
	waitConnected(t, c)
	return h
}

func send(t *testing.T, c *Channel, m bus.Outbound) {
	t.Helper()
	channeltest.Send(t, c, m)
}

// TestConversation: a direct message from an allowed phone is carried
// with nanobot's identity rules and answered by the bridge's send
// command; a stranger known by LID only is carried for the gateway to
// pair; group messages carry the group and mention flags.
func TestConversation(t *testing.T) {
	h := start(t, Config{}, nil)
	h.bridge.Deliver(t, whatsapptest.Message{ID: "3EB0A1", Sender: aliceJID, Content: "hello", Timestamp: 1_700_000_000})
	h.bridge.Deliver(t, whatsapptest.Message{ID: "3EB0A2", Sender: bobLID, Content: "who are you?"})
	h.bridge.Deliver(t, whatsapptest.Message{ID: "3EB0A3", Sender: groupJID, Participant: aliceJID, Content: "lunch?", IsGroup: true})
	got := h.in.Wait(t, 3)
	if m := got[0]; m.SenderID != alicePhone || m.ChatID != aliceJID || m.Content != "hello" || m.ID != aliceJID+"/3EB0A1" ||
		m.Metadata[channel.MetaGroup] != false || !m.Timestamp.Equal(time.Unix(1_700_000_000, 0)) {
		t.Errorf("direct message %+v", m)
	}
	if m := got[1]; m.SenderID != "987654321012345" || m.ChatID != bobLID {
		t.Errorf("stranger %+v", m)
	}
	// groupPolicy "open" (nanobot's default) answers every group message.
	if m := got[2]; m.SenderID != alicePhone || m.ChatID != groupJID || m.Metadata[channel.MetaGroup] != true || m.Metadata[channel.MetaMentioned] != true {
		t.Errorf("group message %+v", m)
	}
	send(t, h.ch, bus.Outbound{ChatID: aliceJID, Content: "Hi **Alice**"})
	s := h.bridge.WaitSent(t, 1)
	if s[0].Type != "send" || s[0].To != aliceJID || s[0].Text != "Hi **Alice**" {
		t.Errorf("sent %+v", s)
	}
}

// TestGroupMentionRule: with groupPolicy "mention", a group message is
// carried only when it mentions the account or replies to it.
func TestGroupMentionRule(t *testing.T) {
	h := start(t, Config{GroupPolicy: "mention"}, nil)
	h.bridge.Deliver(t, whatsapptest.Message{ID: "G1", Sender: groupJID, Participant: aliceJID, Content: "chatter", IsGroup: true})
	h.bridge.Deliver(t, whatsapptest.Message{ID: "G2", Sender: groupJID, Participant: aliceJID, Content: "@bot hi", IsGroup: true, WasMentioned: true})
	h.bridge.Deliver(t, whatsapptest.Message{ID: "G3", Sender: groupJID, Participant: aliceJID, Content: "re", IsGroup: true, IsReplyToBot: true})
	h.bridge.Deliver(t, whatsapptest.Message{ID: "D1", Sender: aliceJID, Content: "direct"})
	got := h.in.Wait(t, 3)
	time.Sleep(100 * time.Millisecond)
	got = h.in.Messages()
	if len(got) != 3 || got[0].Content != "@bot hi" || got[1].Content != "re" || got[2].Content != "direct" {
		t.Fatalf("carried %+v", got)
	}
	for _, m := range got[:2] {
		if m.Metadata[channel.MetaMentioned] != true {
			t.Errorf("%q not marked mentioned", m.Content)
		}
	}
}

// TestLidMappings: a sender known by LID alone is named by the phone
// number lidMappings gives, or the one learned from an earlier message
// that carried both.
func TestLidMappings(t *testing.T) {
	h := start(t, Config{LidMappings: map[string]string{"111": "15550000111"}}, nil)
	h.bridge.Deliver(t, whatsapptest.Message{ID: "1", Sender: "111@lid", Content: "a"})
	h.bridge.Deliver(t, whatsapptest.Message{ID: "2", Sender: "222@lid", PN: "15550000222@s.whatsapp.net", Content: "b"})
	h.bridge.Deliver(t, whatsapptest.Message{ID: "3", Sender: "222@lid", Content: "c"})
	got := h.in.Wait(t, 3)
	for i, want := range []string{"15550000111", "15550000222", "15550000222"} {
		if got[i].SenderID != want {
			t.Errorf("message %d: sender %q, want %q", i, got[i].SenderID, want)
		}
	}
}

// TestMediaBothWays: an allowed sender's files, stored by the bridge, are
// copied into the workspace and tagged as nanobot does; a stranger's
// stay where they are; a path outside the bridge's media folder is never
// taken; an answer's files go by send_media with their workspace path.
func TestMediaBothWays(t *testing.T) {
	h := start(t, Config{}, func(m bus.Inbound) bool { return m.SenderID == alicePhone })
	photo := filepath.Join(h.media, "wa_1_ab.jpeg")
	os.WriteFile(photo, []byte("\xff\xd8\xffjpeg"), 0o600)
	secret := filepath.Join(t.TempDir(), "id_rsa")
	os.WriteFile(secret, []byte("PRIVATE KEY"), 0o600)
	h.bridge.Deliver(t, whatsapptest.Message{ID: "M1", Sender: bobLID, Content: "", Media: []string{photo}})
	h.bridge.Deliver(t, whatsapptest.Message{ID: "M2", Sender: aliceJID, Content: "look", Media: []string{photo}})
	h.bridge.Deliver(t, whatsapptest.Message{ID: "M3", Sender: aliceJID, Content: "", Media: []string{secret}})
	got := h.in.Wait(t, 3)
	if len(got[0].Media) != 0 {
		t.Errorf("a stranger's file was taken: %+v", got[0])
	}
	if len(got[1].Media) != 1 || !strings.HasPrefix(got[1].Media[0], filepath.Join(h.ws, "media", Name)) ||
		got[1].Content != "look\n[image: "+got[1].Media[0]+"]" {
		t.Errorf("allowed sender's photo: %+v", got[1])
	} else if b, _ := os.ReadFile(got[1].Media[0]); string(b) != "\xff\xd8\xffjpeg" {
		t.Errorf("copied %q", b)
	}
	if len(got[2].Media) != 0 || !strings.Contains(got[2].Content, "outside the bridge's media folder") {
		t.Errorf("a path outside the bridge's media folder: %+v", got[2])
	}
	entries, _ := os.ReadDir(filepath.Join(h.ws, "media", Name))
	if len(entries) != 1 {
		t.Errorf("stored %v", entries)
	}

	report := filepath.Join(h.ws, "report.pdf")
	os.WriteFile(report, []byte("%PDF-1.4"), 0o600)
	send(t, h.ch, bus.Outbound{ChatID: aliceJID, Content: "here", Media: []string{"report.pdf", secret}})
	s := h.bridge.WaitSent(t, 2)
	if s[0].Type != "send" || s[0].Text != "here\n\n(id_rsa not attached: outside the workspace)" {
		t.Errorf("text %+v", s[0])
	}
	if s[1].Type != "send_media" || s[1].FilePath != report || s[1].Mimetype != "application/pdf" || s[1].FileName != "report.pdf" || s[1].To != aliceJID {
		t.Errorf("file %+v", s[1])
	}
}

// TestLongAnswerSplit: an answer over 65,536 characters goes as several
// messages, a code fence closed and reopened across the cut.
func TestLongAnswerSplit(t *testing.T) {
	h := start(t, Config{}, nil)
	line := strings.Repeat("x", 99) + "\n"
	text := "```\n" + strings.Repeat(line, 1000) + "```"
	send(t, h.ch, bus.Outbound{ChatID: aliceJID, Content: text})
	time.Sleep(50 * time.Millisecond)
	s := h.bridge.Sent()
	if len(s) != 2 {
		t.Fatalf("%d messages", len(s))
	}
	for _, c := range s {
		if n := len([]rune(c.Text)); n > MaxMessageLength || strings.Count(c.Text, "```")%2 != 0 {
			t.Errorf("piece of %d characters, %d fences", n, strings.Count(c.Text, "```"))
		}
	}
}

// TestRateLimitRetriesTheRest: WhatsApp's rate-overlimit, mid-answer, is
// a *RetryAfter for that chat; the retry sends the rest, nothing twice.
func TestRateLimitRetriesTheRest(t *testing.T) {
	h := start(t, Config{}, nil)
	saved := RateLimitWait
	RateLimitWait = 200 * time.Millisecond
	defer func() { RateLimitWait = saved }()
	h.bridge.Inject("send", 0, channeltest.TooMany)
	m := bus.Outbound{Kind: bus.Message, Channel: Name, ChatID: aliceJID, Turn: "t1", Content: strings.Repeat("a\n", 40_000)}
	_, err := h.ch.Send(context.Background(), m)
	var ra *channel.RetryAfter
	if !errors.As(err, &ra) || ra.After != 200*time.Millisecond {
		t.Fatalf("err %v, want a *RetryAfter", err)
	}
	begun := time.Now()
	if _, err := h.ch.Send(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	if time.Since(begun) < 150*time.Millisecond {
		t.Error("the chat was not held back after rate-overlimit")
	}
	if s := h.bridge.Sent(); len(s) != 2 || s[0].Text == s[1].Text {
		t.Errorf("sent %d pieces, want the 2 pieces once each", len(s))
	}
}

// TestHundredDisconnectsLoseNothing: the bridge drops the connection 100
// times; every message it broadcast while connected is carried once, and
// the channel connects again each time.
func TestHundredDisconnectsLoseNothing(t *testing.T) {
	h := start(t, Config{}, nil)
	const n = 100
	for i := range n {
		h.bridge.Deliver(t, whatsapptest.Message{ID: fmt.Sprintf("D%03d", i), Sender: aliceJID, Content: fmt.Sprint(i)})
		h.in.Wait(t, i+1)
		if i%3 == 0 {
			// A repeat after a reconnection (the same WhatsApp id): the
			// bus keeps the first.
			h.bridge.Deliver(t, whatsapptest.Message{ID: fmt.Sprintf("D%03d", i), Sender: aliceJID, Content: fmt.Sprint(i)})
		}
		h.bridge.Drop()
	}
	h.bridge.WaitClient(t)
	got := h.in.Unique()
	if len(got) != n {
		t.Fatalf("%d distinct messages, want %d", len(got), n)
	}
	for i, m := range got {
		if m.Content != fmt.Sprint(i) {
			t.Fatalf("message %d is %q", i, m.Content)
		}
	}
	if a := h.bridge.Auths(); a < n+1 {
		t.Errorf("%d connections, want %d", a, n+1)
	}
	send(t, h.ch, bus.Outbound{ChatID: aliceJID, Content: "still here"})
}

// TestBusDownHoldsTheMessage: while the gateway cannot make a message
// durable, the channel keeps it and publishes it once the bus is back.
func TestBusDownHoldsTheMessage(t *testing.T) {
	h := start(t, Config{}, nil)
	h.in.Refuse(3)
	h.bridge.Deliver(t, whatsapptest.Message{ID: "B1", Sender: aliceJID, Content: "one"})
	h.bridge.Deliver(t, whatsapptest.Message{ID: "B2", Sender: aliceJID, Content: "two"})
	got := h.in.Wait(t, 2)
	if got[0].Content != "one" || got[1].Content != "two" {
		t.Errorf("got %+v", got)
	}
}

// TestRestartMidMessageAnswersOnce: the bridge restarts while carrying
// out a send, before it answers: the channel does not send it again (it
// may have gone: twice would be worse), reconnects and sends the next.
// A send the bridge never received (the connection was down) fails, for
// the gateway to retry, and then goes once.
func TestRestartMidMessageAnswersOnce(t *testing.T) {
	h := start(t, Config{}, nil)
	h.bridge.Inject("send", channeltest.LoseAnswer)
	send(t, h.ch, bus.Outbound{ChatID: aliceJID, Turn: "t1", Content: "first"})
	h.bridge.WaitClient(t)
	waitConnected(t, h.ch)
	send(t, h.ch, bus.Outbound{ChatID: aliceJID, Turn: "t2", Content: "second"})
	s := h.bridge.Sent()
	if len(s) != 2 || s[0].Text != "first" || s[1].Text != "second" {
		t.Errorf("sent %+v", s)
	}

	h.bridge.Inject("send", channeltest.Reset)
	m := bus.Outbound{Kind: bus.Message, Channel: Name, ChatID: aliceJID, Turn: "t3", Content: "third"}
	h.ch.Send(context.Background(), m) //nolint:errcheck // lost in the reset: counted as gone
	waitConnected(t, h.ch)
	h.stop()
	ConnectWait = 50 * time.Millisecond
	defer func() { ConnectWait = 5 * time.Second }()
	if _, err := h.ch.Send(context.Background(), bus.Outbound{Kind: bus.Message, ChatID: aliceJID, Content: "fourth"}); err == nil || !strings.Contains(err.Error(), "not connected to the bridge") {
		t.Errorf("send while not connected: %v", err)
	}
	if s := h.bridge.Sent(); len(s) != 2 {
		t.Errorf("sent %+v", s)
	}
}

// TestNoAnswerReconnects: a bridge that never answers a command holds
// the chat ackTimeout at most; the channel reconnects so that later
// answers are not matched to the wrong command.
func TestNoAnswerReconnects(t *testing.T) {
	h := start(t, Config{}, nil)
	h.ch.ackTimeout = 100 * time.Millisecond
	h.bridge.Inject("send", channeltest.Hang)
	before := h.bridge.Auths()
	send(t, h.ch, bus.Outbound{ChatID: aliceJID, Content: "hung"})
	deadline := time.Now().Add(10 * time.Second)
	for h.bridge.Auths() == before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if h.bridge.Auths() == before {
		t.Fatal("no reconnection after an unanswered command")
	}
	waitConnected(t, h.ch)
	send(t, h.ch, bus.Outbound{ChatID: aliceJID, Content: "next"})
	if s := h.bridge.Sent(); len(s) != 1 || s[0].Text != "next" {
		t.Errorf("sent %+v", s)
	}
}

func waitConnected(t *testing.T, c *Channel) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if c.live.Current() != nil {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatal("not connected again")
}

// TestRefusedTokenIsFinal: the bridge closes with 4003 on a wrong token;
// Run returns an error that names the key to fix, without the token.
func TestRefusedTokenIsFinal(t *testing.T) {
	b := whatsapptest.New(t, "the-right-one")
	c, err := New(Config{BridgeURL: b.URL, BridgeToken: token}, channel.Env{Workspace: t.TempDir(), StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = c.Run(ctx, &channeltest.Inbox{}, func() {})
	if err == nil || !strings.Contains(err.Error(), "channels.whatsapp.bridgeToken") || strings.Contains(err.Error(), token) {
		t.Errorf("Run: %v", err)
	}
}

// TestTokenFromNanobotsFile: with no bridgeToken, the channel uses the
// token nanobot generated under its data folder, or creates it there
// (mode 0600) for the bridge to be started with.
func TestTokenFromNanobotsFile(t *testing.T) {
	dir := t.TempDir()
	c, err := New(Config{NanobotDir: dir}, channel.Env{})
	if err != nil {
		t.Fatal(err)
	}
	info, err := os.Stat(TokenPath(dir))
	if err != nil || info.Mode().Perm() != 0o600 || len(c.Token()) < 40 {
		t.Fatalf("token file %v %v, token of %d characters", info, err, len(c.Token()))
	}
	c2, _ := New(Config{NanobotDir: dir}, channel.Env{})
	if c2.Token() != c.Token() {
		t.Error("a second start made a new token")
	}
	if _, err := New(Config{}, channel.Env{}); err == nil || !strings.Contains(err.Error(), "bridgeToken") {
		t.Errorf("no token and no nanobot folder: %v", err)
	}
}

func TestConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{BridgeURL: "http://localhost:3001", BridgeToken: "x"}, "channels.whatsapp.bridgeUrl"},
		{Config{BridgeToken: "x", GroupPolicy: "allowlist"}, "channels.whatsapp.groupPolicy"},
	} {
		if _, err := New(tc.cfg, channel.Env{}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v", tc.cfg, err)
		}
	}
	c, err := New(Config{BridgeToken: "x"}, channel.Env{})
	if err != nil || c.url != DefaultBridgeURL || c.cfg.GroupPolicy != "open" {
		t.Errorf("defaults: %v %+v", err, c)
	}
}

// TestStatusAndQRFrames: status and QR events are logged, not carried.
func TestStatusAndQRFrames(t *testing.T) {
	h := start(t, Config{}, nil)
	h.bridge.Status("disconnected")
	h.bridge.QR("2@abc")
	h.bridge.Status("connected")
	h.bridge.Deliver(t, whatsapptest.Message{ID: "S1", Sender: aliceJID, Content: "after"})
	if got := h.in.Wait(t, 1); len(got) != 1 || got[0].Content != "after" {
		t.Errorf("got %+v", got)
	}
}

// TestStatus: the channel reports connected once it receives, and
// connecting, with why, when the platform is gone.
func TestStatus(t *testing.T) {
	h := start(t, Config{}, nil)
	channeltest.CheckStatus(t, h.ch, h.bridge.Close)
}
