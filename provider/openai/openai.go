// Package openai speaks the OpenAI Chat Completions API
// (POST /v1/chat/completions), streamed over server-sent events. It also
// serves every OpenAI-compatible server (vLLM, llama.cpp's server, LM Studio,
// OpenRouter, Groq) through credentials.address.
package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/nbots/nb/provider"
)

// ID is the cartridge's provider id.
const ID = "openai"

// DefaultAddress is used when the cartridge gives no credentials.address.
const DefaultAddress = "https://api.openai.com"

func init() {
	provider.Register(ID, New)
	provider.CredentialHints[ID] = "provider.credentials.access-token"
}

// Client is an OpenAI Chat Completions client.
type Client struct {
	cfg     provider.Config
	url     string
	headers map[string]string
}

// New builds a client. The access token is required for the official
// address only: local compatible servers usually need none.
func New(cfg provider.Config) (provider.Provider, error) {
	address := cfg.Credential("address")
	token := cfg.Credential("access-token", "api-key")
	if address == "" {
		address = DefaultAddress
		if token == "" {
			return nil, &provider.MissingCredentialError{Provider: ID, Key: "access-token"}
		}
	}
	c := &Client{cfg: cfg, url: provider.JoinURL(address, "/v1/chat/completions"), headers: map[string]string{}}
	if token != "" {
		c.headers["Authorization"] = "Bearer " + token
	}
	if org := cfg.Credential("organization", "organization-id"); org != "" {
		c.headers["OpenAI-Organization"] = org
	}
	return c, nil
}

// ID implements provider.Provider.
func (c *Client) ID() string { return ID }

// Body builds the request body: the cartridge's settings verbatim, then
// the conversation, tools, stream flag and user.
func (c *Client) Body(req provider.Request) map[string]any {
	body := c.cfg.Body()
	body["messages"] = Messages(req)
	body["stream"] = req.Stream
	if !req.Stream {
		delete(body, "stream_options")
	}
	if c.cfg.User != "" {
		body["user"] = c.cfg.User
	}
	if len(req.Tools) > 0 {
		tools := make([]any, len(req.Tools))
		for i, t := range req.Tools {
			fn := map[string]any{"name": t.Name, "parameters": t.Parameters}
			if t.Description != "" {
				fn["description"] = t.Description
			}
			tools[i] = map[string]any{"type": "function", "function": fn}
		}
		body["tools"] = tools
	} else {
		delete(body, "tool_choice")
		delete(body, "parallel_tool_calls")
	}
	return body
}

// Messages maps the common conversation to Chat Completions messages:
// the system text first, then the backdrop as a user message, then the history.
func Messages(req provider.Request) []any {
	var out []any
	if req.System != "" {
		out = append(out, map[string]any{"role": "system", "content": req.System})
	}
	if req.Backdrop != "" {
		out = append(out, map[string]any{"role": "user", "content": req.Backdrop})
	}
	for _, m := range req.Messages {
		switch m.Role {
		case provider.RoleAssistant:
			msg := map[string]any{"role": "assistant"}
			if m.Content != "" || len(m.ToolCalls) == 0 {
				msg["content"] = m.Content
			} else {
				msg["content"] = nil
			}
			if len(m.ToolCalls) > 0 {
				calls := make([]any, len(m.ToolCalls))
				for i, tc := range m.ToolCalls {
					calls[i] = map[string]any{"id": tc.ID, "type": "function",
						"function": map[string]any{"name": tc.Name, "arguments": tc.Arguments}}
				}
				msg["tool_calls"] = calls
			}
			out = append(out, msg)
		case provider.RoleTool:
			out = append(out, map[string]any{"role": "tool", "tool_call_id": m.ToolCallID, "content": m.Content})
		default:
			out = append(out, map[string]any{"role": "user", "content": m.Content})
		}
	}
	return out
}

// Complete implements provider.Provider.
func (c *Client) Complete(ctx context.Context, req provider.Request, onEvent func(provider.Event)) (*provider.Response, error) {
	body, _, err := provider.Post(ctx, c.cfg.HTTPClient, ID, c.url, c.headers, c.Body(req))
	if err != nil {
		return nil, err
	}
	defer body.Close()
	if !req.Stream {
		return c.decodeWhole(ctx, body)
	}
	return c.decodeStream(ctx, body, onEvent)
}

type chunk struct {
	Choices []struct {
		Delta struct {
			Content          *string `json:"content"`
			ReasoningContent *string `json:"reasoning_content"`
			Reasoning        *string `json:"reasoning"`
			ToolCalls        []struct {
				Index    *int   `json:"index"`
				ID       string `json:"id"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
	Error json.RawMessage `json:"error"`
}

func (c *Client) decodeStream(ctx context.Context, body io.Reader, onEvent func(provider.Event)) (*provider.Response, error) {
	emit := func(ev provider.Event) {
		if onEvent != nil {
			onEvent(ev)
		}
	}
	resp := &provider.Response{}
	var text provider.TextBuffer
	var reasoning strings.Builder
	var think provider.ThinkFilter
	calls := map[int]*provider.ToolCall{}
	streamed := false
	done := false
	sse := provider.NewSSEReader(body)
	for !done {
		ev, err := sse.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, provider.ReadError(ctx, ID, err, streamed)
		}
		data := bytes.TrimSpace(ev.Data)
		if len(data) == 0 {
			continue
		}
		if bytes.Equal(data, []byte("[DONE]")) {
			done = true
			break
		}
		var ch chunk
		if err := json.Unmarshal(data, &ch); err != nil {
			return nil, &provider.Error{Provider: ID, Message: fmt.Sprintf("unreadable stream event %q: %v", provider.Clip(string(data)), err), Streamed: streamed}
		}
		if len(ch.Error) > 0 && string(ch.Error) != "null" {
			msg, code := provider.ParseErrorBody(append(append([]byte(`{"error":`), ch.Error...), '}'))
			return nil, &provider.Error{Provider: ID, Message: "error in the stream: " + msg, Code: code, Streamed: streamed, Retryable: !streamed}
		}
		if ch.Usage != nil {
			resp.Usage = provider.Usage{InputTokens: ch.Usage.PromptTokens, OutputTokens: ch.Usage.CompletionTokens}
		}
		for _, choice := range ch.Choices {
			d := choice.Delta
			if d.Content != nil && *d.Content != "" {
				visible, thought := think.Feed(*d.Content)
				if thought != "" {
					reasoning.WriteString(thought)
					emit(provider.Event{Kind: provider.ReasoningDelta, Text: thought})
				}
				if visible != "" {
					text.WriteString(visible)
					streamed = true
					emit(provider.Event{Kind: provider.TextDelta, Text: visible})
				}
			}
			for _, r := range []*string{d.ReasoningContent, d.Reasoning} {
				if r != nil && *r != "" {
					reasoning.WriteString(*r)
					emit(provider.Event{Kind: provider.ReasoningDelta, Text: *r})
				}
			}
			for i, tc := range d.ToolCalls {
				idx := i
				if tc.Index != nil {
					idx = *tc.Index
				}
				call, ok := calls[idx]
				if !ok {
					call = &provider.ToolCall{}
					calls[idx] = call
				}
				if tc.ID != "" {
					call.ID = tc.ID
				}
				if tc.Function.Name != "" && call.Name == "" {
					emit(provider.Event{Kind: provider.ToolCallStarted, Text: tc.Function.Name})
				}
				call.Name += tc.Function.Name
				call.Arguments += tc.Function.Arguments
			}
			if choice.FinishReason != nil && *choice.FinishReason != "" {
				resp.FinishReason = *choice.FinishReason
			}
		}
	}
	if !done && resp.FinishReason == "" {
		return nil, &provider.Error{Provider: ID, Message: "the stream ended before the answer was complete", Streamed: streamed, Retryable: !streamed}
	}
	visible, thought := think.Flush()
	if thought != "" {
		reasoning.WriteString(thought)
	}
	if visible != "" {
		text.WriteString(visible)
		emit(provider.Event{Kind: provider.TextDelta, Text: visible})
	}
	resp.Text = text.String()
	resp.Reasoning = reasoning.String()
	resp.ToolCalls = orderedCalls(calls)
	return resp, nil
}

func orderedCalls(calls map[int]*provider.ToolCall) []provider.ToolCall {
	if len(calls) == 0 {
		return nil
	}
	idx := make([]int, 0, len(calls))
	for i := range calls {
		idx = append(idx, i)
	}
	sort.Ints(idx)
	out := make([]provider.ToolCall, 0, len(idx))
	for n, i := range idx {
		c := *calls[i]
		if c.ID == "" {
			c.ID = fmt.Sprintf("call_%d", n)
		}
		if strings.TrimSpace(c.Arguments) == "" {
			c.Arguments = "{}"
		}
		out = append(out, c)
	}
	return out
}

type whole struct {
	Choices []struct {
		Message struct {
			Content          *string `json:"content"`
			ReasoningContent *string `json:"reasoning_content"`
			Reasoning        *string `json:"reasoning"`
			ToolCalls        []struct {
				ID       string `json:"id"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
}

func (c *Client) decodeWhole(ctx context.Context, body io.Reader) (*provider.Response, error) {
	data, err := io.ReadAll(io.LimitReader(body, 64<<20))
	if err != nil {
		return nil, provider.ReadError(ctx, ID, err, false)
	}
	var w whole
	if err := json.Unmarshal(data, &w); err != nil {
		return nil, &provider.Error{Provider: ID, Message: fmt.Sprintf("unreadable response %q: %v", provider.Clip(string(data)), err)}
	}
	if len(w.Choices) == 0 {
		msg, _ := provider.ParseErrorBody(data)
		if msg == "" {
			msg = "the response has no choices"
		}
		return nil, &provider.Error{Provider: ID, Message: msg}
	}
	resp := &provider.Response{FinishReason: w.Choices[0].FinishReason}
	m := w.Choices[0].Message
	if m.Content != nil {
		var think provider.ThinkFilter
		visible, thought := think.Feed(*m.Content)
		v2, t2 := think.Flush()
		resp.Text = visible + v2
		resp.Reasoning = thought + t2
	}
	for _, r := range []*string{m.ReasoningContent, m.Reasoning} {
		if r != nil {
			resp.Reasoning += *r
		}
	}
	calls := map[int]*provider.ToolCall{}
	for i, tc := range m.ToolCalls {
		calls[i] = &provider.ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments}
	}
	resp.ToolCalls = orderedCalls(calls)
	if w.Usage != nil {
		resp.Usage = provider.Usage{InputTokens: w.Usage.PromptTokens, OutputTokens: w.Usage.CompletionTokens}
	}
	return resp, nil
}
