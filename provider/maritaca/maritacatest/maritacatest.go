// Package maritacatest is an in-process fake of Maritaca AI's API
// (https://docs.maritaca.ai/api/pt/completion). POST /api/chat/completions
// is OpenAI-compatible: chat.completion objects, or chat.completion.chunk
// events over SSE ending with data: [DONE], with function calling.
// POST /api/chat/inference is the legacy API the reference used: an answer
// field, or events with a text field. Errors are {"detail": ...} objects.
// Streams are written in small pieces with keep-alive comments.
package maritacatest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/nbots/nb/provider/openai/openaitest"
	"github.com/nbots/nb/provider/providertest"
)

// Server is the fake's HTTP handler.
type Server struct {
	Brain    providertest.Brain
	Recorder *providertest.Recorder
	// SplitBytes is the size of the pieces streams are written in (default 7).
	SplitBytes int

	mu     sync.Mutex
	header http.Header
	path   string
}

// New returns a fake answering with brain.
func New(brain providertest.Brain) *Server {
	return &Server{Brain: brain, Recorder: &providertest.Recorder{}}
}

// Last returns the path and headers of the last request.
func (s *Server) Last() (path string, header http.Header) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.path, s.header.Clone()
}

// ErrorBodies are error objects as the API returns them, by status.
var ErrorBodies = map[int]string{
	400: `{"detail":"O modelo sabia-9 não existe. Modelos disponíveis: sabia-3, sabiazinho-3."}`,
	401: `{"detail":"Chave de API inválida."}`,
	422: `{"detail":[{"loc":["body","messages"],"msg":"field required","type":"value_error.missing"}]}`,
	429: `{"detail":"Limite de requisições excedido. Tente novamente em alguns segundos."}`,
	500: `{"detail":"Internal Server Error"}`,
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	legacy := strings.HasSuffix(r.URL.Path, "/api/chat/inference")
	if r.Method != http.MethodPost || !(legacy || strings.HasSuffix(r.URL.Path, "/api/chat/completions")) {
		providertest.WriteError(w, 404, `{"detail":"Not Found"}`, "")
		return
	}
	s.mu.Lock()
	s.path, s.header = r.URL.Path, r.Header.Clone()
	s.mu.Unlock()
	body, _ := io.ReadAll(r.Body)
	if s.Recorder != nil {
		s.Recorder.Record(body)
	}
	auth := r.Header.Get("Authorization")
	if !(strings.HasPrefix(auth, "Key ") || (!legacy && strings.HasPrefix(auth, "Bearer "))) {
		providertest.WriteError(w, 401, `{"detail":"Not authenticated"}`, "")
		return
	}
	turn, err := Decode(body)
	if err != nil {
		providertest.WriteError(w, 422, fmt.Sprintf(`{"detail":%s}`, providertest.JSONString(err.Error())), "")
		return
	}
	reply := s.Brain(turn)
	if providertest.WriteReplyError(w, reply, ErrorBodies) {
		return
	}
	switch {
	case legacy && turn.Stream:
		s.legacyStream(w, reply)
	case legacy:
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"answer": reply.Text(), "model": turn.Model, //nolint:errcheck // client may have gone
			"usage": map[string]any{"completion_tokens": 12, "prompt_tokens": 9, "total_tokens": 21}})
	case turn.Stream:
		s.stream(w, turn, reply)
	default:
		whole(w, turn, reply)
	}
}

func (s *Server) legacyStream(w http.ResponseWriter, reply providertest.Reply) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(200)
	for i, c := range reply.Chunks {
		if reply.CutAfter > 0 && i >= reply.CutAfter {
			providertest.Hijack(w)
			return
		}
		providertest.WriteSplit(w, fmt.Sprintf("data: {\"text\": %s}\n\n", providertest.JSONString(c)), providertest.SplitSize(s.SplitBytes))
		if i == 0 {
			providertest.Flush(w, ": ping\n\n")
		}
	}
	if reply.StreamError != "" {
		providertest.WriteSplit(w, fmt.Sprintf("data: {\"detail\": %s}\n\n", providertest.JSONString(reply.StreamError)), providertest.SplitSize(s.SplitBytes))
	}
}

const head = `"id":"chatcmpl-fake","object":"chat.completion.chunk","created":1700000000,"model":%s`

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
	providertest.Flush(w, ": ping\n\n")
	if reply.Reasoning != "" {
		for _, p := range providertest.Split(reply.Reasoning, 5) {
			send(fmt.Sprintf(`{"reasoning_content":%s}`, providertest.JSONString(p)), "", "")
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
		providertest.WriteSplit(w, fmt.Sprintf(`data: {"detail":%s}`+"\n\n", providertest.JSONString(reply.StreamError)), n)
		return
	}
	for i, c := range reply.Calls {
		send(fmt.Sprintf(`{"tool_calls":[{"index":%d,"id":%q,"type":"function","function":{"name":%s,"arguments":""}}]}`, i, callID(c, i), providertest.JSONString(c.Name)), "", "")
		for _, f := range providertest.Split(c.Arguments, 4) {
			send(fmt.Sprintf(`{"tool_calls":[{"index":%d,"function":{"arguments":%s}}]}`, i, providertest.JSONString(f)), "", "")
		}
	}
	finish := "stop"
	if len(reply.Calls) > 0 {
		finish = "tool_calls"
	}
	if reply.Finish != "" {
		finish = reply.Finish
	}
	send(`{}`, finish, `,"usage":{"completion_tokens":12,"prompt_tokens":9,"total_tokens":21}`)
	providertest.WriteSplit(w, "data: [DONE]\n\n", n)
}

func callID(c providertest.Call, i int) string {
	if c.ID != "" {
		return c.ID
	}
	return fmt.Sprintf("call_%d", i)
}

func whole(w http.ResponseWriter, t providertest.Turn, reply providertest.Reply) {
	msg := map[string]any{"role": "assistant", "content": reply.Text()}
	finish := "stop"
	if len(reply.Calls) > 0 {
		finish = "tool_calls"
		calls := make([]any, len(reply.Calls))
		for i, c := range reply.Calls {
			calls[i] = map[string]any{"id": callID(c, i), "type": "function", "function": map[string]any{"name": c.Name, "arguments": c.Arguments}}
		}
		msg["tool_calls"] = calls
	}
	if reply.Finish != "" {
		finish = reply.Finish
	}
	if reply.Reasoning != "" {
		msg["reasoning_content"] = reply.Reasoning
	}
	out := map[string]any{
		"id": "chatcmpl-fake", "object": "chat.completion", "created": 1700000000, "model": t.Model,
		"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}},
		"usage":   map[string]any{"prompt_tokens": 9, "completion_tokens": 12, "total_tokens": 21},
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(out) //nolint:errcheck // client may have gone
}

// Decode reads a request body of either API into a Turn.
func Decode(body []byte) (providertest.Turn, error) {
	req, err := openaitest.ParseRequest(body)
	if err != nil {
		return providertest.Turn{}, err
	}
	if req.Messages == nil {
		return providertest.Turn{}, fmt.Errorf("messages: field required")
	}
	return req.Turn(func(i int, m *openaitest.Message, calls map[string]string) error {
		if !isString(m.Content) {
			return fmt.Errorf("messages.%d.content: field required", i)
		}
		switch m.Role {
		case "system", "user", "assistant":
		case "tool":
			if _, ok := calls[m.ToolCallID]; !ok {
				return fmt.Errorf("messages.%d.tool_call_id: no tool call %q", i, m.ToolCallID)
			}
		default:
			return fmt.Errorf("messages.%d.role: unexpected value %q", i, m.Role)
		}
		return nil
	})
}

// isString reports whether raw is a JSON string: every message needs one.
func isString(raw json.RawMessage) bool {
	var s string
	return json.Unmarshal(raw, &s) == nil && len(raw) > 0 && raw[0] == '"'
}
