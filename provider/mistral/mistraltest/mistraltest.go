// Package mistraltest is an in-process fake of Mistral AI's chat
// completion API (https://docs.mistral.ai/api/): it checks the bearer key
// and the rules the API enforces on tool call ids (nine letters or
// digits), decodes requests into a providertest.Turn and answers in the
// documented wire format: chat.completion objects, or chat.completion.chunk
// events over SSE ending with data: [DONE], with usage on the last chunk,
// thinking chunks for reasoning, and error objects, written in small pieces.
package mistraltest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/nbots/nb/provider/mistral"
	"github.com/nbots/nb/provider/openai/openaitest"
	"github.com/nbots/nb/provider/providertest"
)

// Server is the fake's HTTP handler.
type Server struct {
	Brain    providertest.Brain
	Recorder *providertest.Recorder
	// SplitBytes is the size of the pieces streams are written in (default 7).
	SplitBytes int
}

// New returns a fake answering with brain.
func New(brain providertest.Brain) *Server {
	return &Server{Brain: brain, Recorder: &providertest.Recorder{}}
}

// ErrorBodies are error objects as the API returns them, by status.
var ErrorBodies = map[int]string{
	400: `{"object":"error","message":"Tool call id was call_1 but must be a-z, A-Z, 0-9, with a length of 9.","type":"invalid_request_error","param":null,"code":null}`,
	401: `{"message":"Unauthorized","request_id":"6b1e4f6b0a9c4c1f8e0d2a3b4c5d6e7f"}`,
	422: `{"object":"error","message":{"detail":[{"type":"extra_forbidden","loc":["body","user"],"msg":"Extra inputs are not permitted","input":"soft-user"}]},"type":"invalid_request_error","param":null,"code":null}`,
	429: `{"message":"Requests rate limit exceeded","request_id":"6b1e4f6b0a9c4c1f8e0d2a3b4c5d6e80"}`,
	500: `{"object":"error","message":"Service unavailable.","type":"internal_server_error","param":null,"code":"1000"}`,
}

func invalid(msg string) string {
	return fmt.Sprintf(`{"object":"error","message":%s,"type":"invalid_request_error","param":null,"code":null}`, providertest.JSONString(msg))
}

// ServeHTTP implements http.Handler for POST /v1/chat/completions.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/v1/chat/completions") {
		providertest.WriteError(w, 404, `{"detail":"Not Found"}`, "")
		return
	}
	body, _ := io.ReadAll(r.Body)
	if s.Recorder != nil {
		s.Recorder.Record(body)
	}
	if !strings.HasPrefix(r.Header.Get("Authorization"), "Bearer ") {
		providertest.WriteError(w, 401, ErrorBodies[401], "")
		return
	}
	turn, err := Decode(body)
	if err != nil {
		providertest.WriteError(w, 400, invalid(err.Error()), "")
		return
	}
	reply := s.Brain(turn)
	if providertest.WriteReplyError(w, reply, ErrorBodies) {
		return
	}
	if turn.Stream {
		s.stream(w, turn, reply)
		return
	}
	whole(w, turn, reply)
}

const head = `"id":"5c3a1e0f2b7d4e8a9c6b0d1f2e3a4b5c","object":"chat.completion.chunk","created":1700000000,"model":%s`

func (s *Server) stream(w http.ResponseWriter, t providertest.Turn, reply providertest.Reply) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(200)
	n := providertest.SplitSize(s.SplitBytes)
	model := providertest.JSONString(t.Model)
	send := func(delta, finish, extra string) {
		fin := "null"
		if finish != "" {
			fin = fmt.Sprintf("%q", finish)
		}
		providertest.WriteSplit(w, fmt.Sprintf("data: {"+head+`,"choices":[{"index":0,"delta":%s,"finish_reason":%s}]%s}`+"\n\n", model, delta, fin, extra), n)
	}
	send(`{"role":"assistant","content":""}`, "", "")
	providertest.Flush(w, ": keep-alive\n\n")
	if reply.Reasoning != "" {
		for _, p := range providertest.Split(reply.Reasoning, 5) {
			send(fmt.Sprintf(`{"content":[{"type":"thinking","thinking":[{"type":"text","text":%s}]}]}`, providertest.JSONString(p)), "", "")
		}
	}
	for i, c := range reply.Chunks {
		if reply.CutAfter > 0 && i >= reply.CutAfter {
			providertest.Hijack(w)
			return
		}
		if reply.Delay > 0 {
			time.Sleep(reply.Delay)
		}
		send(fmt.Sprintf(`{"content":%s}`, providertest.JSONString(c)), "", "")
	}
	if reply.StreamError != "" {
		providertest.WriteSplit(w, fmt.Sprintf(`data: {"object":"error","message":%s,"type":"internal_server_error","param":null,"code":"1000"}`+"\n\n", providertest.JSONString(reply.StreamError)), n)
		return
	}
	for i, c := range reply.Calls {
		frags := providertest.Split(c.Arguments, 4)
		if len(frags) == 0 {
			frags = []string{""}
		}
		send(fmt.Sprintf(`{"tool_calls":[{"id":%q,"function":{"name":%s,"arguments":%s},"index":%d}]}`, callID(c, i), providertest.JSONString(c.Name), providertest.JSONString(frags[0]), i), "", "")
		for _, f := range frags[1:] {
			send(fmt.Sprintf(`{"tool_calls":[{"id":"null","function":{"name":"","arguments":%s},"index":%d}]}`, providertest.JSONString(f), i), "", "")
		}
	}
	finish := "stop"
	if len(reply.Calls) > 0 {
		finish = "tool_calls"
	}
	if reply.Finish != "" {
		finish = reply.Finish
	}
	send(`{"content":""}`, finish, `,"usage":{"prompt_tokens":9,"total_tokens":21,"completion_tokens":12}`)
	providertest.WriteSplit(w, "data: [DONE]\n\n", n)
}

func callID(c providertest.Call, i int) string {
	if c.ID == "" {
		return mistral.CallID(fmt.Sprint("call_", i))
	}
	return mistral.CallID(c.ID)
}

func whole(w http.ResponseWriter, t providertest.Turn, reply providertest.Reply) {
	var content any = reply.Text()
	if reply.Reasoning != "" {
		content = []any{
			map[string]any{"type": "thinking", "thinking": []any{map[string]any{"type": "text", "text": reply.Reasoning}}},
			map[string]any{"type": "text", "text": reply.Text()},
		}
	}
	msg := map[string]any{"role": "assistant", "content": content, "tool_calls": nil, "prefix": false}
	finish := "stop"
	if len(reply.Calls) > 0 {
		finish = "tool_calls"
		calls := make([]any, len(reply.Calls))
		for i, c := range reply.Calls {
			calls[i] = map[string]any{"id": callID(c, i), "type": "function", "function": map[string]any{"name": c.Name, "arguments": c.Arguments}, "index": i}
		}
		msg["tool_calls"] = calls
	}
	if reply.Finish != "" {
		finish = reply.Finish
	}
	out := map[string]any{
		"id": "5c3a1e0f2b7d4e8a9c6b0d1f2e3a4b5c", "object": "chat.completion", "created": 1700000000, "model": t.Model,
		"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}},
		"usage":   map[string]any{"prompt_tokens": 9, "completion_tokens": 12, "total_tokens": 21},
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(out) //nolint:errcheck // client may have gone
}

// Decode reads a chat completion request body into a Turn, and enforces
// what the API does: known roles, tool call ids of nine letters or digits,
// each tool message answering an earlier call, no user message right
// after a tool message, and image_url chunks (a string or {url}) in user
// and tool messages.
func Decode(body []byte) (providertest.Turn, error) {
	req, err := openaitest.ParseRequest(body)
	if err != nil {
		return providertest.Turn{}, err
	}
	if err := checkToolChoice(body, req); err != nil {
		return providertest.Turn{}, err
	}
	return req.TurnWith(openaitest.ImageRules{StringURL: true, InTool: true}, func(i int, m *openaitest.Message, calls map[string]string) error {
		if i > 0 && m.Role == "user" && req.Messages[i-1].Role == "tool" {
			return fmt.Errorf("Unexpected role 'user' after role 'tool'")
		}
		switch m.Role {
		case "system", "user", "assistant":
		case "tool":
			if !validID(m.ToolCallID) {
				return fmt.Errorf("Tool call id was %s but must be a-z, A-Z, 0-9, with a length of 9.", m.ToolCallID)
			}
			if _, ok := calls[m.ToolCallID]; !ok {
				return fmt.Errorf("Unexpected tool call id %s in tool results", m.ToolCallID)
			}
		default:
			return fmt.Errorf("Unexpected role %q", m.Role)
		}
		for _, c := range m.ToolCalls {
			if !validID(c.ID) {
				return fmt.Errorf("Tool call id was %s but must be a-z, A-Z, 0-9, with a length of 9.", c.ID)
			}
		}
		return nil
	})
}

// checkToolChoice holds tool_choice to the documented forms: "auto",
// "none", "any", "required", or {"type": "function", "function": {"name"}}
// naming an offered tool.
func checkToolChoice(body []byte, req *openaitest.Request) error {
	var b struct {
		ToolChoice json.RawMessage `json:"tool_choice"`
	}
	json.Unmarshal(body, &b) //nolint:errcheck // parsed before
	if len(b.ToolChoice) == 0 || string(b.ToolChoice) == "null" {
		return nil
	}
	var mode string
	if json.Unmarshal(b.ToolChoice, &mode) == nil {
		switch mode {
		case "auto", "none", "any", "required":
			return nil
		}
		return fmt.Errorf("tool_choice: Input should be 'auto', 'none', 'any' or 'required'")
	}
	var named struct {
		Type     string `json:"type"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if err := json.Unmarshal(b.ToolChoice, &named); err != nil || (named.Type != "" && named.Type != "function") {
		return fmt.Errorf("tool_choice: Input should be a valid dictionary or instance of ToolChoice")
	}
	for _, t := range req.Tools {
		if t.Function.Name == named.Function.Name {
			return nil
		}
	}
	return fmt.Errorf("tool_choice: function %q is not among the tools", named.Function.Name)
}

func validID(id string) bool { return mistral.CallID(id) == id }
