package agent

import (
	"context"
	"sync"

	"github.com/nbots/nb/tool"
)

// liveMax bounds the live output of one call that is passed on as
// ToolOutput events: a command that prints gigabytes is watched for its
// first megabyte, then its result says the rest.
const liveMax = 1 << 20

// liveStopped is the last ToolOutput of a call that printed more than
// liveMax.
const liveStopped = "\n[nb: the live output stops here; the whole output comes with the result]\n"

// liveContext is the context a call runs with: where scripts print (see
// scriptContext) and, when someone listens to the events, a
// tool.LiveOutput that turns what the tool prints as it runs into
// ToolOutput events. mu is shared by the calls of a round, so their
// events come one at a time; done ends the call's events (a piece that
// comes after it is dropped).
func (a *Agent) liveContext(ctx context.Context, call tool.Call, mu *sync.Mutex) (context.Context, func()) {
	ctx = a.scriptContext(ctx)
	if a.OnEvent == nil {
		return ctx, func() {}
	}
	c := call
	sent, closed := 0, false
	live := func(stream, text string) {
		mu.Lock()
		defer mu.Unlock()
		if closed || sent > liveMax || text == "" {
			return
		}
		sent += len(text)
		if sent > liveMax {
			text = liveStopped
		}
		a.emit(Event{Kind: ToolOutput, Call: &c, Stream: stream, Text: text})
	}
	return tool.WithLiveOutput(ctx, live), func() {
		mu.Lock()
		closed = true
		mu.Unlock()
	}
}
