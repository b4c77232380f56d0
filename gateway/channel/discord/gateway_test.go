package discord

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nbots/nb/gateway/channel"
	"github.com/nbots/nb/gateway/channel/channeltest"
	"github.com/nbots/nb/gateway/channel/discord/discordtest"
	"github.com/nbots/nb/internal/testbuf"
)

// waitFor polls cond for up to ten seconds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// checkOnce checks that exactly want messages were published, in order.
func checkOnce(t *testing.T, in *channeltest.Inbox, want int) {
	t.Helper()
	in.Wait(t, want)
	time.Sleep(100 * time.Millisecond)
	got := in.Messages()
	if len(got) != want {
		t.Errorf("%d messages published, want %d exactly once", len(got), want)
	}
	for i := 1; i < len(got); i++ {
		if snowflake(got[i].ID) <= snowflake(got[i-1].ID) {
			t.Errorf("message %d out of order: %s after %s", i, got[i].Content, got[i-1].Content)
		}
	}
}

// TestReconnectWhileHeartbeating kills the socket again and again while
// heartbeats run (every 10 ms): each time the client resumes on a new
// connection, and no message is lost or doubled. This is the path on
// which discordgo raced with itself (its heartbeat reading the
// connection its reconnect replaced); under -race it must stay quiet.
func TestReconnectWhileHeartbeating(t *testing.T) {
	fake := newFake(t)
	fake.SetHeartbeatInterval(10 * time.Millisecond)
	h := start(t, fake, channel.Env{})
	const ch = "200000000000000001"
	const drops = 10
	for i := range drops {
		conns, _ := fake.Stats()
		beats := fake.Heartbeats()
		waitFor(t, "heartbeats", func() bool { return fake.Heartbeats() >= beats+2 })
		fake.Post("", ch, alice, fmt.Sprintf("before %d", i))
		fake.Drop()
		fake.Post("", ch, alice, fmt.Sprintf("during %d", i))
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := fake.WaitConnected(ctx, conns+1)
		cancel()
		if err != nil {
			t.Fatalf("no reconnection after drop %d: %v", i, fake)
		}
	}
	checkOnce(t, h.in, 2*drops)
	// At least one resume per drop (more if a heartbeat's ACK came
	// late on a busy machine: the client then resumes once more).
	if _, resumes := fake.Stats(); resumes < drops {
		t.Errorf("%d resumes after %d drops", resumes, drops)
	}
}

// TestZombieConnectionResumed: a connection that stays open but whose
// heartbeats go unacknowledged is closed by the client, which resumes on
// a new one.
func TestZombieConnectionResumed(t *testing.T) {
	fake := newFake(t)
	fake.SetHeartbeatInterval(20 * time.Millisecond)
	h := start(t, fake, channel.Env{})
	const ch = "200000000000000001"
	fake.Post("", ch, alice, "one")
	h.in.Wait(t, 1)
	conns, _ := fake.Stats()
	fake.MuteAcks(true)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := fake.WaitConnected(ctx, conns+1); err != nil {
		t.Fatalf("the client kept a connection whose heartbeats went unanswered: %v", fake)
	}
	fake.MuteAcks(false)
	fake.Post("", ch, alice, "two")
	checkOnce(t, h.in, 2)
	if _, resumes := fake.Stats(); resumes < 1 {
		t.Errorf("the zombie connection was not resumed: %v", fake)
	}
}

// TestHeartbeatRequestAnswered: opcode 1 from the gateway is answered at
// once, not at the next beat.
func TestHeartbeatRequestAnswered(t *testing.T) {
	fake := newFake(t)
	fake.SetHeartbeatInterval(time.Hour)
	h := start(t, fake, channel.Env{})
	fake.Post("", "200000000000000001", alice, "x")
	h.in.Wait(t, 1)
	n := fake.Heartbeats()
	fake.RequestHeartbeat()
	waitFor(t, "the requested heartbeat", func() bool { return fake.Heartbeats() > n })
}

// TestFirstHeartbeatJittered: the first beat of a connection comes
// after a random part of the interval, not after the whole interval (so
// that clients reconnecting together do not beat together).
func TestFirstHeartbeatJittered(t *testing.T) {
	fake := newFake(t)
	const every = 300 * time.Millisecond
	fake.SetHeartbeatInterval(every)
	start(t, fake, channel.Env{})
	const conns = 6
	for i := range conns {
		waitFor(t, "a first heartbeat", func() bool { return len(fake.FirstBeats()) > i })
		fake.Drop()
	}
	firsts := fake.FirstBeats()
	least := firsts[0]
	for _, d := range firsts {
		least = min(least, d)
		if d > every+every/2 {
			t.Errorf("a first heartbeat after %s (interval %s)", d, every)
		}
	}
	// Six uniform draws all above 90% of the interval: one in a million.
	if least > every*9/10 {
		t.Errorf("first heartbeats after %v: the whole interval each time, no jitter", firsts)
	}
}

// TestDisallowedIntentsFatal: a close code that reconnecting cannot cure
// (4014, the Message Content Intent not turned on) ends Run with what to
// do, instead of reconnecting for ever.
func TestDisallowedIntentsFatal(t *testing.T) {
	fake := newFake(t)
	fake.DisallowIntents(intentMessageContent)
	c, err := New(Config{Token: token, APIBase: fake.URL}, channel.Env{StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = c.Run(ctx, &channeltest.Inbox{}, func() { t.Error("ready") })
	if err == nil || !strings.Contains(err.Error(), "4014") || !strings.Contains(err.Error(), "Message Content Intent") {
		t.Errorf("Run: %v", err)
	}
	if conns, _ := fake.Stats(); conns != 0 {
		t.Errorf("%d sessions", conns)
	}
}

// TestSessionStartLimit: with no session left to start, the channel
// waits for the limit's reset (reporting why) instead of identifying.
func TestSessionStartLimit(t *testing.T) {
	fake := newFake(t)
	const reset = 700 * time.Millisecond
	fake.SetSessionStartLimit(0, reset)
	c, err := New(Config{Token: token, APIBase: fake.URL}, channel.Env{StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx, &channeltest.Inbox{}, func() {}) }()
	defer func() { cancel(); <-done }()
	waitFor(t, "the reason", func() bool { return strings.Contains(c.Status().Reason, "session_start_limit") })
	if err := fake.WaitConnected(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(t0); d < reset-100*time.Millisecond {
		t.Errorf("identified after %s, before the limit's reset", d)
	}
	opened := 0
	for _, r := range fake.Requests() {
		if r == "GET /gateway" {
			opened++
		}
	}
	if opened != 1 {
		t.Errorf("%d gateway connections opened, want 1 (after the reset): %q", opened, fake.Requests())
	}
}

// TestResumeAddressGone: when the resume address keeps failing, the
// client starts a new session from Get Gateway Bot's address, and
// fetches what was written meanwhile.
func TestResumeAddressGone(t *testing.T) {
	fake := newFake(t)
	fake.BreakResumeURL()
	c, err := New(Config{Token: token, APIBase: fake.URL}, channel.Env{StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	c.retry = 10 * time.Millisecond
	in := &channeltest.Inbox{}
	channeltest.Start(t, c, in)
	const ch = "200000000000000001"
	fake.Post("", ch, alice, "before")
	in.Wait(t, 1)
	fake.Drop()
	fake.Post("", ch, alice, "during")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := fake.WaitConnected(ctx, 2); err != nil {
		t.Fatalf("no new session: %v", fake)
	}
	checkOnce(t, in, 2)
	if _, resumes := fake.Stats(); resumes != 0 {
		t.Errorf("%d resumes through an address that answers 404", resumes)
	}
}

// TestGatewayURL: the address Discord gives gets the version and the
// encoding; anything but a WebSocket URL is refused.
func TestGatewayURL(t *testing.T) {
	u, err := gatewayURL("wss://gateway.discord.gg")
	if err != nil || u != "wss://gateway.discord.gg?encoding=json&v=10" {
		t.Errorf("%q %v", u, err)
	}
	if _, err := gatewayURL("https://discord.com"); err == nil {
		t.Error("an https URL was taken for the gateway")
	}
}

// TestPendingCapped: a channel that takes no dispatch makes the gateway
// hold at most maxPending of them and stop reading the connection, with
// a warning; nothing read is lost (the rest stays with Discord, and the
// sequence a resume starts from is the last dispatch held). Once the
// channel takes them, reading goes on and every message arrives, in
// order.
func TestPendingCapped(t *testing.T) {
	const limit, posts = 4, 20
	const ch = "200000000000000001"
	run := func(fake *discordtest.Server, events chan event) (g *gateway, logs *testbuf.Buffer, stop func()) {
		logs = &testbuf.Buffer{}
		g = &gateway{
			token: token, intents: DefaultIntents, log: slog.New(slog.NewTextHandler(logs, nil)), link: &channel.Conn{},
			rest:  &rest{base: fake.URL + "/api/v" + apiVersion, auth: "Bot " + token, hc: &http.Client{Timeout: 10 * time.Second}},
			retry: 10 * time.Millisecond, invalidWait: func() time.Duration { return time.Millisecond }, maxPending: limit,
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- g.run(ctx, events) }()
		wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
		defer wcancel()
		if err := fake.WaitConnected(wctx, 1); err != nil {
			cancel()
			t.Fatalf("the gateway did not connect: %v", err)
		}
		return g, logs, func() { cancel(); <-done }
	}

	// A channel that takes nothing.
	fake := newFake(t)
	fake.SetHeartbeatInterval(time.Hour)
	g, logs, stop := run(fake, make(chan event))
	for i := range posts {
		fake.Post("", ch, alice, fmt.Sprint(i))
	}
	waitFor(t, "the pause logged", func() bool { return strings.Contains(logs.String(), "the gateway is not read") })
	time.Sleep(200 * time.Millisecond) // were it reading on, it would have read the rest by now
	stop()                             // run has returned: g is the test's to read
	if len(g.pending) != limit {
		t.Fatalf("%d dispatches held, want the cap of %d", len(g.pending), limit)
	}
	var held []string
	for _, e := range g.pending {
		var m struct{ Content string }
		json.Unmarshal(e.D, &m) //nolint:errcheck // READY has none
		held = append(held, e.T+" "+m.Content)
	}
	if want := []string{"READY ", "MESSAGE_CREATE 0", "MESSAGE_CREATE 1", "MESSAGE_CREATE 2"}; !slices.Equal(held, want) {
		t.Errorf("held %q, want %q", held, want)
	}
	if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "held=4") {
		t.Errorf("the pause is not a warning naming what is held:\n%s", logs)
	}

	// A channel that starts taking late.
	fake = newFake(t)
	fake.SetHeartbeatInterval(time.Hour)
	events := make(chan event)
	_, logs, stop = run(fake, events)
	defer stop()
	for i := range posts {
		fake.Post("", ch, alice, fmt.Sprint(i))
	}
	waitFor(t, "the pause logged", func() bool { return strings.Contains(logs.String(), "the gateway is not read") })
	var got []string
	deadline := time.After(10 * time.Second)
	for len(got) < posts {
		select {
		case e := <-events:
			if e.T == "MESSAGE_CREATE" {
				var m struct{ Content string }
				if err := json.Unmarshal(e.D, &m); err != nil {
					t.Fatal(err)
				}
				got = append(got, m.Content)
			}
		case <-deadline:
			t.Fatalf("after the pause the channel got %q of %d messages", got, posts)
		}
	}
	for i, c := range got {
		if c != fmt.Sprint(i) {
			t.Fatalf("after the pause the messages came as %q, want 0 to %d in order", got, posts-1)
		}
	}
	if !strings.Contains(logs.String(), "reading the gateway again") {
		t.Errorf("the end of the pause is not logged:\n%s", logs)
	}
}
