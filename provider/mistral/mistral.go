// Package mistral speaks Mistral AI's chat completion API
// (POST /v1/chat/completions), streamed over server-sent events, with
// function calling. API documentation: https://docs.mistral.ai/api/ and
// https://docs.mistral.ai/capabilities/function_calling/.
//
// The API looks like OpenAI's but differs where it matters here: tool call
// ids must be exactly nine letters or digits (ids written by another
// provider are mapped, the same way every time), tool messages carry the
// function name, reasoning models send content as a list of thinking and
// text chunks, and unknown body fields are refused with a 422.
package mistral

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"sort"
	"strings"

	"github.com/nbots/nb/provider"
)

// ID is the cartridge's provider id.
const ID = "mistral"

// DefaultAddress is used when the cartridge gives no credentials.address.
const DefaultAddress = "https://api.mistral.ai"

func init() {
	provider.Register(ID, New)
	provider.CredentialHints[ID] = "provider.credentials.api-key"
}

// Client is a Mistral chat completion client.
type Client struct {
	cfg     provider.Config
	url     string
	headers map[string]string
}

// New builds a client. The api-key is required for the official address
// only: a self-hosted deployment behind credentials.address may need none.
func New(cfg provider.Config) (provider.Provider, error) {
	address := cfg.Credential("address")
	key := cfg.Credential("api-key")
	if address == "" {
		address = DefaultAddress
		if key == "" {
			return nil, &provider.MissingCredentialError{Provider: ID, Key: "api-key"}
		}
	}
	c := &Client{cfg: cfg, url: provider.JoinURL(address, "/v1/chat/completions"), headers: map[string]string{}}
	if key != "" {
		c.headers["Authorization"] = "Bearer " + key
	}
	return c, nil
}

// ID implements provider.Provider.
func (c *Client) ID() string { return ID }

// Body builds the request body: the cartridge's settings verbatim
// (model, temperature, top_p, max_tokens, safe_prompt, random_seed,
// response_format, tool_choice ...), then messages, tools and the stream
// flag. tool_choice and parallel_tool_calls are left out without tools.
func (c *Client) Body(req provider.Request) map[string]any {
	body := c.cfg.Body()
	body["messages"] = Messages(req)
	body["stream"] = req.Stream
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

// Messages maps the common conversation to Mistral messages: the system
// text first, the backdrop as a user message, then the history, with
// tool call ids passed through CallID.
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
			msg := map[string]any{"role": "assistant", "content": m.Content}
			if len(m.ToolCalls) > 0 {
				calls := make([]any, len(m.ToolCalls))
				for i, tc := range m.ToolCalls {
					args := tc.Arguments
					if strings.TrimSpace(args) == "" {
						args = "{}"
					}
					calls[i] = map[string]any{"id": CallID(tc.ID), "type": "function",
						"function": map[string]any{"name": tc.Name, "arguments": args}}
				}
				msg["tool_calls"] = calls
			}
			out = append(out, msg)
		case provider.RoleTool:
			out = append(out, map[string]any{"role": "tool", "tool_call_id": CallID(m.ToolCallID), "name": m.ToolName, "content": m.Content})
		default:
			out = append(out, map[string]any{"role": "user", "content": m.Content})
		}
	}
	return out
}

const idAlphabet = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"

// CallID returns id when it is already a Mistral tool call id (nine
// letters or digits) and otherwise a nine-character id derived from it,
// so a conversation begun with another provider can go on here and a call
// and its result still share an id.
func CallID(id string) string {
	if validID(id) {
		return id
	}
	sum := sha256.Sum256([]byte(id))
	n := new(big.Int).SetBytes(sum[:])
	b := make([]byte, 9)
	base := big.NewInt(int64(len(idAlphabet)))
	mod := new(big.Int)
	for i := range b {
		n.DivMod(n, base, mod)
		b[i] = idAlphabet[mod.Int64()]
	}
	return string(b)
}

func validID(id string) bool {
	if len(id) != 9 {
		return false
	}
	for i := 0; i < len(id); i++ {
		if !strings.ContainsRune(idAlphabet, rune(id[i])) {
			return false
		}
	}
	return true
}

// Complete implements provider.Provider.
func (c *Client) Complete(ctx context.Context, req provider.Request, onEvent func(provider.Event)) (*provider.Response, error) {
	body, _, err := provider.Post(ctx, c.cfg.HTTPClient, ID, c.url, c.headers, c.Body(req))
	if err != nil {
		return nil, err
	}
	defer body.Close()
	if !req.Stream {
		return decodeWhole(ctx, body)
	}
	return decodeStream(ctx, body, onEvent)
}

// content is a message's content: a string, or (reasoning models) a list
// of {type: text, text} and {type: thinking, thinking: [{type: text, text}]}.
type content struct {
	text, thinking string
}

func (c *content) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) == nil {
		c.text = s
		return nil
	}
	var chunks []struct {
		Type     string          `json:"type"`
		Text     string          `json:"text"`
		Thinking json.RawMessage `json:"thinking"`
	}
	if err := json.Unmarshal(b, &chunks); err != nil {
		return nil // null or a shape this client does not know: no text
	}
	for _, ch := range chunks {
		switch ch.Type {
		case "text":
			c.text += ch.Text
		case "thinking":
			var parts []struct {
				Text string `json:"text"`
			}
			if json.Unmarshal(ch.Thinking, &parts) == nil {
				for _, p := range parts {
					c.thinking += p.Text
				}
			} else {
				var s string
				json.Unmarshal(ch.Thinking, &s) //nolint:errcheck // best effort
				c.thinking += s
			}
		}
	}
	return nil
}

type toolCall struct {
	Index    *int   `json:"index"`
	ID       string `json:"id"`
	Function struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"function"`
}

// args returns the arguments as JSON text: Mistral sends a string, some
// compatible servers an object.
func (tc toolCall) args() string {
	raw := strings.TrimSpace(string(tc.Function.Arguments))
	var s string
	if json.Unmarshal([]byte(raw), &s) == nil {
		return s
	}
	if raw == "null" {
		return ""
	}
	return raw
}

type usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
}

type chunk struct {
	Object  string `json:"object"`
	Message any    `json:"message"`
	Type    string `json:"type"`
	Code    any    `json:"code"`
	Choices []struct {
		Delta struct {
			Content   content    `json:"content"`
			ToolCalls []toolCall `json:"tool_calls"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *usage `json:"usage"`
}

func decodeStream(ctx context.Context, body io.Reader, onEvent func(provider.Event)) (*provider.Response, error) {
	emit := func(ev provider.Event) {
		if onEvent != nil {
			onEvent(ev)
		}
	}
	resp := &provider.Response{}
	var text, reasoning strings.Builder
	var think provider.ThinkFilter
	var calls callList
	streamed, done := false, false
	thought := func(s string) {
		if s != "" {
			reasoning.WriteString(s)
			emit(provider.Event{Kind: provider.ReasoningDelta, Text: s})
		}
	}
	sse := provider.NewSSEReader(body)
	for !done {
		ev, err := sse.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, provider.ReadError(ctx, ID, err, streamed)
		}
		data := strings.TrimSpace(string(ev.Data))
		if data == "" {
			continue
		}
		if data == "[DONE]" {
			done = true
			break
		}
		var ch chunk
		if err := json.Unmarshal(ev.Data, &ch); err != nil {
			return nil, &provider.Error{Provider: ID, Message: fmt.Sprintf("unreadable stream event %q: %v", provider.Clip(data), err), Streamed: streamed}
		}
		if ch.Object == "error" || ev.Event == "error" {
			msg, code := provider.ParseErrorBody(ev.Data)
			return nil, &provider.Error{Provider: ID, Message: "error in the stream: " + msg, Code: code, Streamed: streamed, Retryable: !streamed}
		}
		if ch.Usage != nil {
			resp.Usage = provider.Usage{InputTokens: ch.Usage.PromptTokens, OutputTokens: ch.Usage.CompletionTokens}
		}
		for _, choice := range ch.Choices {
			d := choice.Delta
			thought(d.Content.thinking)
			if d.Content.text != "" {
				visible, t := think.Feed(d.Content.text)
				thought(t)
				if visible != "" {
					text.WriteString(visible)
					streamed = true
					emit(provider.Event{Kind: provider.TextDelta, Text: visible})
				}
			}
			for _, tc := range d.ToolCalls {
				call := calls.slot(tc)
				if tc.Function.Name != "" && call.Name == "" {
					emit(provider.Event{Kind: provider.ToolCallStarted, Text: tc.Function.Name})
				}
				call.Name += tc.Function.Name
				call.Arguments += tc.args()
			}
			if choice.FinishReason != nil && *choice.FinishReason != "" {
				resp.FinishReason = *choice.FinishReason
			}
		}
	}
	if !done && resp.FinishReason == "" {
		return nil, &provider.Error{Provider: ID, Message: "the stream ended before the answer was complete", Streamed: streamed, Retryable: !streamed}
	}
	visible, t := think.Flush()
	reasoning.WriteString(t)
	if visible != "" {
		text.WriteString(visible)
		emit(provider.Event{Kind: provider.TextDelta, Text: visible})
	}
	resp.Text = text.String()
	resp.Reasoning = reasoning.String()
	resp.ToolCalls = calls.done()
	return resp, nil
}

// callList gathers streamed tool calls. Fragments are matched by index,
// but Mistral sends each call whole and may give every call of an answer
// index 0, so a fragment carrying a new id starts a new call. Continuation
// fragments may carry the placeholder id "null".
type callList struct {
	calls   []*provider.ToolCall
	byIndex map[int]*provider.ToolCall
}

func (l *callList) slot(tc toolCall) *provider.ToolCall {
	id := tc.ID
	if id == "null" {
		id = ""
	}
	idx := len(l.calls)
	if tc.Index != nil {
		idx = *tc.Index
	}
	if l.byIndex == nil {
		l.byIndex = map[int]*provider.ToolCall{}
	}
	call, ok := l.byIndex[idx]
	if !ok || (id != "" && call.ID != "" && call.ID != id) {
		call = &provider.ToolCall{}
		l.byIndex[idx] = call
		l.calls = append(l.calls, call)
	}
	if id != "" {
		call.ID = id
	}
	return call
}

func (l *callList) done() []provider.ToolCall {
	m := map[int]*provider.ToolCall{}
	for i, c := range l.calls {
		m[i] = c
	}
	return orderedCalls(m)
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
			c.ID = CallID(fmt.Sprintf("call_%d", n))
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
			Content   content    `json:"content"`
			ToolCalls []toolCall `json:"tool_calls"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage *usage `json:"usage"`
}

func decodeWhole(ctx context.Context, body io.Reader) (*provider.Response, error) {
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
	var think provider.ThinkFilter
	visible, thought := think.Feed(m.Content.text)
	v2, t2 := think.Flush()
	resp.Text = visible + v2
	resp.Reasoning = m.Content.thinking + thought + t2
	calls := map[int]*provider.ToolCall{}
	for i, tc := range m.ToolCalls {
		calls[i] = &provider.ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.args()}
	}
	resp.ToolCalls = orderedCalls(calls)
	if w.Usage != nil {
		resp.Usage = provider.Usage{InputTokens: w.Usage.PromptTokens, OutputTokens: w.Usage.CompletionTokens}
	}
	return resp, nil
}
