package slack

import (
	"context"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nbots/nb/gateway/channel"
	"github.com/nbots/nb/gateway/channel/slack/slacktest"
)

func waitConnections(t *testing.T, fake *slacktest.Server, n int, within time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	if err := fake.WaitConnected(ctx, n); err != nil {
		t.Fatalf("connection %d not opened within %s (%d opened)", n, within, fake.Connections())
	}
}

// TestRefreshReconnectsAtOnce: a disconnect message asking for a
// refresh is answered by a new connection right away, without the wait
// that follows a failure; what comes next arrives on it.
func TestRefreshReconnectsAtOnce(t *testing.T) {
	fake := newFake(t)
	h := startWith(t, fake, Config{}, func(c *Channel) { c.retryBase = 10 * time.Second })
	for i, reason := range []string{"warning", "refresh_requested"} {
		fake.DisconnectFor(reason)
		waitConnections(t, fake, i+2, 3*time.Second)
	}
	fake.Post(slacktest.Event{Channel: "D0001", ChannelType: "im", User: "U0001", Text: "after"})
	if m := h.in.Wait(t, 1)[0]; m.Content != "after" {
		t.Errorf("%+v", m)
	}
	waitAcked(t, fake)
}

// TestLinkDisabledWaits: Socket Mode turned off in the app's settings
// (link_disabled) is reported in the channel's status, and the next
// connection waits as after a failure.
func TestLinkDisabledWaits(t *testing.T) {
	fake := newFake(t)
	h := startWith(t, fake, Config{}, func(c *Channel) { c.retryBase = time.Second })
	t0 := time.Now()
	fake.DisconnectFor("link_disabled")
	var st channel.Status
	for i := 0; ; i++ {
		if st = h.ch.Status(); st.State == channel.Connecting {
			break
		}
		if i > 200 {
			t.Fatalf("still %+v after link_disabled", st)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if !strings.Contains(st.Reason, "Socket Mode is turned off") || !strings.Contains(st.Reason, "link_disabled") || !st.Lost {
		t.Errorf("status %+v", st)
	}
	waitConnections(t, fake, 2, 5*time.Second)
	if d := time.Since(t0); d < 900*time.Millisecond {
		t.Errorf("reconnected after %s: link_disabled is a failure, waited for", d)
	}
}

// TestAcknowledgements: each envelope is acknowledged with its
// envelope_id alone, as Slack documents ({"envelope_id":"…"}); slash
// commands and interactions are acknowledged and not carried.
func TestAcknowledgements(t *testing.T) {
	fake := newFake(t)
	h := start(t, fake, Config{})
	cmd := fake.PostEnvelope("slash_commands", map[string]any{"command": "/nb", "text": "hi", "user_id": "U0001", "channel_id": "C0001"})
	act := fake.PostEnvelope("interactive", map[string]any{"type": "block_actions", "user": map[string]any{"id": "U0001"}})
	fake.Post(slacktest.Event{Channel: "D0001", ChannelType: "im", User: "U0001", Text: "hello"})
	h.in.Wait(t, 1)
	waitAcked(t, fake)
	acks := fake.Acks()
	if len(acks) != 3 || !slices.Contains(acks, `{"envelope_id":"`+cmd+`"}`) || !slices.Contains(acks, `{"envelope_id":"`+act+`"}`) {
		t.Fatalf("acknowledgements %q", acks)
	}
	re := regexp.MustCompile(`^\{"envelope_id":"env-[0-9]+"\}$`)
	for _, a := range acks {
		if !re.MatchString(a) {
			t.Errorf("acknowledgement %q", a)
		}
	}
	time.Sleep(50 * time.Millisecond)
	if got := h.in.Unique(); len(got) != 1 || got[0].Content != "hello" {
		t.Errorf("carried %+v", got)
	}
}

// TestDeadConnection: a connection that stops answering pings (dropped
// by the network without a word) is replaced, and the envelope whose
// acknowledgement was lost comes again (retry_attempt 1) and is carried
// once.
func TestDeadConnection(t *testing.T) {
	fake := newFake(t)
	h := startWith(t, fake, Config{}, func(c *Channel) { c.pingEvery = 100 * time.Millisecond })
	fake.Deafen()
	fake.Post(slacktest.Event{Channel: "D0001", ChannelType: "im", User: "U0001", Text: "lost ack"})
	waitConnections(t, fake, 2, 5*time.Second)
	waitAcked(t, fake)
	time.Sleep(50 * time.Millisecond)
	if got := h.in.Unique(); len(got) != 1 || got[0].Content != "lost ack" {
		t.Errorf("carried %+v", got)
	}
}

// TestRateLimitedConnecting: a 429 of auth.test or apps.connections.open
// is waited out for as long as its Retry-After says, then the call is
// made again.
func TestRateLimitedConnecting(t *testing.T) {
	fake := newFake(t)
	fake.RateLimit("auth.test", 1, 1)
	fake.RateLimit("apps.connections.open", 1, 1)
	t0 := time.Now()
	start(t, fake, Config{})
	if d := time.Since(t0); d < 1900*time.Millisecond {
		t.Errorf("ready after %s: two Retry-After: 1 not waited out", d)
	}
	if a, o := fake.Calls("auth.test"), fake.Calls("apps.connections.open"); a != 2 || o != 2 {
		t.Errorf("auth.test called %d times, apps.connections.open %d", a, o)
	}
}
