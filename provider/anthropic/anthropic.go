// Package anthropic speaks Anthropic's Messages API (POST /v1/messages),
// streamed over server-sent events, with tool use and extended thinking.
// API documentation: https://docs.anthropic.com/en/api/messages and
// https://docs.anthropic.com/en/docs/build-with-claude/streaming.
package anthropic

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/nbots/nb/provider"
)

// ID is the cartridge's provider id.
const ID = "anthropic"

// DefaultAddress is used when the cartridge gives no credentials.address.
const DefaultAddress = "https://api.anthropic.com"

// DefaultVersion is sent as anthropic-version when the cartridge has no
// credentials.anthropic-version.
const DefaultVersion = "2023-06-01"

// DefaultMaxTokens is sent when the settings have no max_tokens: the API
// requires the field.
const DefaultMaxTokens = 4096

// BackdropAnswer is the assistant turn that follows the backdrop, as the
// reference places it, so that user and assistant turns alternate.
const BackdropAnswer = "Ok."

func init() {
	provider.Register(ID, New)
	provider.CredentialHints[ID] = "provider.credentials.api-key"
}

// Client is a Messages API client.
type Client struct {
	cfg     provider.Config
	url     string
	headers map[string]string
	// cache sets prompt-cache breakpoints (see markCache).
	cache bool
	// effort is provider.options.reasoning-effort (see think).
	effort provider.Effort
}

// New builds a client. The api-key is required for the official address;
// a gateway given in credentials.address may authenticate otherwise.
// options.beta (a string or a list) becomes the anthropic-beta header.
func New(cfg provider.Config) (provider.Provider, error) {
	address, key, err := cfg.Endpoint(ID, DefaultAddress, "api-key")
	if err != nil {
		return nil, err
	}
	version := cfg.Credential("anthropic-version")
	if version == "" {
		version = DefaultVersion
	}
	effort, err := cfg.ReasoningEffort()
	if err != nil {
		return nil, err
	}
	c := &Client{cfg: cfg, url: provider.JoinURL(address, "/v1/messages"), headers: map[string]string{"anthropic-version": version}, cache: true, effort: effort}
	if v, ok := cfg.Options["cache"]; ok {
		on, err := provider.OptionBool(v)
		if err != nil {
			return nil, fmt.Errorf("%s: provider.options.cache: %w", ID, err)
		}
		c.cache = on
	}
	if key != "" {
		c.headers["x-api-key"] = key
	}
	switch b := cfg.Options["beta"].(type) {
	case string:
		c.headers["anthropic-beta"] = b
	case []any:
		var names []string
		for _, x := range b {
			names = append(names, fmt.Sprint(x))
		}
		c.headers["anthropic-beta"] = strings.Join(names, ",")
	}
	return c, nil
}

// ID implements provider.Provider.
func (c *Client) ID() string { return ID }

// Body builds the request body: the cartridge's settings verbatim, then
// system, messages, tools and the stream flag. max_tokens defaults to
// DefaultMaxTokens; metadata.user_id to Config.User when the settings have
// no metadata; a string tool_choice (auto, any, none, required) becomes
// the API's {type: ...} object.
func (c *Client) Body(req provider.Request) (map[string]any, error) {
	// The Messages API has no structured-output mode (outside a beta):
	// the schema is asked for in the system text.
	req = provider.WithOutputInstruction(req)
	msgs, err := Messages(req)
	if err != nil {
		return nil, err
	}
	body := c.cfg.BodyFor(req)
	if _, ok := body["max_tokens"]; !ok {
		body["max_tokens"] = DefaultMaxTokens
		if budget := c.effort.Budget(); budget > 0 {
			// Thinking counts against max_tokens: leave the answer its own.
			body["max_tokens"] = budget + DefaultMaxTokens
		}
	}
	if err := c.think(body); err != nil {
		return nil, err
	}
	if len(req.Stop) > 0 {
		body["stop_sequences"] = req.Stop
	}
	if req.System != "" {
		body["system"] = req.System
	}
	body["messages"] = msgs
	body["stream"] = req.Stream
	if user := req.UserOr(c.cfg.User); user != "" {
		if _, ok := body["metadata"]; !ok {
			body["metadata"] = map[string]any{"user_id": user}
		}
	}
	if len(req.Tools) > 0 {
		tools := make([]any, len(req.Tools))
		for i, t := range req.Tools {
			def := map[string]any{"name": t.Name, "input_schema": t.Parameters}
			if t.Description != "" {
				def["description"] = t.Description
			}
			tools[i] = def
		}
		body["tools"] = tools
		if s, ok := body["tool_choice"].(string); ok {
			if s == "required" {
				s = "any"
			}
			body["tool_choice"] = map[string]any{"type": s}
		}
		if req.ToolChoice != "" {
			body["tool_choice"] = map[string]any{"type": "tool", "name": req.ToolChoice}
		}
	} else {
		delete(body, "tool_choice")
	}
	if err := req.Override.Apply(body, ID, samplingNames); err != nil {
		return nil, err
	}
	if c.cache {
		markCache(body)
	}
	return body, nil
}

// think turns the reasoning effort into extended thinking
// ({type: enabled, budget_tokens}) unless the settings have a thinking
// key. The API wants the budget below max_tokens and at least 1,024.
func (c *Client) think(body map[string]any) error {
	budget := c.effort.Budget()
	if _, set := body["thinking"]; set || budget == 0 {
		return nil
	}
	if limit, ok := body["max_tokens"].(int); ok && limit <= budget {
		budget = limit / 2
		if budget < 1024 {
			return fmt.Errorf("%s: provider.options.reasoning-effort: max_tokens %d leaves no room for thinking (it needs at least 1,024 tokens and an answer)", ID, limit)
		}
	}
	body["thinking"] = map[string]any{"type": "enabled", "budget_tokens": budget}
	return nil
}

// ephemeral is the cache_control value of a breakpoint: the API's
// five-minute prompt cache.
func ephemeral() map[string]any { return map[string]any{"type": "ephemeral"} }

// markCache sets the prompt-cache breakpoints of a request body
// (https://docs.anthropic.com/en/docs/build-with-claude/prompt-caching):
// on the last tool definition, on the system text and on the last block
// of the last two user turns, four in all (the API's maximum). The cache
// key is the request's prefix in the API's order, tools then system then
// messages, so in a tool loop each round reads everything up to the
// previous round's last user turn from the cache and writes only what the
// round added; a new exchange on the same conversation reads the system
// and tools. The cartridge turns it off with provider.options.cache:
// false. Prompt caching is generally available: no beta header is needed.
func markCache(body map[string]any) {
	if tools, ok := body["tools"].([]any); ok && len(tools) > 0 {
		if last, ok := tools[len(tools)-1].(map[string]any); ok {
			last["cache_control"] = ephemeral()
		}
	}
	if system, ok := body["system"].(string); ok && system != "" {
		body["system"] = []any{map[string]any{"type": "text", "text": system, "cache_control": ephemeral()}}
	}
	msgs, _ := body["messages"].([]any)
	marked := 0
	for i := len(msgs) - 1; i >= 0 && marked < 2; i-- {
		m, ok := msgs[i].(map[string]any)
		if !ok || m["role"] != "user" {
			continue
		}
		switch content := m["content"].(type) {
		case string:
			m["content"] = []any{map[string]any{"type": "text", "text": content, "cache_control": ephemeral()}}
		case []any:
			last, ok := content[len(content)-1].(map[string]any)
			if !ok {
				continue
			}
			// The block may be shared with the conversation (thinking blocks
			// are; user blocks are built per request, but stay safe).
			block := make(map[string]any, len(last)+1)
			for k, v := range last {
				block[k] = v
			}
			block["cache_control"] = ephemeral()
			blocks := append([]any(nil), content...)
			blocks[len(blocks)-1] = block
			m["content"] = blocks
		default:
			continue
		}
		marked++
	}
}

// samplingNames are Anthropic's names of the sampling settings; the
// Messages API has no seed and no penalties.
var samplingNames = provider.SamplingNames{Temperature: "temperature", TopP: "top_p", TopK: "top_k", MaxTokens: "max_tokens"}

// Messages maps the common conversation to Messages API turns: the
// backdrop as a user turn answered by BackdropAnswer, then the history.
// Tool results become tool_result blocks in a user turn, assistant tool
// calls tool_use blocks, and the thinking blocks kept in
// Message.Extra["anthropic"] go back first in their assistant turn, byte
// for byte. Consecutive turns of the same role are merged, since the API
// wants user and assistant to alternate. A turn whose only block is text
// is sent with string content. Images are image blocks (base64 bytes, or
// a URL the API fetches) after the text of a user message, or inside the
// tool_result block of a tool message; an assistant message with images
// fails with a *provider.UnsupportedError.
func Messages(req provider.Request) ([]any, error) {
	type turn struct {
		role   string
		blocks []any
	}
	var turns []turn
	add := func(role string, blocks ...any) {
		if len(blocks) == 0 {
			return
		}
		if n := len(turns); n > 0 && turns[n-1].role == role {
			turns[n-1].blocks = append(turns[n-1].blocks, blocks...)
			return
		}
		turns = append(turns, turn{role: role, blocks: blocks})
	}
	text := func(s string) []any {
		if s == "" {
			return nil // the API rejects empty text blocks
		}
		return []any{map[string]any{"type": "text", "text": s}}
	}
	if req.Backdrop != "" {
		add("user", text(req.Backdrop)...)
		add("assistant", text(BackdropAnswer)...)
	}
	for _, m := range req.Messages {
		images, err := imageBlocks(m)
		if err != nil {
			return nil, err
		}
		switch m.Role {
		case provider.RoleAssistant:
			blocks := ThinkingBlocks(m)
			blocks = append(blocks, text(m.Content)...)
			for _, tc := range m.ToolCalls {
				blocks = append(blocks, map[string]any{"type": "tool_use", "id": tc.ID, "name": tc.Name, "input": arguments(tc.Arguments)})
			}
			add("assistant", blocks...)
		case provider.RoleTool:
			var content any = m.Content
			if len(images) > 0 {
				content = append(text(m.Content), images...)
			}
			block := map[string]any{"type": "tool_result", "tool_use_id": m.ToolCallID, "content": content}
			if m.IsError {
				block["is_error"] = true
			}
			add("user", block)
		default:
			add("user", append(text(m.Content), images...)...)
		}
	}
	out := make([]any, len(turns))
	for i, t := range turns {
		var content any = t.blocks
		if len(t.blocks) == 1 {
			if b := t.blocks[0].(map[string]any); b["type"] == "text" {
				content = b["text"]
			}
		}
		out[i] = map[string]any{"role": t.role, "content": content}
	}
	return out, nil
}

// imageBlocks maps a message's images to image blocks: {type: base64,
// media_type, data} for bytes, {type: url, url} for a URL.
func imageBlocks(m provider.Message) ([]any, error) {
	if len(m.Images) == 0 {
		return nil, nil
	}
	if m.Role == provider.RoleAssistant {
		return nil, &provider.UnsupportedError{Provider: ID, Feature: "images in assistant messages"}
	}
	blocks := make([]any, len(m.Images))
	for i, img := range m.Images {
		var source map[string]any
		switch {
		case len(img.Data) > 0:
			source = map[string]any{"type": "base64", "media_type": img.MediaType, "data": base64.StdEncoding.EncodeToString(img.Data)}
		case img.URL != "":
			source = map[string]any{"type": "url", "url": img.URL}
		default:
			return nil, &provider.UnsupportedError{Provider: ID, Feature: "images without data or URL"}
		}
		blocks[i] = map[string]any{"type": "image", "source": source}
	}
	return blocks, nil
}

// arguments parses a call's JSON arguments into the object tool_use wants.
func arguments(s string) any {
	var v map[string]any
	if json.Unmarshal([]byte(s), &v) == nil && v != nil {
		return v
	}
	return map[string]any{}
}

// ThinkingBlocks returns the thinking and redacted_thinking blocks an
// assistant message keeps in Extra["anthropic"]["thinking"].
func ThinkingBlocks(m provider.Message) []any {
	ex, _ := m.Extra[ID].(map[string]any)
	blocks, _ := ex["thinking"].([]any)
	return append([]any(nil), blocks...)
}

// Complete implements provider.Provider.
func (c *Client) Complete(ctx context.Context, req provider.Request, onEvent func(provider.Event)) (*provider.Response, error) {
	payload, err := c.Body(req)
	if err != nil {
		return nil, err
	}
	body, _, err := provider.Send(ctx, provider.HTTPRequest{Provider: ID, Client: c.cfg.HTTPClient, URL: c.url, Headers: c.headers, Body: payload, Stream: req.Stream, Timeouts: c.cfg.Timeouts})
	if err != nil {
		return nil, err
	}
	defer body.Close()
	if !req.Stream {
		return decodeWhole(ctx, body)
	}
	return decodeStream(ctx, body, onEvent)
}

type block struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	Thinking  string          `json:"thinking"`
	Signature string          `json:"signature"`
	Data      string          `json:"data"`
}

type usage struct {
	InputTokens              int `json:"input_tokens"`
	OutputTokens             int `json:"output_tokens"`
	CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int `json:"cache_read_input_tokens"`
}

func (u usage) input() int {
	return u.InputTokens + u.CacheCreationInputTokens + u.CacheReadInputTokens
}

// common is the usage in the common model: input counts every prompt
// token, cached or not (the API's input_tokens counts only the uncached
// ones after the last breakpoint).
func (u usage) common() provider.Usage {
	return provider.Usage{InputTokens: u.input(), OutputTokens: u.OutputTokens, CacheReadTokens: u.CacheReadInputTokens, CacheWriteTokens: u.CacheCreationInputTokens}
}

type event struct {
	Type    string `json:"type"`
	Index   int    `json:"index"`
	Message *struct {
		Model string `json:"model"`
		Usage usage  `json:"usage"`
	} `json:"message"`
	ContentBlock *block `json:"content_block"`
	Delta        struct {
		Type        string `json:"type"`
		Text        string `json:"text"`
		PartialJSON string `json:"partial_json"`
		Thinking    string `json:"thinking"`
		Signature   string `json:"signature"`
		StopReason  string `json:"stop_reason"`
	} `json:"delta"`
	Usage *usage `json:"usage"`
	Error *struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
}

// open is a content block being streamed.
type open struct {
	block
	args strings.Builder
}

func decodeStream(ctx context.Context, body io.Reader, onEvent func(provider.Event)) (*provider.Response, error) {
	emit := func(ev provider.Event) {
		if onEvent != nil {
			onEvent(ev)
		}
	}
	resp := &provider.Response{}
	var text, reasoning strings.Builder
	blocks := map[int]*open{}
	streamed, done := false, false
	stop := ""
	sse := provider.NewSSEReader(body)
	defer sse.Close()
	for !done {
		ev, err := sse.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, provider.ReadError(ctx, ID, err, streamed)
		}
		if len(strings.TrimSpace(string(ev.Data))) == 0 {
			continue
		}
		var e event
		if err := json.Unmarshal(ev.Data, &e); err != nil {
			return nil, &provider.Error{Provider: ID, Message: fmt.Sprintf("unreadable stream event %q: %v", provider.Clip(string(ev.Data)), err), Streamed: streamed}
		}
		if e.Type == "" {
			e.Type = ev.Event
		}
		switch e.Type {
		case "message_start":
			if e.Message != nil {
				resp.Usage = e.Message.Usage.common()
				resp.Model = e.Message.Model
			}
		case "content_block_start":
			if e.ContentBlock == nil {
				continue
			}
			b := &open{block: *e.ContentBlock}
			blocks[e.Index] = b
			switch b.Type {
			case "text":
				if b.Text != "" {
					text.WriteString(b.Text)
					streamed = true
					emit(provider.Event{Kind: provider.TextDelta, Text: b.Text})
				}
			case "thinking":
				if b.Thinking != "" {
					reasoning.WriteString(b.Thinking)
					emit(provider.Event{Kind: provider.ReasoningDelta, Text: b.Thinking})
				}
			case "tool_use":
				if in := strings.TrimSpace(string(b.Input)); in != "" && in != "{}" && in != "null" {
					b.args.WriteString(in)
				}
				emit(provider.Event{Kind: provider.ToolCallStarted, Text: b.Name})
			}
		case "content_block_delta":
			b := blocks[e.Index]
			if b == nil {
				b = &open{block: block{Type: "text"}}
				blocks[e.Index] = b
			}
			switch e.Delta.Type {
			case "text_delta":
				if e.Delta.Text != "" {
					b.Text += e.Delta.Text
					text.WriteString(e.Delta.Text)
					streamed = true
					emit(provider.Event{Kind: provider.TextDelta, Text: e.Delta.Text})
				}
			case "input_json_delta":
				b.args.WriteString(e.Delta.PartialJSON)
			case "thinking_delta":
				b.Thinking += e.Delta.Thinking
				reasoning.WriteString(e.Delta.Thinking)
				emit(provider.Event{Kind: provider.ReasoningDelta, Text: e.Delta.Thinking})
			case "signature_delta":
				b.Signature += e.Delta.Signature
			}
		case "message_delta":
			if e.Delta.StopReason != "" {
				stop = e.Delta.StopReason
			}
			if e.Usage != nil {
				// message_delta's usage is cumulative; the input and cache
				// counts it repeats (or omits) are those of message_start.
				resp.Usage.OutputTokens = e.Usage.OutputTokens
				if in := e.Usage.input(); in > 0 {
					u := e.Usage.common()
					u.OutputTokens = e.Usage.OutputTokens
					resp.Usage = u
				}
			}
		case "message_stop":
			done = true
		case "error":
			return nil, streamError(e, streamed)
		}
		// ping, content_block_stop and event types added later need nothing.
	}
	if !done {
		return nil, provider.Incomplete(ID, streamed)
	}
	idx := make([]int, 0, len(blocks))
	for i := range blocks {
		idx = append(idx, i)
	}
	sort.Ints(idx)
	var content []block
	for _, i := range idx {
		b := blocks[i]
		if b.Type == "tool_use" {
			b.Input = json.RawMessage(b.args.String())
		}
		content = append(content, b.block)
	}
	finish(resp, content)
	resp.SetFinishReason(stop)
	resp.Text = text.String()
	resp.Reasoning = reasoning.String()
	estimateReasoning(resp, content)
	return resp, nil
}

// estimateReasoning fills the reasoning tokens Anthropic does not count
// apart (OpenAI, Google and the others do), so that usage compares
// across families: when the answer has thinking blocks, the output
// tokens not spent on its text and tool calls, at least the thinking
// text's own estimate (Claude 4 models show a summary of a longer
// thinking, which is billed whole), at most the output tokens. Four
// characters a token, as nb estimates elsewhere.
func estimateReasoning(resp *provider.Response, content []block) {
	thought, visible := 0, 0
	for _, b := range content {
		switch b.Type {
		case "thinking":
			thought += len(b.Thinking)
		case "redacted_thinking":
			thought += 1 // encrypted: its size says nothing, but it was spent
		case "text":
			visible += len(b.Text)
		case "tool_use":
			visible += len(b.Name) + len(b.Input)
		}
	}
	out := resp.Usage.OutputTokens
	if thought == 0 || out <= 0 {
		return
	}
	n := max(out-(visible+3)/4, (thought+3)/4)
	resp.Usage.ReasoningTokens = min(n, out)
}

func streamError(e event, streamed bool) error {
	pe := &provider.Error{Provider: ID, Message: "error in the stream", Streamed: streamed}
	if e.Error != nil {
		pe.Message += ": " + e.Error.Message
		pe.Code = e.Error.Type
		switch e.Error.Type {
		case "overloaded_error", "api_error", "rate_limit_error":
			pe.Retryable = !streamed
		}
	}
	return pe
}

// finish fills the tool calls and the thinking blocks to keep from the
// answer's content blocks.
func finish(resp *provider.Response, content []block) {
	var thinking []any
	for _, b := range content {
		switch b.Type {
		case "tool_use":
			args := strings.TrimSpace(string(b.Input))
			if args == "" || args == "null" {
				args = "{}"
			}
			resp.ToolCalls = append(resp.ToolCalls, provider.ToolCall{ID: b.ID, Name: b.Name, Arguments: args})
		case "thinking":
			thinking = append(thinking, map[string]any{"type": "thinking", "thinking": b.Thinking, "signature": b.Signature})
		case "redacted_thinking":
			thinking = append(thinking, map[string]any{"type": "redacted_thinking", "data": b.Data})
		}
	}
	if len(thinking) > 0 {
		resp.Extra = map[string]any{ID: map[string]any{"thinking": thinking}}
	}
}

type whole struct {
	Type       string  `json:"type"`
	Model      string  `json:"model"`
	Content    []block `json:"content"`
	StopReason string  `json:"stop_reason"`
	Usage      usage   `json:"usage"`
}

func decodeWhole(ctx context.Context, body io.Reader) (*provider.Response, error) {
	data, err := io.ReadAll(body) // capped by provider.Send at the answer limit
	if err != nil {
		return nil, provider.ReadError(ctx, ID, err, false)
	}
	var w whole
	if err := json.Unmarshal(data, &w); err != nil {
		return nil, &provider.Error{Provider: ID, Message: fmt.Sprintf("unreadable response %q: %v", provider.Clip(string(data)), err)}
	}
	if w.Type == "error" {
		msg, code := provider.ParseErrorBody(data)
		return nil, &provider.Error{Provider: ID, Message: msg, Code: code}
	}
	resp := &provider.Response{Usage: w.Usage.common(), Model: w.Model}
	var text, reasoning strings.Builder
	for _, b := range w.Content {
		switch b.Type {
		case "text":
			text.WriteString(b.Text)
		case "thinking":
			reasoning.WriteString(b.Thinking)
		}
	}
	finish(resp, w.Content)
	resp.SetFinishReason(w.StopReason)
	resp.Text = text.String()
	resp.Reasoning = reasoning.String()
	estimateReasoning(resp, w.Content)
	return resp, nil
}
