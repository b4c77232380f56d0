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
	"fmt"
	"net/http"
	"sort"
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
	// Reasoning is the model's reasoning text of an assistant message.
	Reasoning string `json:"reasoning,omitempty"`
	// Images are the pictures of a user message or a tool result.
	Images []media.Image `json:"images,omitempty"`
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
	// Stream asks for a streamed answer. Providers that cannot stream
	// still call the callback once with the whole text.
	Stream bool
	// User is the opaque end-user identifier of this request, for APIs
	// with a field for it; empty uses Config.User. One bot serves many
	// end users, so it travels with the request.
	User string
}

// UserOr is the request's end-user identifier, else fallback.
func (r Request) UserOr(fallback string) string {
	if r.User != "" {
		return r.User
	}
	return fallback
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
type Usage struct {
	InputTokens  int `json:"input_tokens,omitempty"`
	OutputTokens int `json:"output_tokens,omitempty"`
}

// Response is the accumulated answer of one Request.
type Response struct {
	Text         string
	Reasoning    string
	ToolCalls    []ToolCall
	FinishReason string
	Usage        Usage
	// Extra is provider-specific data to keep with the assistant message
	// (see Message.Extra).
	Extra map[string]any
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
	// HTTPClient is used for every request; nil means a default client
	// that honours HTTPS_PROXY, NO_PROXY and SSL_CERT_FILE.
	HTTPClient *http.Client
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
		cfg.HTTPClient = DefaultHTTPClient()
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
