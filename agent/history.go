package agent

import (
	"encoding/json"
	"os"
	"strconv"
	"strings"

	"github.com/nbots/nb/cartridge"
	"github.com/nbots/nb/provider"
	"github.com/nbots/nb/state"
)

// request builds the provider request for the current history.
func (a *Agent) request(b cartridge.Behavior, stream bool) provider.Request {
	// The reference ignored behaviors.interaction.instruction; the
	// specification lists it as what the bot should do next, so it follows
	// the directive in the system text, which every provider can place.
	system := joinNonEmpty("\n\n", b.Directive, b.Instruction)
	a.mu.Lock()
	msgs := Messages(a.History, a.Limits)
	a.mu.Unlock()
	budget := a.Budget
	if budget > 0 {
		// Fit reads a budget of 0 or less as no limit; a system text that
		// takes the whole budget leaves room for the last turn only.
		budget = max(budget-estimateTokens(system)-estimateTokens(b.Backdrop), 1)
	}
	req := provider.Request{System: system, Backdrop: b.Backdrop, Messages: Fit(msgs, budget), Stream: stream}
	if a.Tools != nil {
		req.Tools = a.Tools.Specs()
	}
	return req
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
// conversation. Partial answers are left out; tool output is truncated for
// the model (the full output stays in the state).
func Messages(history []state.Event, limits Truncation) []provider.Message {
	var out []provider.Message
	// pending are the calls of the last assistant message still without a
	// result: a state written by an interrupted run may lack them, and
	// providers refuse calls left unanswered.
	var pending []provider.ToolCall
	answer := func() {
		for _, c := range pending {
			out = append(out, provider.Message{Role: provider.RoleTool, Content: InterruptedText, ToolCallID: c.ID, ToolName: c.Name})
		}
		pending = nil
	}
	for _, ev := range history {
		if ev.Who != "tool" {
			answer()
		}
		switch ev.Who {
		case "user":
			out = append(out, provider.Message{Role: provider.RoleUser, Content: Text(ev.Message)})
		case "AI":
			if ev.Partial {
				continue
			}
			m := provider.Message{Role: provider.RoleAssistant, Content: Text(ev.Message)}
			if ev.Meta != nil {
				m.Reasoning, _ = ev.Meta["reasoning"].(string)
				if extra, ok := ev.Meta["extra"].(map[string]any); ok {
					m.Extra = extra
				}
				m.ToolCalls = decodeCalls(ev.Meta["tool_calls"])
			}
			pending = append([]provider.ToolCall(nil), m.ToolCalls...)
			out = append(out, m)
		case "tool":
			m := provider.Message{Role: provider.RoleTool, Content: limits.Apply(Text(ev.Message))}
			if ev.Meta != nil {
				m.ToolCallID, _ = ev.Meta["id"].(string)
				m.ToolName, _ = ev.Meta["name"].(string)
			}
			for i, c := range pending {
				if c.ID == m.ToolCallID {
					pending = append(pending[:i], pending[i+1:]...)
					break
				}
			}
			out = append(out, m)
		}
	}
	answer()
	return out
}

func decodeCalls(v any) []provider.ToolCall {
	list, _ := v.([]any)
	var out []provider.ToolCall
	for _, item := range list {
		m, _ := item.(map[string]any)
		if m == nil {
			continue
		}
		c := provider.ToolCall{}
		c.ID, _ = m["id"].(string)
		c.Name, _ = m["name"].(string)
		switch args := m["arguments"].(type) {
		case string:
			c.Arguments = args
		case nil:
			c.Arguments = "{}"
		default:
			b, _ := json.Marshal(args)
			c.Arguments = string(b)
		}
		out = append(out, c)
	}
	return out
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
// state.budget, else NANO_BOTS_HISTORY_BUDGET, else a size fitted to the
// model's family (leaving room for the answer).
func Budget(c *cartridge.Cartridge) int {
	if v, ok := c.Get("state", "budget"); ok {
		if n, ok := v.(int64); ok && n > 0 {
			return int(n)
		}
	}
	if n, err := strconv.Atoi(os.Getenv("NANO_BOTS_HISTORY_BUDGET")); err == nil && n > 0 {
		return n
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
