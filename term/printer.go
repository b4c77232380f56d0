package term

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/nbots/nb/agent"
	"github.com/nbots/nb/cartridge"
	"github.com/nbots/nb/color"
	"github.com/nbots/nb/provider"
)

// Printer renders an agent's events for one mode: streamed chunks as they
// arrive (each coloured on its own), the whole answer when not streamed,
// and tool feedback wrapped in its affixes and colour.
type Printer struct {
	W io.Writer
	// Err receives notices (retries, a busy state key); nil drops them.
	Err io.Writer
	// MaxRetries is the retry policy's count, shown with each retry.
	MaxRetries int
	// Status, when set, is a terminal where nb shows what it waits for
	// after two quiet seconds ("waiting for openai gpt-4o… 3s",
	// "thinking… 2s"); nil shows nothing (pipes, TERM=dumb).
	Status    io.Writer
	Cartridge *cartridge.Cartridge
	Mode      cartridge.Mode
	Color     bool
	// Wrote is set once anything was written by OnEvent.
	Wrote bool

	sgr     string // the output colour's escape sequence, once known
	sgrDone bool

	mu     sync.Mutex
	status *status
	// context and budget are the last request's figures; usage and
	// rounds sum the session's (Status).
	context, budget int
	usage           provider.Usage
	rounds          int
}

// Prefix writes the output prefix.
func (p *Printer) Prefix() { p.write(p.Cartridge.Affix(p.Mode, "output", "prefix")) }

// Suffix writes the output suffix.
func (p *Printer) Suffix() { p.write(p.Cartridge.Affix(p.Mode, "output", "suffix")) }

func (p *Printer) write(s string) {
	if s != "" {
		io.WriteString(p.W, s) //nolint:errcheck // a closed pipe ends the program elsewhere
	}
}

// EndStatus erases the waiting status at the end of an exchange.
func (p *Printer) EndStatus() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.status != nil {
		p.status.stop()
	}
}

// OnEvent renders one agent event.
func (p *Printer) OnEvent(ev agent.Event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.Status != nil {
		if p.status == nil {
			p.status = &status{w: p.Status, mu: &p.mu, now: time.Now}
		}
		p.status.onEvent(ev)
	}
	switch ev.Kind {
	case agent.TextDelta, agent.Answer:
		p.Wrote = true
		if !p.sgrDone {
			p.sgrDone = true
			if p.Color {
				p.sgr, _ = color.SGR(p.Cartridge.OutputColor(p.Mode))
			}
		}
		p.write(color.Wrap(ev.Text, p.sgr))
	case agent.Feedback:
		p.Wrote = true
		p.write(p.Feedback(ev.Action, ev.Text))
	case agent.Retry:
		p.notice(fmt.Sprintf("%v; retrying in %.1fs (%d/%d)", ev.Err, ev.Delay.Seconds(), ev.Attempt, max(p.MaxRetries, ev.Attempt)))
	case agent.Waiting, agent.Warning:
		p.notice(ev.Text)
	case agent.LoopDetection:
		if !ev.IsError { // the stop is the exchange's result, which the front-end shows
			p.notice(ev.Text)
		}
	case agent.RoundStart:
		p.context, p.budget = ev.ContextTokens, ev.ContextBudget
	case agent.RoundEnd:
		p.usage.Add(ev.Usage)
		p.rounds++
	}
}

// Figures are what /status shows: the last request's size against the
// context budget, and the tokens the session used so far.
func (p *Printer) Figures() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.rounds == 0 {
		return "nothing sent yet"
	}
	var b strings.Builder
	if p.budget > 0 {
		fmt.Fprintf(&b, "context: ~%d of %d estimated tokens (%d%%)\n", p.context, p.budget, p.context*100/p.budget)
	}
	u := p.usage
	fmt.Fprintf(&b, "tokens this session: %d in (%d from the cache, %d written to it), %d out (%d reasoning), %d requests",
		u.InputTokens, u.CacheReadTokens, u.CacheWriteTokens, u.OutputTokens, u.ReasoningTokens, p.rounds)
	return b.String()
}

// notice writes one line to Err. Called with mu held.
func (p *Printer) notice(msg string) {
	if p.status != nil {
		p.status.erase()
	}
	if p.Err != nil {
		fmt.Fprintln(p.Err, "nb: "+msg)
	}
}

// Feedback is the text of tool feedback as shown: prefix, message and
// suffix, the whole wrapped in the action's colour.
func (p *Printer) Feedback(action cartridge.ToolAction, text string) string {
	c := p.Cartridge
	s := c.ToolSetting(p.Mode, action, "prefix") + text + c.ToolSetting(p.Mode, action, "suffix")
	return Paint(s, c.ToolSetting(p.Mode, action, "color"), p.Color)
}
