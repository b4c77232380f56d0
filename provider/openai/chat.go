package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/nbots/nb/media"
	"github.com/nbots/nb/provider"
	"github.com/nbots/nb/tool"
)

// Dialect says where a Chat Completions server departs from OpenAI's API.
// The zero value (with ID set) is OpenAI's. Providers whose API is
// OpenAI-compatible (Mistral, Maritaca, Cohere v2 for messages) build
// requests and read answers through a Dialect of their own.
type Dialect struct {
	// ID is the provider id errors are reported under.
	ID string

	// EmptyContent is what an assistant message with tool calls and no
	// text sends as content.
	EmptyContent EmptyContent
	// FillArguments sends "{}" for a call stored without arguments, for
	// APIs that refuse an empty string.
	FillArguments bool
	// CallID, when set, maps every tool call id sent (in assistant and tool
	// messages) and the synthetic ids given to calls that arrive without one.
	CallID func(string) string
	// ToolName adds the function's name to tool messages.
	ToolName bool
	// Assistant, when set, may add fields to each assistant message built
	// from m.
	Assistant func(m provider.Message, msg map[string]any)

	// CallsByID reads streamed tool calls that arrive whole, possibly all
	// with index 0 and with the placeholder id "null" on continuations: a
	// fragment with a new id starts a new call, and calls keep their order
	// of arrival. Otherwise fragments are matched by index alone and calls
	// ordered by index.
	CallsByID bool

	// Images says how the API takes images; the zero value is OpenAI's
	// {type: image_url, image_url: {url}} parts.
	Images ImageStyle
	// ToolImages says where the images a tool returned go. The zero value
	// is OpenAI's rule: tool messages carry text only, so the images follow
	// the run of tool messages in a user message that says which call
	// returned them.
	ToolImages ToolImageStyle
	// Forcing is how tool_choice forces the call Request.ToolChoice names;
	// the zero value is OpenAI's named function.
	Forcing Forcing
}

// Forcing is how a dialect's tool_choice forces a call of one tool.
type Forcing int

// The ways of forcing a call.
const (
	// ForceFunction sends {"type": "function", "function": {"name": n}}
	// (OpenAI, Mistral).
	ForceFunction Forcing = iota
	// ForceRequired sends "REQUIRED": the model must call one of the
	// offered tools (Cohere v2, whose tool_choice names no tool).
	ForceRequired
	// ForceNone sends nothing: the API documents no forced choice.
	ForceNone
)

// toolChoice is the tool_choice value that forces a call of name, nil
// when the dialect cannot force one.
func (d Dialect) toolChoice(name string) any {
	switch d.Forcing {
	case ForceFunction:
		return map[string]any{"type": "function", "function": map[string]any{"name": name}}
	case ForceRequired:
		return "REQUIRED"
	}
	return nil
}

// ImageStyle is how a Chat Completions dialect takes images.
type ImageStyle int

// The image styles.
const (
	// ImageURLObject sends {"type": "image_url", "image_url": {"url": u}},
	// u a data: URL or an http(s) URL (OpenAI, Cohere v2).
	ImageURLObject ImageStyle = iota
	// ImageURLString sends {"type": "image_url", "image_url": u} (Mistral).
	ImageURLString
	// NoImages: the API takes none; a request with images fails with a
	// *provider.UnsupportedError.
	NoImages
)

// ToolImageStyle is where a dialect puts the images of a tool result.
type ToolImageStyle int

// The places of tool images.
const (
	// ToolImagesInUserMessage puts them in a user message after the tool
	// messages of the round.
	ToolImagesInUserMessage ToolImageStyle = iota
	// ToolImagesInToolMessage puts them among the parts of the tool
	// message's content (Mistral, whose API refuses a user message right
	// after a tool message).
	ToolImagesInToolMessage
)

// imagePart is one image as the dialect's content part.
func (d Dialect) imagePart(img media.Image) (any, error) {
	u := img.DataURL()
	if u == "" {
		return nil, &provider.UnsupportedError{Provider: d.ID, Feature: "images without data or URL"}
	}
	if d.Images == ImageURLString {
		return map[string]any{"type": "image_url", "image_url": u}, nil
	}
	return map[string]any{"type": "image_url", "image_url": map[string]any{"url": u}}, nil
}

// parts is a message content of text and images: the text part first
// (left out when empty), then one part per image.
func (d Dialect) parts(text string, images []media.Image) ([]any, error) {
	var out []any
	if text != "" {
		out = append(out, map[string]any{"type": "text", "text": text})
	}
	for _, img := range images {
		p, err := d.imagePart(img)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// ToolImagesNote introduces the images of a tool result in the user
// message that carries them, for APIs whose tool messages take text only.
func ToolImagesNote(toolName, callID string) string {
	return fmt.Sprintf("The images returned by the tool %s (call %s):", toolName, callID)
}

// checkImages refuses images the dialect cannot send.
func (d Dialect) checkImages(m provider.Message) error {
	if len(m.Images) == 0 {
		return nil
	}
	if m.Role == provider.RoleAssistant {
		return &provider.UnsupportedError{Provider: d.ID, Feature: "images in assistant messages"}
	}
	if d.Images == NoImages {
		return &provider.UnsupportedError{Provider: d.ID, Feature: "images", Hint: "this provider's API takes text only"}
	}
	return nil
}

// EmptyContent is the content an assistant message with tool calls and no
// text is sent with.
type EmptyContent int

// The shapes of EmptyContent.
const (
	// ContentNull sends "content": null (OpenAI).
	ContentNull EmptyContent = iota
	// ContentEmpty sends "content": "".
	ContentEmpty
	// ContentOmitted sends no content field.
	ContentOmitted
)

// Tools maps tool specs to Chat Completions function tools: each one
// encoded already (a json.RawMessage, kept by its schema map: see
// toolCache), or a map when it cannot be.
func Tools(specs []tool.Spec) []any {
	tools := make([]any, len(specs))
	for i, t := range specs {
		if fn := encodedTool(t); fn != nil {
			tools[i] = fn
			continue
		}
		tools[i] = toolMap(t)
	}
	return tools
}

// StopAndFormat adds the request's stop sequences (stop) and output
// schema (response_format of type json_schema) in the Chat Completions
// shape that OpenAI and Mistral share.
func StopAndFormat(body map[string]any, req provider.Request) {
	if len(req.Stop) > 0 {
		body["stop"] = req.Stop
	}
	if req.Output != nil {
		body["response_format"] = map[string]any{"type": "json_schema",
			"json_schema": map[string]any{"name": SchemaName(req.Output.Name), "schema": req.Output.Schema}}
	}
}

// SchemaName is name as the APIs take a schema's name: letters, digits,
// _ and -, at most 64 characters, "output" when empty.
func SchemaName(name string) string {
	var b strings.Builder
	for _, r := range name {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	s := b.String()
	if len(s) > 64 {
		s = s[:64]
	}
	if s == "" {
		s = "output"
	}
	return s
}

// Body starts a request body: settings (the cartridge's, from
// provider.Config.Body) with the conversation, the stream flag and the
// tools. Without tools the settings in toolOnly are left out, since the
// APIs refuse them then. It fails when the conversation has images the
// dialect cannot send.
func (d Dialect) Body(settings map[string]any, req provider.Request, toolOnly ...string) (map[string]any, error) {
	msgs, err := d.Messages(req)
	if err != nil {
		return nil, err
	}
	settings["messages"] = msgs
	settings["stream"] = req.Stream
	if len(req.Tools) > 0 {
		settings["tools"] = Tools(req.Tools)
		if req.ToolChoice != "" {
			if c := d.toolChoice(req.ToolChoice); c != nil {
				settings["tool_choice"] = c
			}
		}
	} else {
		for _, k := range toolOnly {
			delete(settings, k)
		}
	}
	return settings, nil
}

// Messages maps the common conversation to Chat Completions messages:
// the system text first, then the backdrop as a user message, then the
// history. A user message with images has a list of parts as content;
// the images of tool results go where ToolImages says. It fails with a
// *provider.UnsupportedError on images the dialect cannot send.
func (d Dialect) Messages(req provider.Request) ([]any, error) {
	callID := d.CallID
	if callID == nil {
		callID = func(id string) string { return id }
	}
	// A message each, the system text and the backdrop: sized once.
	out := make([]any, 0, len(req.Messages)+2)
	// pending holds the images of the tool messages of the current run,
	// sent in a user message once the run ends.
	var pending []any
	flush := func() {
		if len(pending) > 0 {
			out = append(out, map[string]any{"role": "user", "content": pending})
			pending = nil
		}
	}
	if req.System != "" {
		out = append(out, &textMessage{Content: req.System, Role: "system"})
	}
	if req.Backdrop != "" {
		out = append(out, &textMessage{Content: req.Backdrop, Role: "user"})
	}
	for _, m := range req.Messages {
		if err := d.checkImages(m); err != nil {
			return nil, err
		}
		if m.Role != provider.RoleTool {
			flush()
		}
		switch m.Role {
		case provider.RoleAssistant:
			if m.Content != "" && len(m.ToolCalls) == 0 && d.Assistant == nil {
				out = append(out, &textMessage{Content: m.Content, Role: "assistant"})
				continue
			}
			msg := map[string]any{"role": "assistant"}
			switch {
			case m.Content != "" || len(m.ToolCalls) == 0 || d.EmptyContent == ContentEmpty:
				msg["content"] = m.Content
			case d.EmptyContent == ContentNull:
				msg["content"] = nil
			}
			if d.Assistant != nil {
				d.Assistant(m, msg)
			}
			if len(m.ToolCalls) > 0 {
				calls := make([]any, len(m.ToolCalls))
				for i, tc := range m.ToolCalls {
					args := tc.Arguments
					if d.FillArguments && strings.TrimSpace(args) == "" {
						args = "{}"
					}
					calls[i] = map[string]any{"id": callID(tc.ID), "type": "function",
						"function": map[string]any{"name": tc.Name, "arguments": args}}
				}
				msg["tool_calls"] = calls
			}
			out = append(out, msg)
		case provider.RoleTool:
			if !d.ToolName && len(m.Images) == 0 {
				out = append(out, &toolMessage{Content: m.Content, Role: "tool", ToolCallID: callID(m.ToolCallID)})
				continue
			}
			msg := map[string]any{"role": "tool", "tool_call_id": callID(m.ToolCallID), "content": m.Content}
			if d.ToolName {
				msg["name"] = m.ToolName
			}
			if len(m.Images) > 0 {
				if d.ToolImages == ToolImagesInToolMessage {
					parts, err := d.parts(m.Content, m.Images)
					if err != nil {
						return nil, err
					}
					msg["content"] = parts
				} else {
					parts, err := d.parts(ToolImagesNote(m.ToolName, callID(m.ToolCallID)), m.Images)
					if err != nil {
						return nil, err
					}
					pending = append(pending, parts...)
				}
			}
			out = append(out, msg)
		default:
			if len(m.Images) == 0 {
				out = append(out, &textMessage{Content: m.Content, Role: "user"})
				continue
			}
			parts, err := d.parts(m.Content, m.Images)
			if err != nil {
				return nil, err
			}
			out = append(out, map[string]any{"role": "user", "content": parts})
		}
	}
	flush()
	return out, nil
}

// textMessage and toolMessage are the history's commonest messages: the
// system text, a user's, an assistant's text without tool calls or
// dialect hook, a tool's text result. They encode to the bytes of the map they stand
// for (a map's keys are encoded sorted: the fields are in that order),
// without a map to build and its keys to sort at each request: a
// request sends the whole history each time.
type textMessage struct {
	Content string `json:"content"`
	Role    string `json:"role"`
}

type toolMessage struct {
	Content    string `json:"content"`
	Role       string `json:"role"`
	ToolCallID string `json:"tool_call_id"`
}

// text is a JSON string field decoded without the pointer a *string costs.
// null and a missing field both give "".
type text string

func (t *text) UnmarshalJSON(b []byte) error {
	if s, ok := plainString(b); ok {
		*t = text(s)
		return nil
	}
	var s *string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	if s != nil {
		*t = text(*s)
	}
	return nil
}

// plainString decodes a JSON string with no escapes and valid UTF-8 with
// one allocation, the common case of a streamed piece.
func plainString(b []byte) (string, bool) {
	if len(b) < 2 || b[0] != '"' {
		return "", false
	}
	inner := b[1 : len(b)-1]
	if bytes.IndexByte(inner, '\\') >= 0 || !utf8.Valid(inner) {
		return "", false
	}
	return string(inner), true
}

// content is a message's content: a string, or (Mistral's reasoning
// models) a list of {type: text, text} and {type: thinking, thinking:
// [{type: text, text}]} parts.
type content struct {
	text, thinking string
}

func (c *content) UnmarshalJSON(b []byte) error {
	if s, ok := plainString(b); ok {
		c.text = s
		return nil
	}
	var s string
	if json.Unmarshal(b, &s) == nil {
		c.text = s
		return nil
	}
	var parts []struct {
		Type     string          `json:"type"`
		Text     string          `json:"text"`
		Thinking json.RawMessage `json:"thinking"`
	}
	if err := json.Unmarshal(b, &parts); err != nil {
		return nil // null or a shape this client does not know: no text
	}
	for _, p := range parts {
		switch p.Type {
		case "text":
			c.text += p.Text
		case "thinking":
			var sub []struct {
				Text string `json:"text"`
			}
			if json.Unmarshal(p.Thinking, &sub) == nil {
				for _, x := range sub {
					c.thinking += x.Text
				}
			} else {
				var s string
				json.Unmarshal(p.Thinking, &s) //nolint:errcheck // best effort
				c.thinking += s
			}
		}
	}
	return nil
}

// arguments is a call's arguments as JSON text: OpenAI sends a string,
// some compatible servers an object.
type arguments string

func (a *arguments) UnmarshalJSON(b []byte) error {
	if s, ok := plainString(b); ok {
		*a = arguments(s)
		return nil
	}
	var s string
	if json.Unmarshal(b, &s) == nil {
		*a = arguments(s)
		return nil
	}
	if raw := strings.TrimSpace(string(b)); raw != "null" {
		*a = arguments(raw)
	}
	return nil
}

// isError is true when a chunk's object field is "error" (Mistral's error
// events); it reads the field without keeping a string.
type isError bool

func (e *isError) UnmarshalJSON(b []byte) error {
	*e = string(b) == `"error"`
	return nil
}

type toolCall struct {
	Index    *int   `json:"index"`
	ID       string `json:"id"`
	Function struct {
		Name      string    `json:"name"`
		Arguments arguments `json:"arguments"`
	} `json:"function"`
}

// message is a delta of a chunk or the message of a whole answer.
type message struct {
	Content content `json:"content"`
	// ReasoningContent (DeepSeek, vLLM, Maritaca) and Reasoning
	// (OpenRouter, Ollama) carry reasoning text.
	ReasoningContent text       `json:"reasoning_content"`
	Reasoning        text       `json:"reasoning"`
	ToolCalls        []toolCall `json:"tool_calls"`
}

// reasoning is the message's reasoning text outside its visible content.
func (m *message) reasoning() string {
	return m.Content.thinking + string(m.ReasoningContent) + string(m.Reasoning)
}

// usage is Chat Completions' usage object; the details are OpenAI's
// (https://platform.openai.com/docs/api-reference/chat/object#chat/object-usage):
// cached_tokens of the prompt, reasoning_tokens of the completion. Both
// are already counted in prompt_tokens and completion_tokens.
type usage struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	PromptTokensDetails *struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	CompletionTokensDetails *struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	} `json:"completion_tokens_details"`
}

func (u *usage) common() provider.Usage {
	out := provider.Usage{InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens}
	if d := u.PromptTokensDetails; d != nil {
		out.CacheReadTokens = d.CachedTokens
	}
	if d := u.CompletionTokensDetails; d != nil {
		out.ReasoningTokens = d.ReasoningTokens
	}
	return out
}

type chunk struct {
	Model   string        `json:"model"`
	Choices []chunkChoice `json:"choices"`
	Usage   *usage        `json:"usage"`
	// An error arrives as {"error": ...} (OpenAI), {"detail": ...}
	// (Maritaca) or {"object": "error", "message": ...} (Mistral).
	Error  json.RawMessage `json:"error"`
	Detail json.RawMessage `json:"detail"`
	Object isError         `json:"object"`
}

// chunkChoice is one of a stream event's choices.
type chunkChoice struct {
	Delta        message `json:"delta"`
	FinishReason *string `json:"finish_reason"`
}

func present(raw json.RawMessage) bool { return len(raw) > 0 && string(raw) != "null" }

// DecodeStream reads a streamed answer (chat.completion.chunk events over
// server-sent events, ending with data: [DONE]), passing each piece to
// onEvent (which may be nil) as it arrives, and returns the whole answer.
func (d Dialect) DecodeStream(ctx context.Context, body io.Reader, onEvent func(provider.Event)) (*provider.Response, error) {
	resp := &provider.Response{}
	ans := provider.Answer{Emit: onEvent}
	calls := callList{byID: d.CallsByID}
	done := false
	finish := ""
	sse := provider.NewSSEReader(body)
	defer sse.Close()
	for !done {
		ev, err := sse.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, provider.ReadError(ctx, d.ID, err, ans.Streamed)
		}
		data := bytes.TrimSpace(ev.Data)
		if len(data) == 0 {
			continue
		}
		if bytes.Equal(data, []byte("[DONE]")) {
			done = true
			break
		}
		// Room for the one choice an event has: segmentio's decoder
		// fills the room it finds, and makes room for 10 otherwise.
		ch := chunk{Choices: make([]chunkChoice, 0, 1)}
		if err := provider.DecodeJSON(data, &ch); err != nil {
			return nil, &provider.Error{Provider: d.ID, Message: fmt.Sprintf("unreadable stream event %q: %v", provider.Clip(string(data)), err), Streamed: ans.Streamed}
		}
		if present(ch.Error) || present(ch.Detail) || bool(ch.Object) || ev.Event == "error" {
			msg, code := provider.ParseErrorBody(data)
			return nil, &provider.Error{Provider: d.ID, Message: "error in the stream: " + msg, Code: code, Streamed: ans.Streamed, Retryable: !ans.Streamed}
		}
		if ch.Usage != nil {
			resp.Usage = ch.Usage.common()
		}
		if ch.Model != "" {
			resp.Model = ch.Model
		}
		for i := range ch.Choices {
			choice := &ch.Choices[i]
			delta := &choice.Delta
			ans.Reasoning(delta.Content.thinking)
			ans.Reasoning(string(delta.ReasoningContent))
			ans.Reasoning(string(delta.Reasoning))
			ans.Content(delta.Content.text)
			for j, tc := range delta.ToolCalls {
				call := calls.slot(tc, j)
				if tc.Function.Name != "" && call.Name == "" && onEvent != nil {
					onEvent(provider.Event{Kind: provider.ToolCallStarted, Text: tc.Function.Name})
				}
				call.Name += tc.Function.Name
				call.Arguments += string(tc.Function.Arguments)
			}
			if choice.FinishReason != nil && *choice.FinishReason != "" {
				finish = *choice.FinishReason
			}
		}
	}
	if !done && finish == "" {
		return nil, provider.Incomplete(d.ID, ans.Streamed)
	}
	ans.Finish(resp)
	resp.ToolCalls = d.finish(calls.calls)
	resp.SetFinishReason(finish)
	return resp, nil
}

// callList gathers streamed tool calls in their order of arrival.
type callList struct {
	byID  bool
	calls []indexedCall
}

type indexedCall struct {
	index int
	*provider.ToolCall
}

// slot returns the call fragment tc (the pos-th of its delta) belongs to.
func (l *callList) slot(tc toolCall, pos int) *provider.ToolCall {
	id := tc.ID
	idx := pos
	if l.byID {
		if id == "null" {
			id = ""
		}
		idx = len(l.calls)
	}
	if tc.Index != nil {
		idx = *tc.Index
	}
	// The last call with the index: with byID a later call may reuse it.
	var call *provider.ToolCall
	for i := len(l.calls) - 1; i >= 0; i-- {
		if l.calls[i].index == idx {
			call = l.calls[i].ToolCall
			break
		}
	}
	if call == nil || (l.byID && id != "" && call.ID != "" && call.ID != id) {
		call = &provider.ToolCall{}
		l.calls = append(l.calls, indexedCall{idx, call})
		if !l.byID {
			sort.SliceStable(l.calls, func(i, j int) bool { return l.calls[i].index < l.calls[j].index })
		}
	}
	if id != "" {
		call.ID = id
	}
	return call
}

// finish gives calls without an id a synthetic one from their position
// and empty arguments "{}".
func (d Dialect) finish(calls []indexedCall) []provider.ToolCall {
	if len(calls) == 0 {
		return nil
	}
	out := make([]provider.ToolCall, len(calls))
	for n, c := range calls {
		out[n] = *c.ToolCall
		if out[n].ID == "" {
			out[n].ID = provider.NewCallID()
			if d.CallID != nil {
				out[n].ID = d.CallID(out[n].ID)
			}
		}
		if strings.TrimSpace(out[n].Arguments) == "" {
			out[n].Arguments = "{}"
		}
	}
	return out
}

type whole struct {
	Model   string        `json:"model"`
	Choices []wholeChoice `json:"choices"`
	Usage   *usage        `json:"usage"`
}

// wholeChoice is one of an answer's choices (nb reads the first).
type wholeChoice struct {
	Message      message `json:"message"`
	FinishReason string  `json:"finish_reason"`
}

// DecodeWhole reads an answer that was not streamed (a chat.completion object).
func (d Dialect) DecodeWhole(ctx context.Context, body io.Reader) (*provider.Response, error) {
	data, err := io.ReadAll(body) // capped by provider.Send at the answer limit
	if err != nil {
		return nil, provider.ReadError(ctx, d.ID, err, false)
	}
	w := whole{Choices: make([]wholeChoice, 0, 1)} // as a stream's events
	if err := provider.DecodeJSON(data, &w); err != nil {
		return nil, &provider.Error{Provider: d.ID, Message: fmt.Sprintf("unreadable response %q: %v", provider.Clip(string(data)), err)}
	}
	if len(w.Choices) == 0 {
		msg, _ := provider.ParseErrorBody(data)
		if msg == "" {
			msg = "the response has no choices"
		}
		return nil, &provider.Error{Provider: d.ID, Message: msg}
	}
	resp := &provider.Response{Model: w.Model}
	m := &w.Choices[0].Message
	visible, thought := provider.SplitThink(m.Content.text)
	resp.Text = visible
	resp.Reasoning = m.reasoning() + thought
	calls := make([]indexedCall, len(m.ToolCalls))
	for i, tc := range m.ToolCalls {
		calls[i] = indexedCall{i, &provider.ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: string(tc.Function.Arguments)}}
	}
	resp.ToolCalls = d.finish(calls)
	resp.SetFinishReason(w.Choices[0].FinishReason)
	if w.Usage != nil {
		resp.Usage = w.Usage.common()
	}
	return resp, nil
}
