package mochat

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nbots/nb/gateway/bus"
	"github.com/nbots/nb/gateway/channel"
	"github.com/nbots/nb/gateway/channel/channeltest"
	"github.com/nbots/nb/gateway/channel/mochat/mochattest"
)

const token = "claw-secret-TOKEN-0123"

func newServer(t *testing.T) *mochattest.Server {
	return mochattest.New(t, token, []string{"session_a", "session_b"}, map[string]string{"panel_1": "group_1"})
}

func intp(v int) *int { return &v }

// run starts a channel on srv with cfg (baseUrl and token filled in);
// env's folders are kept when given, for restarts.
func run(t *testing.T, srv *mochattest.Server, cfg Config, env channel.Env) (*Channel, *channeltest.Inbox, func()) {
	t.Helper()
	log, _ := channeltest.Logger(t, token)
	env.Logger = log
	env = channeltest.Folders(t, env)
	cfg.BaseURL, cfg.ClawToken = srv.URL, token
	if cfg.AgentUserID == "" {
		cfg.AgentUserID = "agent_1"
	}
	if cfg.RetryDelayMs == 0 {
		cfg.RetryDelayMs = 10
	}
	if cfg.SocketReconnectDelayMs == 0 {
		cfg.SocketReconnectDelayMs, cfg.SocketMaxReconnectDelayMs = 10, 50
	}
	if cfg.RefreshIntervalMs == 0 {
		cfg.RefreshIntervalMs = 50
	}
	if cfg.WatchTimeoutMs == 0 {
		cfg.WatchTimeoutMs = 300
	}
	c, err := New(cfg, env)
	if err != nil {
		t.Fatal(err)
	}
	c.pacer.Interval = nil
	in := &channeltest.Inbox{}
	stop := channeltest.Start(t, c, in)
	return c, in, stop
}

// TestConversation: over the socket, a session's history is not
// answered, a new message is carried from its author; in a panel with
// mention.requireInGroups, chatter is dropped and a mention carried as a
// group message; answers go to the session and to the panel with its
// group.
func TestConversation(t *testing.T) {
	srv := newServer(t)
	srv.Say("session_a", "alice", "old history")
	c, in, _ := run(t, srv, Config{Sessions: []string{"*"}, Panels: []string{"*"}, Mention: MentionConfig{RequireInGroups: true}, ReplyDelayMode: "off"}, channel.Env{})
	srv.WaitSocket(t, 1)
	time.Sleep(100 * time.Millisecond) // subscribed
	id := srv.Say("session_a", "alice", "hello")
	srv.Post("panel_1", "bob", "chatter", nil)
	srv.Post("panel_1", "bob", "hey <@agent_1> lunch?", nil)
	srv.Say("session_b", "agent_1", "my own message")
	got := in.Wait(t, 2)
	time.Sleep(100 * time.Millisecond)
	got = in.Messages()
	if len(got) != 2 {
		t.Fatalf("carried %+v", got)
	}
	if m := got[0]; m.SenderID != "alice" || m.ChatID != "session_a" || m.Content != "hello" || m.ID != "session_a/"+id || m.Metadata[channel.MetaGroup] != false {
		t.Errorf("session message %+v", m)
	}
	if m := got[1]; m.SenderID != "bob" || m.ChatID != "panel_1" || m.Metadata["group_id"] != "group_1" || m.Metadata[channel.MetaGroup] != true || m.Metadata["was_mentioned"] != true {
		t.Errorf("panel message %+v", m)
	}
	channeltest.Send(t, c, bus.Outbound{ChatID: "session_a", Content: "hi alice", ReplyTo: id})
	channeltest.Send(t, c, bus.Outbound{ChatID: "panel_1", Content: "noon"})
	s := srv.WaitSent(t, 2)
	if s[0].SessionID != "session_a" || s[0].Content != "hi alice" || s[0].ReplyTo != id || s[0].PanelID != "" {
		t.Errorf("session answer %+v", s[0])
	}
	if s[1].PanelID != "panel_1" || s[1].GroupID != "group_1" || s[1].Content != "noon" {
		t.Errorf("panel answer %+v", s[1])
	}
}

// TestReplyDelay: with replyDelayMode "non-mention", a panel's messages
// that do not mention the agent are held and delivered together after
// replyDelayMs, labelled by sender; a mention delivers what is held at
// once, with it.
func TestReplyDelay(t *testing.T) {
	srv := newServer(t)
	_, in, _ := run(t, srv, Config{Panels: []string{"panel_1"}, ReplyDelayMs: intp(300)}, channel.Env{})
	srv.WaitSocket(t, 1)
	time.Sleep(100 * time.Millisecond)
	srv.Post("panel_1", "bob", "one", nil)
	srv.Post("panel_1", "carol", "two", nil)
	time.Sleep(100 * time.Millisecond)
	if n := len(in.Messages()); n != 0 {
		t.Fatalf("%d messages before the delay", n)
	}
	got := in.Wait(t, 1)
	if m := got[0]; m.Content != "bob: one\ncarol: two" || m.SenderID != "carol" || m.Metadata["buffered_count"] != 2 || m.Metadata["was_mentioned"] != false {
		t.Errorf("held messages %+v", m)
	}
	srv.Post("panel_1", "bob", "three", nil)
	begun := time.Now()
	srv.Post("panel_1", "dave", "ping", map[string]any{"mentions": []any{map[string]any{"userId": "agent_1"}}})
	got = in.Wait(t, 2)
	if time.Since(begun) > 250*time.Millisecond {
		t.Error("a mention waited for the delay")
	}
	if m := got[1]; m.Content != "bob: three\ndave: ping" || m.Metadata["was_mentioned"] != true {
		t.Errorf("mention %+v", m)
	}
}

// TestPollingFallbackAndCursors: with no socket, sessions are long-polled
// from their cursors and panels polled; the cursor is saved in nanobot's
// form after the message is durable, so a restart replays nothing and
// delivers what came while it was down.
func TestPollingFallbackAndCursors(t *testing.T) {
	srv := newServer(t)
	srv.NoSocket = true
	srv.Say("session_a", "alice", "history")
	env := channeltest.Folders(t, channel.Env{})
	_, in, stop := run(t, srv, Config{Sessions: []string{"session_a"}, Panels: []string{"panel_1"}, ReplyDelayMode: "off"}, env)
	time.Sleep(150 * time.Millisecond) // the cold watch has taken its cursor
	srv.Say("session_a", "alice", "one")
	srv.Post("panel_1", "bob", "in the panel", nil)
	got := in.Wait(t, 2)
	if got[0].Content != "one" && got[1].Content != "one" {
		t.Errorf("got %+v", got)
	}
	stop()
	saved, _ := env.FileCursor(Name)
	pos, _ := saved.Load(t.Context())
	if !strings.Contains(pos, `"session_a":2`) || !strings.Contains(pos, `"schemaVersion":1`) {
		t.Errorf("saved cursors %s", pos)
	}
	srv.Say("session_a", "alice", "while down")
	_, in2, _ := run(t, srv, Config{Sessions: []string{"session_a"}, ReplyDelayMode: "off"}, env)
	got = in2.Wait(t, 1)
	time.Sleep(200 * time.Millisecond)
	if got = in2.Messages(); len(got) != 1 || got[0].Content != "while down" {
		t.Errorf("after the restart %+v", got)
	}
}

// TestRestartMidMessage: the bus refuses a message, the channel stops
// before it is durable: the cursor has not moved, so the next start
// delivers it, once.
func TestRestartMidMessage(t *testing.T) {
	srv := newServer(t)
	env := channeltest.Folders(t, channel.Env{})
	_, in, stop := run(t, srv, Config{Sessions: []string{"session_a"}}, env)
	srv.WaitSocket(t, 1)
	time.Sleep(100 * time.Millisecond)
	srv.Say("session_a", "alice", "first")
	in.Wait(t, 1)
	in.Refuse(-1)
	srv.Say("session_a", "alice", "second")
	time.Sleep(200 * time.Millisecond)
	stop()
	_, in2, _ := run(t, srv, Config{Sessions: []string{"session_a"}}, env)
	got := in2.Wait(t, 1)
	time.Sleep(200 * time.Millisecond)
	if got = in2.Messages(); len(got) != 1 || got[0].Content != "second" {
		t.Errorf("after the restart %+v", got)
	}
}

// TestHundredDisconnectsLoseNothing: the socket drops 100 times, a
// message written each time while it is down; every message is carried
// exactly once (the polls or the resubscription's events bring the
// missed ones, the duplicate window drops repeats).
func TestHundredDisconnectsLoseNothing(t *testing.T) {
	srv := newServer(t)
	_, in, _ := run(t, srv, Config{Sessions: []string{"session_a"}}, channel.Env{})
	srv.WaitSocket(t, 1)
	time.Sleep(100 * time.Millisecond)
	const n = 100
	for i := range n {
		srv.Drop()
		srv.Say("session_a", "alice", fmt.Sprint(i))
		srv.WaitSocket(t, i+2)
	}
	in.Wait(t, n)
	time.Sleep(300 * time.Millisecond)
	got := in.Unique()
	if len(got) != n {
		t.Fatalf("%d distinct messages, want %d", len(got), n)
	}
	for i, m := range got {
		if m.Content != fmt.Sprint(i) {
			t.Fatalf("message %d is %q", i, m.Content)
		}
	}
	if all := in.Messages(); len(all) != n {
		t.Errorf("%d published, want %d: a message was published twice", len(all), n)
	}
}

// TestRateLimitRetriesTheRest: a 429 mid-answer is a *RetryAfter for
// that target; the retry sends the rest, nothing twice.
func TestRateLimitRetriesTheRest(t *testing.T) {
	srv := newServer(t)
	c, _, _ := run(t, srv, Config{Sessions: []string{"session_a"}}, channel.Env{})
	srv.Inject("send", 0, channeltest.TooMany)
	m := bus.Outbound{Kind: bus.Message, Channel: Name, ChatID: "session_a", Turn: "t1", Content: strings.Repeat("a\n", 6000)}
	_, err := c.Send(context.Background(), m)
	var ra *channel.RetryAfter
	if !errors.As(err, &ra) || ra.After != time.Second {
		t.Fatalf("err %v, want a *RetryAfter of 1s", err)
	}
	if _, err := c.Send(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	if s := srv.Sent(); len(s) != 2 || s[0].Content == s[1].Content {
		t.Errorf("sent %d pieces, want 2 once each", len(s))
	}
}

// TestDuplicateWindow: the last 2,000 ids of a target are remembered.
func TestDuplicateWindow(t *testing.T) {
	s := &seen{set: map[string]bool{}}
	for i := range SeenWindow + 1 {
		if s.remember(fmt.Sprint(i)) {
			t.Fatalf("%d taken for a duplicate", i)
		}
	}
	if !s.remember(fmt.Sprint(SeenWindow)) || s.remember("0") {
		t.Error("the window is not the last 2,000 ids")
	}
}

// TestRefusedToken: a token the server refuses stops the channel with an
// error naming the key, not the token.
func TestRefusedToken(t *testing.T) {
	srv := newServer(t)
	c, err := New(Config{BaseURL: srv.URL, ClawToken: "wrong-" + token, Sessions: []string{"*"}}, channeltest.Folders(t, channel.Env{}))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = c.Run(ctx, &channeltest.Inbox{}, func() {})
	if err == nil || !strings.Contains(err.Error(), "channels.mochat.clawToken") || strings.Contains(err.Error(), token) {
		t.Errorf("Run: %v", err)
	}
}

func TestConfigErrors(t *testing.T) {
	if _, err := New(Config{}, channel.Env{}); err == nil || !strings.Contains(err.Error(), "clawToken") {
		t.Errorf("no token: %v", err)
	}
	if _, err := New(Config{ClawToken: "x", BaseURL: "ftp://x"}, channel.Env{}); err == nil || !strings.Contains(err.Error(), "baseUrl") {
		t.Errorf("bad URL: %v", err)
	}
	if got := resolveTarget("panel:session_x"); !got.panel || got.id != "session_x" {
		t.Errorf("panel: prefix %+v", got)
	}
	if got := resolveTarget("mochat:session_x"); got.panel {
		t.Errorf("mochat: prefix %+v", got)
	}
}

// TestDeadlineIsAStop: Run whose context times out has stopped, not
// failed: it returns nil.
func TestDeadlineIsAStop(t *testing.T) {
	srv := newServer(t)
	c, err := New(Config{BaseURL: srv.URL, ClawToken: token, Sessions: []string{"session_a"}}, channeltest.Folders(t, channel.Env{}))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if err := c.Run(ctx, &channeltest.Inbox{}, func() {}); err != nil {
		t.Errorf("Run: %v", err)
	}
}

// TestStatus: the channel reports connected once it receives, and
// connecting, with why, when the platform is gone.
func TestStatus(t *testing.T) {
	srv := newServer(t)
	c, _, _ := run(t, srv, Config{Sessions: []string{"*"}}, channel.Env{})
	channeltest.CheckStatus(t, c, srv.Close)
}

// TestRetryAfterHeader: a 429's Retry-After may be an HTTP-date, cannot
// ask for more than maxRetryAfter, and is a second when unreadable.
func TestRetryAfterHeader(t *testing.T) {
	if d := retryAfter(time.Now().Add(time.Minute).UTC().Format(http.TimeFormat)); d < 55*time.Second || d > time.Minute {
		t.Errorf("an HTTP-date a minute on: %v", d)
	}
	if d := retryAfter("99999999999"); d != maxRetryAfter {
		t.Errorf("a huge count: %v, want %v", d, maxRetryAfter)
	}
	for _, h := range []string{"", "-2", "soon"} {
		if d := retryAfter(h); d != time.Second {
			t.Errorf("%q: %v, want a second", h, d)
		}
	}
}
