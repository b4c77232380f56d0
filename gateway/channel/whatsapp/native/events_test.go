//go:build whatsmeow

package native

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.mau.fi/whatsmeow/types/events"

	"github.com/nbots/nb/gateway/channel"
	"github.com/nbots/nb/gateway/channel/channeltest"
	"github.com/nbots/nb/gateway/channel/whatsapp"
)

// running starts a channel on p and returns it with its connection and
// the channel of Run's result.
func running(t *testing.T, p *platform, failing int) (*Channel, *fakeClient, <-chan error, context.CancelFunc) {
	t.Helper()
	var fc *fakeClient
	c := p.channelOn(t, whatsapp.Config{}, channeltest.Folders(t, channel.Env{}), func(f *fakeClient) { fc, f.failing = f, failing })
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	errc := make(chan error, 1)
	ready := make(chan struct{})
	go func() { errc <- c.Run(ctx, &channeltest.Inbox{}, func() { close(ready) }) }()
	select {
	case <-ready:
	case err := <-errc:
		t.Fatalf("Run: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("not ready")
	}
	return c, fc, errc, cancel
}

// The connection's state follows whatsmeow's events: down with a reason
// while whatsmeow reconnects, up again on events.Connected; the first
// connection is retried by Run itself.
func TestReconnection(t *testing.T) {
	p := newPlatform()
	c, fc, errc, _ := running(t, p, 3) // three refused connections first
	channeltest.WaitStatus(t, c, channel.Connected)
	for _, tc := range []struct {
		evt    any
		state  channel.Connection
		reason string
	}{
		{&events.Disconnected{}, channel.Connecting, "disconnected from WhatsApp"},
		{&events.Connected{}, channel.Connected, ""},
		{&events.KeepAliveTimeout{ErrorCount: 3}, channel.Connecting, "did not answer 3 keepalives"},
		{&events.KeepAliveRestored{}, channel.Connected, ""},
		{&events.ConnectFailure{Reason: events.ConnectFailureServiceUnavailable, Message: "try later"}, channel.Connecting, "try later"},
		{&events.Connected{}, channel.Connected, ""},
		{&events.TemporaryBan{Code: events.TempBanSentToTooManyPeople, Expire: time.Hour}, channel.Connecting, "banned"},
		{&events.Connected{}, channel.Connected, ""},
	} {
		if !fc.dispatch(tc.evt) {
			t.Fatalf("%T not handled", tc.evt)
		}
		st := channeltest.WaitStatus(t, c, tc.state)
		if !strings.Contains(st.Reason, tc.reason) {
			t.Errorf("after %T: reason %q, want %q", tc.evt, st.Reason, tc.reason)
		}
	}
	select {
	case err := <-errc:
		t.Fatalf("Run returned %v on a recoverable event", err)
	default:
	}
}

// WhatsApp's final answers stop the channel with what to do.
func TestFinalEvents(t *testing.T) {
	for _, tc := range []struct {
		evt  any
		want string
	}{
		{&events.LoggedOut{Reason: events.ConnectFailureLoggedOut}, "nb gateway channels login whatsapp"},
		{&events.StreamReplaced{}, "stream replaced"},
		{&events.ClientOutdated{}, "outdated"},
	} {
		p := newPlatform()
		c, fc, errc, _ := running(t, p, 0)
		fc.dispatch(tc.evt)
		select {
		case err := <-errc:
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%T: Run returned %v, want it to say %q", tc.evt, err, tc.want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%T: Run did not stop", tc.evt)
		}
		if st := c.Status(); st.State == channel.Connected {
			t.Errorf("%T: still reported connected", tc.evt)
		}
		if p.cur != nil {
			t.Errorf("%T: the client was not disconnected", tc.evt)
		}
	}
}

// 100 disconnections while people write: every message is published
// once, none lost (each is redelivered until the handler has taken it).
func TestDisconnectsLoseNothing(t *testing.T) {
	p := newPlatform()
	e := channeltest.Folders(t, channel.Env{})
	in := &channeltest.Inbox{}
	const n = 100
	for i := range n {
		c := p.channelOn(t, whatsapp.Config{}, e, nil)
		stop := channeltest.Start(t, c, in)
		p.say("message " + string(rune('A'+i%26)) + strings.Repeat("!", i/26))
		if i%3 == 0 {
			in.Refuse(1)
		}
		stop()
	}
	c := p.channelOn(t, whatsapp.Config{}, e, nil)
	channeltest.Start(t, c, in)
	got := in.Wait(t, n)
	if u := in.Unique(); len(u) != n {
		t.Errorf("%d unique messages of %d", len(u), n)
	}
	seen := map[string]int{}
	for _, m := range got {
		seen[m.ID]++
	}
	for id, k := range seen {
		if k > 1 {
			t.Errorf("%s published %d times", id, k)
		}
	}
}
