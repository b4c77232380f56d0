package discord

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nbots/nb/gateway/channel"
	"github.com/nbots/nb/gateway/channel/channeltest"
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
