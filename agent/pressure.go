package agent

import (
	"fmt"
	"unicode/utf8"

	"github.com/nbots/nb/provider"
)

// PressureShare is the share of the context budget (Agent.Budget) at
// which the agent warns that the context is nearly full: the reference's
// 80%.
const PressureShare = 0.8

// abridgeKeep is how many characters of an old tool output are still
// sent once it is abridged: its head and its tail, half each.
const abridgeKeep = 1000

// contextPressure watches how full an exchange's requests are: it keeps
// the last request's size, warns once when it passes PressureShare of the
// budget, and says when old tool outputs were abridged to fit.
type contextPressure struct {
	tokens   int
	warned   bool
	abridged int
}

// check measures req, the request about to be sent, and emits a Warning
// the first time it takes PressureShare of the budget or more, and each
// time more old tool outputs had to be abridged.
func (p *contextPressure) check(a *Agent, req provider.Request) {
	p.tokens = requestTokens(req)
	if a.Budget <= 0 {
		return
	}
	// The conversation as it is, before old outputs were abridged to
	// fit, is what nears the budget.
	if wanted := max(a.wanted, p.tokens); !p.warned && float64(wanted) >= PressureShare*float64(a.Budget) {
		p.warned = true
		a.emit(Event{Kind: Warning, ContextTokens: wanted, ContextBudget: a.Budget,
			Text: fmt.Sprintf("Context usage at ~%d%% of the context budget (~%d of %d estimated tokens)", wanted*100/a.Budget, wanted, a.Budget)})
	}
	if a.abridged > p.abridged {
		p.abridged = a.abridged
		a.emit(Event{Kind: Warning, ContextTokens: p.tokens, ContextBudget: a.Budget,
			Text: fmt.Sprintf("Context nearly full: %s abridged (head and tail kept; the whole outputs stay in the conversation's state)", plural(a.abridged, "old tool output", "old tool outputs"))})
	}
}

// requestTokens estimates the size of a request: its system text, its
// backdrop and its messages.
func requestTokens(req provider.Request) int {
	n := estimateTokens(req.System) + estimateTokens(req.Backdrop)
	for _, m := range req.Messages {
		n += messageTokens(m)
	}
	return n
}

// abridge shortens the oldest tool outputs, head and tail kept, until
// msgs fit budget (estimated tokens) or none is left to shorten: in a
// long exchange the old outputs go before whole turns do (Fit). The
// results of the last round of calls stay whole, and so do the stored
// ones (the state keeps every output; this is what is sent). It returns
// msgs (a copy when something changed) and how many outputs it
// shortened.
func abridge(msgs []provider.Message, budget int) ([]provider.Message, int) {
	if budget <= 0 {
		return msgs, 0
	}
	total := 0
	last := -1 // the last assistant message with calls: its results stay whole
	for i, m := range msgs {
		total += messageTokens(m)
		if m.Role == provider.RoleAssistant && len(m.ToolCalls) > 0 {
			last = i
		}
	}
	if total <= budget {
		return msgs, 0
	}
	var out []provider.Message
	n := 0
	for i := 0; i < last && total > budget; i++ {
		m := msgs[i]
		if m.Role != provider.RoleTool || utf8.RuneCountInString(m.Content) <= 2*abridgeKeep {
			continue
		}
		if out == nil {
			out = append([]provider.Message(nil), msgs...)
		}
		before := messageTokens(m)
		m.Content = abridgeText(m.Content)
		out[i] = m
		total -= before - messageTokens(m)
		n++
	}
	if out == nil {
		return msgs, 0
	}
	return out, n
}

// abridgeText keeps the head and the tail of an old tool output.
func abridgeText(s string) string {
	n := utf8.RuneCountInString(s)
	half := abridgeKeep / 2
	head, tail := s[:runeOffset(s, half)], s[runeOffset(s, n-half):]
	return head + fmt.Sprintf("\n\n[nb: this earlier tool output was abridged to fit the context: %d characters from its middle are left out. The whole output is kept in the conversation's state; call the tool again if you need it.]\n\n", n-2*half) + tail
}
