package discord

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nbots/nb/gateway/bus"
	"github.com/nbots/nb/gateway/channel"
	"github.com/nbots/nb/gateway/channel/channeltest"
	"github.com/nbots/nb/gateway/channel/discord/discordtest"
	"github.com/nbots/nb/internal/testbuf"
)

const token = "MTAwMDAw.secret-DISCORD-token"

var (
	alice = discordtest.User{ID: "100000000000000042", Username: "alice"}
	bob   = discordtest.User{ID: "100000000000000043", Username: "bob"}
)

type harness struct {
	ch   *Channel
	in   *channeltest.Inbox
	stop func()
}

func newFake(t *testing.T) *discordtest.Server {
	t.Helper()
	f, err := discordtest.New(token)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	return f
}

func start(t *testing.T, fake *discordtest.Server, env channel.Env) *harness {
	t.Helper()
	logs := &testbuf.Buffer{}
	env.Logger = slog.New(slog.NewTextHandler(logs, nil))
	if env.StateDir == "" {
		env.StateDir = t.TempDir()
	}
	c, err := New(Config{Token: token, APIBase: fake.URL}, env)
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{ch: c, in: &channeltest.Inbox{}}
	t.Cleanup(func() {
		if strings.Contains(logs.String(), "secret-DISCORD") {
			t.Errorf("the token is in the logs:\n%s", logs)
		}
	})
	h.stop = channeltest.Start(t, c, h.in)
	return h
}

func TestConversation(t *testing.T) {
	fake := newFake(t)
	h := start(t, fake, channel.Env{})
	dm := fake.Post("", "200000000000000001", alice, "hello")
	fake.Post("300000000000000001", "200000000000000002", bob, "lunch?")
	ask := fake.Post("300000000000000001", "200000000000000002", bob, "<@"+fake.Bot.ID+"> what time is it?", fake.Bot)
	got := h.in.Wait(t, 3)
	if m := got[0]; m.SenderID != alice.ID || m.ChatID != dm.ChannelID || m.ID != dm.ID || m.Content != "hello" || m.Metadata["group"] != false || m.Metadata["mentioned"] != true {
		t.Errorf("direct message %+v", m)
	}
	if m := got[1]; m.Metadata["group"] != true || m.Metadata["mentioned"] != false {
		t.Errorf("chatter %+v", m.Metadata)
	}
	if m := got[2]; m.Metadata["mentioned"] != true || m.Content != "what time is it?" {
		t.Errorf("mention %+v", m)
	}
	if _, err := h.ch.Send(context.Background(), bus.Outbound{Kind: bus.Message, ChatID: ask.ChannelID, ReplyTo: ask.ID, Content: "Noon, @everyone"}); err != nil {
		t.Fatal(err)
	}
	s := fake.Sent(ask.ChannelID)
	if len(s) != 1 || s[0].Content != "Noon, @everyone" || s[0].MessageReference == nil || s[0].MessageReference.MessageID != ask.ID {
		t.Errorf("sent %+v", s)
	}
	// The bot's own message, dispatched back, is not carried.
	time.Sleep(100 * time.Millisecond)
	if n := len(h.in.Messages()); n != 3 {
		t.Errorf("%d messages", n)
	}
	if err := h.ch.Typing(context.Background(), ask.ChannelID); err != nil {
		t.Error(err)
	}
}

func TestProgressEdits(t *testing.T) {
	fake := newFake(t)
	h := start(t, fake, channel.Env{})
	dm := fake.Post("", "200000000000000001", alice, "x")
	h.in.Wait(t, 1)
	ctx := context.Background()
	p, _ := h.ch.Send(ctx, bus.Outbound{Kind: bus.Progress, ChatID: dm.ChannelID, Turn: "t", Content: "thinking"})
	f, err := h.ch.Send(ctx, bus.Outbound{Kind: bus.Message, ChatID: dm.ChannelID, Turn: "t", Content: "done"})
	s := fake.Sent(dm.ChannelID)
	if err != nil || p != f || len(s) != 1 || s[0].Content != "done" || s[0].EditedTimestamp == nil {
		t.Errorf("%v %s %s %+v", err, p, f, s)
	}
}

func TestSplitFenced(t *testing.T) {
	var b strings.Builder
	b.WriteString("Intro\n```go\n")
	for i := range 300 {
		fmt.Fprintf(&b, "fmt.Println(%d) // a line of code\n", i)
	}
	b.WriteString("```\nOutro")
	ps := channel.SplitFenced(b.String(), MaxMessageLength)
	if len(ps) < 3 {
		t.Fatalf("%d pieces", len(ps))
	}
	for i, p := range ps {
		if n := len([]rune(p)); n > MaxMessageLength {
			t.Errorf("piece %d: %d characters", i, n)
		}
		if strings.Count(p, "```")%2 != 0 {
			t.Errorf("piece %d has an unclosed fence:\n%s", i, p)
		}
		if i > 0 && i < len(ps)-1 && !strings.HasPrefix(p, "```go\n") {
			t.Errorf("piece %d does not reopen the fence: %.20q", i, p)
		}
	}
}

func TestRateLimitHeadersPerChannel(t *testing.T) {
	fake := newFake(t)
	h := start(t, fake, channel.Env{})
	a := fake.Post("", "200000000000000001", alice, "x")
	b := fake.Post("", "200000000000000009", bob, "y")
	h.in.Wait(t, 2)
	fake.SetRateLimit(1, time.Second)
	ctx := context.Background()
	send := func(ch, text string) error {
		_, err := h.ch.Send(ctx, bus.Outbound{Kind: bus.Message, ChatID: ch, Content: text})
		return err
	}
	if err := send(a.ChannelID, "one"); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	done := make(chan time.Duration)
	go func() {
		if err := send(a.ChannelID, "two"); err != nil {
			t.Error(err)
		}
		done <- time.Since(t0)
	}()
	if err := send(b.ChannelID, "other"); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(t0); d > 300*time.Millisecond {
		t.Errorf("another channel waited %s", d)
	}
	if d := <-done; d < 700*time.Millisecond {
		t.Errorf("the second message to an empty bucket went after %s: the headers were not read", d)
	}
	// A client that did not see the headers (a new process) gets the 429
	// as *channel.RetryAfter.
	fresh, _ := New(Config{Token: token, APIBase: fake.URL}, channel.Env{})
	send(a.ChannelID, "three") //nolint:errcheck // empties the bucket
	_, err := fresh.Send(ctx, bus.Outbound{Kind: bus.Message, ChatID: a.ChannelID, Content: "four"})
	var ra *channel.RetryAfter
	if !errors.As(err, &ra) || ra.After <= 0 || ra.After > time.Second {
		t.Errorf("a 429: %v", err)
	}
}

func TestUndeliverable(t *testing.T) {
	fake := newFake(t)
	h := start(t, fake, channel.Env{})
	m := fake.Post("300000000000000001", "200000000000000005", bob, "x")
	h.in.Wait(t, 1)
	fake.Deny(m.ChannelID)
	_, err := h.ch.Send(context.Background(), bus.Outbound{Kind: bus.Message, ChatID: m.ChannelID, Content: "hi"})
	if !channel.IsUndeliverable(err) || !strings.Contains(err.Error(), "Missing Access") {
		t.Errorf("denied: %v", err)
	}
	_, err = h.ch.Send(context.Background(), bus.Outbound{Kind: bus.Message, ChatID: "404", Content: "hi"})
	if !channel.IsUndeliverable(err) || !strings.Contains(err.Error(), "Unknown Channel") {
		t.Errorf("unknown: %v", err)
	}
}

// faults is how many disconnections TestDisconnectsLoseNothing injects:
// one in ten is an invalid session, after which the client waits 1 to 5
// seconds before identifying again (as Discord asks), so the default
// keeps the suite short; -discord.faults=100 is the figure
// (about 30 s under -race).
var faults = flag.Int("discord.faults", 25, "disconnections injected by TestDisconnectsLoseNothing")

func TestDisconnectsLoseNothing(t *testing.T) {
	fake := newFake(t)
	h := start(t, fake, channel.Env{})
	const ch = "200000000000000001"
	want := 0
	for i := range *faults {
		conns, _ := fake.Stats()
		fake.Post("", ch, alice, fmt.Sprintf("before %d", i))
		switch {
		case i%10 == 9:
			fake.InvalidateSession() // the resume fails: a new session, caught up by REST
			fake.Drop()
		case i%2 == 0:
			fake.Drop()
		default:
			fake.Reconnect()
		}
		fake.Post("", ch, alice, fmt.Sprintf("during %d", i)) // while disconnected, most often
		want += 2
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := fake.WaitConnected(ctx, conns+1)
		cancel()
		if err != nil {
			t.Fatalf("no reconnection after fault %d: %v", i, fake)
		}
	}
	got := h.in.Wait(t, want)
	time.Sleep(200 * time.Millisecond)
	got = h.in.Messages()
	if len(got) != want {
		t.Errorf("%d messages published, want %d exactly once", len(got), want)
	}
	for i := 1; i < len(got); i++ {
		if snowflake(got[i].ID) <= snowflake(got[i-1].ID) {
			t.Fatalf("message %d out of order: %s after %s", i, got[i].Content, got[i-1].Content)
		}
	}
	if _, resumes := fake.Stats(); resumes < *faults/2 {
		t.Errorf("only %d resumes", resumes)
	}
}

func TestRestartFetchesWhatWasMissed(t *testing.T) {
	fake := newFake(t)
	env := channel.Env{StateDir: t.TempDir()}
	h := start(t, fake, env)
	fake.Post("", "200000000000000001", alice, "one")
	h.in.Wait(t, 1)
	h.stop()
	fake.Post("", "200000000000000001", alice, "two")
	fake.Post("", "200000000000000001", alice, "three")
	h2 := start(t, fake, env)
	got := h2.in.Wait(t, 2)
	time.Sleep(200 * time.Millisecond)
	if got = h2.in.Messages(); len(got) != 2 || got[0].Content != "two" || got[1].Content != "three" {
		t.Errorf("after the restart: %+v", got)
	}
}

func TestRefusedToken(t *testing.T) {
	fake := newFake(t)
	c, err := New(Config{Token: "wrong.secret-X", APIBase: fake.URL}, channel.Env{StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	err = c.Run(context.Background(), &channeltest.Inbox{}, func() { t.Error("ready") })
	if err == nil || !strings.Contains(err.Error(), "channels.discord.token") || strings.Contains(err.Error(), "secret-X") {
		t.Errorf("Run: %v", err)
	}
}

func TestAttachmentsBothWays(t *testing.T) {
	fake := newFake(t)
	ws := t.TempDir()
	h := start(t, fake, channel.Env{Workspace: ws})
	in := fake.PostFiles("", "200000000000000001", alice, "look", discordtest.File{Name: "cat.png", ContentType: "image/png", Data: []byte("PNG-bytes")})
	fake.PostFiles("300000000000000001", "200000000000000002", bob, "not for the bot", discordtest.File{Name: "x.png", Data: []byte("x")})
	got := h.in.Wait(t, 2)
	m := got[0]
	if len(m.Media) != 1 || !strings.HasPrefix(m.Media[0], filepath.Join(ws, "media", "discord")+string(filepath.Separator)) {
		t.Fatalf("media %q", m.Media)
	}
	if b, err := os.ReadFile(m.Media[0]); err != nil || string(b) != "PNG-bytes" {
		t.Errorf("stored %q %v", b, err)
	}
	if m.Content != "look\n[attachment: "+m.Media[0]+"]" {
		t.Errorf("content %q", m.Content)
	}
	if len(got[1].Media) != 0 {
		t.Error("a file in chatter that does not mention the bot was downloaded")
	}

	os.WriteFile(filepath.Join(ws, "report.pdf"), []byte("%PDF-1.4"), 0o600)
	long := strings.Repeat("a line of text\n", 200) // two messages
	if _, err := h.ch.Send(context.Background(), bus.Outbound{Kind: bus.Message, ChatID: in.ChannelID, Content: long,
		Media: []string{"report.pdf", "/etc/hostname"}}); err != nil {
		t.Fatal(err)
	}
	var sent []discordtest.Message
	for _, x := range fake.Sent(in.ChannelID) {
		if x.Author.ID == fake.Bot.ID {
			sent = append(sent, x)
		}
	}
	if len(sent) != 2 || len(sent[0].Attachments) != 0 || len(sent[1].Attachments) != 1 {
		t.Fatalf("sent %+v", sent)
	}
	a := sent[1].Attachments[0]
	if a.Filename != "report.pdf" || string(fake.File(a.URL)) != "%PDF-1.4" || !strings.HasSuffix(sent[1].Content, "(hostname not attached: outside the workspace)") {
		t.Errorf("attachment %+v, text %q", a, sent[1].Content)
	}
	// A file alone, without text.
	if _, err := h.ch.Send(context.Background(), bus.Outbound{Kind: bus.Message, ChatID: in.ChannelID, Media: []string{"report.pdf"}}); err != nil {
		t.Fatal(err)
	}
}

// A turn's reply sent again by another replica (the first died after
// Discord took the reply, before it recorded the delivery) is posted
// once: each piece carries a nonce derived from the turn, enforced.
func TestRepeatedReplyPostedOnce(t *testing.T) {
	fake := newFake(t)
	h := start(t, fake, channel.Env{})
	dm := fake.Post("", "200000000000000001", alice, "x")
	h.in.Wait(t, 1)
	other, err := New(Config{Token: token, APIBase: fake.URL}, channel.Env{StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	long := strings.Repeat("line of the answer\n", 150) // two pieces
	reply := bus.Outbound{Kind: bus.Message, ChatID: dm.ChannelID, Turn: "turn-1", Content: long}
	first, err := h.ch.Send(ctx, reply)
	if err != nil {
		t.Fatal(err)
	}
	again, err := other.Send(ctx, reply)
	if err != nil {
		t.Fatal(err)
	}
	if s := fake.Sent(dm.ChannelID); len(s) != 2 || first != again {
		t.Fatalf("the reply sent twice was posted as %d messages (ids %s, %s)", len(s), first, again)
	}
	if n := fake.NonceHits(); n != 2 {
		t.Errorf("%d creates answered by the nonce, want 2", n)
	}
	// Another turn, and a message outside any turn, are new messages.
	if _, err := other.Send(ctx, bus.Outbound{Kind: bus.Message, ChatID: dm.ChannelID, Turn: "turn-2", Content: "short"}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := other.Send(ctx, bus.Outbound{Kind: bus.Message, ChatID: dm.ChannelID, Content: "no turn"}); err != nil {
			t.Fatal(err)
		}
	}
	if s := fake.Sent(dm.ChannelID); len(s) != 5 {
		t.Errorf("%d messages, want 5", len(s))
	}
}
