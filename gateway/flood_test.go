package gateway

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/nbots/nb/gateway/bus"
)

// TestFloodFromOneChatIsBounded: while a turn runs, one chat sends 5,000
// messages of 10 KB (the probe's flood grew the process from 33 MB to
// 1.03 GB). Past gateway.limits.queuedPerChat they are dropped, the chat
// is told once, memory stays flat, and once the queue drained the chat
// is answered again.
func TestFloodFromOneChatIsBounded(t *testing.T) {
	const limit = 5
	h := newHarness(t, func(g *Gateway) { g.Bus.(*bus.Local).MaxQueued = limit })
	h.r.started = make(chan string, 10_000)
	h.send(t, tg("slow"))
	<-h.r.started
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	big := strings.Repeat("x", 10<<10)
	for i := range 5000 {
		m := tg(fmt.Sprintf("%d %s", i, big))
		m.ID = fmt.Sprint(i)
		h.send(t, m) // a drop is not an error: the platform must not send it again
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	if grew := int64(after.HeapInuse) - int64(before.HeapInuse); grew > 10<<20 {
		t.Errorf("the heap grew by %d MB for one chat's flood", grew>>20)
	}
	notice := h.next(t)
	if !strings.Contains(notice.Content, "writing faster than I can answer") || notice.ChatID != "1" {
		t.Fatalf("the flood notice: %+v", notice)
	}
	h.send(t, tg("/stop"))
	answered := 0
	for done := false; !done; {
		select {
		case m := <-h.out:
			switch {
			case m.Kind != bus.Message:
			case strings.HasPrefix(m.Content, "echo: "):
				answered++
			case strings.Contains(m.Content, "writing faster"):
				t.Fatal("the chat was told twice in one flood")
			}
		case <-time.After(time.Second):
			done = true
		}
	}
	if answered > limit {
		t.Errorf("%d messages answered: more than the %d the queue holds", answered, limit)
	}
	h.send(t, tg("calm again"))
	for {
		m := h.next(t)
		if m.Content == "echo: calm again" {
			break
		}
	}
}
