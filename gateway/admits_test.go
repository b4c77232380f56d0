package gateway

import (
	"strings"
	"testing"

	"github.com/nbots/nb/gateway/bus"
	"github.com/nbots/nb/gateway/channel"
)

// TestInboxAdmitsBeforeMedia: the gateway's inbox tells a channel whose
// media it may fetch (the owner's, not a stranger's, nor unmentioned
// group chatter) without handing out a pairing code: the stranger's
// message, published after, still gets its code; once paired, the
// stranger's media are fetched too.
func TestInboxAdmitsBeforeMedia(t *testing.T) {
	h := newHarness(t)
	in := h.g.Inbox("telegram")
	stranger := bus.Inbound{Channel: "telegram", SenderID: "2", ChatID: "2", Content: "a file for you"}
	group := tg("chatter")
	group.Metadata = map[string]any{channel.MetaGroup: true, channel.MetaMentioned: false}
	for _, c := range []struct {
		m    bus.Inbound
		want bool
	}{{tg("my file"), true}, {stranger, false}, {group, false}} {
		if got := channel.Admits(in, c.m); got != c.want {
			t.Errorf("%s %q: admitted %v", c.m.SenderID, c.m.Content, got)
		}
	}
	h.send(t, stranger)
	m := h.next(t)
	if !strings.Contains(m.Content, "pairing code is ") {
		t.Fatalf("the stranger's first message: %q", m.Content)
	}
	code := strings.TrimSuffix(strings.Fields(strings.SplitAfter(m.Content, "pairing code is ")[1])[0], ":")
	h.send(t, tg("/pair "+code))
	h.next(t)
	if !channel.Admits(in, stranger) {
		t.Error("a paired sender's media are not admitted")
	}
}
