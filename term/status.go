package term

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/nbots/nb/agent"
)

// statusDelay is how long nothing may arrive before nb says what it is
// waiting for.
const statusDelay = 2 * time.Second

// status is the line that says what nb waits for (a provider, a tool, a
// model's hidden reasoning), shown on a terminal's stderr after a quiet
// while and erased as soon as output comes. It is drawn after the cursor
// with the cursor saved and restored, so whatever is written next starts
// where it would have, over the erased status.
type status struct {
	w    io.Writer
	mu   *sync.Mutex // the printer's: status and output never interleave
	what string      // what is awaited; "" when nothing is
	show time.Time   // when to show it
	from time.Time   // since when it is awaited
	up   bool        // drawn on the terminal
	gen  int         // bumps on every change; a ticker of an old one stops
	now  func() time.Time
	// live is the running tool's output so far (its last lines), shown
	// under the status line.
	live liveTail
}

// set starts waiting for what, to be shown after delay. Called with mu held.
func (s *status) set(what string, delay time.Duration) {
	now := s.now()
	if what == s.what && what != "" {
		return
	}
	s.erase()
	s.live = liveTail{}
	s.what, s.from, s.show = what, now, now.Add(delay)
	s.gen++
	if what == "" {
		return
	}
	gen := s.gen
	go s.tick(gen, delay)
}

// tick redraws the status every second while it stands.
func (s *status) tick(gen int, delay time.Duration) {
	t := time.NewTimer(delay)
	defer t.Stop()
	for {
		<-t.C
		s.mu.Lock()
		if s.gen != gen {
			s.mu.Unlock()
			return
		}
		s.draw()
		s.mu.Unlock()
		t.Reset(time.Second)
	}
}

// draw writes the status after the cursor, and under it the last lines
// of the running tool's output. Room for those lines is made first with
// index (ESC D, down a line, scrolling at the bottom, keeping the column)
// and cursor-up, so the saved cursor is still where output goes on.
// Called with mu held.
func (s *status) draw() {
	secs := int(s.now().Sub(s.from).Round(time.Second) / time.Second)
	var b strings.Builder
	lines := s.live.lines()
	if n := len(lines); n > 0 {
		fmt.Fprintf(&b, "%s\x1b[%dA", strings.Repeat("\x1bD", n), n)
	}
	fmt.Fprintf(&b, "\x1b7\x1b[J\x1b[2m%s… %ds", s.what, secs)
	for _, l := range lines {
		b.WriteString("\r\n  " + l)
	}
	b.WriteString("\x1b[0m\x1b8")
	io.WriteString(s.w, b.String()) //nolint:errcheck // a terminal
	s.up = true
}

// erase removes a drawn status and the lines under it. Called with mu
// held.
func (s *status) erase() {
	if s.up {
		io.WriteString(s.w, "\x1b[J") //nolint:errcheck // a terminal
		s.up = false
	}
}

// liveLines is how many of a running tool's last lines are shown, and
// liveWidth how much of each.
const (
	liveLines = 3
	liveWidth = 72
)

// liveTail keeps the last lines of a tool's live output, made safe to
// print: control characters are left out (an escape sequence's ESC too,
// so none reaches the terminal, though its other characters show), a
// carriage return starts the line again (a progress bar shows its last
// state), tabs become spaces.
type liveTail struct {
	done []string // complete lines, the last liveLines
	cur  []rune   // the line being printed
}

func (t *liveTail) write(text string) {
	for _, r := range text {
		switch {
		case r == '\n':
			t.done = append(t.done, string(t.cur))
			if len(t.done) > liveLines {
				t.done = t.done[len(t.done)-liveLines:]
			}
			t.cur = t.cur[:0]
		case r == '\r':
			t.cur = t.cur[:0]
		case r == '\t':
			t.cur = append(t.cur, ' ')
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0):
		default:
			t.cur = append(t.cur, r)
		}
	}
}

// lines are the lines to show, each cut to liveWidth.
func (t *liveTail) lines() []string {
	all := t.done
	if len(t.cur) > 0 {
		all = append(append([]string(nil), all...), string(t.cur))
	}
	if len(all) > liveLines {
		all = all[len(all)-liveLines:]
	}
	out := make([]string, len(all))
	for i, l := range all {
		if r := []rune(l); len(r) > liveWidth {
			l = string(r[:liveWidth-1]) + "…"
		}
		out[i] = l
	}
	return out
}

// stop erases the status and stops waiting. Called with mu held.
func (s *status) stop() {
	s.erase()
	s.what = ""
	s.gen++
}

// onEvent moves the status with the exchange. Called with mu held.
func (s *status) onEvent(ev agent.Event) {
	switch ev.Kind {
	case agent.RoundStart:
		what := "waiting for " + ev.Provider
		if ev.Model != "" {
			what += " " + ev.Model
		}
		s.set(what, statusDelay)
	case agent.Reasoning:
		s.set("thinking", 0)
	case agent.ToolStart:
		s.set("running "+strings.TrimSpace(ev.Call.Name), statusDelay)
	case agent.ToolOutput:
		// Shown at once: output is what the user waits for.
		if s.what != "" {
			s.live.write(ev.Text)
			s.draw()
		}
	case agent.TextDelta, agent.Answer, agent.Feedback, agent.RoundEnd, agent.ToolEnd:
		s.stop()
	}
}
