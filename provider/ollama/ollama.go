// Package ollama speaks Ollama's native chat API (POST /api/chat), streamed
// as newline-delimited JSON.
package ollama

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/nbots/nb/provider"
	"github.com/nbots/nb/provider/openai"
)

// ID is the cartridge's provider id.
const ID = "ollama"

// DefaultAddress is Ollama's default listening address.
const DefaultAddress = "http://localhost:11434"

func init() {
	provider.Register(ID, New)
	provider.CredentialHints[ID] = "provider.credentials.access-token"
}

// Client is an Ollama chat client.
type Client struct {
	cfg     provider.Config
	url     string
	headers map[string]string
	// effort is provider.options.reasoning-effort, sent as think (true,
	// or false for none) unless the settings have think.
	effort provider.Effort
}

// New builds a client; no credential is required.
func New(cfg provider.Config) (provider.Provider, error) {
	address := cfg.Credential("address")
	if address == "" {
		address = DefaultAddress
	}
	effort, err := cfg.ReasoningEffort()
	if err != nil {
		return nil, err
	}
	c := &Client{cfg: cfg, url: provider.JoinURL(address, "/api/chat"), headers: map[string]string{}, effort: effort}
	if token := cfg.Credential("access-token", "api-key"); token != "" {
		c.headers["Authorization"] = "Bearer " + token
	}
	return c, nil
}

// ID implements provider.Provider.
func (c *Client) ID() string { return ID }

// Body builds the request body: the cartridge's settings verbatim
// (model, format, raw, template, options, keep_alive, think ...), then the
// conversation, tools and stream flag.
func (c *Client) Body(req provider.Request) (map[string]any, error) {
	msgs, err := Messages(req)
	if err != nil {
		return nil, err
	}
	body := c.cfg.BodyFor(req)
	if len(req.Stop) > 0 {
		opts, _ := body["options"].(map[string]any)
		if opts == nil {
			opts = map[string]any{}
		}
		opts["stop"] = req.Stop
		body["options"] = opts
	}
	if req.Output != nil {
		body["format"] = req.Output.Schema
	}
	if c.effort != "" {
		if _, set := body["think"]; !set {
			body["think"] = c.effort != provider.EffortNone
		}
	}
	body["messages"] = msgs
	body["stream"] = req.Stream
	if len(req.Tools) > 0 {
		// Ollama takes tools in the Chat Completions shape.
		body["tools"] = openai.Tools(req.Tools)
	}
	if err := req.Sampling.Apply(body, ID, samplingNames); err != nil {
		return nil, err
	}
	return body, nil
}

// samplingNames are where Ollama takes the sampling settings: in the
// request's options (the answer's limit is num_predict).
var samplingNames = provider.SamplingNames{Temperature: "options.temperature", TopP: "options.top_p", TopK: "options.top_k",
	MaxTokens: "options.num_predict", Seed: "options.seed",
	PresencePenalty: "options.presence_penalty", FrequencyPenalty: "options.frequency_penalty"}

// Messages maps the common conversation to Ollama's messages. Images go
// in the images field (base64, without a data: prefix) of the user or
// tool message they came with; Ollama takes bytes only, so an image given
// by URL fails with a *provider.UnsupportedError (nb does not fetch it).
func Messages(req provider.Request) ([]any, error) {
	var out []any
	if req.System != "" {
		out = append(out, map[string]any{"role": "system", "content": req.System})
	}
	if req.Backdrop != "" {
		out = append(out, map[string]any{"role": "user", "content": req.Backdrop})
	}
	for _, m := range req.Messages {
		images, err := images(m)
		if err != nil {
			return nil, err
		}
		switch m.Role {
		case provider.RoleAssistant:
			msg := map[string]any{"role": "assistant", "content": m.Content}
			if len(m.ToolCalls) > 0 {
				calls := make([]any, len(m.ToolCalls))
				for i, tc := range m.ToolCalls {
					var args any = map[string]any{}
					if strings.TrimSpace(tc.Arguments) != "" {
						var v any
						if json.Unmarshal([]byte(tc.Arguments), &v) == nil && v != nil {
							args = v
						}
					}
					calls[i] = map[string]any{"function": map[string]any{"name": tc.Name, "arguments": args}}
				}
				msg["tool_calls"] = calls
			}
			out = append(out, msg)
		case provider.RoleTool:
			msg := map[string]any{"role": "tool", "content": m.Content, "tool_name": m.ToolName}
			if images != nil {
				msg["images"] = images
			}
			out = append(out, msg)
		default:
			msg := map[string]any{"role": "user", "content": m.Content}
			if images != nil {
				msg["images"] = images
			}
			out = append(out, msg)
		}
	}
	return out, nil
}

// images returns a message's images as base64 strings.
func images(m provider.Message) ([]any, error) {
	if len(m.Images) == 0 {
		return nil, nil
	}
	if m.Role == provider.RoleAssistant {
		return nil, &provider.UnsupportedError{Provider: ID, Feature: "images in assistant messages"}
	}
	out := make([]any, len(m.Images))
	for i, img := range m.Images {
		if len(img.Data) == 0 {
			return nil, &provider.UnsupportedError{Provider: ID, Feature: "images given by URL",
				Hint: "Ollama takes the image's bytes: send it as a data: URL"}
		}
		out[i] = base64.StdEncoding.EncodeToString(img.Data)
	}
	return out, nil
}

// Timeouts are Ollama's default time limits: Ollama answers only once the
// model is loaded, which can take minutes for a large one, so the
// first-byte limit of a streamed request is 5 minutes.
func Timeouts(stream bool) provider.Timeouts {
	t := provider.DefaultTimeouts(stream)
	if stream {
		t.FirstByte = 5 * time.Minute
	}
	return t
}

type line struct {
	Message struct {
		Content   string `json:"content"`
		Thinking  string `json:"thinking"`
		ToolCalls []struct {
			ID       string `json:"id"`
			Function struct {
				Name      string          `json:"name"`
				Arguments json.RawMessage `json:"arguments"`
			} `json:"function"`
		} `json:"tool_calls"`
	} `json:"message"`
	Done            bool   `json:"done"`
	DoneReason      string `json:"done_reason"`
	PromptEvalCount int    `json:"prompt_eval_count"`
	EvalCount       int    `json:"eval_count"`
	Error           string `json:"error"`
}

// Complete implements provider.Provider. Streamed or not, Ollama answers
// with NDJSON lines (one line when not streaming).
func (c *Client) Complete(ctx context.Context, req provider.Request, onEvent func(provider.Event)) (*provider.Response, error) {
	payload, err := c.Body(req)
	if err != nil {
		return nil, err
	}
	body, _, err := provider.Send(ctx, provider.HTTPRequest{Provider: ID, Client: c.cfg.HTTPClient, URL: c.url, Headers: c.headers, Body: payload, Stream: req.Stream,
		Timeouts: c.cfg.Timeouts.Or(Timeouts(req.Stream))})
	if err != nil {
		return nil, err
	}
	defer body.Close()
	// Not streaming, the answer arrives as one line: nothing is emitted.
	emit := onEvent
	if !req.Stream {
		emit = nil
	}
	resp := &provider.Response{}
	ans := provider.Answer{Emit: emit}
	streamed := func() bool { return ans.Streamed && req.Stream }
	done := false
	finish := ""
	r := provider.NewNDJSONReader(body)
	defer r.Close()
	for !done {
		data, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, provider.ReadError(ctx, ID, err, streamed())
		}
		var l line
		if err := json.Unmarshal(data, &l); err != nil {
			return nil, &provider.Error{Provider: ID, Message: fmt.Sprintf("unreadable stream line %q: %v", provider.Clip(string(data)), err), Streamed: streamed()}
		}
		if l.Error != "" {
			return nil, &provider.Error{Provider: ID, Message: "error in the stream: " + l.Error, Streamed: streamed(), Retryable: !streamed()}
		}
		ans.Reasoning(l.Message.Thinking)
		ans.Content(l.Message.Content)
		for _, tc := range l.Message.ToolCalls {
			args := strings.TrimSpace(string(tc.Function.Arguments))
			if args == "" || args == "null" {
				args = "{}"
			}
			// Some servers send the arguments as a JSON string.
			var s string
			if json.Unmarshal([]byte(args), &s) == nil {
				args = s
			}
			id := tc.ID
			if id == "" {
				id = provider.NewCallID()
			}
			if emit != nil {
				emit(provider.Event{Kind: provider.ToolCallStarted, Text: tc.Function.Name})
			}
			resp.ToolCalls = append(resp.ToolCalls, provider.ToolCall{ID: id, Name: tc.Function.Name, Arguments: args})
		}
		if l.Done {
			done = true
			finish = l.DoneReason
			resp.Usage = provider.Usage{InputTokens: l.PromptEvalCount, OutputTokens: l.EvalCount}
		}
	}
	if !done {
		return nil, provider.Incomplete(ID, streamed())
	}
	ans.Finish(resp)
	resp.SetFinishReason(finish)
	return resp, nil
}
