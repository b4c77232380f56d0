package openaitest

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/nbots/nb/provider/providertest"
)

// Responses is a fake of OpenAI's Responses API (POST /v1/responses): it
// decodes input items into a providertest.Turn, checks what the API
// checks (every function_call_output answers a function_call it can see,
// reasoning items come back as it issued them, previous_response_id names
// a stored response) and answers with a response object or the
// documented event stream (response.created, response.in_progress,
// response.output_item.added/done, response.content_part.added/done,
// response.output_text.delta/done, response.reasoning_summary_part.added/done,
// response.reasoning_summary_text.delta/done,
// response.function_call_arguments.delta/done, response.completed or
// response.incomplete), each event with its sequence_number, written in
// small pieces. A reply's Reasoning becomes a reasoning item with a
// summary and encrypted content.
type Responses struct {
	Brain    providertest.Brain
	Recorder *providertest.Recorder
	// SplitBytes is the size of the pieces streams are written in (default 7).
	SplitBytes int

	mu     sync.Mutex
	n      int
	stored map[string][]map[string]any // response id -> the whole conversation's items
	issued map[string]string           // reasoning item id -> encrypted_content
}

// NewResponses returns a Responses fake answering with brain.
func NewResponses(brain providertest.Brain) *Responses {
	return &Responses{Brain: brain, Recorder: &providertest.Recorder{}, stored: map[string][]map[string]any{}, issued: map[string]string{}}
}

func invalidRequest(status int, w http.ResponseWriter, msg, param, code string) {
	c := "null"
	if code != "" {
		c = providertest.JSONString(code)
	}
	providertest.WriteError(w, status, fmt.Sprintf(`{"error":{"message":%s,"type":"invalid_request_error","param":%s,"code":%s}}`, providertest.JSONString(msg), providertest.JSONString(param), c), "")
}

// ServeHTTP implements http.Handler.
func (s *Responses) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/v1/responses") {
		invalidRequest(404, w, fmt.Sprintf("Invalid URL (%s %s)", r.Method, r.URL.Path), "", "")
		return
	}
	body, _ := io.ReadAll(r.Body)
	if s.Recorder != nil {
		s.Recorder.Record(body)
	}
	var req struct {
		Model        string           `json:"model"`
		Input        json.RawMessage  `json:"input"`
		Instructions string           `json:"instructions"`
		Tools        []map[string]any `json:"tools"`
		Stream       bool             `json:"stream"`
		Store        *bool            `json:"store"`
		Previous     string           `json:"previous_response_id"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		invalidRequest(400, w, "We could not parse the JSON body of your request.", "", "")
		return
	}
	var items []map[string]any
	var text string
	if json.Unmarshal(req.Input, &text) == nil {
		items = []map[string]any{{"role": "user", "content": text}}
	} else if err := json.Unmarshal(req.Input, &items); err != nil {
		invalidRequest(400, w, "Invalid type for 'input': expected a string or an array of input items.", "input", "invalid_type")
		return
	}
	s.mu.Lock()
	var history []map[string]any
	if req.Previous != "" {
		prev, ok := s.stored[req.Previous]
		if !ok {
			s.mu.Unlock()
			invalidRequest(400, w, fmt.Sprintf("Previous response with id '%s' not found.", req.Previous), "previous_response_id", "previous_response_not_found")
			return
		}
		history = append(history, prev...)
	}
	history = append(history, items...)
	s.mu.Unlock()
	turn, err := s.turn(req.Model, req.Instructions, req.Stream, req.Tools, history)
	if err != nil {
		invalidRequest(400, w, err.Error(), "input", "")
		return
	}
	reply := s.Brain(turn)
	if providertest.WriteReplyError(w, reply, ErrorBodies) {
		return
	}
	s.mu.Lock()
	s.n++
	id := fmt.Sprintf("resp_fake%d", s.n)
	output := s.output(id, reply)
	if req.Store == nil || *req.Store {
		s.stored[id] = append(history, output...)
	}
	s.mu.Unlock()
	if req.Stream {
		s.stream(w, req.Model, id, reply, output)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(responseObject(req.Model, id, reply, output)) //nolint:errcheck // client may have gone
}

// turn decodes the items the model sees, checking the API's rules.
func (s *Responses) turn(model, instructions string, stream bool, tools []map[string]any, items []map[string]any) (providertest.Turn, error) {
	t := providertest.Turn{System: instructions, Stream: stream, Model: model}
	for _, tl := range tools {
		if tl["type"] != "function" {
			return t, fmt.Errorf("tools: unsupported tool type %v", tl["type"])
		}
		t.Tools = append(t.Tools, fmt.Sprint(tl["name"]))
	}
	calls := map[string]string{}
	for i, it := range items {
		typ, _ := it["type"].(string)
		switch {
		case typ == "function_call":
			calls[fmt.Sprint(it["call_id"])] = fmt.Sprint(it["name"])
			call := fmt.Sprintf("%v(%v)", it["name"], it["arguments"])
			if n := len(t.Messages); n > 0 && t.Messages[n-1].Role == "assistant" {
				t.Messages[n-1].ToolCalls = append(t.Messages[n-1].ToolCalls, call)
			} else {
				t.Messages = append(t.Messages, providertest.Msg{Role: "assistant", ToolCalls: []string{call}})
			}
		case typ == "function_call_output":
			id := fmt.Sprint(it["call_id"])
			name, ok := calls[id]
			if !ok {
				return t, fmt.Errorf("No tool call found for function call output with call_id %s.", id)
			}
			t.Messages = append(t.Messages, providertest.Msg{Role: "tool", Content: fmt.Sprint(it["output"]), ToolName: name, ToolCallID: id})
		case typ == "reasoning":
			id, _ := it["id"].(string)
			enc, _ := it["encrypted_content"].(string)
			s.mu.Lock()
			want, ok := s.issued[id]
			s.mu.Unlock()
			if !ok || enc != want {
				return t, fmt.Errorf("Item with id '%s' not found, or its encrypted_content was changed.", id)
			}
			if _, ok := it["summary"].([]any); !ok {
				return t, fmt.Errorf("Missing required parameter: 'input[%d].summary'.", i)
			}
		case typ == "message" || typ == "":
			role, _ := it["role"].(string)
			msg := providertest.Msg{Role: role}
			switch c := it["content"].(type) {
			case string:
				msg.Content = c
			case []any:
				for _, p := range c {
					part, _ := p.(map[string]any)
					switch part["type"] {
					case "input_text", "output_text":
						msg.Content += fmt.Sprint(part["text"])
					case "input_image":
						msg.Content += "[image]"
					default:
						return t, fmt.Errorf("Invalid content part type %v in input[%d].", part["type"], i)
					}
				}
			}
			if role != "user" && role != "assistant" && role != "system" && role != "developer" {
				return t, fmt.Errorf("Invalid value: '%s'. Supported values are: 'assistant', 'system', 'developer', and 'user'.", role)
			}
			t.Messages = append(t.Messages, msg)
		default:
			return t, fmt.Errorf("Invalid value: '%s' for input[%d].type.", typ, i)
		}
	}
	return t, nil
}

// output builds the response's output items for reply (with s.mu held).
func (s *Responses) output(id string, reply providertest.Reply) []map[string]any {
	var out []map[string]any
	if reply.Reasoning != "" {
		rid := "rs_" + id
		enc := "gAAAAB" + base64.StdEncoding.EncodeToString([]byte(reply.Reasoning))
		s.issued[rid] = enc
		out = append(out, map[string]any{"type": "reasoning", "id": rid, "summary": []any{map[string]any{"type": "summary_text", "text": reply.Reasoning}}, "encrypted_content": enc})
	}
	if reply.Text() != "" {
		out = append(out, map[string]any{"type": "message", "id": "msg_" + id, "status": "completed", "role": "assistant",
			"content": []any{map[string]any{"type": "output_text", "text": reply.Text(), "annotations": []any{}}}})
	}
	for i, c := range reply.Calls {
		callID := c.ID
		if callID == "" {
			callID = fmt.Sprintf("call_%s_%d", id, i)
		}
		out = append(out, map[string]any{"type": "function_call", "id": fmt.Sprintf("fc_%s_%d", id, i), "status": "completed", "call_id": callID, "name": c.Name, "arguments": c.Arguments})
	}
	return out
}

func responseObject(model, id string, reply providertest.Reply, output []map[string]any) map[string]any {
	status := "completed"
	var incomplete any
	if reply.Finish == "length" {
		status, incomplete = "incomplete", map[string]any{"reason": "max_output_tokens"}
	}
	if output == nil {
		output = []map[string]any{}
	}
	reasoning := len(strings.Fields(reply.Reasoning))
	return map[string]any{"id": id, "object": "response", "created_at": 1700000000, "status": status, "model": model,
		"output": output, "error": nil, "incomplete_details": incomplete,
		"usage": map[string]any{"input_tokens": 9, "input_tokens_details": map[string]any{"cached_tokens": 0},
			"output_tokens": 12 + reasoning, "output_tokens_details": map[string]any{"reasoning_tokens": reasoning}, "total_tokens": 21 + reasoning}}
}

func (s *Responses) stream(w http.ResponseWriter, model, id string, reply providertest.Reply, output []map[string]any) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(200)
	n := providertest.SplitSize(s.SplitBytes)
	seq := 0
	send := func(typ string, fields map[string]any) {
		fields["type"] = typ
		fields["sequence_number"] = seq
		seq++
		data, _ := json.Marshal(fields)
		providertest.WriteSplit(w, "event: "+typ+"\ndata: "+string(data)+"\n\n", n)
	}
	start := responseObject(model, id, reply, nil)
	start["status"], start["usage"], start["incomplete_details"] = "in_progress", nil, nil
	send("response.created", map[string]any{"response": start})
	send("response.in_progress", map[string]any{"response": start})
	for i, item := range output {
		added := map[string]any{}
		for k, v := range item {
			added[k] = v
		}
		switch item["type"] {
		case "message":
			added["content"], added["status"] = []any{}, "in_progress"
		case "function_call":
			added["arguments"], added["status"] = "", "in_progress"
		case "reasoning":
			added["summary"] = []any{}
		}
		send("response.output_item.added", map[string]any{"output_index": i, "item": added})
		switch item["type"] {
		case "reasoning":
			send("response.reasoning_summary_part.added", map[string]any{"item_id": item["id"], "output_index": i, "summary_index": 0, "part": map[string]any{"type": "summary_text", "text": ""}})
			for _, p := range providertest.Split(reply.Reasoning, 5) {
				send("response.reasoning_summary_text.delta", map[string]any{"item_id": item["id"], "output_index": i, "summary_index": 0, "delta": p})
			}
			send("response.reasoning_summary_text.done", map[string]any{"item_id": item["id"], "output_index": i, "summary_index": 0, "text": reply.Reasoning})
			send("response.reasoning_summary_part.done", map[string]any{"item_id": item["id"], "output_index": i, "summary_index": 0, "part": map[string]any{"type": "summary_text", "text": reply.Reasoning}})
		case "message":
			send("response.content_part.added", map[string]any{"item_id": item["id"], "output_index": i, "content_index": 0, "part": map[string]any{"type": "output_text", "text": "", "annotations": []any{}}})
			for _, c := range reply.Chunks {
				send("response.output_text.delta", map[string]any{"item_id": item["id"], "output_index": i, "content_index": 0, "delta": c, "logprobs": []any{}})
			}
			send("response.output_text.done", map[string]any{"item_id": item["id"], "output_index": i, "content_index": 0, "text": reply.Text(), "logprobs": []any{}})
			send("response.content_part.done", map[string]any{"item_id": item["id"], "output_index": i, "content_index": 0, "part": map[string]any{"type": "output_text", "text": reply.Text(), "annotations": []any{}}})
		case "function_call":
			args := fmt.Sprint(item["arguments"])
			for _, p := range providertest.Split(args, 4) {
				send("response.function_call_arguments.delta", map[string]any{"item_id": item["id"], "output_index": i, "delta": p})
			}
			send("response.function_call_arguments.done", map[string]any{"item_id": item["id"], "output_index": i, "arguments": args})
		}
		send("response.output_item.done", map[string]any{"output_index": i, "item": item})
	}
	if reply.StreamError != "" {
		send("error", map[string]any{"code": "server_error", "message": reply.StreamError, "param": nil})
		return
	}
	final := responseObject(model, id, reply, output)
	terminal := "response.completed"
	if final["status"] == "incomplete" {
		terminal = "response.incomplete"
	}
	send(terminal, map[string]any{"response": final})
}
