// Package agentproto is nb's agent protocol on the wire: the JSON frames
// of a run over a websocket (WS /agents/{name}/run), the descriptions
// served by discovery (GET /agents, GET /tools), the JSON Schemas of
// every frame, and a Go client. docs/agent-protocol.md is the protocol's
// specification; this package is its reference.
package agentproto

import (
	"encoding/json"
	"fmt"

	"github.com/nbots/nb/state"
)

// The frame types.
const (
	// Client to server.
	TypeRun           = "run"
	TypeInput         = "input"
	TypeStop          = "stop"
	TypeConfirmResult = "confirm_result"
	// Both ways: a client answers a tool_call with it; a server reports
	// the result of a tool it ran itself.
	TypeToolResult = "tool_result"
	// Server to client.
	TypeRunStarted   = "run_started"
	TypeStepChunk    = "step_chunk"
	TypeStep         = "step"
	TypeToolCall     = "tool_call"
	TypeMinionStart  = "minion_start"
	TypeMinionResult = "minion_result"
	TypeFinalResult  = "final_result"
	TypeError        = "error"
	TypeConfirm      = "confirm"
	// TypeEvent carries one of the loop's events (an nb addition, when
	// the run frame asks for events).
	TypeEvent = "event"
)

// The error codes of error frames.
const (
	CodeValidation        = "validation_error"   // input, parameters, context or output against their schemas
	CodeUnknownAgent      = "unknown_agent"      // no agent of that name here
	CodeMissingTools      = "missing_tools"      // required tools neither served nor declared
	CodeCancelled         = "cancelled"          // stop, or the server shutting down
	CodeProvider          = "provider_error"     // the model's API failed
	CodeTimeout           = "timeout"            // an idle or total limit ran out
	CodeCartridge         = "cartridge_error"    // the agent's cartridge cannot be loaded or built (a mistake in it, a variable not set)
	CodeInternal          = "internal"           // a failure of the server itself
	CodeUnknownCallID     = "unknown_call_id"    // a result or answer for no pending call (the run goes on)
	CodeDuplicateResult   = "duplicate_result"   // a second result for a call (the run goes on)
	CodeProtocol          = "protocol_error"     // a frame that is not JSON, not known or not expected now (the run goes on)
	CodeFrameTooLarge     = "frame_too_large"    // a frame over the size limit, discarded (the run goes on)
	CodeRateLimited       = "rate_limited"       // frames faster than the limit, discarded (the run goes on)
	CodeFederationRefused = "federation_refused" // the run would call back into its own chain, or go too deep
	CodeMinionFailed      = "minion_failed"      // a minion could not be run (its own error frames say why)
	CodeUnknownRun        = "unknown_run"        // a reconnection to a run this client does not have (or that ended long ago)
	CodeRunLost           = "run_lost"           // a reconnection to a run whose replica stopped before it ended
	CodeRunInProgress     = "run_in_progress"    // a reconnection to a run that still runs on its own connection
)

// Frame is one message of a run, either way. Every frame has Type and
// Seq (increasing per connection and per direction); the server's frames
// have RunID once it is assigned, and those that belong to a minion have
// MinionID ("m1", "m1/m2" when nested). Which other fields a frame has
// depends on its type: see docs/agent-protocol.md and the schemas in
// schema/.
type Frame struct {
	Type     string `json:"type"`
	Seq      int64  `json:"seq"`
	RunID    string `json:"run_id,omitempty"`
	MinionID string `json:"minion_id,omitempty"`

	// run_started: the agent's name. minion_start, tool_call, confirm,
	// tool_result: the minion's or tool's name.
	Agent string `json:"agent,omitempty"`
	Name  string `json:"name,omitempty"`
	// URL is a remote minion's address (minion_start).
	URL string `json:"url,omitempty"`

	// Input is the run's input (run, minion_start) or a call's arguments
	// (tool_call, confirm).
	Input any `json:"input,omitempty"`
	// Context travels with every call and comes back with every step and
	// result.
	Context any `json:"context,omitempty"`
	// Parameters, Tools, Minions, Chunks and Chain are the run frame's.
	Parameters map[string]any `json:"parameters,omitempty"`
	Tools      []ToolRepr     `json:"tools,omitempty"`
	Minions    []MinionRef    `json:"minions,omitempty"`
	Chunks     bool           `json:"chunks,omitempty"`
	// Events asks for event frames (run).
	Events bool `json:"events,omitempty"`
	// FollowUps keeps the connection open after final_result, for input
	// frames that start follow-ups on the same conversation (run).
	FollowUps bool `json:"follow_ups,omitempty"`
	// Chain is the servers and runs that led to this run (run), or that
	// a refused run would have closed into a cycle (error).
	Chain []Hop `json:"chain,omitempty"`

	// Step numbers the steps of a run from 1 (step_chunk, step).
	Step      int        `json:"step,omitempty"`
	Delta     string     `json:"delta,omitempty"`
	Generated *string    `json:"generated,omitempty"`
	Usage     *Usage     `json:"usage,omitempty"`
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`

	// ID is a call's id (tool_call, tool_result, confirm, confirm_result,
	// and error frames about a call).
	ID      string `json:"id,omitempty"`
	Output  any    `json:"output,omitempty"`
	IsError bool   `json:"is_error,omitempty"`
	// Result is a run's or a minion's result (final_result, minion_result).
	Result any `json:"result,omitempty"`
	// Stopped says a limit ended the run (or minion) before an answer
	// (final_result, minion_result: "round_limit", "loop_detected" or "token_limit",
	// with Message saying how to go on).
	Stopped string `json:"stopped,omitempty"`

	// Kind is an event's kind (event: session_start, session_end,
	// user_input, steering_injected, turn_limit, loop_detection,
	// warning, error, assistant_text_start, tool_call_output_delta), with
	// Message its text, Step the round of a turn_limit or an
	// assistant_text_start, IsError set on the loop_detection that stops
	// the run, ContextTokens and ContextBudget a warning's figures; a
	// tool_call_output_delta has the call's ID and Name, the Delta its tool
	// printed and the Stream it printed it on (stdout, stderr).
	Kind          string `json:"kind,omitempty"`
	Stream        string `json:"stream,omitempty"`
	ContextTokens int    `json:"context_tokens,omitempty"`
	ContextBudget int    `json:"context_budget,omitempty"`

	// Code and Message describe an error (error; Message also a failed
	// minion_result).
	Code    string `json:"code,omitempty"`
	Message string `json:"message,omitempty"`

	// Content is steering text (input).
	Content string `json:"content,omitempty"`
	// Allow answers a confirm (confirm_result).
	Allow *bool `json:"allow,omitempty"`
}

// Terminal reports whether f ends its run: a final_result or an error
// of the run itself (not of a minion, not about one call).
func (f *Frame) Terminal() bool {
	if f.MinionID != "" {
		return false
	}
	switch f.Type {
	case TypeFinalResult:
		return true
	case TypeError:
		return !Recoverable(f.Code)
	}
	return false
}

// Recoverable reports whether an error frame with code leaves its run
// going: the complaint is about one frame the client sent.
func Recoverable(code string) bool {
	switch code {
	case CodeUnknownCallID, CodeDuplicateResult, CodeProtocol, CodeFrameTooLarge, CodeRateLimited:
		return true
	}
	return false
}

// AgentRepr describes an agent (GET /agents, GET /agents/{name}; a
// client's minions in a run frame). The schemas are JSON Schemas; an
// absent input or output schema means a string.
type AgentRepr struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// Type is how the agent works: functions, react or plan (nb's
	// agents; informative).
	Type            string         `json:"type,omitempty"`
	InputSchema     map[string]any `json:"input_schema,omitempty"`
	ContextSchema   map[string]any `json:"context_schema,omitempty"`
	ParameterSchema map[string]any `json:"parameter_schema,omitempty"`
	OutputSchema    map[string]any `json:"output_schema,omitempty"`
	// RequiredTools name the tools and minions the agent cannot work
	// without: the server's, or declared by the client.
	RequiredTools []string `json:"required_tools,omitempty"`
}

// ToolRepr describes a tool (GET /tools; a client's tools in a run
// frame). InputSchema is a JSON Schema with an object root.
type ToolRepr struct {
	Name          string         `json:"name"`
	Description   string         `json:"description,omitempty"`
	InputSchema   map[string]any `json:"input_schema,omitempty"`
	ContextSchema map[string]any `json:"context_schema,omitempty"`
}

// MinionRef is a minion a client adds to a run: an agent of the server
// by name, a remote agent by URL (ws:// or wss://…/agents/NAME/run), or
// an agent the client runs itself (a description without URL that names
// no agent of the server: its calls come back as tool_call frames).
type MinionRef struct {
	AgentRepr
	URL string `json:"url,omitempty"`
}

// ToolCall is one call a step asks for.
type ToolCall struct {
	ID      string `json:"id"`
	Name    string `json:"name"`
	Input   any    `json:"input"`
	Context any    `json:"context,omitempty"`
}

// Usage counts tokens. Input and output count every token; the cache and
// reasoning counts say how much of them was read from or written to the
// provider's prompt cache, or spent thinking. It is the shape the state
// keeps an exchange's usage in.
type Usage = state.Usage

// Hop is one run in a chain of runs across servers: which server, which
// run, which agent.
type Hop struct {
	Server string `json:"server"`
	RunID  string `json:"run_id,omitempty"`
	Agent  string `json:"agent,omitempty"`
}

// String renders a hop as server/agent#run.
func (h Hop) String() string {
	s := h.Server
	if h.Agent != "" {
		s += "/" + h.Agent
	}
	if h.RunID != "" {
		s += "#" + h.RunID
	}
	return s
}

// Decode reads one frame. It fails on text that is not a JSON object
// with a string type.
func Decode(data []byte) (*Frame, error) {
	var f Frame
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("not a frame: %w", err)
	}
	if f.Type == "" {
		return nil, fmt.Errorf("not a frame: no type")
	}
	return &f, nil
}

// ErrorFrame returns an error frame with code and message.
func ErrorFrame(code, message string) *Frame {
	return &Frame{Type: TypeError, Code: code, Message: message}
}

// Text returns s as a *string (Frame.Generated).
func Text(s string) *string { return &s }

// Bool returns b as a *bool (Frame.Allow).
func Bool(b bool) *bool { return &b }

// MarshalJSON writes f with the fields its type requires even when they
// are empty (a step's tool_calls).
func (f Frame) MarshalJSON() ([]byte, error) {
	type plain Frame
	b, err := json.Marshal(plain(f))
	if err != nil {
		return nil, err
	}
	if f.Type == TypeStep && len(f.ToolCalls) == 0 && len(b) > 1 {
		b = append(b[:len(b)-1], `,"tool_calls":[]}`...)
	}
	return b, nil
}
