package openaiapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
)

// responseObject is a response of the Responses API, field for field as
// OpenAI sends it.
type responseObject struct {
	ID                 string             `json:"id"`
	Object             string             `json:"object"`
	CreatedAt          int64              `json:"created_at"`
	Status             string             `json:"status"`
	Background         bool               `json:"background"`
	CompletedAt        *int64             `json:"completed_at"`
	Error              *responseError     `json:"error"`
	IncompleteDetails  *incompleteDetails `json:"incomplete_details"`
	Instructions       *string            `json:"instructions"`
	MaxOutputTokens    *int               `json:"max_output_tokens"`
	Model              string             `json:"model"`
	Output             []outputItem       `json:"output"`
	ParallelToolCalls  bool               `json:"parallel_tool_calls"`
	PreviousResponseID *string            `json:"previous_response_id"`
	Reasoning          reasoningConfig    `json:"reasoning"`
	Store              bool               `json:"store"`
	Temperature        *float64           `json:"temperature"`
	Text               textConfig         `json:"text"`
	ToolChoice         json.RawMessage    `json:"tool_choice"`
	Tools              []responsesTool    `json:"tools"`
	TopP               *float64           `json:"top_p"`
	Truncation         string             `json:"truncation"`
	Usage              *responseUsage     `json:"usage"`
	User               *string            `json:"user"`
	Metadata           map[string]string  `json:"metadata"`
}

type responseError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

type incompleteDetails struct {
	Reason string `json:"reason"`
}

type reasoningConfig struct {
	Effort  *string `json:"effort"`
	Summary *string `json:"summary"`
}

type textConfig struct {
	Format textFormat `json:"format"`
}

type textFormat struct {
	Type string `json:"type"`
}

type responseUsage struct {
	InputTokens        int `json:"input_tokens"`
	InputTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"input_tokens_details"`
	OutputTokens        int `json:"output_tokens"`
	OutputTokensDetails struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
	TotalTokens int `json:"total_tokens"`
}

// outputItem is an output item: a message or a function call.
type outputItem struct {
	ID        string        `json:"id"`
	Type      string        `json:"type"`
	Status    string        `json:"status"`
	Role      string        `json:"role,omitempty"`
	Content   *[]outputText `json:"content,omitempty"`
	Arguments *string       `json:"arguments,omitempty"`
	CallID    string        `json:"call_id,omitempty"`
	Name      string        `json:"name,omitempty"`
}

type outputText struct {
	Type        string `json:"type"`
	Annotations []any  `json:"annotations"`
	Logprobs    []any  `json:"logprobs"`
	Text        string `json:"text"`
}

func newOutputText(text string) outputText {
	return outputText{Type: "output_text", Annotations: []any{}, Logprobs: []any{}, Text: text}
}

func messageItem(id, status, text string, withText bool) outputItem {
	content := []outputText{}
	if withText {
		content = append(content, newOutputText(text))
	}
	return outputItem{ID: id, Type: "message", Status: status, Role: "assistant", Content: &content}
}

func callItem(id, status string, c clientCall, args string) outputItem {
	return outputItem{ID: id, Type: "function_call", Status: status, Arguments: &args, CallID: c.ID, Name: c.Name}
}

// complete fills the response from an exchange's outcome, with new ids
// for its items.
func (r *responseObject) complete(out *outcome, now int64) {
	r.Output = r.Output[:0]
	if out.text != "" || len(out.calls) == 0 {
		r.Output = append(r.Output, messageItem("msg_"+newID(), "completed", out.text, true))
	}
	for _, c := range out.calls {
		r.Output = append(r.Output, callItem("fc_"+newID(), "completed", c, c.Arguments))
	}
	r.finish(out, now)
}

// finish sets the response's status and usage.
func (r *responseObject) finish(out *outcome, now int64) {
	r.Status = "completed"
	switch finishReason(out.res, len(out.calls)) {
	case "length":
		r.Status, r.IncompleteDetails = "incomplete", &incompleteDetails{Reason: "max_output_tokens"}
	case "content_filter":
		r.Status, r.IncompleteDetails = "incomplete", &incompleteDetails{Reason: "content_filter"}
	}
	r.CompletedAt = &now
	u := &responseUsage{InputTokens: out.res.Usage.InputTokens, OutputTokens: out.res.Usage.OutputTokens}
	u.InputTokensDetails.CachedTokens = out.res.Usage.CacheReadTokens
	u.OutputTokensDetails.ReasoningTokens = out.res.Usage.ReasoningTokens
	u.TotalTokens = u.InputTokens + u.OutputTokens
	r.Usage = u
}

// responseStream writes a response as the Responses API's events, each
// with its sequence number. Nothing is sent before the answer begins, so
// a request that fails at once gets an error status.
type responseStream struct {
	sse
	resp    *responseObject
	seq     int
	begun   bool
	msgID   string
	msgText []byte
	index   int // output_index of the message, -1 before it is added
}

func (h *Handler) streamResponse(w http.ResponseWriter, r *http.Request, t *turn, resp *responseObject) {
	rs := &responseStream{sse: sse{w: w}, resp: resp, index: -1}
	out, err := h.run(r.Context(), t, rs)
	if err != nil {
		if !rs.started {
			h.fail(w, r, t, err)
			return
		}
		if !errors.Is(r.Context().Err(), context.Canceled) {
			e := apiError(err, t.model, t.bot.Provider().ID())
			h.logger(r.Context()).Error("exchange failed while streaming", "model", t.model, "status", e.Status, "error", err)
			resp.Status = "failed"
			code := e.Code
			if code == "" {
				code = "server_error"
			}
			resp.Error = &responseError{Code: code, Message: e.Message}
			rs.send("response.failed", map[string]any{"response": resp})
		}
		return
	}
	rs.begin()
	if rs.index < 0 && len(out.calls) == 0 {
		rs.openMessage()
	}
	rs.closeMessage()
	for _, c := range out.calls {
		id := "fc_" + newID()
		index := len(resp.Output)
		rs.send("response.output_item.added", map[string]any{"output_index": index, "item": callItem(id, "in_progress", c, "")})
		for _, piece := range pieces(c.Arguments, argumentPiece) {
			rs.send("response.function_call_arguments.delta", map[string]any{"item_id": id, "output_index": index, "delta": piece})
		}
		rs.send("response.function_call_arguments.done", map[string]any{"item_id": id, "output_index": index, "name": c.Name, "arguments": c.Arguments})
		item := callItem(id, "completed", c, c.Arguments)
		resp.Output = append(resp.Output, item)
		rs.send("response.output_item.done", map[string]any{"output_index": index, "item": item})
	}
	resp.finish(out, h.now().Unix())
	h.keepResponse(r, resp, out)
	event := "response.completed"
	if resp.Status == "incomplete" {
		event = "response.incomplete"
	}
	rs.send(event, map[string]any{"response": resp})
}

// send writes one event: its type, sequence number and fields.
func (rs *responseStream) send(typ string, fields map[string]any) {
	fields["type"] = typ
	fields["sequence_number"] = rs.seq
	rs.seq++
	b, err := json.Marshal(fields)
	if err != nil {
		return
	}
	rs.event(typ, b)
}

// begin sends response.created and response.in_progress, once.
func (rs *responseStream) begin() {
	if rs.begun {
		return
	}
	rs.begun = true
	// Sent with what follows them, not alone.
	rs.hold = true
	defer func() { rs.hold = false }()
	rs.send("response.created", map[string]any{"response": rs.resp})
	rs.send("response.in_progress", map[string]any{"response": rs.resp})
}

// openMessage adds the message item and its text part.
func (rs *responseStream) openMessage() {
	rs.begin()
	rs.msgID = "msg_" + newID()
	rs.index = len(rs.resp.Output)
	// Sent with the first delta (or the item's end), not alone.
	rs.hold = true
	defer func() { rs.hold = false }()
	rs.send("response.output_item.added", map[string]any{"output_index": rs.index, "item": messageItem(rs.msgID, "in_progress", "", false)})
	rs.send("response.content_part.added", map[string]any{"item_id": rs.msgID, "output_index": rs.index, "content_index": 0, "part": newOutputText("")})
}

// closeMessage ends the message item, when there is one.
func (rs *responseStream) closeMessage() {
	if rs.index < 0 {
		return
	}
	text := string(rs.msgText)
	rs.send("response.output_text.done", map[string]any{"item_id": rs.msgID, "output_index": rs.index, "content_index": 0, "text": text, "logprobs": []any{}})
	rs.send("response.content_part.done", map[string]any{"item_id": rs.msgID, "output_index": rs.index, "content_index": 0, "part": newOutputText(text)})
	item := messageItem(rs.msgID, "completed", text, true)
	rs.resp.Output = append(rs.resp.Output, item)
	rs.send("response.output_item.done", map[string]any{"output_index": rs.index, "item": item})
}

func (rs *responseStream) text(s string) {
	if rs.index < 0 {
		rs.openMessage()
	}
	rs.msgText = append(rs.msgText, s...)
	rs.send("response.output_text.delta", map[string]any{"item_id": rs.msgID, "output_index": rs.index, "content_index": 0, "delta": s, "logprobs": []any{}})
}

// reasoning is not streamed by the Responses endpoint (see docs/openai.md).
func (rs *responseStream) reasoning(string) {}
