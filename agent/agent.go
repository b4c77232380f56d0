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
	"io"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nbots/nb/cartridge"
	"github.com/nbots/nb/media"
	"github.com/nbots/nb/provider"
	"github.com/nbots/nb/script"
	"github.com/nbots/nb/state"
	"github.com/nbots/nb/tool"
	"github.com/nbots/nb/tracing"
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
	// RoundStart says a request to the provider begins (Round, Provider,
	// Model): a front-end may show what it is waiting for.
	RoundStart
	// RoundEnd says the provider answered one round (Round, Text, Usage,
	// Calls): one step of the exchange.
	RoundEnd
	// ToolStart says a tool call begins to run (Call).
	ToolStart
	// ToolEnd carries a tool call's whole result (Call, Output, IsError),
	// before any truncation for the model.
	ToolEnd
	// Retry says a failed provider request will be tried again (Err,
	// Attempt, Delay).
	Retry
	// Waiting says the exchange waits for something outside it (Text): the
	// state key is held by another exchange.
	Waiting
	// SessionStart opens an exchange's events (the reference's
	// SESSION_START): nb's session with the loop is one exchange, an
	// input and the rounds that answer it.
	SessionStart
	// SessionEnd closes them (Text: the final state, SessionIdle when the
	// exchange ended with an answer or a limit and the conversation can go
	// on, SessionFailed when it ended with an error).
	SessionEnd
	// UserInput is the user's input, as recorded (Text).
	UserInput
	// SteeringInjected is a message sent while the tools ran, recorded
	// before the next request (Text).
	SteeringInjected
	// TurnLimit says the exchange stopped at its round limit (Round: the
	// rounds made) with the conversation kept (Text: what to do next).
	TurnLimit
	// LoopDetection says the model repeats the same tool calls (Text):
	// the first time, the text is the warning sent to the model; when the
	// pattern goes on after it, the exchange stops with this text
	// (IsError set, and Result.Notice says the same).
	LoopDetection
	// Warning is something the user should know that does not stop the
	// exchange (Text): the context nearly full, old tool outputs
	// abridged to fit it (ContextTokens, ContextBudget).
	Warning
	// Error says the exchange failed (Err); SessionEnd follows.
	Error
	// AssistantTextStart comes before the first text of a round (Round;
	// none for a non-streamed answer, before its Answer).
	AssistantTextStart
	// ToolOutput is a piece of a tool's output while it runs (Call, Text,
	// Stream: "stdout" or "stderr"), exec's as the command prints it. For
	// people watching: the model gets the result, and ToolEnd has it whole.
	ToolOutput
)

// The final states of SessionEnd.
const (
	SessionIdle   = "idle"
	SessionFailed = "failed"
)

// String names the kind as the agent protocol's event frames and nb
// serve's log do: the reference's names in lower case.
func (k EventKind) String() string {
	if n, ok := kindNames[k]; ok {
		return n
	}
	return fmt.Sprintf("event_%d", int(k))
}

var kindNames = map[EventKind]string{
	TextDelta: "assistant_text_delta", Answer: "assistant_text_end", Feedback: "feedback", Reasoning: "reasoning_delta",
	RoundStart: "round_start", RoundEnd: "round_end", ToolStart: "tool_call_start", ToolEnd: "tool_call_end",
	Retry: "retry", Waiting: "waiting", SessionStart: "session_start", SessionEnd: "session_end", UserInput: "user_input",
	SteeringInjected: "steering_injected", TurnLimit: "turn_limit", LoopDetection: "loop_detection", Warning: "warning", Error: "error",
	AssistantTextStart: "assistant_text_start", ToolOutput: "tool_call_output_delta",
}

// Event is something a front-end may show.
type Event struct {
	Kind EventKind
	Text string
	// Action and Call are set for Feedback events; Call for ToolStart and
	// ToolEnd.
	Action cartridge.ToolAction
	Call   *tool.Call
	// Output and IsError are a tool's result (ToolEnd).
	Output  any
	IsError bool
	// Stream is where a ToolOutput's text came from: stdout or stderr.
	Stream string
	// Round counts the provider requests of the exchange, from 1
	// (RoundStart, RoundEnd).
	Round int
	// Provider and Model say whom a RoundStart asks.
	Provider, Model string
	// Usage is one round's token usage (RoundEnd).
	Usage provider.Usage
	// Calls are the tool calls the model asked for in a round (RoundEnd).
	Calls []tool.Call
	// Err, Attempt and Delay describe a Retry; Err an Error.
	Err     error
	Attempt int
	Delay   time.Duration
	// ContextTokens is the estimated size of a request (RoundStart,
	// Warning) and ContextBudget what it may take (Agent.Budget).
	ContextTokens, ContextBudget int
}

// Confirmer decides whether a tool call may run. text is the confirming
// feedback (the adapter's result or "<name> <arguments>"). A front-end
// asks its user (the terminal matches the cartridge's yes-words itself; a
// websocket or MCP client answers yes or no) and returns the decision.
// An error stops the exchange (the user pressed Ctrl-C at the question):
// the round's calls are recorded as interrupted.
type Confirmer interface {
	Confirm(ctx context.Context, call tool.Call, text string) (bool, error)
}

// Conversation is where an exchange reads and records its history: a
// stored conversation held for the exchange (a state.Turn), or a Memory.
type Conversation interface {
	// History is the conversation so far; the caller must not modify it.
	History() []state.Event
	// Append records events.
	Append(events ...state.Event) error
}

// OutputKeeper is a Conversation that keeps the whole of tool outputs too
// large for the history (a state.Turn does).
type OutputKeeper interface {
	// KeepOutput keeps text under the call's id; where says where it is.
	KeepOutput(id, text string) (where string, err error)
}

// Memory is a Conversation kept in memory: a stateless REPL, or a
// conversation a client sent whole. It is safe for concurrent use.
type Memory struct {
	mu     sync.Mutex
	events []state.Event
}

// NewMemory returns a Memory holding events.
func NewMemory(events ...state.Event) *Memory {
	return &Memory{events: append([]state.Event(nil), events...)}
}

// History implements Conversation.
func (m *Memory) History() []state.Event {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.events[:len(m.events):len(m.events)]
}

// Append implements Conversation.
func (m *Memory) Append(events ...state.Event) error {
	m.mu.Lock()
	m.events = append(m.events, events...)
	m.mu.Unlock()
	return nil
}

// DenialText is what the model receives for a call the user did not allow,
// verbatim from the reference.
const DenialText = "We asked the user you're chatting with for permission, but the user did not allow you to run this tool or function."

// Agent is the loop of one exchange with a cartridge: the bot's parts
// (provider, tools, scripts) and where this conversation lives and
// reports. Front-ends do not build one: they describe an exchange
// (bot.Exchange) and the bot builds its Agent, from its shared parts,
// on the one path every exchange takes (Bot.Ask, Boot, Continue).
type Agent struct {
	Cartridge *cartridge.Cartridge
	Mode      cartridge.Mode
	Provider  provider.Provider
	// Model names the model Provider asks, for events; empty is the
	// cartridge's (a managed sub-agent may use another).
	Model string
	// Tools are the tools offered to the model; nil or empty means none.
	Tools *tool.Set
	// External are tools the client runs itself (an OpenAI-compatible
	// client's own functions): offered to the model, never run here. A
	// round that calls one ends the exchange with the calls in
	// Result.Pending, after the round's other calls ran.
	External []tool.Spec
	// Context is what the model is told about where it works (the
	// environment block and the project's instructions, package project),
	// sent first, before the cartridge's directive and instruction, which
	// come later and win. Empty adds none.
	Context string
	// System is more system text, after the cartridge's directive and
	// instruction: an OpenAI-compatible client's system and developer
	// messages. Empty adds none.
	System string
	// Override, when set, changes the cartridge's provider settings in
	// this agent's requests: a server's client asked for them (sampling
	// settings, or an agent client's parameters).
	Override *provider.Override
	// Stop are stop sequences for this agent's requests (a server's
	// client sent them; see provider.Request.Stop).
	Stop []string
	// Whole asks for the answer in one piece, not streamed, whatever the
	// cartridge says (a server's client that did not ask for a stream):
	// the provider is not asked to stream, and the output adapter runs.
	Whole bool
	// Scripts runs adapters; nil means the cartridge has none.
	Scripts *script.Runtime
	// Confirmer is asked before each tool call when the cartridge's tools
	// are confirmable; nil denies every call.
	Confirmer Confirmer
	// Conversation keeps the history; nil is a Memory of the agent's own.
	Conversation Conversation
	// OnEvent receives events; nil drops them.
	OnEvent func(Event)
	// Output receives what the cartridge's scripts print; nil discards it.
	Output io.Writer
	// User is the end user's opaque identifier, sent to providers that
	// have a field for it; empty sends none.
	User string
	// Steering, when set, is asked after each round of tool calls for
	// messages the user sent meanwhile; they are recorded as one user
	// turn (separated by blank lines) before the next request.
	Steering func() []string
	// SteerFirst asks Steering before the first request too, and joins
	// what was queued to the input (the agent protocol: an input sent
	// before the run's first call is never lost). Without it, a message
	// that arrives before the first request is left for its sender's
	// next turn (the gateway answers each message on its own, as
	// nanobot does).
	SteerFirst bool
	// MaxRounds bounds the provider calls of one input (see the function
	// MaxRounds).
	MaxRounds int
	// MaxTokens, when above 0, bounds the tokens of one input's rounds
	// (input and output, summed): no request is made past it.
	MaxTokens int
	// LoopWindow is the loop detector's window in tool calls
	// (DefaultLoopWindow when 0).
	LoopWindow int
	// Budget bounds the history sent to the provider, in estimated tokens.
	Budget int
	// Limits bound tool output sent to the model.
	Limits Truncation
	// ToolLimits are the cartridge's limits for some tools
	// (builtins.limits), by tool.MatchName of the tool's name: they win
	// over the tools' own and Limits.
	ToolLimits map[string]cartridge.ToolLimit
	// MaxStored bounds one tool output kept in the conversation, in bytes
	// (the model sees far less, the ToolEnd event all of it); 0 means
	// DefaultMaxStored. A larger output is kept head and tail with a note,
	// and whole by the Conversation when it is an OutputKeeper.
	MaxStored int
	// Structured, when set, asks the model for an answer that is one
	// JSON value following a schema (see provider.Request.Output).
	Structured *provider.OutputSchema
	// Loop is how Ask works towards the answer: tool calls (the
	// default), a text ReAct loop, or a planner.
	Loop Loop
	// MaxTasks is a planner's budget: how many tasks run at most
	// (DefaultMaxTasks when 0).
	MaxTasks int
	// OnPlan, when set, is told a planner's plan each time it changes.
	OnPlan func(Plan)
	// Check, when set, reads the answer of Ask: a complaint it returns
	// is sent to the model once, and the model answers again (a planner
	// writes its final answer again from the same results). The caller
	// checks the second answer itself.
	Check func(answer string) (complaint string)

	// plan is the planner's last run (for its second answer).
	lastPlan *planRun
	// abridged is how many old tool outputs the last request had to
	// abridge (see abridge); wanted is the size of the last request
	// before that.
	abridged, wanted int
	// squeeze, when set, bounds the messages of the requests that follow
	// (estimated tokens): the provider refused a longer conversation.
	squeeze int
}

// Loop is how an agent works towards its answer.
type Loop string

// The loops.
const (
	// LoopFunctions offers the tools to the model as functions and runs the
	// calls it makes, round after round, until it answers ("" too).
	LoopFunctions Loop = "functions"
	// LoopReAct describes the tools in the system text and reads the model's
	// Thought, Action and Action Input lines (see askReAct).
	LoopReAct Loop = "react"
	// LoopPlan has the model break the objective into tasks, run them one by
	// one and write the answer from their results (see askPlan).
	LoopPlan Loop = "plan"
)

// DefaultMaxStored is the default bound of one tool output in the state:
// 256 KiB, five times more than any model is sent by default.
const DefaultMaxStored = 256 << 10

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
	// Usage sums the token usage of the exchange's rounds.
	Usage provider.Usage
	// FinishReason is why the last round ended (provider.FinishReason
	// values; "tool_calls" when Pending is set).
	FinishReason string
	// Rounds is the number of provider requests made.
	Rounds int
	// Pending are the calls to External tools the model made in its last
	// round: the client runs them and continues the conversation.
	Pending []tool.Call
	// Stopped says the exchange ended without an answer, at a limit
	// (StopRoundLimit, StopLoop), with the conversation kept: Notice says
	// what happened and how to go on, and a front-end shows it where the
	// answer would be. FinishReason is then Stopped too.
	Stopped, Notice string
	// ContextTokens is the estimated size of the last request and
	// ContextBudget what it may take (see Agent.Budget).
	ContextTokens, ContextBudget int
}

// The limits an exchange stops at (Result.Stopped).
const (
	// StopRoundLimit: MaxRounds rounds of tool calls without an answer.
	StopRoundLimit = "round_limit"
	// StopLoop: the model kept repeating its calls after the warning.
	StopLoop = "loop_detected"
	// StopTokenLimit: the exchange's rounds used MaxTokens tokens.
	StopTokenLimit = "token_limit"
)

// Ask runs one exchange by the agent's Loop: the user's input (with
// images, for providers that take them, in the functions loop), then
// the model's rounds until it answers; when Check has a complaint about
// the answer, the model answers once more.
func (a *Agent) Ask(ctx context.Context, input string, images ...media.Image) (*Result, error) {
	ctx, span := a.startSpan(ctx)
	res, err := a.session(func() (*Result, error) { return a.askChecked(ctx, input, images) })
	tracing.End(span, err)
	return res, err
}

// startSpan starts the span of an exchange (see tracing.StartAgent).
func (a *Agent) startSpan(ctx context.Context) (context.Context, tracing.Span) {
	if !tracing.Enabled() {
		return ctx, tracing.NoSpan()
	}
	name := a.Cartridge.String("meta", "name") // Meta().Name, without the rest of Meta
	if name == "" {
		name = "nb"
	}
	return tracing.StartAgent(ctx, name)
}

// session brackets an exchange's events with SessionStart and
// SessionEnd, and reports its failure as an Error event.
func (a *Agent) session(run func() (*Result, error)) (*Result, error) {
	a.emit(Event{Kind: SessionStart})
	res, err := run()
	end := SessionIdle
	if err != nil {
		a.emit(Event{Kind: Error, Err: err, Text: err.Error()})
		end = SessionFailed
	}
	a.emit(Event{Kind: SessionEnd, Text: end})
	return res, err
}

// askChecked is Ask within its session.
func (a *Agent) askChecked(ctx context.Context, input string, images []media.Image) (*Result, error) {
	res, err := a.ask(ctx, input, images)
	if err != nil || a.Check == nil {
		return res, err
	}
	complaint := a.Check(res.Text)
	if complaint == "" {
		return res, nil
	}
	if a.Loop == LoopPlan && a.lastPlan != nil {
		return a.lastPlan.finalStep(ctx, complaint)
	}
	return a.ask(ctx, complaint, nil)
}

// ask runs input through the agent's loop.
func (a *Agent) ask(ctx context.Context, input string, images []media.Image) (*Result, error) {
	switch a.Loop {
	case LoopReAct:
		return a.askReAct(ctx, input)
	case LoopPlan:
		return a.askPlan(ctx, input)
	case LoopFunctions, "":
	default:
		return nil, fmt.Errorf("unknown agent loop %q (functions, react or plan)", a.Loop)
	}
	return a.askFunctions(ctx, input, images)
}

// askFunctions runs the functions loop: the user's input, then provider
// rounds until the model answers without tool calls.
func (a *Agent) askFunctions(ctx context.Context, input string, images []media.Image) (*Result, error) {
	message, err := a.prepareInput(ctx, input)
	if err != nil {
		return nil, err
	}
	raw := input
	a.emit(Event{Kind: UserInput, Text: message})
	message = a.drainSteering(message)
	ev := state.Event{At: state.Now(), Who: state.RoleUser, Mode: string(a.Mode), Input: &raw, Message: message, Images: images}
	if err := a.record(ev); err != nil {
		return nil, err
	}
	return a.converse(ctx, a.Cartridge.Behavior("interaction"))
}

// drainSteering takes the messages the user sent before the first
// request (a steer queued while nothing ran) and joins them to the
// input, after it, as the reference's drain right after USER_INPUT: one
// user turn, since two in a row read as a failed exchange.
func (a *Agent) drainSteering(message string) string {
	if a.Steering == nil || !a.SteerFirst {
		return message
	}
	for _, msg := range a.Steering() {
		a.emit(Event{Kind: SteeringInjected, Text: msg})
		message = joinNonEmpty("\n\n", message, msg)
	}
	return message
}

// Continue runs provider rounds (the functions loop) on the
// conversation as it is, without a new user message: a client that ran the Pending calls of the last
// exchange has recorded their results.
func (a *Agent) Continue(ctx context.Context) (*Result, error) {
	ctx, span := a.startSpan(ctx)
	res, err := a.session(func() (*Result, error) { return a.converse(ctx, a.Cartridge.Behavior("interaction")) })
	tracing.End(span, err)
	return res, err
}

// Boot runs the boot exchange (REPL start): behaviors.boot's instruction
// is the user message. It does nothing when there is no boot instruction.
func (a *Agent) Boot(ctx context.Context) (_ *Result, err error) {
	b := a.Cartridge.Behavior("boot")
	if strings.TrimSpace(b.Instruction) == "" {
		return nil, nil
	}
	ctx, span := a.startSpan(ctx)
	defer func() { tracing.End(span, err) }()
	return a.session(func() (*Result, error) {
		instr := b.Instruction
		ev := state.Event{At: state.Now(), Who: state.RoleUser, Mode: string(a.Mode), Input: &instr, Message: instr}
		if err := a.record(ev); err != nil {
			return nil, err
		}
		a.emit(Event{Kind: UserInput, Text: instr})
		b.Instruction = "" // it was the user message
		return a.converse(ctx, b)
	})
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
	v, err := a.Scripts.Call(a.scriptContext(ctx), script.Source{Lang: script.Lang(src.Lang), Code: src.Code, File: src.File, Line: src.Line}, params...)
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

// scriptContext is ctx carrying where scripts print (see
// script.WithOutput): the front-end's writer, never the process's stdout.
func (a *Agent) scriptContext(ctx context.Context) context.Context {
	return script.WithOutput(ctx, a.Output)
}

// conversation is where the history lives.
func (a *Agent) conversation() Conversation {
	if a.Conversation == nil {
		a.Conversation = NewMemory()
	}
	return a.Conversation
}

// History is the conversation so far.
func (a *Agent) History() []state.Event { return a.conversation().History() }

// record appends events to the conversation.
func (a *Agent) record(events ...state.Event) error {
	return a.conversation().Append(events...)
}

// jsonSafe returns v with the values JSON cannot hold (NaN, ±Inf) turned
// into the text Lua prints for them, so any output can be stored and
// sent. v itself is never modified.
func jsonSafe(v any) any {
	out, _ := safeValue(v)
	return out
}

func safeValue(v any) (any, bool) {
	switch t := v.(type) {
	case float64:
		switch {
		case math.IsNaN(t):
			return "nan", true
		case math.IsInf(t, 1):
			return "inf", true
		case math.IsInf(t, -1):
			return "-inf", true
		}
	case float32:
		return safeValue(float64(t))
	case map[string]any:
		var out map[string]any
		for k, x := range t {
			if y, changed := safeValue(x); changed {
				if out == nil {
					out = maps.Clone(t)
				}
				out[k] = y
			}
		}
		if out != nil {
			return out, true
		}
	case []any:
		var out []any
		for i, x := range t {
			if y, changed := safeValue(x); changed {
				if out == nil {
					out = slices.Clone(t)
				}
				out[i] = y
			}
		}
		if out != nil {
			return out, true
		}
	}
	return v, false
}

// converse calls the provider until it answers with text, or until a
// limit stops it (the round limit, a loop that goes on after its
// warning) with the conversation kept and a Result that says so.
func (a *Agent) converse(ctx context.Context, b cartridge.Behavior) (*Result, error) {
	stream := a.Cartridge.Stream(a.Mode) && !a.Whole
	g := a.newGuard("rounds of tool calls", a.roundLimit())
	ctx = provider.WithRetryNotify(ctx, func(err error, attempt int, delay time.Duration) {
		a.emit(Event{Kind: Retry, Err: err, Attempt: attempt, Delay: delay})
	})
	model := a.model()
	var pressure contextPressure
	for round := 1; ; round++ {
		if res := g.halt(round, stream, pressure); res != nil {
			return res, nil
		}
		req := a.request(b, stream)
		pressure.check(a, req)
		a.emit(Event{Kind: RoundStart, Round: round, Provider: a.Provider.ID(), Model: model, ContextTokens: pressure.tokens, ContextBudget: a.Budget})
		var partial provider.TextBuffer
		resp, err := a.Provider.Complete(ctx, req, func(ev provider.Event) {
			switch ev.Kind {
			case provider.TextDelta:
				if partial.Len() == 0 && ev.Text != "" {
					a.emit(Event{Kind: AssistantTextStart, Round: round})
				}
				partial.WriteString(ev.Text)
				a.emit(Event{Kind: TextDelta, Text: ev.Text})
			case provider.ReasoningDelta:
				a.emit(Event{Kind: Reasoning, Text: ev.Text})
			}
		})
		var cut *provider.AnswerCutError
		if errors.As(err, &cut) && partial.Len() > 0 && ctx.Err() == nil {
			// An answer longer than nb reads: what came is the answer,
			// and it says where it was cut.
			partial.WriteString(cut.Notice())
			a.emit(Event{Kind: TextDelta, Text: cut.Notice()})
			resp, err = &provider.Response{Text: partial.String(), FinishReason: "length"}, nil
		}
		if g.retry(ctx, err, partial.Len() > 0, req, func() provider.Request { return a.request(b, stream) }) {
			round--
			continue
		}
		if err != nil {
			if partial.Len() > 0 {
				// Keep what the user saw, marked so it is never sent back as complete.
				text := partial.String()
				a.record(state.Event{At: state.Now(), Who: state.RoleAI, Mode: string(a.Mode), Message: text, Partial: true}) //nolint:errcheck // the provider's error matters more
			}
			return nil, err
		}
		g.usage.Add(resp.Usage)
		calls := make([]tool.Call, len(resp.ToolCalls))
		for i, c := range resp.ToolCalls {
			calls[i] = tool.Call{ID: c.ID, Name: c.Name, Arguments: decodeArguments(c.Arguments)}
		}
		a.emit(Event{Kind: RoundEnd, Round: round, Text: resp.Text, Usage: resp.Usage, Calls: calls})
		if len(resp.ToolCalls) == 0 {
			res, err := a.finish(ctx, resp, stream, g.usage)
			if res != nil {
				res.Usage, res.Rounds = g.usage, round
				res.ContextTokens, res.ContextBudget = pressure.tokens, a.Budget
			}
			return res, err
		}
		pending, err := a.runTools(ctx, resp)
		if err != nil {
			return nil, err
		}
		if len(pending) > 0 {
			return &Result{Text: resp.Text, Display: resp.Text, Streamed: stream, Usage: g.usage, Rounds: round,
				FinishReason: "tool_calls", Pending: pending, ContextTokens: pressure.tokens, ContextBudget: a.Budget}, nil
		}
		// The messages sent meanwhile and a loop warning are one user
		// turn: two user turns in a row read as a failed exchange and
		// the next question, and the first would never be sent.
		var inject []string
		if a.Steering != nil {
			for _, msg := range a.Steering() {
				a.emit(Event{Kind: SteeringInjected, Text: msg})
				inject = append(inject, msg)
			}
		}
		warning, stop := g.loop(calls)
		if stop != "" {
			return g.result(stream, round, StopLoop, stop, pressure), nil
		}
		if warning != "" {
			inject = append(inject, warning)
		}
		if len(inject) > 0 {
			msg := strings.Join(inject, "\n\n")
			if err := a.record(state.Event{At: state.Now(), Who: state.RoleUser, Mode: string(a.Mode), Input: &msg, Message: msg}); err != nil {
				return nil, err
			}
		}
	}
}

// compact halves the messages of the next request after the provider
// refused req as longer than the model's context (build makes the next
// request, within a.squeeze), and says so in a Warning. It returns
// false when nothing could be left out (the last turn alone is too
// long): the refusal stands.
func (a *Agent) compact(req provider.Request, cause error, build func() provider.Request) bool {
	size := 0
	for _, m := range req.Messages {
		size += messageTokens(m)
	}
	abridgedBefore := a.abridged
	a.squeeze = max(size/2, 1)
	next := build()
	after := 0
	for _, m := range next.Messages {
		after += messageTokens(m)
	}
	if after >= size {
		a.emit(Event{Kind: Warning, ContextTokens: requestTokens(req), ContextBudget: a.Budget,
			Text: fmt.Sprintf("The provider refused the conversation as longer than the model's context (%v), and it cannot be compacted further", cause)})
		return false
	}
	turns := func(msgs []provider.Message) int {
		n := 0
		for _, m := range msgs {
			if m.Role == provider.RoleUser {
				n++
			}
		}
		return n
	}
	dropped := turns(req.Messages) - turns(next.Messages)
	a.emit(Event{Kind: Warning, ContextTokens: requestTokens(next), ContextBudget: a.Budget,
		Text: fmt.Sprintf("The provider refused the conversation as longer than the model's context: it was compacted from ~%d to ~%d estimated tokens (%s abridged, %s left out) and sent again",
			size, after, plural(a.abridged-abridgedBefore, "1 old tool output", "old tool outputs"), plural(dropped, "1 earlier turn", "earlier turns"))})
	return true
}

// LoopWarning is what the model is told when its last n calls repeat a
// pattern: the reference's text.
func LoopWarning(n int) string {
	return fmt.Sprintf("Loop detected: the last %d tool calls follow a repeating pattern. Try a different approach.", n)
}

// decodeArguments reads a call's arguments for events; text that is not
// a JSON object gives an empty map (the round reports the error).
func decodeArguments(raw string) map[string]any {
	args := map[string]any{}
	if strings.TrimSpace(raw) != "" {
		json.Unmarshal([]byte(raw), &args) //nolint:errcheck // see above
		if args == nil {
			args = map[string]any{}
		}
	}
	return args
}

// model is the model the agent's requests ask for.
func (a *Agent) model() string {
	if a.Model != "" {
		return a.Model
	}
	return Model(a.Cartridge)
}

// Model is the model a cartridge asks for (settings.model, or
// options.model for the providers that keep it there), for display.
func Model(c *cartridge.Cartridge) string {
	if m := c.String("provider", "settings", "model"); m != "" {
		return m
	}
	return c.String("provider", "options", "model")
}

// finish stores and returns the text answer.
func (a *Agent) finish(ctx context.Context, resp *provider.Response, stream bool, usage provider.Usage) (*Result, error) {
	res := &Result{Text: resp.Text, Display: resp.Text, Streamed: stream, FinishReason: resp.FinishReason}
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
		if res.Display != "" {
			a.emit(Event{Kind: AssistantTextStart})
		}
		a.emit(Event{Kind: Answer, Text: res.Display})
	}
	if resp.Text != "" || resp.Reasoning != "" {
		output := a.Cartridge.Affix(a.Mode, "output", "prefix") + res.Display + a.Cartridge.Affix(a.Mode, "output", "suffix")
		ev := state.Event{At: state.Now(), Who: state.RoleAI, Mode: string(a.Mode), Message: resp.Text, Output: &output}
		withResponse(&ev, resp)
		ev.Usage = storedUsage(usage)
		if err := a.record(ev); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// withResponse records in ev what the model's response carries besides
// its text: reasoning, provider data and tool calls.
func withResponse(ev *state.Event, resp *provider.Response) {
	ev.Reasoning = resp.Reasoning
	if len(resp.Extra) > 0 {
		ev.Extra = resp.Extra
	}
	for _, c := range resp.ToolCalls {
		ev.ToolCalls = append(ev.ToolCalls, state.ToolCall{ID: c.ID, Name: c.Name, Arguments: c.Arguments})
	}
}

// The round limits when safety.tools.rounds is not set.
const (
	// DefaultRounds is the reference's limit, for cartridges that answer
	// questions with a few tool calls.
	DefaultRounds = 10
	// CodingRounds is the limit of a cartridge that writes files or runs
	// commands (builtins.files with write, builtins.exec): a coding task
	// takes the vendors' agents 50 to 200 rounds. The loop detector, the
	// context budget and safety.tokens guard it.
	CodingRounds = 200
)

// MaxRounds is the cartridge's round limit: safety.tools.rounds, else
// CodingRounds for a cartridge that writes files or runs commands, else
// DefaultRounds.
func MaxRounds(c *cartridge.Cartridge) int {
	if v, ok := c.Get("safety", "tools", "rounds"); ok {
		if n, ok := v.(int64); ok && n > 0 {
			return int(n)
		}
	}
	if b, err := c.Builtins(); err == nil && b != nil && (b.Exec != nil || b.Files != nil && b.Files.Write) {
		return CodingRounds
	}
	return DefaultRounds
}

// MaxTokens is the cartridge's token budget for one exchange
// (safety.tokens): the input and output tokens of its rounds, summed; 0
// when unset.
func MaxTokens(c *cartridge.Cartridge) int {
	if v, ok := c.Get("safety", "tokens"); ok {
		if n, ok := v.(int64); ok && n > 0 {
			return int(n)
		}
	}
	return 0
}

// ToolLimits are the cartridge's limits of some tools' output
// (builtins.limits), keyed as Agent.ToolLimits; nil when none.
func ToolLimits(c *cartridge.Cartridge) map[string]cartridge.ToolLimit {
	b, err := c.Builtins()
	if err != nil || b == nil || len(b.Limits) == 0 {
		return nil
	}
	out := make(map[string]cartridge.ToolLimit, len(b.Limits))
	for name, l := range b.Limits {
		out[tool.MatchName(name)] = l
	}
	return out
}

// DefaultLoopWindow is the loop detector's window: the reference's ten
// calls.
const DefaultLoopWindow = 10

// LoopWindow is the loop detector's window (safety.loops, else
// DefaultLoopWindow).
func LoopWindow(c *cartridge.Cartridge) int {
	if v, ok := c.Get("safety", "loops"); ok {
		if n, ok := v.(int64); ok && n >= 2 {
			return int(n)
		}
	}
	return DefaultLoopWindow
}

// storedUsage is an exchange's usage as its answer keeps it in the
// state; none when the provider reported none.
func storedUsage(u provider.Usage) *state.Usage {
	if u == (provider.Usage{}) {
		return nil
	}
	return &state.Usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, CacheReadTokens: u.CacheReadTokens,
		CacheWriteTokens: u.CacheWriteTokens, ReasoningTokens: u.ReasoningTokens}
}
