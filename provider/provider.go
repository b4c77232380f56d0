// Package provider is the common model every language-model provider speaks
// in nb: messages, requests, streamed events, tool calls, usage and errors,
// plus the shared machinery (HTTP, SSE and NDJSON readers, retries) that the
// per-provider packages in provider/<name> build on.
//
// A provider package translates a Request into its own wire format, streams
// the answer back through a callback, and returns the accumulated Response.
// Providers register themselves by id (Register) so the command line only
// imports them.
package provider

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"

	"github.com/nbots/nb/media"
	"github.com/nbots/nb/tool"
)

// Role says who wrote a message.
type Role string

// The roles of the common model. System text is not a message: it travels
// in Request.System so each provider can place it as its API wants.
const (
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleTool      Role = "tool"
)

// Message is one entry of the conversation sent to a provider.
type Message struct {
	Role    Role   `json:"role"`
	Content string `json:"content,omitempty"`
	// ToolCalls are the calls an assistant message asked for.
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// ToolCallID and ToolName identify the call a tool message answers.
	ToolCallID string `json:"tool_call_id,omitempty"`
	ToolName   string `json:"tool_name,omitempty"`
	// IsError marks a tool message whose call failed (the tool said so);
	// providers whose API has the notion send it (Anthropic's is_error),
	// the others have only the text.
	IsError bool `json:"is_error,omitempty"`
	// Images go with a user message (pictures a client sent) or a tool
	// message (pictures a tool returned). Each provider sends them the way
	// its API takes them, or fails with an *UnsupportedError before
	// sending anything: an image is never dropped. Assistant messages
	// carry none.
	Images []media.Image `json:"images,omitempty"`
	// Reasoning is the model's reasoning text of an assistant message.
	Reasoning string `json:"reasoning,omitempty"`
	// Extra holds provider-specific data that must be sent back verbatim
	// on the next request (signed thinking blocks, for example), keyed by
	// provider id.
	Extra map[string]any `json:"extra,omitempty"`
}

// ToolCall is one function call requested by the model.
type ToolCall struct {
	// ID is the provider's id for the call; providers without ids get a
	// synthetic one so results can be matched.
	ID string `json:"id"`
	// Name is the function name exactly as the provider sent it.
	Name string `json:"name"`
	// Arguments is the JSON text of the arguments ("{}" when none).
	Arguments string `json:"arguments"`
}

// Request is one call to a model.
type Request struct {
	// System is the system text (the cartridge's directive, and its
	// instruction when there is one). Empty means none.
	System string
	// Backdrop is context given before the conversation; each provider
	// places it the way the reference does.
	Backdrop string
	// Messages is the conversation, oldest first.
	Messages []Message
	// Tools are offered to the model; empty means no tools.
	Tools []tool.Spec
	// ToolChoice names the one of Tools the model must call, in each
	// API's form: OpenAI's and Mistral's named function, Anthropic's
	// {type: tool, name}, Gemini's functionCallingConfig (mode ANY with
	// the name allowed), Cohere v2's "REQUIRED" (any offered tool). ""
	// lets the model choose, as do the APIs that cannot force a call
	// (Ollama's /api/chat, Cohere v1, Maritaca). A server that refuses a
	// forced choice answers with an error: the caller may ask again
	// without one.
	ToolChoice string
	// Stream asks for a streamed answer. Providers that cannot stream
	// still call the callback once with the whole text.
	Stream bool
	// User is the opaque end-user identifier of this request, for APIs
	// with a field for it; empty uses Config.User. One bot serves many
	// end users, so it travels with the request.
	User string
	// Override, when set, changes the cartridge's settings for this
	// request: what a client of nb's servers asked for (see Override).
	Override *Override
	// Stop are stop sequences: the answer ends before the first of them
	// (a ReAct agent stops the model before it invents an observation).
	Stop []string
	// Output asks for an answer that is one JSON value following a
	// schema: the API's own structured-output mode where it has one
	// (OpenAI's and Mistral's response_format json_schema, Gemini's
	// responseSchema, Ollama's format, Cohere's response_format), an
	// instruction in the system text where it has none (Anthropic,
	// Maritaca). The caller still validates the answer.
	Output *OutputSchema
}

// OutputSchema is the shape a structured answer must have.
type OutputSchema struct {
	// Name names the schema where an API wants a name (letters, digits,
	// _ and -).
	Name string
	// Schema is a JSON Schema.
	Schema map[string]any
}

// Instruction is the system text that asks for the schema where an API
// has no structured-output mode.
func (o *OutputSchema) Instruction() string {
	b, _ := json.Marshal(o.Schema)
	return "Answer with one JSON value and nothing else (no prose, no code fence). It must be valid against this JSON Schema:\n" + string(b)
}

// WithOutputInstruction returns req with the output schema's instruction
// after its system text, for APIs without a structured-output mode.
func WithOutputInstruction(req Request) Request {
	if req.Output == nil {
		return req
	}
	if req.System != "" {
		req.System += "\n\n"
	}
	req.System += req.Output.Instruction()
	return req
}

// UserOr is the request's end-user identifier, else fallback.
func (r Request) UserOr(fallback string) string {
	if r.User != "" {
		return r.User
	}
	return fallback
}

// Model is the model the request asks for, and whether it is its
// Override's: a client's "model" (a non-empty string) replaces
// configured, the model of the provider's configuration (Config.Model).
// The observers of a call (metrics, traces) take it from here, once.
func (r Request) Model(configured string) (model string, overridden bool) {
	if r.Override != nil {
		if m, ok := r.Override.Settings["model"].(string); ok && m != "" {
			return m, true
		}
	}
	return configured, false
}

// EventKind tells what an Event carries.
type EventKind int

// Event kinds.
const (
	// TextDelta is a piece of the visible answer.
	TextDelta EventKind = iota + 1
	// ReasoningDelta is a piece of reasoning output, never printed as the answer.
	ReasoningDelta
	// ToolCallStarted says the model began a tool call (Text holds the name).
	ToolCallStarted
)

// Event is a streamed piece of an answer.
type Event struct {
	Kind EventKind
	Text string
}

// Usage counts tokens as the provider reports them; zero means unknown.
// InputTokens counts every token of the prompt, cached ones included, and
// OutputTokens every token of the answer, reasoning included: the cache
// and reasoning counts say how much of each was read from or written to
// the provider's prompt cache, or spent thinking.
type Usage struct {
	InputTokens  int `json:"input_tokens,omitempty"`
	OutputTokens int `json:"output_tokens,omitempty"`
	// CacheReadTokens are input tokens read from the prompt cache (billed
	// at a fraction of the input price); CacheWriteTokens were written to
	// it (Anthropic bills them above the input price).
	CacheReadTokens  int `json:"cache_read_tokens,omitempty"`
	CacheWriteTokens int `json:"cache_write_tokens,omitempty"`
	// ReasoningTokens are output tokens the model spent thinking.
	ReasoningTokens int `json:"reasoning_tokens,omitempty"`
}

// Add adds v's counts to u's: the usage of an exchange is the sum of its
// rounds.
func (u *Usage) Add(v Usage) {
	u.InputTokens += v.InputTokens
	u.OutputTokens += v.OutputTokens
	u.CacheReadTokens += v.CacheReadTokens
	u.CacheWriteTokens += v.CacheWriteTokens
	u.ReasoningTokens += v.ReasoningTokens
}

// The finish reasons of the common model: why the model stopped. Every
// provider maps its own values to these (Response.RawFinishReason keeps
// the provider's).
const (
	// FinishStop: the answer is complete (or a stop sequence was met).
	FinishStop = "stop"
	// FinishLength: the answer was cut at the token limit.
	FinishLength = "length"
	// FinishToolCalls: the model asks for tool calls.
	FinishToolCalls = "tool_calls"
	// FinishContentFilter: the answer was withheld or cut by a safety filter.
	FinishContentFilter = "content_filter"
	// FinishOther: any other reason (the raw value says which).
	FinishOther = "other"
)

// finishReasons maps the providers' own finish reasons, lower-cased, to
// the common ones. OpenAI and the compatible APIs use the common values
// already; Anthropic, Cohere, Gemini and Ollama have their own.
var finishReasons = map[string]string{
	"stop": FinishStop, "end_turn": FinishStop, "stop_sequence": FinishStop, "complete": FinishStop,
	"length": FinishLength, "max_tokens": FinishLength, "model_length": FinishLength,
	"model_context_window_exceeded": FinishLength, "error_limit": FinishLength,
	"tool_calls": FinishToolCalls, "function_call": FinishToolCalls, "tool_use": FinishToolCalls, "tool_call": FinishToolCalls,
	"content_filter": FinishContentFilter, "refusal": FinishContentFilter, "error_toxic": FinishContentFilter,
	"safety": FinishContentFilter, "recitation": FinishContentFilter, "blocklist": FinishContentFilter,
	"prohibited_content": FinishContentFilter, "spii": FinishContentFilter, "image_safety": FinishContentFilter,
	"image_prohibited_content": FinishContentFilter,
}

// NormalizeFinishReason maps a provider's finish reason to one of the
// Finish constants. An answer with tool calls is FinishToolCalls whatever
// the provider said (Gemini and Ollama say stop); an empty raw value is
// FinishStop (APIs without one end only when the answer is complete).
func NormalizeFinishReason(raw string, hasToolCalls bool) string {
	if hasToolCalls {
		return FinishToolCalls
	}
	if raw == "" {
		return FinishStop
	}
	if r, ok := finishReasons[strings.ToLower(raw)]; ok {
		return r
	}
	return FinishOther
}

// Response is the accumulated answer of one Request.
type Response struct {
	Text      string
	Reasoning string
	ToolCalls []ToolCall
	// FinishReason is why the model stopped: one of the Finish constants.
	FinishReason string
	// RawFinishReason is the provider's own value (end_turn, MAX_TOKENS,
	// COMPLETE ...), empty when it sent none.
	RawFinishReason string
	// Usage counts the tokens of the request and the answer, streamed or
	// not, as far as the provider reports them.
	Usage Usage
	// Extra is provider-specific data to keep with the assistant message
	// (see Message.Extra).
	Extra map[string]any
	// Model is the model that answered, as the API names it; "" when the
	// API does not say.
	Model string
}

// SetFinishReason stores the provider's finish reason and its common
// form. Call it once the tool calls are in place.
func (r *Response) SetFinishReason(raw string) {
	r.RawFinishReason = raw
	r.FinishReason = NormalizeFinishReason(raw, len(r.ToolCalls) > 0)
}

// Message turns the response into the assistant message to store.
func (r *Response) Message() Message {
	return Message{Role: RoleAssistant, Content: r.Text, ToolCalls: r.ToolCalls, Reasoning: r.Reasoning, Extra: r.Extra}
}

// Provider is a language-model API.
type Provider interface {
	// ID is the cartridge's provider id (openai, ollama, ...).
	ID() string
	// Complete sends req and returns the whole answer. When req.Stream is
	// set, each piece is passed to onEvent as soon as it arrives; onEvent
	// may be nil. Implementations must be safe for concurrent use.
	Complete(ctx context.Context, req Request, onEvent func(Event)) (*Response, error)
}

// Config is what a provider is built from: the cartridge's provider
// section after ENV substitution.
type Config struct {
	ID          string
	Credentials map[string]any
	Options     map[string]any
	Settings    map[string]any
	// User is the opaque end-user identifier to send where the API has a
	// field for it (OpenAI's user); empty means none.
	User string
	// HTTPClient is used for every request; nil means a shared default
	// client whose proxy comes from HTTPS_PROXY, HTTP_PROXY and NO_PROXY
	// as Getenv gives them.
	HTTPClient *http.Client
	// Timeouts bound the waits of each request (connection, first byte,
	// silence in a stream); zero fields take the defaults (see Timeouts).
	Timeouts Timeouts
	// Getenv looks up the environment a provider may see (proxies,
	// Google's application default credentials). nil means an empty
	// environment: nothing in this package or below reads the process
	// environment itself.
	Getenv func(string) string
	// AllowHostCredentials lets a provider use credentials and files of
	// the host: Google's application default credentials (a key file, the
	// gcloud login, the metadata server) and a key file named by
	// provider.credentials.file-path. The command line sets it; a server
	// running cartridges its clients sent must not, so that they cannot
	// borrow the host's identity or read its files.
	AllowHostCredentials bool
}

// Env returns the value of an environment variable as Getenv gives it,
// "" when Getenv is nil.
func (c Config) Env(name string) string {
	if c.Getenv == nil {
		return ""
	}
	return c.Getenv(name)
}

// Factory builds a provider from its configuration.
type Factory func(Config) (Provider, error)

var (
	registryMu sync.RWMutex
	registry   = map[string]Factory{}
)

// Register makes a provider id available to New. It is called from the
// init function of each provider package.
func Register(id string, f Factory) {
	registryMu.Lock()
	defer registryMu.Unlock()
	registry[id] = f
}

// IDs lists the registered provider ids, sorted.
func IDs() []string {
	registryMu.RLock()
	defer registryMu.RUnlock()
	ids := make([]string, 0, len(registry))
	for id := range registry {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// New builds the provider cfg.ID names.
func New(cfg Config) (Provider, error) {
	registryMu.RLock()
	f, ok := registry[cfg.ID]
	registryMu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("unsupported provider %q (supported: %v)", cfg.ID, IDs())
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = ClientFor(cfg.Getenv)
	}
	return f(cfg)
}

// NewCallID invents an id for a tool call the provider sent without one.
// It is unique across answers, so a conversation with several tool rounds
// can be continued on a provider that wants distinct ids.
func NewCallID() string {
	var b [8]byte
	rand.Read(b[:]) //nolint:errcheck // never fails
	return "call_" + hex.EncodeToString(b[:])
}
