package term

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nbots/nb/agent"
	"github.com/nbots/nb/tool"
)

// TestStatusLiveLines: a running tool's output shows at once under the
// status line, its last three lines, each cut to the width, with escape
// sequences and other control characters left out and a carriage return
// starting the line again; the erase clears them with the status.
func TestStatusLiveLines(t *testing.T) {
	var b strings.Builder
	var mu sync.Mutex
	s := &status{w: &b, mu: &mu, now: func() time.Time { return time.Unix(0, 0) }}
	mu.Lock()
	defer mu.Unlock()
	call := &tool.Call{Name: "exec"}
	s.onEvent(agent.Event{Kind: agent.ToolStart, Call: call})
	s.onEvent(agent.Event{Kind: agent.ToolOutput, Call: call, Text: "one\ntwo\nthree\n\x1b]0;pwned\x07fo\tur " + strings.Repeat("x", 100) + "\n10%\r50%"})
	got := b.String()
	want := "\x1bD\x1bD\x1bD\x1b[3A\x1b7\x1b[J\x1b[2mrunning exec… 0s\r\n  three\r\n  ]0;pwnedfo ur " + strings.Repeat("x", 57) + "…\r\n  50%\x1b[0m\x1b8"
	if got != want {
		t.Errorf("drawn\n%q\nwant\n%q", got, want)
	}
	b.Reset()
	s.onEvent(agent.Event{Kind: agent.ToolEnd, Call: call})
	if b.String() != "\x1b[J" {
		t.Errorf("erased with %q", b.String())
	}
}
