package gateway

import (
	"strings"
	"sync"
	"time"

	"github.com/nbots/nb/agent"
	"github.com/nbots/nb/tool"
)

// The live output of a running command in a turn's progress message.
const (
	// liveInterval is the least time between two updates of a turn's
	// live output: about the pace at which chat platforms take edits of
	// one message (Telegram about one a second in a private chat); a
	// channel's own pacer spaces them further where its platform asks
	// (Telegram's groups).
	liveInterval = time.Second
	// liveLines and liveChars bound what is shown: the last lines of the
	// output, as a terminal would.
	liveLines = 8
	liveChars = 1200
)

// liveOutput gathers what the tools of a turn print while they run
// (agent.ToolOutput events) and says when to show its last lines in the
// turn's progress message: at most once per liveInterval, and only when
// something new came.
type liveOutput struct {
	mu    sync.Mutex
	hint  string // the running call, as the tool hint shows it
	tail  string
	fresh bool
	last  time.Time
	now   func() time.Time
}

// event takes one of the turn's events and returns the progress text to
// publish now ("" for none).
func (l *liveOutput) event(ev agent.Event) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now
	if l.now != nil {
		now = l.now
	}
	switch ev.Kind {
	case agent.ToolStart:
		if ev.Call != nil {
			l.hint, l.tail, l.fresh = toolHint([]tool.Call{*ev.Call}), "", false
		}
	case agent.ToolEnd, agent.RoundStart:
		l.tail, l.fresh = "", false
	case agent.ToolOutput:
		l.tail = lastLines(l.tail+ev.Text, liveLines, liveChars)
		l.fresh = true
		if t := now(); t.Sub(l.last) >= liveInterval && strings.TrimSpace(l.tail) != "" {
			l.last, l.fresh = t, false
			return l.text()
		}
	}
	return ""
}

// text is the progress message: the running call and its last lines.
func (l *liveOutput) text() string {
	out := strings.TrimRight(l.tail, "\n")
	out = strings.ReplaceAll(out, "```", "ˋˋˋ") // the output cannot close the block
	head := "⚙ running"
	if l.hint != "" {
		head += " " + l.hint
	}
	return head + "\n```\n" + out + "\n```"
}

// lastLines keeps the end of s: at most lines lines and chars bytes
// (cut at a line start where it can).
func lastLines(s string, lines, chars int) string {
	if len(s) > chars {
		s = s[len(s)-chars:]
		if i := strings.IndexByte(s, '\n'); i >= 0 && i < len(s)-1 {
			s = s[i+1:]
		}
		for len(s) > 0 && s[0]&0xC0 == 0x80 { // not in the middle of a character
			s = s[1:]
		}
	}
	trimmed := strings.TrimRight(s, "\n")
	if n := strings.Count(trimmed, "\n"); n >= lines {
		cut := n - lines + 1
		for i := 0; i < len(trimmed); i++ {
			if trimmed[i] == '\n' {
				cut--
				if cut == 0 {
					return s[i+1:]
				}
			}
		}
	}
	return s
}
