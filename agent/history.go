package agent

import (
	"strings"

	"github.com/nbots/nb/cartridge"
	"github.com/nbots/nb/provider"
	"github.com/nbots/nb/state"
	"github.com/nbots/nb/tool"
)

// request builds the provider request for the current history.
func (a *Agent) request(b cartridge.Behavior, stream bool) provider.Request {
	// The reference ignored behaviors.interaction.instruction; the
	// specification lists it as what the bot should do next, so it follows
	// the directive in the system text, which every provider can place. A
	// client's own system text comes last: the cartridge speaks first.
	system := joinNonEmpty("\n\n", a.Context, b.Directive, b.Instruction, a.System)
	msgs := Messages(a.History(), a.limitsFor)
	budget := a.Budget
	if budget > 0 {
		// Fit reads a budget of 0 or less as no limit; a system text that
		// takes the whole budget leaves room for the last turn only.
		budget = max(budget-estimateTokens(system)-estimateTokens(b.Backdrop), 1)
	}
	if a.squeeze > 0 && (budget <= 0 || a.squeeze < budget) {
		budget = a.squeeze // the provider refused a larger conversation
	}
	if budget > 0 {
		var n int
		a.wanted = requestTokens(provider.Request{System: system, Backdrop: b.Backdrop, Messages: msgs})
		msgs, n = abridge(msgs, budget)
		a.abridged = max(a.abridged, n)
	}
	req := provider.Request{System: system, Backdrop: b.Backdrop, Messages: Fit(msgs, budget), Stream: stream, User: a.User,
		Override: a.Override, Output: a.Structured, Stop: a.Stop}
	if a.Tools != nil {
		req.Tools = a.Tools.Specs()
	}
	req.Tools = append(req.Tools, a.External...)
	return req
}

// limitsFor is the truncation of one tool's output for the model: the
// cartridge's for the tool (builtins.limits), else the tool's own limits
// where it has them, else the agent's.
func (a *Agent) limitsFor(name string) Truncation {
	t := a.Limits
	if tl, ok := a.Tools.Lookup(name); ok {
		if l, ok := tl.(tool.Limited); ok {
			lim := l.OutputLimits()
			if lim.Chars > 0 {
				t.MaxChars = lim.Chars
			}
			if lim.Lines > 0 {
				t.MaxLines = lim.Lines
			}
			t.Tail = lim.Tail
		}
	}
	if len(a.ToolLimits) == 0 {
		return t // no key to normalize for each tool output of each request
	}
	if o, ok := a.ToolLimits[tool.MatchName(name)]; ok {
		if o.Chars > 0 {
			t.MaxChars = o.Chars
		}
		if o.Lines > 0 {
			t.MaxLines = o.Lines
		}
		if o.Mode != "" {
			t.Tail = o.Mode == "tail"
		}
	}
	return t
}

func joinNonEmpty(sep string, parts ...string) string {
	var out []string
	for _, p := range parts {
		if strings.TrimSpace(p) != "" {
			out = append(out, p)
		}
	}
	return strings.Join(out, sep)
}

// Messages converts the stored history into the provider-neutral
// conversation. limits gives the truncation of a tool's output for the
// model (the full output stays in the state); nil keeps it whole.
//
// What is sent always keeps the providers' rules, whatever the history
// holds (a state written by an interrupted run, by an older nb, or by two
// runs that interleaved before exchanges held their key): partial answers
// are left out; a user turn that never got an answer (a failed exchange)
// is not sent again, except the last one, which is being asked now; every
// call gets a result (InterruptedText when none was stored); results
// without a call just before them are left out.
func Messages(history []state.Event, limits func(tool string) Truncation) []provider.Message {
	// At most one message an event, and a result for each call left
	// without one: sized once, not grown at every turn's length.
	out := make([]provider.Message, 0, len(history)+1)
	// pending are the calls of the last assistant message still without a
	// result.
	var pending []provider.ToolCall
	answer := func() {
		for _, c := range pending {
			out = append(out, provider.Message{Role: provider.RoleTool, Content: InterruptedText, ToolCallID: c.ID, ToolName: c.Name})
		}
		pending = nil
	}
	// inRound tells whether tool results may follow: the last message
	// sent is an assistant's calls or a result of them.
	inRound := false
	for i, ev := range history {
		if ev.Who != state.RoleTool {
			answer()
			inRound = false
		}
		switch ev.Who {
		case state.RoleUser:
			if unanswered(history, i) {
				continue
			}
			out = append(out, provider.Message{Role: provider.RoleUser, Content: Text(ev.Message), Images: ev.Images})
		case state.RoleAI:
			if ev.Partial {
				continue
			}
			m := provider.Message{Role: provider.RoleAssistant, Content: Text(ev.Message)}
			m.Reasoning, m.Extra = ev.Reasoning, ev.Extra
			for _, c := range ev.ToolCalls {
				m.ToolCalls = append(m.ToolCalls, provider.ToolCall{ID: c.ID, Name: c.Name, Arguments: c.Arguments})
			}
			pending = append([]provider.ToolCall(nil), m.ToolCalls...)
			inRound = len(m.ToolCalls) > 0
			out = append(out, m)
		case state.RoleTool:
			m := provider.Message{Role: provider.RoleTool, Images: ev.Images, ToolCallID: ev.Result.ID, ToolName: ev.Result.Name, IsError: ev.Result.IsError}
			matched := false
			for i, c := range pending {
				if c.ID == m.ToolCallID {
					pending = append(pending[:i], pending[i+1:]...)
					matched = true
					break
				}
			}
			if !inRound || !matched {
				continue // an orphan: no call of this round asked for it
			}
			text := Text(ev.Message)
			if limits != nil {
				text = limits(m.ToolName).Apply(text)
			}
			m.Content = text
			out = append(out, m)
		}
	}
	answer()
	return out
}

// unanswered tells whether the user turn history[i] is followed by
// another user turn before any complete answer: a failed exchange, whose
// question must not be sent again (the last user turn, the one being
// asked, is never unanswered).
func unanswered(history []state.Event, i int) bool {
	for _, ev := range history[i+1:] {
		switch {
		case ev.Who == state.RoleUser:
			return true
		case ev.Who == state.RoleAI && !ev.Partial, ev.Who == state.RoleTool:
			return false
		}
	}
	return false
}

// estimateTokens is the usual four-characters-a-token estimate.
func estimateTokens(s string) int { return (len(s) + 3) / 4 }

func messageTokens(m provider.Message) int {
	n := estimateTokens(m.Content) + 4
	for _, c := range m.ToolCalls {
		n += estimateTokens(c.Name) + estimateTokens(c.Arguments) + 4
	}
	return n
}

// Fit leaves out the oldest turns until the conversation fits the budget
// (in estimated tokens). Turns start at user messages, so a tool call is
// never separated from its result; the last turn is always kept. A budget
// of 0 or less keeps everything.
func Fit(msgs []provider.Message, budget int) []provider.Message {
	if budget <= 0 {
		return msgs
	}
	total := 0
	for _, m := range msgs {
		total += messageTokens(m)
	}
	start := 0
	for total > budget {
		next := -1
		for i := start + 1; i < len(msgs); i++ {
			if msgs[i].Role == provider.RoleUser {
				next = i
				break
			}
		}
		if next < 0 {
			break // only the last turn is left
		}
		for _, m := range msgs[start:next] {
			total -= messageTokens(m)
		}
		start = next
	}
	return msgs[start:]
}

// Budget is the history budget in estimated tokens: the cartridge's
// state.budget, else fallback (NANO_BOTS_HISTORY_BUDGET, read by the
// caller) when positive, else a size fitted to the model's family
// (leaving room for the answer).
func Budget(c *cartridge.Cartridge, fallback int) int {
	if v, ok := c.Get("state", "budget"); ok {
		if n, ok := v.(int64); ok && n > 0 {
			return int(n)
		}
	}
	if fallback > 0 {
		return fallback
	}
	if v, ok := c.Get("provider", "settings", "options", "num_ctx"); ok {
		if n, ok := v.(int64); ok && n > 0 {
			return int(n) * 3 / 4
		}
	}
	model := strings.ToLower(c.String("provider", "settings", "model") + c.String("provider", "options", "model"))
	return budgetForModel(c.String("provider", "id"), model)
}

func budgetForModel(providerID, model string) int {
	has := func(s ...string) bool {
		for _, x := range s {
			if strings.Contains(model, x) {
				return true
			}
		}
		return false
	}
	switch {
	case has("gemini"):
		return 500_000
	case has("claude"):
		return 150_000
	case has("gpt-4o", "gpt-4.1", "gpt-4-turbo", "gpt-5", "o1", "o3", "o4", "command-r", "command-a", "mistral-large", "mistral-medium", "mistral-small", "codestral", "sabia-3", "llama-3.1", "llama3.1", "qwen"):
		return 100_000
	case has("gpt-3.5"):
		return 12_000
	case has("gpt-4"):
		return 6_000
	case providerID == "ollama":
		return 3_000 // Ollama's default context is small unless num_ctx says otherwise
	}
	return 24_000
}
