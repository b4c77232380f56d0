package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/nbots/nb/provider"
	"github.com/nbots/nb/state"
	"github.com/nbots/nb/tool"
)

// The ReAct loop runs an agent as a text ReAct loop, for models and
// providers without tool calling: the model writes Thought, Action and
// Action Input lines, nb runs the action and answers with an Observation
// line, until the model writes a Final Answer. The tools are described in
// the system text, never offered as functions; a stop sequence keeps the
// model from writing the observation itself (and what it writes past one
// is ignored); an answer in neither form is fed back to the model as a
// format error. Tool calls go through the same checks as a round of
// function calls (validation, confirmation, feedback, events). The
// agent's MaxRounds bounds its steps.

// ReActStop is the stop sequence of a ReAct request.
const ReActStop = "\nObservation:"

// reactFormat is the part of the system text that teaches the format.
const reactFormat = `Use this format:

Thought: what to do next, and why
Action: the name of one tool, exactly as listed above
Action Input: the tool's input, as one JSON object on one line
Observation: the tool's result (it is written for you: stop after Action Input)
... (Thought, Action, Action Input and Observation repeat as needed)
Thought: I know the final answer
Final Answer: the answer to the task`

// askReAct runs one input through the ReAct loop.
func (a *Agent) askReAct(ctx context.Context, input string) (*Result, error) {
	message, err := a.prepareInput(ctx, input)
	if err != nil {
		return nil, err
	}
	raw := input
	a.emit(Event{Kind: UserInput, Text: message})
	message = a.drainSteering(message)
	if err := a.record(state.Event{At: state.Now(), Who: state.RoleUser, Mode: string(a.Mode), Input: &raw, Message: message}); err != nil {
		return nil, err
	}
	b := a.Cartridge.Behavior("interaction")
	system := joinNonEmpty("\n\n", a.Context, b.Directive, b.Instruction, a.reactInstructions())
	stream := a.Cartridge.Stream(a.Mode)
	g := a.newGuard("ReAct steps", a.roundLimit())
	ctx = provider.WithRetryNotify(ctx, func(err error, attempt int, delay time.Duration) {
		a.emit(Event{Kind: Retry, Err: err, Attempt: attempt, Delay: delay})
	})
	model := a.model()
	var pressure contextPressure
	build := func() provider.Request {
		budget := a.Budget
		if budget > 0 {
			budget = max(budget-estimateTokens(system)-estimateTokens(b.Backdrop), 1)
		}
		if a.squeeze > 0 && (budget <= 0 || a.squeeze < budget) {
			budget = a.squeeze // the provider refused a larger conversation
		}
		return provider.Request{System: system, Backdrop: b.Backdrop, Messages: Fit(Messages(a.History(), nil), budget), Stream: stream,
			User: a.User, Override: a.Override, Stop: []string{ReActStop}}
	}
	for step := 1; ; step++ {
		if res := g.halt(step, stream, pressure); res != nil {
			return res, nil
		}
		req := build()
		pressure.check(a, req)
		a.emit(Event{Kind: RoundStart, Round: step, Provider: a.Provider.ID(), Model: model, ContextTokens: pressure.tokens, ContextBudget: a.Budget})
		streamed := false
		resp, err := a.Provider.Complete(ctx, req, func(ev provider.Event) {
			if ev.Kind == provider.TextDelta {
				streamed = streamed || ev.Text != ""
				a.emit(Event{Kind: TextDelta, Text: ev.Text})
			}
		})
		if g.retry(ctx, err, streamed, req, build) {
			step--
			continue
		}
		if err != nil {
			return nil, err
		}
		g.usage.Add(resp.Usage)
		text := cutObservation(resp.Text)
		move := ParseReAct(text)
		var calls []tool.Call
		var call tool.Call
		if move.Action != "" && move.Err == "" {
			args, problem := a.reactArguments(move)
			if problem != "" {
				move.Err = problem
			} else {
				call = tool.Call{ID: provider.NewCallID(), Name: move.Action, Arguments: args}
				calls = []tool.Call{call}
			}
		}
		a.emit(Event{Kind: RoundEnd, Round: step, Text: resp.Text, Usage: resp.Usage, Calls: calls})
		if err := a.record(state.Event{At: state.Now(), Who: state.RoleAI, Mode: string(a.Mode), Message: text}); err != nil {
			return nil, err
		}
		var observation string
		switch {
		case move.Final != nil && len(calls) == 0:
			return &Result{Text: *move.Final, Display: *move.Final, Streamed: stream, Usage: g.usage, Rounds: step, FinishReason: provider.FinishStop,
				ContextTokens: pressure.tokens, ContextBudget: a.Budget}, nil
		case len(calls) > 0:
			out, _, err := a.callTool(ctx, call)
			if err != nil {
				return nil, err
			}
			observation = "Observation: " + out
		default:
			observation = "Observation: Invalid format: " + move.Err + ". Write either an Action line and an Action Input line, or a Final Answer line."
		}
		if a.Steering != nil {
			for _, msg := range a.Steering() {
				a.emit(Event{Kind: SteeringInjected, Text: msg})
				observation += "\n\n" + msg
			}
		}
		warning, stop := g.loop(calls)
		if warning != "" {
			observation += "\n\n" + warning
		}
		if err := a.record(state.Event{At: state.Now(), Who: state.RoleUser, Mode: string(a.Mode), Input: &observation, Message: observation}); err != nil {
			return nil, err
		}
		if stop != "" {
			return g.result(stream, step, StopLoop, stop, pressure), nil
		}
	}
}

// reactInstructions describe the tools and the format.
func (a *Agent) reactInstructions() string {
	var b strings.Builder
	specs := a.Tools.Specs()
	if len(specs) == 0 {
		b.WriteString("You have no tools: answer at once with a Final Answer line.\n\n")
	} else {
		b.WriteString("You can use these tools:\n\n")
		for _, sp := range specs {
			params, _ := json.Marshal(sp.Parameters)
			fmt.Fprintf(&b, "- %s: %s\n  input schema: %s\n", sp.Name, strings.TrimSpace(sp.Description), params)
		}
		b.WriteString("\n")
	}
	b.WriteString(reactFormat)
	if a.Structured != nil {
		sch, _ := json.Marshal(a.Structured.Schema)
		fmt.Fprintf(&b, "\n\nThe Final Answer must be one JSON value on the same line, valid against this JSON Schema: %s", sch)
	}
	b.WriteString("\n\nBegin!")
	return b.String()
}

// reactArguments decodes the Action Input: a JSON object, or plain text
// for a tool with a single text parameter.
func (a *Agent) reactArguments(m Move) (map[string]any, string) {
	in := strings.TrimSpace(m.Input)
	in = strings.TrimPrefix(strings.TrimSuffix(in, "```"), "```json")
	in = strings.TrimSpace(strings.TrimPrefix(in, "```"))
	if in == "" {
		return map[string]any{}, ""
	}
	dec := json.NewDecoder(strings.NewReader(in))
	dec.UseNumber()
	var args map[string]any
	if err := dec.Decode(&args); err == nil && args != nil {
		return normalizeNumbers(args).(map[string]any), ""
	}
	if t, ok := a.Tools.Lookup(m.Action); ok {
		if name, ok := singleText(t.Spec().Parameters); ok {
			var s string
			if json.Unmarshal([]byte(in), &s) != nil {
				s = in
			}
			return map[string]any{name: s}, ""
		}
	}
	return nil, fmt.Sprintf("the Action Input of %s is not a JSON object", m.Action)
}

// singleText tells whether a schema has exactly one property, of type
// string, and returns its name.
func singleText(schema map[string]any) (string, bool) {
	props, _ := schema["properties"].(map[string]any)
	if len(props) != 1 {
		return "", false
	}
	for name, p := range props {
		pm, _ := p.(map[string]any)
		if pm["type"] == "string" {
			return name, true
		}
	}
	return "", false
}

// Move is what one ReAct answer asks for: an action with its input, a
// final answer, or nothing usable (Err says why).
type Move struct {
	Thought string
	Action  string
	Input   string
	Final   *string
	Err     string
}

// ParseReAct reads one ReAct answer. An Action before a Final Answer
// wins (the answer was written past the action); an Action without an
// Action Input, or neither, is a format error.
func ParseReAct(text string) Move {
	var m Move
	lines := strings.Split(text, "\n")
	actionAt, finalAt := -1, -1
	for i, line := range lines {
		l := strings.TrimSpace(line)
		switch {
		case hasLabel(l, "Thought:") && m.Thought == "":
			m.Thought = labelValue(l, "Thought:")
		case hasLabel(l, "Action:") && actionAt < 0:
			actionAt = i
			m.Action = strings.Trim(labelValue(l, "Action:"), "`\"' ")
		case hasLabel(l, "Action Input:") && actionAt >= 0 && m.Input == "":
			rest := labelValue(l, "Action Input:")
			// The input may go on over several lines (a pretty-printed
			// object), up to the next label.
			for _, next := range lines[i+1:] {
				n := strings.TrimSpace(next)
				if hasLabel(n, "Thought:") || hasLabel(n, "Action:") || hasLabel(n, "Final Answer:") || hasLabel(n, "Observation:") {
					break
				}
				rest += "\n" + next
			}
			m.Input = strings.TrimSpace(rest)
			if m.Input == "" {
				m.Input = "{}"
			}
		case hasLabel(l, "Final Answer:") && finalAt < 0:
			finalAt = i
			rest := []string{labelValue(l, "Final Answer:")}
			rest = append(rest, lines[i+1:]...)
			final := strings.TrimSpace(strings.Join(rest, "\n"))
			m.Final = &final
		}
	}
	switch {
	case actionAt >= 0 && (finalAt < 0 || actionAt < finalAt):
		m.Final = nil
		if m.Action == "" {
			m.Err = "the Action line names no tool"
		} else if m.Input == "" {
			m.Err = "the Action has no Action Input line"
		}
	case finalAt >= 0:
		m.Action, m.Input = "", ""
	default:
		m.Action = ""
		m.Err = "there is neither an Action nor a Final Answer"
	}
	return m
}

func hasLabel(line, label string) bool {
	return len(line) >= len(label) && strings.EqualFold(line[:len(label)], label)
}

func labelValue(line, label string) string {
	return strings.TrimSpace(line[len(label):])
}

// cutObservation drops what a model wrote from its own "Observation:"
// on (a provider that ignored the stop sequence).
func cutObservation(text string) string {
	if i := strings.Index(text, ReActStop); i >= 0 {
		return text[:i]
	}
	if strings.HasPrefix(text, "Observation:") {
		return ""
	}
	return text
}
