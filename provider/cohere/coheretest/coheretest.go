// Package coheretest is an in-process fake of Cohere's chat API in both
// versions. POST /v2/chat (https://docs.cohere.com/reference/chat-stream)
// answers with a chat response object or server-sent events
// (message-start, content-start/delta/end, tool-plan-delta,
// tool-call-start/delta/end, message-end). POST /v1/chat
// (https://docs.cohere.com/v1/reference/chat) answers with a v1 response
// or newline-delimited JSON events (stream-start, text-generation,
// tool-calls-chunk, tool-calls-generation, stream-end). Errors are
// {"id", "message"} objects. Streams are written in small pieces with
// keep-alives between events.
package coheretest

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
	path   string
	header http.Header
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
	400: `{"id":"0b9a2c4e-5f1d-4b7e-9c3a-1d2e3f4a5b6c","message":"invalid request: message must be at least 1 token long or tool results must be specified."}`,
	401: `{"id":"0b9a2c4e-5f1d-4b7e-9c3a-1d2e3f4a5b6d","message":"invalid api token"}`,
	429: `{"id":"0b9a2c4e-5f1d-4b7e-9c3a-1d2e3f4a5b6e","message":"You are using a Trial key, which is limited to 10 API calls / minute. You can continue to use the Trial key for free or upgrade to a Production key with higher rate limits at 'https://dashboard.cohere.com/api-keys'. Contact us on 'https://discord.gg/XW44jPfYJu' or email us at support@cohere.com with any questions"}`,
	500: `{"id":"0b9a2c4e-5f1d-4b7e-9c3a-1d2e3f4a5b6f","message":"internal server error, this has been reported to our developers. id 0b9a2c4e-5f1d-4b7e-9c3a-1d2e3f4a5b6f"}`,
}

func invalid(msg string) string {
	return fmt.Sprintf(`{"id":"0b9a2c4e-0000-0000-0000-000000000000","message":%s}`, providertest.JSONString("invalid request: "+msg))
}

// ServeHTTP implements http.Handler for POST /v1/chat and /v2/chat.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	v1 := strings.HasSuffix(r.URL.Path, "/v1/chat")
	if r.Method != http.MethodPost || !(v1 || strings.HasSuffix(r.URL.Path, "/v2/chat")) {
		providertest.WriteError(w, 404, `{"message":"404 page not found"}`, "")
		return
	}
	s.mu.Lock()
	s.path, s.header = r.URL.Path, r.Header.Clone()
	s.mu.Unlock()
	body, _ := io.ReadAll(r.Body)
	if s.Recorder != nil {
		s.Recorder.Record(body)
	}
	if !strings.HasPrefix(r.Header.Get("Authorization"), "Bearer ") {
		providertest.WriteError(w, 401, `{"id":"0b9a2c4e-0000-0000-0000-000000000001","message":"no api key supplied"}`, "")
		return
	}
	decode := DecodeV2
	if v1 {
		decode = DecodeV1
	}
	turn, err := decode(body)
	if err != nil {
		providertest.WriteError(w, 400, invalid(err.Error()), "")
		return
	}
	reply := s.Brain(turn)
	if providertest.WriteReplyError(w, reply, ErrorBodies) {
		return
	}
	switch {
	case v1 && turn.Stream:
		s.streamV1(w, reply)
	case v1:
		wholeV1(w, reply)
	case turn.Stream:
		s.streamV2(w, reply)
	default:
		wholeV2(w, reply)
	}
}

// CallID is the id the fake gives call i when the reply names none.
func CallID(c providertest.Call, i int) string {
	if c.ID != "" {
		return c.ID
	}
	return fmt.Sprintf("%s_%d", strings.ReplaceAll(c.Name, "-", "_"), i)
}

const usageJSON = `{"billed_units":{"input_tokens":9,"output_tokens":12},"tokens":{"input_tokens":9,"output_tokens":12}}`

func (s *Server) streamV2(w http.ResponseWriter, reply providertest.Reply) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(200)
	n := providertest.SplitSize(s.SplitBytes)
	send := func(typ, data string) {
		providertest.WriteSplit(w, "event: "+typ+"\ndata: "+data+"\n\n", n)
	}
	send("message-start", `{"id":"7a1c2d3e-fake","type":"message-start","delta":{"message":{"role":"assistant","content":[],"tool_plan":"","tool_calls":[],"citations":[]}}}`)
	providertest.Flush(w, ": keep-alive\n\n")
	index := 0
	if reply.Reasoning != "" && len(reply.Calls) == 0 {
		send("content-start", fmt.Sprintf(`{"type":"content-start","index":%d,"delta":{"message":{"content":{"type":"thinking","thinking":""}}}}`, index))
		for _, p := range providertest.Split(reply.Reasoning, 5) {
			send("content-delta", fmt.Sprintf(`{"type":"content-delta","index":%d,"delta":{"message":{"content":{"thinking":%s}}}}`, index, providertest.JSONString(p)))
		}
		send("content-end", fmt.Sprintf(`{"type":"content-end","index":%d}`, index))
		index++
	}
	if len(reply.Chunks) > 0 || reply.StreamError != "" {
		send("content-start", fmt.Sprintf(`{"type":"content-start","index":%d,"delta":{"message":{"content":{"type":"text","text":""}}}}`, index))
		for i, c := range reply.Chunks {
			if reply.CutAfter > 0 && i >= reply.CutAfter {
				providertest.Hijack(w)
				return
			}
			if reply.Delay > 0 {
				time.Sleep(reply.Delay)
			}
			send("content-delta", fmt.Sprintf(`{"type":"content-delta","index":%d,"delta":{"message":{"content":{"text":%s}}}}`, index, providertest.JSONString(c)))
		}
		if reply.StreamError != "" {
			send("message-end", fmt.Sprintf(`{"type":"message-end","delta":{"error":%s,"finish_reason":"ERROR"}}`, providertest.JSONString(reply.StreamError)))
			return
		}
		send("content-end", fmt.Sprintf(`{"type":"content-end","index":%d}`, index))
	}
	if len(reply.Calls) > 0 && reply.Reasoning != "" {
		for _, p := range providertest.Split(reply.Reasoning, 5) {
			send("tool-plan-delta", fmt.Sprintf(`{"type":"tool-plan-delta","delta":{"message":{"tool_plan":%s}}}`, providertest.JSONString(p)))
		}
	}
	for i, c := range reply.Calls {
		send("tool-call-start", fmt.Sprintf(`{"type":"tool-call-start","index":%d,"delta":{"message":{"tool_calls":{"id":%q,"type":"function","function":{"name":%s,"arguments":""}}}}}`, i, CallID(c, i), providertest.JSONString(c.Name)))
		for _, f := range providertest.Split(c.Arguments, 4) {
			send("tool-call-delta", fmt.Sprintf(`{"type":"tool-call-delta","index":%d,"delta":{"message":{"tool_calls":{"function":{"arguments":%s}}}}}`, i, providertest.JSONString(f)))
		}
		send("tool-call-end", fmt.Sprintf(`{"type":"tool-call-end","index":%d}`, i))
	}
	finish := "COMPLETE"
	if len(reply.Calls) > 0 {
		finish = "TOOL_CALL"
	}
	if reply.Finish != "" {
		finish = reply.Finish
	}
	send("message-end", fmt.Sprintf(`{"type":"message-end","delta":{"finish_reason":%q,"usage":%s}}`, finish, usageJSON))
}

func wholeV2(w http.ResponseWriter, reply providertest.Reply) {
	msg := map[string]any{"role": "assistant"}
	var content []any
	if reply.Reasoning != "" && len(reply.Calls) == 0 {
		content = append(content, map[string]any{"type": "thinking", "thinking": reply.Reasoning})
	}
	if reply.Text() != "" {
		content = append(content, map[string]any{"type": "text", "text": reply.Text()})
	}
	if content != nil {
		msg["content"] = content
	}
	finish := "COMPLETE"
	if len(reply.Calls) > 0 {
		finish = "TOOL_CALL"
		if reply.Reasoning != "" {
			msg["tool_plan"] = reply.Reasoning
		}
		calls := make([]any, len(reply.Calls))
		for i, c := range reply.Calls {
			calls[i] = map[string]any{"id": CallID(c, i), "type": "function", "function": map[string]any{"name": c.Name, "arguments": c.Arguments}}
		}
		msg["tool_calls"] = calls
	}
	if reply.Finish != "" {
		finish = reply.Finish
	}
	var usage any
	json.Unmarshal([]byte(usageJSON), &usage) //nolint:errcheck // constant
	out := map[string]any{"id": "7a1c2d3e-fake", "finish_reason": finish, "message": msg, "usage": usage}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(out) //nolint:errcheck // client may have gone
}

const genID = "5e3c1b2a-gen"

func (s *Server) streamV1(w http.ResponseWriter, reply providertest.Reply) {
	w.Header().Set("Content-Type", "application/stream+json")
	w.WriteHeader(200)
	n := providertest.SplitSize(s.SplitBytes)
	send := func(line string) { providertest.WriteSplit(w, line+"\n", n) }
	send(`{"is_finished":false,"event_type":"stream-start","generation_id":"` + genID + `"}`)
	providertest.Flush(w, "\n")
	for i, c := range reply.Chunks {
		if reply.CutAfter > 0 && i >= reply.CutAfter {
			providertest.Hijack(w)
			return
		}
		if reply.Delay > 0 {
			time.Sleep(reply.Delay)
		}
		send(fmt.Sprintf(`{"is_finished":false,"event_type":"text-generation","text":%s}`, providertest.JSONString(c)))
	}
	if reply.StreamError != "" {
		send(fmt.Sprintf(`{"is_finished":true,"event_type":"stream-end","finish_reason":"ERROR","error":%s,"response":{"generation_id":%q,"text":%s,"finish_reason":"ERROR"}}`, providertest.JSONString(reply.StreamError), genID, providertest.JSONString(reply.Text())))
		return
	}
	finish := "COMPLETE"
	if reply.Finish != "" {
		finish = reply.Finish
	}
	if len(reply.Calls) > 0 {
		if reply.Reasoning != "" {
			for _, p := range providertest.Split(reply.Reasoning, 5) {
				send(fmt.Sprintf(`{"is_finished":false,"event_type":"tool-calls-chunk","text":%s}`, providertest.JSONString(p)))
			}
		}
		var whole []string
		for i, c := range reply.Calls {
			send(fmt.Sprintf(`{"is_finished":false,"event_type":"tool-calls-chunk","tool_call_delta":{"index":%d,"name":%s}}`, i, providertest.JSONString(c.Name)))
			for _, f := range providertest.Split(c.Arguments, 4) {
				send(fmt.Sprintf(`{"is_finished":false,"event_type":"tool-calls-chunk","tool_call_delta":{"index":%d,"parameters":%s}}`, i, providertest.JSONString(f)))
			}
			whole = append(whole, fmt.Sprintf(`{"name":%s,"parameters":%s}`, providertest.JSONString(c.Name), object(c.Arguments)))
		}
		send(fmt.Sprintf(`{"is_finished":false,"event_type":"tool-calls-generation","text":%s,"tool_calls":[%s]}`, providertest.JSONString(reply.Reasoning), strings.Join(whole, ",")))
	}
	send(fmt.Sprintf(`{"is_finished":true,"event_type":"stream-end","finish_reason":%q,"response":{"response_id":"r-fake","text":%s,"generation_id":%q,"chat_history":[],"finish_reason":%q,"meta":{"api_version":{"version":"1"},"billed_units":{"input_tokens":9,"output_tokens":12},"tokens":{"input_tokens":9,"output_tokens":12}}}}`,
		finish, providertest.JSONString(reply.Text()), genID, finish))
}

func object(args string) string {
	var v map[string]any
	if json.Unmarshal([]byte(args), &v) != nil || v == nil {
		return "{}"
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func wholeV1(w http.ResponseWriter, reply providertest.Reply) {
	finish := "COMPLETE"
	if reply.Finish != "" {
		finish = reply.Finish
	}
	out := map[string]any{"response_id": "r-fake", "text": reply.Text(), "generation_id": genID, "chat_history": []any{}, "finish_reason": finish,
		"meta": map[string]any{"api_version": map[string]any{"version": "1"}, "billed_units": map[string]any{"input_tokens": 9, "output_tokens": 12}, "tokens": map[string]any{"input_tokens": 9, "output_tokens": 12}}}
	if len(reply.Calls) > 0 {
		out["text"] = reply.Reasoning
		calls := make([]any, len(reply.Calls))
		for i, c := range reply.Calls {
			var params any
			json.Unmarshal([]byte(object(c.Arguments)), &params) //nolint:errcheck // valid by construction
			calls[i] = map[string]any{"name": c.Name, "parameters": params}
		}
		out["tool_calls"] = calls
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(out) //nolint:errcheck // client may have gone
}

// DecodeV2 reads a v2 chat request into a Turn, and enforces what the API
// does: known roles, each tool message answering an earlier call, and
// image_url parts ({url}: a data: URL or an http(s) URL) in user
// messages only.
func DecodeV2(body []byte) (providertest.Turn, error) {
	req, err := openaitest.ParseRequest(body)
	if err != nil {
		return providertest.Turn{}, err
	}
	if req.Model == "" {
		return providertest.Turn{}, fmt.Errorf("model is required")
	}
	var choice struct {
		ToolChoice json.RawMessage `json:"tool_choice"`
	}
	json.Unmarshal(body, &choice) //nolint:errcheck // parsed above
	if c := string(choice.ToolChoice); c != "" && c != `"REQUIRED"` && c != `"NONE"` {
		return providertest.Turn{}, fmt.Errorf("tool_choice must be one of REQUIRED, NONE, got %s", c)
	}
	return req.Turn(func(i int, m *openaitest.Message, calls map[string]string) error {
		switch m.Role {
		case "system", "user":
		case "assistant":
			if m.Text() == "" && len(m.ToolCalls) == 0 {
				return fmt.Errorf("messages[%d]: assistant message must have either content or tool_calls", i)
			}
		case "tool":
			if _, ok := calls[m.ToolCallID]; !ok {
				return fmt.Errorf("messages[%d]: tool_call_id %q does not match any tool call", i, m.ToolCallID)
			}
		default:
			return fmt.Errorf("messages[%d]: role must be one of system, user, assistant, tool", i)
		}
		return nil
	})
}

type resultV1 struct {
	Call struct {
		Name       string         `json:"name"`
		Parameters map[string]any `json:"parameters"`
	} `json:"call"`
	Outputs []map[string]any `json:"outputs"`
}

func (r resultV1) msg() providertest.Msg {
	var parts []string
	for _, o := range r.Outputs {
		if s, ok := o["result"].(string); ok && len(o) == 1 {
			parts = append(parts, s)
			continue
		}
		b, _ := json.Marshal(o)
		parts = append(parts, string(b))
	}
	return providertest.Msg{Role: "tool", ToolName: r.Call.Name, Content: strings.Join(parts, "\n")}
}

// DecodeV1 reads a v1 chat request into a Turn: preamble, chat_history
// (USER, CHATBOT, SYSTEM and TOOL turns), then message or tool_results.
// It enforces what the API does: a message or tool results, known roles.
func DecodeV1(body []byte) (providertest.Turn, error) {
	var req struct {
		Model       string `json:"model"`
		Stream      bool   `json:"stream"`
		Preamble    string `json:"preamble"`
		Message     string `json:"message"`
		ChatHistory []struct {
			Role        string     `json:"role"`
			Message     string     `json:"message"`
			ToolResults []resultV1 `json:"tool_results"`
			ToolCalls   []struct {
				Name       string         `json:"name"`
				Parameters map[string]any `json:"parameters"`
			} `json:"tool_calls"`
		} `json:"chat_history"`
		ToolResults []resultV1 `json:"tool_results"`
		Tools       []struct {
			Name                 string                    `json:"name"`
			ParameterDefinitions map[string]map[string]any `json:"parameter_definitions"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return providertest.Turn{}, err
	}
	if req.Message == "" && len(req.ToolResults) == 0 {
		return providertest.Turn{}, fmt.Errorf("message must be at least 1 token long or tool results must be specified.")
	}
	t := providertest.Turn{Model: req.Model, Stream: req.Stream, System: req.Preamble}
	roles := map[string]string{"USER": "user", "CHATBOT": "assistant", "SYSTEM": "system", "TOOL": "tool"}
	for i, h := range req.ChatHistory {
		role, ok := roles[h.Role]
		if !ok {
			return t, fmt.Errorf("chat_history[%d]: role must be one of USER, CHATBOT, SYSTEM, TOOL", i)
		}
		if role == "tool" {
			for _, r := range h.ToolResults {
				t.Messages = append(t.Messages, r.msg())
			}
			continue
		}
		msg := providertest.Msg{Role: role, Content: h.Message}
		for _, c := range h.ToolCalls {
			b, _ := json.Marshal(c.Parameters)
			msg.ToolCalls = append(msg.ToolCalls, c.Name+"("+string(b)+")")
		}
		t.Messages = append(t.Messages, msg)
	}
	for _, r := range req.ToolResults {
		t.Messages = append(t.Messages, r.msg())
	}
	if req.Message != "" {
		t.Messages = append(t.Messages, providertest.Msg{Role: "user", Content: req.Message})
	}
	for _, tl := range req.Tools {
		for name, def := range tl.ParameterDefinitions {
			if _, ok := def["type"].(string); !ok {
				return t, fmt.Errorf("tools.%s.parameter_definitions.%s.type is required", tl.Name, name)
			}
		}
		t.Tools = append(t.Tools, tl.Name)
	}
	return t, nil
}
