package openai

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/nbots/nb/media"
	"github.com/nbots/nb/provider"
)

// ResponsesKey is the key of the Responses API's data kept with an
// assistant message (provider.Message.Extra): the response's id and the
// reasoning items to send back on the next request.
const ResponsesKey = "openai-responses"

// ResponsesClient speaks OpenAI's Responses API (POST /v1/responses,
// https://platform.openai.com/docs/api-reference/responses), chosen with
// provider.options.api: responses, and by default for OpenAI's reasoning
// models on OpenAI's own address (ResponsesByDefault). Reasoning items travel across tool
// rounds with their encrypted content (store: false, include
// reasoning.encrypted_content), so a reasoning model keeps its thoughts
// between calls without the server keeping anything; with
// provider.options.store: true the server keeps the conversation and each
// request sends previous_response_id and only what is new.
type ResponsesClient struct {
	cfg     provider.Config
	url     string
	headers map[string]string
	effort  provider.Effort
	store   bool
}

func newResponses(cfg provider.Config, url string, headers map[string]string, effort provider.Effort) (*ResponsesClient, error) {
	c := &ResponsesClient{cfg: cfg, url: url, headers: headers, effort: effort}
	if v, ok := cfg.Options["store"]; ok {
		on, err := provider.OptionBool(v)
		if err != nil {
			return nil, fmt.Errorf("%s: provider.options.store: %w", ID, err)
		}
		c.store = on
	}
	return c, nil
}

// ID implements provider.Provider.
func (c *ResponsesClient) ID() string { return ID }

// responsesSampling are the Responses API's names of the sampling
// settings.
var responsesSampling = provider.SamplingNames{Temperature: "temperature", TopP: "top_p", MaxTokens: "max_output_tokens"}

// Body builds the request body: the cartridge's settings (with the Chat
// Completions names of the answer's limit, the reasoning effort and the
// verbosity moved to their Responses places), then
// instructions (the system text), input items, tools, stream and store.
func (c *ResponsesClient) Body(req provider.Request) (map[string]any, error) {
	body := c.cfg.BodyFor(req)
	if err := renameForResponses(body); err != nil {
		return nil, err
	}
	msgs := req.Messages
	if c.store {
		if id, rest := continuation(msgs); id != "" {
			body["previous_response_id"] = id
			msgs = rest
			req.Backdrop = ""
		}
		body["store"] = true
	} else {
		body["store"] = false
		include, _ := body["include"].([]any)
		body["include"] = append(include, "reasoning.encrypted_content")
	}
	input, err := responsesInput(req.Backdrop, msgs)
	if err != nil {
		return nil, err
	}
	body["input"] = input
	if req.System != "" {
		body["instructions"] = req.System
	}
	body["stream"] = req.Stream
	if len(req.Tools) > 0 {
		tools := make([]any, len(req.Tools))
		for i, t := range req.Tools {
			def := map[string]any{"type": "function", "name": t.Name, "parameters": t.Parameters, "strict": false}
			if t.Description != "" {
				def["description"] = t.Description
			}
			tools[i] = def
		}
		body["tools"] = tools
		if req.ToolChoice != "" {
			body["tool_choice"] = map[string]any{"type": "function", "name": req.ToolChoice}
		}
	} else {
		delete(body, "tool_choice")
		delete(body, "parallel_tool_calls")
	}
	if req.Output != nil {
		body["text"] = map[string]any{"format": map[string]any{"type": "json_schema", "name": SchemaName(req.Output.Name), "schema": req.Output.Schema}}
	}
	if user := req.UserOr(c.cfg.User); user != "" {
		body["safety_identifier"] = user
	}
	if err := req.Override.Apply(body, ID, responsesSampling); err != nil {
		return nil, err
	}
	if len(req.Stop) > 0 {
		return nil, &provider.UnsupportedError{Provider: ID, Feature: "stop sequences with the Responses API", Hint: "use provider.options.api: chat for this cartridge"}
	}
	provider.ApplyEffort(body, c.effort, "reasoning.effort", false)
	return body, nil
}

// continuation finds the last assistant message that came from a stored
// response: the id to continue from and the messages after it.
func continuation(msgs []provider.Message) (string, []provider.Message) {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role != provider.RoleAssistant {
			continue
		}
		ex, _ := msgs[i].Extra[ResponsesKey].(map[string]any)
		if id, _ := ex["id"].(string); id != "" && ex["stored"] == true {
			return id, msgs[i+1:]
		}
		return "", msgs
	}
	return "", msgs
}

// responsesInput maps the conversation to input items: the backdrop as a
// user message, user messages with input_text and input_image parts,
// assistant messages as their reasoning items (verbatim), text and
// function_call items, tool messages as function_call_output items (with
// a user message after them for images a tool returned).
func responsesInput(backdrop string, msgs []provider.Message) ([]any, error) {
	var items []any
	if backdrop != "" {
		items = append(items, map[string]any{"role": "user", "content": backdrop})
	}
	var toolImages []any
	flush := func() {
		if len(toolImages) > 0 {
			items = append(items, map[string]any{"role": "user", "content": toolImages})
			toolImages = nil
		}
	}
	for _, m := range msgs {
		if m.Role != provider.RoleTool {
			flush()
		}
		switch m.Role {
		case provider.RoleAssistant:
			if len(m.Images) > 0 {
				return nil, &provider.UnsupportedError{Provider: ID, Feature: "images in assistant messages"}
			}
			ex, _ := m.Extra[ResponsesKey].(map[string]any)
			if r, ok := ex["reasoning"].([]any); ok {
				items = append(items, r...)
			}
			if m.Content != "" {
				items = append(items, map[string]any{"role": "assistant", "content": m.Content})
			}
			for _, tc := range m.ToolCalls {
				items = append(items, map[string]any{"type": "function_call", "call_id": tc.ID, "name": tc.Name, "arguments": tc.Arguments})
			}
		case provider.RoleTool:
			items = append(items, map[string]any{"type": "function_call_output", "call_id": m.ToolCallID, "output": m.Content})
			if len(m.Images) > 0 {
				toolImages = append(toolImages, map[string]any{"type": "input_text", "text": ToolImagesNote(m.ToolName, m.ToolCallID)})
				for _, img := range m.Images {
					toolImages = append(toolImages, inputImage(img))
				}
			}
		default:
			if len(m.Images) == 0 {
				items = append(items, map[string]any{"role": "user", "content": m.Content})
				continue
			}
			var parts []any
			if m.Content != "" {
				parts = append(parts, map[string]any{"type": "input_text", "text": m.Content})
			}
			for _, img := range m.Images {
				parts = append(parts, inputImage(img))
			}
			items = append(items, map[string]any{"role": "user", "content": parts})
		}
	}
	flush()
	return items, nil
}

func inputImage(img media.Image) map[string]any {
	url := img.URL
	if len(img.Data) > 0 {
		url = "data:" + img.MediaType + ";base64," + base64.StdEncoding.EncodeToString(img.Data)
	}
	return map[string]any{"type": "input_image", "image_url": url}
}

// Complete implements provider.Provider.
func (c *ResponsesClient) Complete(ctx context.Context, req provider.Request, onEvent func(provider.Event)) (*provider.Response, error) {
	payload, err := c.Body(req)
	if err != nil {
		return nil, err
	}
	body, _, err := provider.Send(ctx, provider.HTTPRequest{Provider: ID, Client: c.cfg.HTTPClient, URL: c.url, Headers: c.headers, Body: payload, Stream: req.Stream, Timeouts: c.cfg.Timeouts})
	if err != nil {
		return nil, err
	}
	defer body.Close()
	var resp *provider.Response
	if req.Stream {
		resp, err = decodeResponsesStream(ctx, body, onEvent)
	} else {
		resp, err = decodeResponsesWhole(ctx, body)
	}
	if err == nil && c.store {
		resp.Extra[ResponsesKey].(map[string]any)["stored"] = true
	}
	return resp, err
}

// responseItem is an output item: a message, a function call or a
// reasoning item (kept raw, to be sent back as it came).
type responseItem struct {
	Type      string `json:"type"`
	ID        string `json:"id"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
	Content   []struct {
		Type    string `json:"type"`
		Text    string `json:"text"`
		Refusal string `json:"refusal"`
	} `json:"content"`
	Summary []struct {
		Text string `json:"text"`
	} `json:"summary"`
	raw json.RawMessage
}

func (it *responseItem) UnmarshalJSON(b []byte) error {
	type plain responseItem
	if err := json.Unmarshal(b, (*plain)(it)); err != nil {
		return err
	}
	it.raw = append(json.RawMessage(nil), b...)
	return nil
}

// responseObject is the response object, whole or in the terminal events.
type responseObject struct {
	ID                string          `json:"id"`
	Status            string          `json:"status"`
	Output            []responseItem  `json:"output"`
	Error             json.RawMessage `json:"error"`
	IncompleteDetails *struct {
		Reason string `json:"reason"`
	} `json:"incomplete_details"`
	Usage *struct {
		InputTokens        int `json:"input_tokens"`
		OutputTokens       int `json:"output_tokens"`
		InputTokensDetails struct {
			CachedTokens int `json:"cached_tokens"`
		} `json:"input_tokens_details"`
		OutputTokensDetails struct {
			ReasoningTokens int `json:"reasoning_tokens"`
		} `json:"output_tokens_details"`
	} `json:"usage"`
}

// result turns a finished response object into the common answer. The
// text and reasoning streamed before are replaced by the object's own
// when it has output items (they are the same, complete).
func (o *responseObject) result() (*provider.Response, error) {
	if o.Status == "failed" || (len(o.Error) > 0 && string(o.Error) != "null") {
		msg, code := provider.ParseErrorBody(append(append([]byte(`{"error":`), o.Error...), '}'))
		return nil, &provider.Error{Provider: ID, Message: msg, Code: code}
	}
	resp := &provider.Response{}
	var text, reasoning strings.Builder
	var kept []any
	for _, it := range o.Output {
		switch it.Type {
		case "message":
			for _, c := range it.Content {
				text.WriteString(c.Text)
				text.WriteString(c.Refusal)
			}
		case "function_call":
			args := it.Arguments
			if strings.TrimSpace(args) == "" {
				args = "{}"
			}
			resp.ToolCalls = append(resp.ToolCalls, provider.ToolCall{ID: it.CallID, Name: it.Name, Arguments: args})
		case "reasoning":
			for _, s := range it.Summary {
				reasoning.WriteString(s.Text)
			}
			var item map[string]any
			if json.Unmarshal(it.raw, &item) == nil {
				delete(item, "status") // an input item has no status
				kept = append(kept, item)
			}
		}
	}
	resp.Text, resp.Reasoning = text.String(), reasoning.String()
	extra := map[string]any{"id": o.ID}
	if len(kept) > 0 {
		extra["reasoning"] = kept
	}
	resp.Extra = map[string]any{ResponsesKey: extra}
	if u := o.Usage; u != nil {
		resp.Usage = provider.Usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, CacheReadTokens: u.InputTokensDetails.CachedTokens, ReasoningTokens: u.OutputTokensDetails.ReasoningTokens}
	}
	raw := "stop"
	if o.Status == "incomplete" && o.IncompleteDetails != nil {
		raw = o.IncompleteDetails.Reason
		if raw == "max_output_tokens" {
			raw = "length"
		}
	}
	resp.SetFinishReason(raw)
	return resp, nil
}

func decodeResponsesWhole(ctx context.Context, body io.Reader) (*provider.Response, error) {
	data, err := io.ReadAll(body) // capped by provider.Send at the answer limit
	if err != nil {
		return nil, provider.ReadError(ctx, ID, err, false)
	}
	var o responseObject
	if err := json.Unmarshal(data, &o); err != nil {
		return nil, &provider.Error{Provider: ID, Message: fmt.Sprintf("unreadable response %q: %v", provider.Clip(string(data)), err)}
	}
	return o.result()
}

// responseEvent is one streamed event; only the fields nb reads.
type responseEvent struct {
	Type     string          `json:"type"`
	Delta    string          `json:"delta"`
	Item     *responseItem   `json:"item"`
	Response *responseObject `json:"response"`
	Code     string          `json:"code"`
	Message  string          `json:"message"`
}

// decodeResponsesStream reads the semantic events: text and reasoning
// deltas are passed on as they come, a function call's start is said
// when its item is added, and the terminal event (response.completed,
// response.incomplete, response.failed) carries the whole answer. An
// error event fails the request; a stream that ends without a terminal
// event is incomplete.
func decodeResponsesStream(ctx context.Context, body io.Reader, onEvent func(provider.Event)) (*provider.Response, error) {
	emit := func(ev provider.Event) {
		if onEvent != nil {
			onEvent(ev)
		}
	}
	streamed := false
	var text strings.Builder
	sse := provider.NewSSEReader(body)
	defer sse.Close()
	for {
		ev, err := sse.Next()
		if err == io.EOF {
			return nil, provider.Incomplete(ID, streamed)
		}
		if err != nil {
			return nil, provider.ReadError(ctx, ID, err, streamed)
		}
		data := strings.TrimSpace(string(ev.Data))
		if data == "" || data == "[DONE]" {
			continue
		}
		var e responseEvent
		if err := json.Unmarshal(ev.Data, &e); err != nil {
			return nil, &provider.Error{Provider: ID, Message: fmt.Sprintf("unreadable stream event %q: %v", provider.Clip(data), err), Streamed: streamed}
		}
		if e.Type == "" {
			e.Type = ev.Event
		}
		switch e.Type {
		case "response.output_text.delta", "response.refusal.delta":
			if e.Delta != "" {
				streamed = true
				text.WriteString(e.Delta)
				emit(provider.Event{Kind: provider.TextDelta, Text: e.Delta})
			}
		case "response.reasoning_summary_text.delta", "response.reasoning_text.delta":
			emit(provider.Event{Kind: provider.ReasoningDelta, Text: e.Delta})
		case "response.output_item.added":
			if e.Item != nil && e.Item.Type == "function_call" {
				emit(provider.Event{Kind: provider.ToolCallStarted, Text: e.Item.Name})
			}
		case "response.completed", "response.incomplete", "response.failed":
			if e.Response == nil {
				return nil, &provider.Error{Provider: ID, Message: e.Type + " without its response", Streamed: streamed}
			}
			resp, err := e.Response.result()
			if pe, ok := err.(*provider.Error); ok {
				pe.Streamed = streamed
			}
			if err == nil {
				// What was shown is the answer; a text that came only in
				// the terminal object is shown now, in one piece.
				if streamed {
					resp.Text = text.String()
				} else if resp.Text != "" {
					emit(provider.Event{Kind: provider.TextDelta, Text: resp.Text})
				}
			}
			return resp, err
		case "error":
			msg := e.Message
			if msg == "" {
				msg = provider.Clip(data)
			}
			return nil, &provider.Error{Provider: ID, Message: "error in the stream: " + msg, Code: e.Code, Streamed: streamed}
		}
	}
}
