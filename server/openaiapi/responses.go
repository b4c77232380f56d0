package openaiapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/nbots/nb/bot"
	"github.com/nbots/nb/eventlog"
	"github.com/nbots/nb/media"
	"github.com/nbots/nb/server"
	"github.com/nbots/nb/state"
	"github.com/nbots/nb/tool"
)

// responsesRequest is the body of POST /v1/responses: the fields nb
// reads. Others are accepted and ignored (see docs/openai.md).
type responsesRequest struct {
	Model              string                  `json:"model"`
	Input              json.RawMessage         `json:"input"`
	Instructions       json.RawMessage         `json:"instructions"`
	Tools              toolList[responsesTool] `json:"tools"`
	ToolChoice         json.RawMessage         `json:"tool_choice"`
	PreviousResponseID string                  `json:"previous_response_id"`
	Conversation       json.RawMessage         `json:"conversation"`
	Stream             bool                    `json:"stream"`
	Store              *bool                   `json:"store"`
	Background         *bool                   `json:"background"`
	User               string                  `json:"user"`
	SafetyIdentifier   string                  `json:"safety_identifier"`
	Metadata           map[string]string       `json:"metadata"`
	ParallelToolCalls  *bool                   `json:"parallel_tool_calls"`
	sampling
}

// responsesTool is a tool of the Responses API: functions are flat.
type responsesTool struct {
	Type        string         `json:"type"`
	Name        string         `json:"name,omitempty"`
	Description *string        `json:"description,omitempty"`
	Parameters  map[string]any `json:"parameters,omitempty"`
	Strict      *bool          `json:"strict,omitempty"`
}

// inputItem is an item of a request's input: a message, a function call
// the model made, or a function call's output.
type inputItem struct {
	Type      string          `json:"type"`
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	CallID    string          `json:"call_id"`
	Name      string          `json:"name"`
	Arguments string          `json:"arguments"`
	Output    json.RawMessage `json:"output"`
}

// storedResponse is a response kept for previous_response_id and GET:
// the whole conversation after it, and the response object.
type storedResponse struct {
	conversation []state.Event
	object       []byte
	// summary is what the server's control page lists of it (kept
	// beside it in a shared store, so zero when read back from there).
	summary eventlog.Summary
}

// summarize is what the control page lists of a response: its model,
// status, creation time and tokens, never its contents.
func (resp *responseObject) summarize() eventlog.Summary {
	s := eventlog.Summary{Label: resp.Model, Status: resp.Status, Created: time.Unix(resp.CreatedAt, 0).UTC()}
	if resp.Usage != nil {
		s.Tokens = resp.Usage.InputTokens + resp.Usage.OutputTokens
	}
	return s
}

// StoredResponses lists the stored responses of every client, the most
// recent first, at most limit of them, without their contents: for the
// server's operator (nb serve's control page).
func (h *Handler) StoredResponses(ctx context.Context, limit int) ([]eventlog.Entry, error) {
	return h.responses.List(ctx, limit)
}

// createResponse answers POST /v1/responses.
func (h *Handler) createResponse(w http.ResponseWriter, r *http.Request) {
	var req responsesRequest
	r, done, ok := h.open(w, r, &req)
	if !ok {
		return
	}
	defer done()
	t, instructions, err := h.responsesTurn(r, &req)
	if err != nil {
		WriteError(w, apiError(err, req.Model, ""))
		return
	}
	h.reportLost(w, r, t)
	resp := &responseObject{
		ID: "resp_" + newID(), Object: "response", CreatedAt: h.now().Unix(), Status: "in_progress",
		Instructions: instructions, MaxOutputTokens: req.MaxOutputTokens, Model: t.model, Output: []outputItem{},
		ParallelToolCalls: req.ParallelToolCalls == nil || *req.ParallelToolCalls,
		Reasoning:         reasoningConfig{}, Store: req.Store == nil || *req.Store, Temperature: req.Temperature,
		Text: textConfig{Format: textFormat{Type: "text"}}, ToolChoice: req.ToolChoice, Tools: req.Tools, TopP: req.TopP,
		Truncation: "disabled", Metadata: req.Metadata,
	}
	if req.PreviousResponseID != "" {
		resp.PreviousResponseID = &req.PreviousResponseID
	}
	if req.User != "" {
		resp.User = &req.User
	}
	if resp.Tools == nil {
		resp.Tools = []responsesTool{}
	}
	if len(resp.ToolChoice) == 0 || string(resp.ToolChoice) == "null" {
		resp.ToolChoice = json.RawMessage(`"auto"`)
	}
	if resp.Metadata == nil {
		resp.Metadata = map[string]string{}
	}
	if req.Stream {
		h.streamResponse(w, r, t, resp)
		return
	}
	out, err := h.run(r.Context(), t, nil)
	if err != nil {
		h.fail(w, r, t, err)
		return
	}
	resp.complete(out, h.now().Unix())
	body := h.keepResponse(r, resp, out)
	writeBody(w, http.StatusOK, body)
}

// keepResponse encodes the finished response and keeps it when asked to.
func (h *Handler) keepResponse(r *http.Request, resp *responseObject, out *outcome) []byte {
	body, err := json.Marshal(resp)
	if err != nil {
		body = []byte(`{"error":"the response could not be encoded"}`)
	}
	if resp.Store {
		size := eventsSize(out.conversation) + int64(len(body))
		ok, err := h.responses.Put(r.Context(), resp.ID, h.ownerOf(r), &storedResponse{conversation: out.conversation, object: body, summary: resp.summarize()}, size)
		switch {
		case err != nil:
			h.logger(r.Context()).Warn("a response could not be kept for previous_response_id", "id", resp.ID, "error", err.Error())
		case !ok:
			h.logger(r.Context()).Warn("a response is too large to keep for previous_response_id", "id", resp.ID, "bytes", size)
		}
	}
	return append(body, '\n')
}

// getResponse answers GET /v1/responses/{id}.
func (h *Handler) getResponse(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	kept, ok, err := h.stored(r, id)
	if err != nil {
		WriteError(w, apiError(err, "", ""))
		return
	}
	if !ok {
		WriteError(w, responseNotFound(id, ""))
		return
	}
	writeBody(w, http.StatusOK, kept.object)
}

// deleteResponse answers DELETE /v1/responses/{id}.
func (h *Handler) deleteResponse(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	deleted, err := h.responses.Delete(r.Context(), id, h.ownerOf(r))
	if err != nil {
		WriteError(w, storeError(err))
		return
	}
	if !deleted {
		WriteError(w, responseNotFound(id, ""))
		return
	}
	server.WriteJSON(w, http.StatusOK, struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Deleted bool   `json:"deleted"`
	}{id, "response", true})
}

// stored is the response id kept for the owner of r.
func (h *Handler) stored(r *http.Request, id string) (*storedResponse, bool, error) {
	kept, ok, err := h.responses.Get(r.Context(), id, h.ownerOf(r))
	if err != nil {
		return nil, false, storeError(err)
	}
	return kept, ok, nil
}

func responseNotFound(id, param string) *Error {
	if param != "" {
		return &Error{Status: http.StatusBadRequest, Message: fmt.Sprintf("Previous response with id '%s' not found: responses are kept for a limited time, and not across restarts of the server; send the whole conversation as input instead.", id), Type: "invalid_request_error", Param: param, Code: "previous_response_not_found"}
	}
	return &Error{Status: http.StatusNotFound, Message: fmt.Sprintf("Response with id '%s' not found.", id), Type: "invalid_request_error"}
}

// responsesTurn checks the request and turns it into an exchange; it
// returns the request's instructions for the response object.
func (h *Handler) responsesTurn(r *http.Request, req *responsesRequest) (*turn, *string, error) {
	if req.Model == "" {
		return nil, nil, badRequest("model", "model is required: the id of a cartridge (GET /v1/models lists them)")
	}
	if len(req.Conversation) > 0 && string(req.Conversation) != "null" {
		return nil, nil, badRequest("conversation", "conversations are not supported: use previous_response_id, or send the whole conversation as input")
	}
	if req.Background != nil && *req.Background {
		return nil, nil, badRequest("background", "background responses are not supported")
	}
	var instructions *string
	if raw := bytes.TrimSpace(req.Instructions); len(raw) > 0 && string(raw) != "null" {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, nil, badRequest("instructions", "instructions must be a string")
		}
		instructions = &s
	}
	var history []state.Event
	if req.PreviousResponseID != "" {
		kept, ok, err := h.stored(r, req.PreviousResponseID)
		if err != nil {
			return nil, nil, err
		}
		if !ok {
			return nil, nil, responseNotFound(req.PreviousResponseID, "previous_response_id")
		}
		history = append(history, kept.conversation...)
	}
	b, err := h.catalog.Bot(r.Context(), cartridgeID(req.Model))
	if err != nil {
		return nil, nil, err
	}
	user := req.SafetyIdentifier
	if user == "" {
		user = req.User
	}
	t := &turn{bot: b, model: req.Model, endUser: h.userOf(r, user), owner: h.ownerOf(r), whole: !req.Stream}
	if t.external, err = responsesTools(r.Context(), b, req.Tools); err != nil {
		return nil, nil, err
	}
	if t.override, t.stop, err = req.settings(); err != nil {
		return nil, nil, err
	}
	var system []string
	if instructions != nil && *instructions != "" {
		system = append(system, *instructions)
	}
	events, more, err := inputEvents(req.Input, history)
	if err != nil {
		return nil, nil, err
	}
	system = append(system, more...)
	t.system = strings.Join(system, "\n\n")
	if events, t.lost, err = h.restoreRounds(r.Context(), t.owner, events); err != nil {
		return nil, nil, err
	}
	t.history, t.input = splitInput(events)
	if t.input == nil && len(events) == len(history) {
		return nil, nil, badRequest("input", "input is required: a text, or a list of items")
	}
	return t, instructions, nil
}

// responsesTools turns the client's function tools into specs.
func responsesTools(ctx context.Context, b *bot.Bot, tools []responsesTool) ([]tool.Spec, error) {
	c, err := newToolChecker(b, len(tools))
	if err != nil {
		return nil, err
	}
	for i, t := range tools {
		param := fmt.Sprintf("tools[%d]", i)
		if t.Type != "function" {
			return nil, badRequest(param+".type", "unsupported tool type %q: only function tools are supported (the cartridge's own tools run on the server)", t.Type)
		}
		desc := ""
		if t.Description != nil {
			desc = *t.Description
		}
		if err := c.add(ctx, param+".name", t.Name, desc, t.Parameters); err != nil {
			return nil, err
		}
	}
	return c.specs, nil
}

// inputEvents appends the request's input to history: a text is a user
// message; items are messages, function calls and their outputs. System
// and developer messages are returned as system text.
func inputEvents(raw json.RawMessage, history []state.Event) ([]state.Event, []string, error) {
	events := history
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return events, nil, nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, nil, badRequest("input", "invalid input: %v", err)
		}
		return appendUser(events, s, nil), nil, nil
	}
	var items []inputItem
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, nil, badRequest("input", "input must be a string or an array of items")
	}
	names := map[string]string{} // call id -> tool name
	for _, ev := range history {
		for _, c := range ev.ToolCalls {
			names[c.ID] = c.Name
		}
	}
	var system []string
	// open is the index of the assistant event that function_call items
	// join: the last event, while it is the model's.
	open := -1
	for i, it := range items {
		param := fmt.Sprintf("input[%d]", i)
		typ := it.Type
		if typ == "" && it.Role != "" {
			typ = "message"
		}
		switch typ {
		case "message":
			switch it.Role {
			case "system", "developer":
				text, _, err := messageContent(it.Content, param+".content", false)
				if err != nil {
					return nil, nil, err
				}
				system = append(system, text)
			case "user":
				text, images, err := messageContent(it.Content, param+".content", true)
				if err != nil {
					return nil, nil, err
				}
				events = appendUser(events, text, images)
				open = -1
			case "assistant":
				text, _, err := messageContent(it.Content, param+".content", false)
				if err != nil {
					return nil, nil, err
				}
				if open >= 0 && len(events[open].ToolCalls) == 0 {
					prev := agentText(events[open].Message)
					events[open].Message = prev + text
					continue
				}
				events = append(events, aiEvent(text, nil, ""))
				open = len(events) - 1
			default:
				return nil, nil, badRequest(param+".role", "unknown role %q: expected user, assistant, system or developer", it.Role)
			}
		case "function_call":
			if it.CallID == "" || it.Name == "" {
				return nil, nil, badRequest(param, "a function_call item needs a call_id and a name")
			}
			args := it.Arguments
			if strings.TrimSpace(args) == "" {
				args = "{}"
			}
			c := clientCall{ID: it.CallID, Name: it.Name, Arguments: args}
			names[c.ID] = c.Name
			if open < 0 {
				events = append(events, aiEvent("", []clientCall{c}, ""))
				open = len(events) - 1
				continue
			}
			ev := &events[open]
			ev.ToolCalls = append(slices.Clone(ev.ToolCalls), c)
			if agentText(ev.Message) == "" {
				ev.Message = nil
			}
		case "function_call_output":
			name, ok := names[it.CallID]
			if !ok {
				orig, _ := splitID(it.CallID)
				name, ok = names[orig]
			}
			if !ok {
				return nil, nil, badRequest(param+".call_id", "no function_call before this item has the call_id %q", it.CallID)
			}
			text, images, err := toolOutput(it.Output, param+".output")
			if err != nil {
				return nil, nil, err
			}
			ev := toolEvent(it.CallID, name, text)
			ev.Images = images
			events = append(events, ev)
			open = -1
		case "reasoning":
			// The model's reasoning summaries are not sent back: nb keeps
			// what a provider needs again with the server's part of a round.
		case "item_reference":
			return nil, nil, badRequest(param+".type", "item references are not supported: send the items themselves, or use previous_response_id")
		default:
			return nil, nil, badRequest(param+".type", "unsupported input item type %q: nb takes messages, function_call and function_call_output items", typ)
		}
	}
	return events, system, nil
}

// toolOutput reads a function call's output: a string, or content parts
// (text and images).
func toolOutput(raw json.RawMessage, param string) (string, []media.Image, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil, nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", nil, badRequest(param, "invalid output: %v", err)
		}
		return s, nil, nil
	}
	if raw[0] == '[' {
		return messageContent(raw, param, true)
	}
	return "", nil, badRequest(param, "output must be a string or an array of content parts")
}
