package cohere

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/nbots/nb/provider"
	"github.com/nbots/nb/tool"
)

func (c *Client) bodyV1(req provider.Request) (map[string]any, error) {
	for _, m := range req.Messages {
		if len(m.Images) > 0 {
			return nil, &provider.UnsupportedError{Provider: ID, Feature: "images", Hint: "the v1 chat API takes text only; use options.api: v2 with a vision model such as command-a-vision"}
		}
	}
	body := c.cfg.BodyFor(req)
	if len(req.Stop) > 0 {
		body["stop_sequences"] = req.Stop
	}
	if req.Output != nil {
		body["response_format"] = map[string]any{"type": "json_object", "schema": req.Output.Schema}
	}
	if req.System != "" {
		body["preamble"] = req.System
	}
	history, message, results := MessagesV1(req)
	body["message"] = message
	if len(history) > 0 {
		body["chat_history"] = history
	}
	if len(results) > 0 {
		body["tool_results"] = results
	}
	body["stream"] = req.Stream
	if len(req.Tools) > 0 {
		tools := make([]any, len(req.Tools))
		for i, t := range req.Tools {
			def := map[string]any{"name": t.Name, "parameter_definitions": ParameterDefinitions(t)}
			if t.Description != "" {
				def["description"] = t.Description
			}
			tools[i] = def
		}
		body["tools"] = tools
	} else {
		delete(body, "tool_choice")
	}
	return body, nil
}

// MessagesV1 maps the common conversation to v1's shape: the backdrop is
// the first USER turn of chat_history, assistant turns are CHATBOT turns
// (with their tool_calls as {name, parameters}), and tool results are
// TOOL turns pairing each call with its outputs. The last user message
// becomes message; when the conversation ends with tool results they
// become tool_results and message is empty, as the API wants.
func MessagesV1(req provider.Request) (history []any, message string, toolResults []any) {
	var results []any // the tool results being gathered into one TOOL turn
	flush := func() {
		if len(results) > 0 {
			history = append(history, map[string]any{"role": "TOOL", "tool_results": results})
			results = nil
		}
	}
	if req.Backdrop != "" {
		history = append(history, map[string]any{"role": "USER", "message": req.Backdrop})
	}
	for i, m := range req.Messages {
		switch m.Role {
		case provider.RoleAssistant:
			flush()
			turn := map[string]any{"role": "CHATBOT", "message": m.Content}
			if len(m.ToolCalls) > 0 {
				calls := make([]any, len(m.ToolCalls))
				for j, tc := range m.ToolCalls {
					calls[j] = map[string]any{"name": tc.Name, "parameters": arguments(tc.Arguments)}
				}
				turn["tool_calls"] = calls
			}
			history = append(history, turn)
		case provider.RoleTool:
			call := findCall(req.Messages[:i], m)
			results = append(results, map[string]any{
				"call":    map[string]any{"name": call.Name, "parameters": arguments(call.Arguments)},
				"outputs": []any{map[string]any{"result": m.Content}},
			})
		default:
			flush()
			history = append(history, map[string]any{"role": "USER", "message": m.Content})
		}
	}
	if len(results) > 0 {
		return history, "", results
	}
	if n := len(history); n > 0 {
		if last := history[n-1].(map[string]any); last["role"] == "USER" {
			return history[:n-1], last["message"].(string), nil
		}
	}
	return history, "", nil
}

// findCall finds the call a tool message answers in the messages before it.
func findCall(before []provider.Message, m provider.Message) provider.ToolCall {
	for i := len(before) - 1; i >= 0; i-- {
		for _, tc := range before[i].ToolCalls {
			if tc.ID == m.ToolCallID {
				return tc
			}
		}
	}
	return provider.ToolCall{ID: m.ToolCallID, Name: m.ToolName, Arguments: "{}"}
}

// v1Types maps JSON Schema types to the Python-style names v1's
// parameter_definitions use.
var v1Types = map[string]string{"string": "str", "integer": "int", "number": "float", "boolean": "bool", "array": "list", "object": "dict"}

// ParameterDefinitions turns a tool's JSON Schema into v1's
// parameter_definitions: {name: {description, type, required}}.
func ParameterDefinitions(t tool.Spec) map[string]any {
	out := map[string]any{}
	props, _ := t.Parameters["properties"].(map[string]any)
	required := map[string]bool{}
	if req, ok := t.Parameters["required"].([]any); ok {
		for _, r := range req {
			required[fmt.Sprint(r)] = true
		}
	} else if req, ok := t.Parameters["required"].([]string); ok {
		for _, r := range req {
			required[r] = true
		}
	}
	names := make([]string, 0, len(props))
	for name := range props {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		p, _ := props[name].(map[string]any)
		def := map[string]any{"required": required[name]}
		typ := "str"
		if s, ok := p["type"].(string); ok {
			if v, ok := v1Types[s]; ok {
				typ = v
			}
		}
		def["type"] = typ
		if d, ok := p["description"].(string); ok && d != "" {
			def["description"] = d
		}
		out[name] = def
	}
	return out
}

type callV1 struct {
	Name       string          `json:"name"`
	Parameters json.RawMessage `json:"parameters"`
}

type eventV1 struct {
	EventType     string `json:"event_type"`
	IsFinished    bool   `json:"is_finished"`
	GenerationID  string `json:"generation_id"`
	Text          string `json:"text"`
	ToolCallDelta *struct {
		Index      int    `json:"index"`
		Name       string `json:"name"`
		Parameters string `json:"parameters"`
	} `json:"tool_call_delta"`
	ToolCalls    []callV1        `json:"tool_calls"`
	FinishReason string          `json:"finish_reason"`
	Error        json.RawMessage `json:"error"`
	Message      string          `json:"message"`
	Response     *struct {
		GenerationID string `json:"generation_id"`
		Meta         *usage `json:"meta"`
	} `json:"response"`
}

func callsV1(genID string, calls []callV1) []provider.ToolCall {
	out := make([]provider.ToolCall, len(calls))
	for i, c := range calls {
		args := strings.TrimSpace(string(c.Parameters))
		if args == "" || args == "null" {
			args = "{}"
		}
		out[i] = provider.ToolCall{ID: callID(genID, i), Name: c.Name, Arguments: args}
	}
	return out
}

// callID invents an id for a v1 call (v1 has none): unique per answer,
// so a conversation continued on another provider keeps distinct ids.
func callID(genID string, i int) string {
	if genID == "" {
		return provider.NewCallID()
	}
	return fmt.Sprintf("%s_%d", genID, i)
}

// decodeStreamV1 reads v1's newline-delimited JSON events.
func decodeStreamV1(ctx context.Context, body io.Reader, emit func(provider.Event)) (*provider.Response, error) {
	resp := &provider.Response{}
	ans := provider.Answer{Emit: emit}
	chunks := map[int]*provider.ToolCall{}
	var whole []provider.ToolCall
	genID := ""
	done := false
	finish := ""
	r := provider.NewNDJSONReader(body)
	defer r.Close()
	for !done {
		line, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, provider.ReadError(ctx, ID, err, ans.Streamed)
		}
		var e eventV1
		if err := json.Unmarshal(line, &e); err != nil {
			return nil, &provider.Error{Provider: ID, Message: fmt.Sprintf("unreadable stream line %q: %v", provider.Clip(string(line)), err), Streamed: ans.Streamed}
		}
		switch e.EventType {
		case "stream-start":
			genID = e.GenerationID
		case "text-generation":
			ans.Content(e.Text)
		case "tool-calls-chunk":
			if d := e.ToolCallDelta; d != nil {
				call, ok := chunks[d.Index]
				if !ok {
					call = &provider.ToolCall{}
					chunks[d.Index] = call
				}
				if d.Name != "" && call.Name == "" {
					call.Name = d.Name
					emit(provider.Event{Kind: provider.ToolCallStarted, Text: d.Name})
				}
				call.Arguments += d.Parameters
			} else {
				ans.Reasoning(e.Text) // the tool plan
			}
		case "tool-calls-generation":
			// The whole calls; they supersede the chunks.
			whole = callsV1(genID, e.ToolCalls)
			if len(chunks) == 0 {
				for _, c := range whole {
					emit(provider.Event{Kind: provider.ToolCallStarted, Text: c.Name})
				}
			}
		case "stream-end":
			done = true
			finish = e.FinishReason
			if e.Response != nil {
				resp.Usage = e.Response.Meta.common()
			}
			if msg := errorText(e.Error); msg != "" || strings.HasPrefix(e.FinishReason, "ERROR") {
				if msg == "" {
					msg = "the model stopped with finish_reason " + e.FinishReason
				}
				return nil, &provider.Error{Provider: ID, Message: "error in the stream: " + msg, Streamed: ans.Streamed, Retryable: !ans.Streamed}
			}
		case "":
			if e.Message != "" {
				return nil, &provider.Error{Provider: ID, Message: "error in the stream: " + e.Message, Streamed: ans.Streamed, Retryable: !ans.Streamed}
			}
		}
		// search-queries-generation, search-results, citation-generation
		// and later additions need nothing.
	}
	if !done {
		return nil, provider.Incomplete(ID, ans.Streamed)
	}
	ans.Finish(resp)
	resp.ToolCalls = whole
	if whole == nil && len(chunks) > 0 {
		idx := make([]int, 0, len(chunks))
		for i := range chunks {
			idx = append(idx, i)
		}
		sort.Ints(idx)
		for n, i := range idx {
			c := *chunks[i]
			c.ID = callID(genID, n)
			if strings.TrimSpace(c.Arguments) == "" {
				c.Arguments = "{}"
			}
			resp.ToolCalls = append(resp.ToolCalls, c)
		}
	}
	resp.SetFinishReason(finish)
	return resp, nil
}

func decodeWholeV1(ctx context.Context, body io.Reader) (*provider.Response, error) {
	data, err := io.ReadAll(body) // capped by provider.Send at the answer limit
	if err != nil {
		return nil, provider.ReadError(ctx, ID, err, false)
	}
	var w struct {
		Text         *string  `json:"text"`
		GenerationID string   `json:"generation_id"`
		FinishReason string   `json:"finish_reason"`
		ToolCalls    []callV1 `json:"tool_calls"`
		Meta         *usage   `json:"meta"`
	}
	if err := json.Unmarshal(data, &w); err != nil || w.Text == nil {
		msg, _ := provider.ParseErrorBody(data)
		if msg == "" {
			msg = fmt.Sprintf("unreadable response %q", provider.Clip(string(data)))
		}
		return nil, &provider.Error{Provider: ID, Message: msg}
	}
	visible, thought := provider.SplitThink(*w.Text)
	resp := &provider.Response{Text: visible, Reasoning: thought, Usage: w.Meta.common()}
	if len(w.ToolCalls) > 0 {
		resp.ToolCalls = callsV1(w.GenerationID, w.ToolCalls)
		// With tool calls, text is the tool plan, not an answer.
		resp.Reasoning += resp.Text
		resp.Text = ""
	}
	resp.SetFinishReason(w.FinishReason)
	return resp, nil
}
