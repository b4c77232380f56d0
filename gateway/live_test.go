package gateway

import (
	"strings"
	"testing"
	"time"

	"github.com/nbots/nb/agent"
	"github.com/nbots/nb/tool"
)

// The live output shows the last lines of the running call, at most once
// per liveInterval, and starts afresh with each call.
func TestLiveOutputPacing(t *testing.T) {
	now := time.Unix(1000, 0)
	l := &liveOutput{now: func() time.Time { return now }}
	call := &tool.Call{Name: "exec", Arguments: map[string]any{"command": "make test"}}
	out := func(s string) string { return l.event(agent.Event{Kind: agent.ToolOutput, Call: call, Text: s}) }
	l.event(agent.Event{Kind: agent.ToolStart, Call: call})
	first := out("one\ntwo\n")
	if !strings.HasPrefix(first, "⚙ running exec(\"make test\")\n```\n") || !strings.HasSuffix(first, "one\ntwo\n```") {
		t.Errorf("first update %q", first)
	}
	now = now.Add(liveInterval / 2)
	if got := out("three\n"); got != "" {
		t.Errorf("an update within the interval: %q", got)
	}
	now = now.Add(liveInterval)
	var b strings.Builder
	for i := range 20 {
		b.WriteString(strings.Repeat("x", i) + "\n")
	}
	got := out(b.String())
	if lines := strings.Count(got, "\n"); strings.Contains(got, "three") || lines != liveLines+2 {
		t.Errorf("not the last %d lines (%d): %q", liveLines, lines, got)
	}
	l.event(agent.Event{Kind: agent.ToolEnd, Call: call})
	now = now.Add(liveInterval)
	if got := out("```\nnew"); strings.Contains(got, "xxx") || strings.Count(got, "```") != 2 {
		t.Errorf("after the call ended: %q", got)
	}
}
