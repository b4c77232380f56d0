package gateway

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nbots/nb/gateway/access"
	"github.com/nbots/nb/gateway/bus"
)

// /start greets as nanobot does; /restart answers "Restarting...", then
// restarts the gateway, for the owner only.
func TestStartAndRestart(t *testing.T) {
	restarted := make(chan struct{}, 1)
	h, _ := newHarnessWith(t, &echoRunner{}, func(g *Gateway) { g.Restart = func() { restarted <- struct{}{} } })
	m := tg("/start")
	m.Metadata = map[string]any{"first_name": "Alice"}
	h.send(t, m)
	if got := h.next(t).Content; got != "👋 Hi Alice! I'm nb.\n\nSend me a message and I'll respond!\nType /help to see available commands." {
		t.Fatalf("/start: %q", got)
	}
	h.send(t, tg("/restart@nb_bot"))
	if got := h.next(t).Content; got != "Restarting..." {
		t.Fatalf("/restart: %q", got)
	}
	select {
	case <-restarted:
	case <-time.After(5 * time.Second):
		t.Fatal("the gateway was not restarted")
	}
	guest := bus.Inbound{Channel: "telegram", SenderID: "2", ChatID: "2", Content: "/restart"}
	if reply, ok := h.g.command(context.Background(), guest, access.Guest); !ok || !strings.Contains(reply, "Only my owner") {
		t.Fatalf("a guest's /restart: %q", reply)
	}
	select {
	case <-restarted:
		t.Fatal("a guest restarted the gateway")
	case <-time.After(1500 * time.Millisecond):
	}
	h.g.Restart = nil
	if reply, _ := h.g.command(context.Background(), tg("/restart"), access.Owner); reply != "Restarting is not available here." {
		t.Fatalf("without Restart: %q", reply)
	}
}
