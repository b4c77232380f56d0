package cohere

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/nbots/nb/provider"
	"github.com/nbots/nb/provider/openai"
)

// dialectV2 is where v2's messages depart from OpenAI's Chat Completions
// messages (its answers are another format, read below).
var dialectV2 = openai.Dialect{
	ID: ID,
	// An assistant message with tool calls and no text has no content.
	EmptyContent: openai.ContentOmitted,
	// A call without arguments is sent as {}.
	FillArguments: true,
	// The tool plan goes back with the calls it introduced.
	Assistant: func(m provider.Message, msg map[string]any) {
		if plan := ToolPlan(m); plan != "" && len(m.ToolCalls) > 0 {
			msg["tool_plan"] = plan
		}
	},
	// tool_choice "REQUIRED" forces a call (Command R7B and newer); it
	// names no tool, so it forces the named one when it is the only tool
	// offered, as in the gateway's save_memory call.
	Forcing: openai.ForceRequired,
}

func (c *Client) bodyV2(req provider.Request) (map[string]any, error) {
	body, err := dialectV2.Body(c.cfg.BodyFor(req), req, "tool_choice", "strict_tools")
	if err != nil {
		return nil, err
	}
	if len(req.Stop) > 0 {
		body["stop_sequences"] = req.Stop
	}
	if req.Output != nil {
		body["response_format"] = map[string]any{"type": "json_object", "json_schema": req.Output.Schema}
	}
	return body, nil
}

// MessagesV2 maps the common conversation to v2 messages: the system text
// first, the backdrop as a user message, then the history. An assistant
// message sends back its tool plan (kept in Extra["cohere"]["tool_plan"])
// with its tool calls. Images are {type: image_url, image_url: {url}}
// parts of user messages; tool messages take text and documents only, so
// the images of a round's tool results follow its tool messages in one
// user message.
func MessagesV2(req provider.Request) ([]any, error) {
	return dialectV2.Messages(req)
}

// ToolPlan returns the tool plan an assistant message keeps in
// Extra["cohere"]["tool_plan"].
func ToolPlan(m provider.Message) string {
	ex, _ := m.Extra[ID].(map[string]any)
	s, _ := ex["tool_plan"].(string)
	return s
}

type contentV2 struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	Thinking string `json:"thinking"`
}

type callDeltaV2 struct {
	ID       string `json:"id"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// object decodes raw into v when raw is a JSON object.
func object(raw json.RawMessage, v any) bool {
	s := strings.TrimSpace(string(raw))
	return strings.HasPrefix(s, "{") && json.Unmarshal(raw, v) == nil
}

type eventV2 struct {
	Type  string `json:"type"`
	Index int    `json:"index"`
	Delta struct {
		Message struct {
			// Content and ToolCalls are objects in content and tool-call
			// events, empty lists in message-start.
			Content   json.RawMessage `json:"content"`
			ToolPlan  string          `json:"tool_plan"`
			ToolCalls json.RawMessage `json:"tool_calls"`
		} `json:"message"`
		FinishReason string          `json:"finish_reason"`
		Error        json.RawMessage `json:"error"`
		Usage        *usage          `json:"usage"`
	} `json:"delta"`
	Message string `json:"message"`
}

func decodeStreamV2(ctx context.Context, body io.Reader, emit func(provider.Event)) (*provider.Response, error) {
	resp := &provider.Response{}
	ans := provider.Answer{Emit: emit}
	var plan strings.Builder
	var calls []*provider.ToolCall
	byIndex := map[int]*provider.ToolCall{}
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
			return nil, provider.ReadError(ctx, ID, err, ans.Streamed)
		}
		data := strings.TrimSpace(string(ev.Data))
		if data == "" || data == "[DONE]" {
			continue
		}
		var e eventV2
		if err := json.Unmarshal(ev.Data, &e); err != nil {
			return nil, &provider.Error{Provider: ID, Message: fmt.Sprintf("unreadable stream event %q: %v", provider.Clip(data), err), Streamed: ans.Streamed}
		}
		if e.Type == "" {
			e.Type = ev.Event
		}
		m := e.Delta.Message
		switch e.Type {
		case "content-start", "content-delta":
			var content contentV2
			if !object(m.Content, &content) {
				continue
			}
			ans.Reasoning(content.Thinking)
			ans.Content(content.Text)
		case "tool-plan-delta":
			plan.WriteString(m.ToolPlan)
			ans.Reasoning(m.ToolPlan)
		case "tool-call-start", "tool-call-delta":
			var d callDeltaV2
			if !object(m.ToolCalls, &d) {
				continue
			}
			call, ok := byIndex[e.Index]
			if !ok || e.Type == "tool-call-start" && call.ID != "" && d.ID != "" && call.ID != d.ID {
				call = &provider.ToolCall{}
				byIndex[e.Index] = call
				calls = append(calls, call)
			}
			if d.ID != "" {
				call.ID = d.ID
			}
			if n := d.Function.Name; n != "" && call.Name == "" {
				call.Name = n
				emit(provider.Event{Kind: provider.ToolCallStarted, Text: n})
			}
			call.Arguments += d.Function.Arguments
		case "message-end":
			done = true
			finish = e.Delta.FinishReason
			resp.Usage = e.Delta.Usage.common()
			if msg := errorText(e.Delta.Error); msg != "" || e.Delta.FinishReason == "ERROR" {
				if msg == "" {
					msg = "the model stopped with finish_reason ERROR"
				}
				return nil, &provider.Error{Provider: ID, Message: "error in the stream: " + msg, Streamed: ans.Streamed, Retryable: !ans.Streamed}
			}
		default:
			// message-start, content-end, tool-call-end, citation events
			// and later additions need nothing; an error object without a
			// type is reported.
			if e.Type == "" && e.Message != "" {
				return nil, &provider.Error{Provider: ID, Message: "error in the stream: " + e.Message, Streamed: ans.Streamed, Retryable: !ans.Streamed}
			}
		}
	}
	if !done {
		return nil, provider.Incomplete(ID, ans.Streamed)
	}
	ans.Finish(resp)
	for _, c := range calls {
		tc := *c
		if tc.ID == "" {
			tc.ID = provider.NewCallID()
		}
		if strings.TrimSpace(tc.Arguments) == "" {
			tc.Arguments = "{}"
		}
		resp.ToolCalls = append(resp.ToolCalls, tc)
	}
	if plan.Len() > 0 {
		resp.Extra = map[string]any{ID: map[string]any{"tool_plan": plan.String()}}
	}
	resp.SetFinishReason(finish)
	return resp, nil
}

type wholeV2 struct {
	FinishReason string `json:"finish_reason"`
	Message      *struct {
		Content []struct {
			Type     string `json:"type"`
			Text     string `json:"text"`
			Thinking string `json:"thinking"`
		} `json:"content"`
		ToolPlan  string `json:"tool_plan"`
		ToolCalls []struct {
			ID       string `json:"id"`
			Function struct {
				Name      string `json:"name"`
				Arguments string `json:"arguments"`
			} `json:"function"`
		} `json:"tool_calls"`
	} `json:"message"`
	Usage *usage `json:"usage"`
}

func decodeWholeV2(ctx context.Context, body io.Reader) (*provider.Response, error) {
	data, err := io.ReadAll(body) // capped by provider.Send at the answer limit
	if err != nil {
		return nil, provider.ReadError(ctx, ID, err, false)
	}
	var w wholeV2
	if err := json.Unmarshal(data, &w); err != nil || w.Message == nil {
		msg, _ := provider.ParseErrorBody(data)
		if msg == "" {
			msg = fmt.Sprintf("unreadable response %q", provider.Clip(string(data)))
		}
		return nil, &provider.Error{Provider: ID, Message: msg}
	}
	resp := &provider.Response{Usage: w.Usage.common()}
	var text, reasoning strings.Builder
	for _, c := range w.Message.Content {
		switch c.Type {
		case "text":
			text.WriteString(c.Text)
		case "thinking":
			reasoning.WriteString(c.Thinking)
		}
	}
	visible, thought := provider.SplitThink(text.String())
	resp.Text = visible
	resp.Reasoning = reasoning.String() + thought
	if w.Message.ToolPlan != "" {
		resp.Reasoning += w.Message.ToolPlan
		resp.Extra = map[string]any{ID: map[string]any{"tool_plan": w.Message.ToolPlan}}
	}
	for _, tc := range w.Message.ToolCalls {
		call := provider.ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments}
		if call.ID == "" {
			call.ID = provider.NewCallID()
		}
		if strings.TrimSpace(call.Arguments) == "" {
			call.Arguments = "{}"
		}
		resp.ToolCalls = append(resp.ToolCalls, call)
	}
	resp.SetFinishReason(w.FinishReason)
	return resp, nil
}
