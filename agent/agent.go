// Package agent runs a cartridge's conversation: it turns user input into
// provider requests (behaviors, history within a budget, tools), streams the
// answer as events, runs the tool loop (matching, validation, confirmation,
// parallel execution, feedback, loop detection, truncation) and keeps the
// history in the state store. It never prints: front-ends render its events.
package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/nbots/nb/cartridge"
	"github.com/nbots/nb/provider"
	"github.com/nbots/nb/script"
	"github.com/nbots/nb/state"
	"github.com/nbots/nb/tool"
)

// EventKind tells what an Event carries.
type EventKind int

// Event kinds.
const (
	// TextDelta is a streamed piece of the answer.
	TextDelta EventKind = iota + 1
	// Answer is the whole answer of a non-streamed exchange, after the
	// output adapter.
	Answer
	// Feedback is tool feedback (executing or responding) to show.
	Feedback
	// Reasoning is a streamed piece of the model's reasoning.
	Reasoning
)

// Event is something a front-end may show.
type Event struct {
	Kind EventKind
	Text string
	// Action and Call are set for Feedback events.
	Action cartridge.ToolAction
	Call   *tool.Call
}

// Confirmer asks the user whether a tool call may run. text is the
// confirming feedback (the adapter's result or "<name> <arguments>");
// the front-end adds the affixes and colour, reads one line and returns it.
// ok false means no answer could be read (no terminal): the call is denied.
type Confirmer interface {
	Confirm(ctx context.Context, call tool.Call, text string) (answer string, ok bool)
}

// DenialText is what the model receives for a call the user did not allow,
// verbatim from the reference.
const DenialText = "We asked the user you're chatting with for permission, but the user did not allow you to run this tool or function."

// Agent is one conversation with a cartridge.
type Agent struct {
	Cartridge *cartridge.Cartridge
	Mode      cartridge.Mode
	Provider  provider.Provider
	// Tools are the tools offered to the model; nil or empty means none.
	Tools *tool.Set
	// Scripts runs adapters; nil means the cartridge has none.
	Scripts *script.Runtime
	// Confirmer is asked before each tool call when the cartridge's tools
	// are confirmable; nil denies every call.
	Confirmer Confirmer
	// Store keeps the history across runs; nil is a stateless conversation
	// (kept in memory for the agent's lifetime, as a REPL needs).
	Store *state.Store
	// History is the conversation so far (loaded from Store by New).
	History []state.Event
	// OnEvent receives events; nil drops them.
	OnEvent func(Event)
	// MaxRounds bounds the provider calls of one input (10 by default, as
	// the reference).
	MaxRounds int
	// Budget bounds the history sent to the provider, in estimated tokens.
	Budget int
	// Limits bound tool output sent to the model.
	Limits Truncation

	mu sync.Mutex
}

// Options configure New.
type Options struct {
	Mode      cartridge.Mode
	Provider  provider.Provider
	Tools     *tool.Set
	Scripts   *script.Runtime
	Confirmer Confirmer
	Store     *state.Store
	OnEvent   func(Event)
}

// New returns an agent for c, with the stored history loaded.
func New(c *cartridge.Cartridge, o Options) (*Agent, error) {
	a := &Agent{Cartridge: c, Mode: o.Mode, Provider: o.Provider, Tools: o.Tools, Scripts: o.Scripts,
		Confirmer: o.Confirmer, Store: o.Store, OnEvent: o.OnEvent,
		MaxRounds: MaxRounds(c), Budget: Budget(c), Limits: DefaultTruncation()}
	if o.Store != nil {
		doc, err := o.Store.Load()
		if err != nil {
			return nil, err
		}
		a.History = doc.History
	}
	return a, nil
}

func (a *Agent) emit(ev Event) {
	if a.OnEvent != nil {
		a.OnEvent(ev)
	}
}

// Result is the outcome of one exchange.
type Result struct {
	// Text is the final answer as sent by the model.
	Text string
	// Display is the answer as shown (after the output adapter when not streamed).
	Display string
	// Streamed tells whether the answer was delivered as TextDelta events.
	Streamed bool
}

// Ask runs one exchange: the user's input, then provider rounds until the
// model answers without tool calls.
func (a *Agent) Ask(ctx context.Context, input string) (*Result, error) {
	message, err := a.prepareInput(ctx, input)
	if err != nil {
		return nil, err
	}
	raw := input
	ev := state.Event{At: state.Now(), Who: "user", Mode: string(a.Mode), Input: &raw, Message: message}
	if err := a.record(ev); err != nil {
		return nil, err
	}
	return a.converse(ctx, a.Cartridge.Behavior("interaction"))
}

// Boot runs the boot exchange (REPL start): behaviors.boot's instruction
// is the user message. It does nothing when there is no boot instruction.
func (a *Agent) Boot(ctx context.Context) (*Result, error) {
	b := a.Cartridge.Behavior("boot")
	if strings.TrimSpace(b.Instruction) == "" {
		return nil, nil
	}
	instr := b.Instruction
	ev := state.Event{At: state.Now(), Who: "user", Mode: string(a.Mode), Input: &instr, Message: instr}
	if err := a.record(ev); err != nil {
		return nil, err
	}
	b.Instruction = "" // it was the user message
	return a.converse(ctx, b)
}

// HasBoot reports whether the cartridge has a boot exchange.
func (a *Agent) HasBoot() bool {
	return strings.TrimSpace(a.Cartridge.Behavior("boot").Instruction) != ""
}

// prepareInput applies the input adapter and affixes: what is sent and stored.
func (a *Agent) prepareInput(ctx context.Context, input string) (string, error) {
	content := input
	src, err := a.Cartridge.Adapter(a.Mode, "input")
	if err != nil {
		return "", err
	}
	if src != nil {
		content, err = a.runAdapter(ctx, src, script.Param{Name: "content", Value: input})
		if err != nil {
			return "", err
		}
	}
	return a.Cartridge.Affix(a.Mode, "input", "prefix") + content + a.Cartridge.Affix(a.Mode, "input", "suffix"), nil
}

// runAdapter runs an adapter and returns its result as text. Errors name
// the adapter; a runtime error's text becomes the result, as the reference.
func (a *Agent) runAdapter(ctx context.Context, src *cartridge.Source, params ...script.Param) (string, error) {
	if a.Scripts == nil {
		return "", fmt.Errorf("%s: the adapter cannot run: no script runtime", src.Path)
	}
	v, err := a.Scripts.Call(ctx, script.Source{Lang: script.Lang(src.Lang), Code: src.Code, File: src.File, Line: src.Line}, params...)
	if err != nil {
		var rte *script.RuntimeError
		if errors.As(err, &rte) {
			return rte.Error(), nil
		}
		return "", fmt.Errorf("%s: %w", src.Path, err)
	}
	return Text(v), nil
}

// Text renders a script or tool value as text: strings as they are,
// null as "", numbers and booleans as Lua prints them, tables as JSON.
func Text(v any) string {
	switch t := v.(type) {
	case nil:
		return ""
	case string:
		return t
	case int64, int, bool:
		return fmt.Sprint(t)
	case float64:
		return formatFloat(t)
	default:
		// Like the reference's to_json: no HTML escaping of < > &.
		var b strings.Builder
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(t); err != nil {
			return fmt.Sprint(t)
		}
		return strings.TrimSuffix(b.String(), "\n")
	}
}

// record appends events to the history and the store.
func (a *Agent) record(events ...state.Event) error {
	a.mu.Lock()
	a.History = append(a.History, events...)
	a.mu.Unlock()
	if a.Store != nil {
		return a.Store.Append(events...)
	}
	return nil
}

// converse calls the provider until it answers with text.
func (a *Agent) converse(ctx context.Context, b cartridge.Behavior) (*Result, error) {
	stream := a.Cartridge.Stream(a.Mode)
	detector := newLoopDetector(10)
	for round := 1; ; round++ {
		if round > a.MaxRounds {
			return nil, &LimitError{Msg: fmt.Sprintf("stopped after %d rounds of tool calls without an answer (infinite loop prevention); the conversation so far is kept", a.MaxRounds)}
		}
		req := a.request(b, stream)
		var partial provider.TextBuffer
		resp, err := a.Provider.Complete(ctx, req, func(ev provider.Event) {
			switch ev.Kind {
			case provider.TextDelta:
				partial.WriteString(ev.Text)
				a.emit(Event{Kind: TextDelta, Text: ev.Text})
			case provider.ReasoningDelta:
				a.emit(Event{Kind: Reasoning, Text: ev.Text})
			}
		})
		if err != nil {
			if partial.Len() > 0 {
				// Keep what the user saw, marked so it is never sent back as complete.
				text := partial.String()
				a.record(state.Event{At: state.Now(), Who: "AI", Mode: string(a.Mode), Message: text, Partial: true}) //nolint:errcheck // the provider's error matters more
			}
			return nil, err
		}
		if len(resp.ToolCalls) == 0 {
			return a.finish(ctx, resp, stream)
		}
		if err := a.runTools(ctx, resp, detector); err != nil {
			return nil, err
		}
	}
}

// finish stores and returns the text answer.
func (a *Agent) finish(ctx context.Context, resp *provider.Response, stream bool) (*Result, error) {
	res := &Result{Text: resp.Text, Display: resp.Text, Streamed: stream}
	if !stream {
		src, err := a.Cartridge.Adapter(a.Mode, "output")
		if err != nil {
			return nil, err
		}
		if src != nil {
			res.Display, err = a.runAdapter(ctx, src, script.Param{Name: "content", Value: resp.Text})
			if err != nil {
				return nil, err
			}
		}
		a.emit(Event{Kind: Answer, Text: res.Display})
	}
	if resp.Text != "" || resp.Reasoning != "" {
		output := a.Cartridge.Affix(a.Mode, "output", "prefix") + res.Display + a.Cartridge.Affix(a.Mode, "output", "suffix")
		ev := state.Event{At: state.Now(), Who: "AI", Mode: string(a.Mode), Message: resp.Text, Output: &output}
		if meta := responseMeta(resp); meta != nil {
			ev.Meta = meta
		}
		if err := a.record(ev); err != nil {
			return nil, err
		}
	}
	return res, nil
}

func responseMeta(resp *provider.Response) map[string]any {
	meta := map[string]any{}
	if resp.Reasoning != "" {
		meta["reasoning"] = resp.Reasoning
	}
	if len(resp.Extra) > 0 {
		meta["extra"] = resp.Extra
	}
	if len(resp.ToolCalls) > 0 {
		calls := make([]any, len(resp.ToolCalls))
		for i, c := range resp.ToolCalls {
			calls[i] = map[string]any{"id": c.ID, "name": c.Name, "arguments": c.Arguments}
		}
		meta["tool_calls"] = calls
	}
	if len(meta) == 0 {
		return nil
	}
	return meta
}

// LimitError stops an exchange that would not end by itself.
type LimitError struct{ Msg string }

func (e *LimitError) Error() string { return e.Msg }

// MaxRounds is the cartridge's round limit: safety.tools.rounds, else 10.
func MaxRounds(c *cartridge.Cartridge) int {
	if v, ok := c.Get("safety", "tools", "rounds"); ok {
		if n, ok := v.(int64); ok && n > 0 {
			return int(n)
		}
	}
	return 10
}
