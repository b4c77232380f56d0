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
}

// set starts waiting for what, to be shown after delay. Called with mu held.
func (s *status) set(what string, delay time.Duration) {
	now := s.now()
	if what == s.what && what != "" {
		return
	}
	s.erase()
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

// draw writes the status after the cursor. Called with mu held.
func (s *status) draw() {
	secs := int(s.now().Sub(s.from).Round(time.Second) / time.Second)
	text := fmt.Sprintf("%s… %ds", s.what, secs)
	io.WriteString(s.w, "\x1b7\x1b[K\x1b[2m"+text+"\x1b[0m\x1b8") //nolint:errcheck // a terminal
	s.up = true
}

// erase removes a drawn status. Called with mu held.
func (s *status) erase() {
	if s.up {
		io.WriteString(s.w, "\x1b[K") //nolint:errcheck // a terminal
		s.up = false
	}
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
	case agent.TextDelta, agent.Answer, agent.Feedback, agent.RoundEnd, agent.ToolEnd:
		s.stop()
	}
}
