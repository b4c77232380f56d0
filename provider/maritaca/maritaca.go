// Package maritaca speaks Maritaca AI's API for the Sabiá models. By
// default it uses the current chat completions API
// (POST https://chat.maritaca.ai/api/chat/completions, OpenAI-compatible,
// streamed over server-sent events, with function calling; documentation:
// https://docs.maritaca.ai/api/pt/completion). options.api: inference, or
// an address ending in /api/chat/inference, selects the legacy API the
// reference used (chat_mode, a streamed text field, an answer field; no
// tools and no system role).
package maritaca

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/nbots/nb/provider"
	"github.com/nbots/nb/provider/openai"
)

// ID is the cartridge's provider id.
const ID = "maritaca"

// DefaultAddress is used when the cartridge gives no credentials.address.
const DefaultAddress = "https://chat.maritaca.ai"

// The APIs options.api selects.
const (
	APIChatCompletions = "chat-completions"
	APIInference       = "inference"
)

func init() {
	provider.Register(ID, New)
	provider.CredentialHints[ID] = "provider.credentials.api-key"
}

// Client is a Maritaca client.
type Client struct {
	cfg     provider.Config
	api     string
	url     string
	headers map[string]string
}

// New builds a client. The api-key is required for the official address.
// The current API takes it as a bearer token, the legacy one as
// "Authorization: Key <api-key>".
func New(cfg provider.Config) (provider.Provider, error) {
	if err := cfg.RefuseEffort(); err != nil {
		return nil, err
	}
	address, key, err := cfg.Endpoint(ID, DefaultAddress, "api-key")
	if err != nil {
		return nil, err
	}
	c := &Client{cfg: cfg, headers: map[string]string{}}
	// The address may be the host, the host with /api (as OpenAI clients
	// are configured), or a whole endpoint.
	base := strings.TrimRight(address, "/")
	legacyPath := strings.HasSuffix(base, "/chat/inference")
	base = strings.TrimSuffix(strings.TrimSuffix(base, "/chat/completions"), "/chat/inference")
	base = strings.TrimSuffix(base, "/api")
	switch api := strings.ToLower(cfg.Option("api")); {
	case api == APIInference || api == "legacy" || (api == "" && legacyPath):
		c.api, c.url = APIInference, base+"/api/chat/inference"
	case api == "" || api == APIChatCompletions || api == "openai":
		c.api, c.url = APIChatCompletions, base+"/api/chat/completions"
	default:
		return nil, fmt.Errorf("%s: provider.options.api is %q; use %q (the default) or %q", ID, api, APIChatCompletions, APIInference)
	}
	if key != "" {
		scheme := "Bearer "
		if c.api == APIInference {
			scheme = "Key "
		}
		c.headers["Authorization"] = scheme + key
	}
	return c, nil
}

// ID implements provider.Provider.
func (c *Client) ID() string { return ID }

// API returns the API the client speaks: APIChatCompletions or APIInference.
func (c *Client) API() string { return c.api }

// URL returns the endpoint the client posts to.
func (c *Client) URL() string { return c.url }

// Body builds the request body: the cartridge's settings verbatim, then
// the conversation, tools and the stream flag; the legacy API also gets
// chat_mode: true.
func (c *Client) Body(req provider.Request) (map[string]any, error) {
	// Neither API has a structured-output mode: the schema is asked for
	// in the system text.
	req = provider.WithOutputInstruction(req)
	body := c.cfg.BodyFor(req)
	body["stream"] = req.Stream
	if c.api == APIInference {
		if len(req.Stop) > 0 {
			body["stopping_tokens"] = req.Stop
		}
		msgs, err := LegacyMessages(req)
		if err != nil {
			return nil, err
		}
		body["chat_mode"] = true
		body["messages"] = msgs
		if err := req.Override.Apply(body, ID, samplingNames); err != nil {
			return nil, err
		}
		return body, nil
	}
	if len(req.Stop) > 0 {
		body["stop"] = req.Stop
	}
	body, err := dialect.Body(body, req, "tool_choice", "parallel_tool_calls")
	if err != nil {
		return nil, err
	}
	if err := req.Override.Apply(body, ID, samplingNames); err != nil {
		return nil, err
	}
	return body, nil
}

// samplingNames are the sampling settings Maritaca documents, the same on
// both APIs: temperature, top_p and max_tokens (stop sequences are
// Request.Stop); no top_k, no seed and no penalties.
var samplingNames = provider.SamplingNames{Temperature: "temperature", TopP: "top_p", MaxTokens: "max_tokens"}

// dialect is where Maritaca's chat completions API departs from OpenAI's.
var dialect = openai.Dialect{
	ID: ID,
	// Every message needs a string content: "" with tool calls, not null.
	EmptyContent: openai.ContentEmpty,
	// A call without arguments is sent as {}.
	FillArguments: true,
	// The API takes text only.
	Images: openai.NoImages,
	// Its documentation names no way to force a tool call.
	Forcing: openai.ForceNone,
}

// Messages maps the common conversation to chat completions messages:
// the system text first, the backdrop as a user message, then the
// history. Images fail with a *provider.UnsupportedError: the API takes
// text only.
func Messages(req provider.Request) ([]any, error) {
	return dialect.Messages(req)
}

// LegacyMessages maps the conversation for the legacy API, which has only
// user and assistant roles: the system text is a leading user message, the
// backdrop the next one (as the reference places them), and a tool result
// a user message that names the tool. Images fail with a
// *provider.UnsupportedError.
func LegacyMessages(req provider.Request) ([]any, error) {
	var out []any
	for _, s := range []string{req.System, req.Backdrop} {
		if s != "" {
			out = append(out, map[string]any{"role": "user", "content": s})
		}
	}
	for _, m := range req.Messages {
		if len(m.Images) > 0 {
			return nil, &provider.UnsupportedError{Provider: ID, Feature: "images", Hint: "the legacy inference API takes text only"}
		}
		switch m.Role {
		case provider.RoleAssistant:
			if m.Content != "" {
				out = append(out, map[string]any{"role": "assistant", "content": m.Content})
			}
		case provider.RoleTool:
			out = append(out, map[string]any{"role": "user", "content": fmt.Sprintf("Result of %s: %s", m.ToolName, m.Content)})
		default:
			out = append(out, map[string]any{"role": "user", "content": m.Content})
		}
	}
	return out, nil
}

// ErrNoTools is returned when tools are offered on the legacy API.
var ErrNoTools = errors.New("maritaca: the legacy inference API has no tools; remove provider.options.api to use the chat completions API")

// Complete implements provider.Provider.
func (c *Client) Complete(ctx context.Context, req provider.Request, onEvent func(provider.Event)) (*provider.Response, error) {
	if c.api == APIInference && len(req.Tools) > 0 {
		return nil, ErrNoTools
	}
	payload, err := c.Body(req)
	if err != nil {
		return nil, err
	}
	body, _, err := provider.Send(ctx, provider.HTTPRequest{Provider: ID, Client: c.cfg.HTTPClient, URL: c.url, Headers: c.headers, Body: payload, Stream: req.Stream, Timeouts: c.cfg.Timeouts})
	if err != nil {
		return nil, err
	}
	defer body.Close()
	switch {
	case c.api == APIInference && req.Stream:
		return decodeLegacyStream(ctx, body, onEvent)
	case c.api == APIInference:
		return decodeLegacyWhole(ctx, body)
	case req.Stream:
		return dialect.DecodeStream(ctx, body, onEvent)
	default:
		return dialect.DecodeWhole(ctx, body)
	}
}

type usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
}

// The legacy API streams events whose data carries a text field and ends
// when the response does: it has no end event, so a dropped connection
// can only be told from the end by a read error.
func decodeLegacyStream(ctx context.Context, body io.Reader, onEvent func(provider.Event)) (*provider.Response, error) {
	resp := &provider.Response{}
	var text strings.Builder
	streamed := false
	sse := provider.NewSSEReader(body)
	defer sse.Close()
	for {
		ev, err := sse.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, provider.ReadError(ctx, ID, err, streamed)
		}
		if strings.TrimSpace(string(ev.Data)) == "" {
			continue
		}
		var d struct {
			Text             *string         `json:"text"`
			Detail           json.RawMessage `json:"detail"`
			PromptTokens     int             `json:"prompt_tokens"`
			CompletionTokens int             `json:"completion_tokens"`
		}
		if err := json.Unmarshal(ev.Data, &d); err != nil {
			return nil, &provider.Error{Provider: ID, Message: fmt.Sprintf("unreadable stream event %q: %v", provider.Clip(string(ev.Data)), err), Streamed: streamed}
		}
		if len(d.Detail) > 0 && string(d.Detail) != "null" {
			msg, _ := provider.ParseErrorBody(ev.Data)
			return nil, &provider.Error{Provider: ID, Message: "error in the stream: " + msg, Streamed: streamed, Retryable: !streamed}
		}
		if d.CompletionTokens > 0 {
			resp.Usage = provider.Usage{InputTokens: d.PromptTokens, OutputTokens: d.CompletionTokens}
		}
		if d.Text != nil && *d.Text != "" {
			text.WriteString(*d.Text)
			streamed = true
			if onEvent != nil {
				onEvent(provider.Event{Kind: provider.TextDelta, Text: *d.Text})
			}
		}
	}
	resp.Text = text.String()
	resp.SetFinishReason("") // the legacy API gives none
	return resp, nil
}

func decodeLegacyWhole(ctx context.Context, body io.Reader) (*provider.Response, error) {
	data, err := io.ReadAll(body) // capped by provider.Send at the answer limit
	if err != nil {
		return nil, provider.ReadError(ctx, ID, err, false)
	}
	var w struct {
		Answer *string `json:"answer"`
		Usage  *usage  `json:"usage"`
	}
	if err := json.Unmarshal(data, &w); err != nil || w.Answer == nil {
		msg, _ := provider.ParseErrorBody(data)
		if msg == "" {
			msg = fmt.Sprintf("unreadable response %q", provider.Clip(string(data)))
		}
		return nil, &provider.Error{Provider: ID, Message: msg}
	}
	resp := &provider.Response{Text: *w.Answer}
	resp.SetFinishReason("") // the legacy API gives none
	if w.Usage != nil {
		resp.Usage = provider.Usage{InputTokens: w.Usage.PromptTokens, OutputTokens: w.Usage.CompletionTokens}
	}
	return resp, nil
}
