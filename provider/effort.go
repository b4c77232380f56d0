package provider

import (
	"fmt"
	"strings"
)

// Effort is how much a model may reason before it answers: nb's one
// setting (provider.options.reasoning-effort) for what each API spells
// its own way. Each provider maps it onto its native key (OpenAI's
// reasoning_effort or reasoning.effort, Anthropic's thinking budget,
// Gemini's thinkingBudget, Ollama's think) unless the cartridge's settings
// set that key themselves: the native key wins.
type Effort string

// Efforts, from none (no reasoning where the model can do without) to high.
const (
	EffortNone    Effort = "none"
	EffortMinimal Effort = "minimal"
	EffortLow     Effort = "low"
	EffortMedium  Effort = "medium"
	EffortHigh    Effort = "high"
)

// efforts orders the efforts and gives each its token budget, for APIs
// that take a budget rather than a level. 1,024 is Anthropic's smallest
// thinking budget.
var efforts = []struct {
	effort Effort
	budget int
}{{EffortNone, 0}, {EffortMinimal, 1024}, {EffortLow, 2048}, {EffortMedium, 8192}, {EffortHigh, 24576}}

// Budget is the effort's thinking budget in tokens (0 for none or unset).
func (e Effort) Budget() int {
	for _, x := range efforts {
		if x.effort == e {
			return x.budget
		}
	}
	return 0
}

// ReasoningEffort reads provider.options.reasoning-effort; "" when the
// cartridge has none. A value that is not an effort is an error naming
// the ones there are.
func (c Config) ReasoningEffort() (Effort, error) {
	v := c.Option("reasoning-effort")
	if v == "" {
		return "", nil
	}
	var names []string
	for _, x := range efforts {
		if strings.EqualFold(v, string(x.effort)) {
			return x.effort, nil
		}
		names = append(names, string(x.effort))
	}
	return "", fmt.Errorf("%s: provider.options.reasoning-effort: %q is not an effort (one of %s)", c.ID, v, strings.Join(names, ", "))
}

// setIfAbsent sets a dotted path in body unless a value is there already.
func setIfAbsent(body map[string]any, path string, v any) {
	keys := strings.Split(path, ".")
	m := body
	for _, k := range keys[:len(keys)-1] {
		next, ok := m[k].(map[string]any)
		if !ok {
			if m[k] != nil {
				return
			}
			next = map[string]any{}
			m[k] = next
		}
		m = next
	}
	if _, ok := m[keys[len(keys)-1]]; !ok {
		m[keys[len(keys)-1]] = v
	}
}

// ApplyEffort writes e under an API's native path unless the body sets
// that path already: a level ("low") where the API takes one, else the
// effort's budget. Nothing happens for "".
func ApplyEffort(body map[string]any, e Effort, path string, budget bool) {
	if e == "" {
		return
	}
	if budget {
		setIfAbsent(body, path, e.Budget())
		return
	}
	setIfAbsent(body, path, string(e))
}

// RefuseEffort is for providers whose API has no way to set a reasoning
// effort: a cartridge that asks for one is refused at load, naming the
// option, rather than sent without it.
func (c Config) RefuseEffort() error {
	if c.Option("reasoning-effort") == "" {
		return nil
	}
	return fmt.Errorf("%s: provider.options.reasoning-effort: this provider's API has no reasoning effort; remove the option", c.ID)
}
