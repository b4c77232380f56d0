// Package openaitest is an in-process fake of the OpenAI Chat Completions
// API: it decodes requests into a providertest.Turn and answers in the
// documented wire format (chat.completion and chat.completion.chunk objects
// over SSE, keep-alive comments, [DONE], error objects), writing streams in
// small pieces so frames arrive split across reads.
package openaitest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

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

// ErrorBodies are error objects as the API documents them, by status.
var ErrorBodies = map[int]string{
	400: `{"error":{"message":"Invalid value for 'temperature': expected a number.","type":"invalid_request_error","param":"temperature","code":null}}`,
	401: `{"error":{"message":"Incorrect API key provided: sk-test. You can find your API key at https://platform.openai.com/account/api-keys.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`,
	429: `{"error":{"message":"Rate limit reached for gpt-4o in organization org-test on requests per min (RPM): Limit 3, Used 3, Requested 1. Please try again in 20s.","type":"requests","param":null,"code":"rate_limit_exceeded"}}`,
	500: `{"error":{"message":"The server had an error while processing your request. Sorry about that!","type":"server_error","param":null,"code":null}}`,
}

// ServeHTTP implements http.Handler for POST /v1/chat/completions.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/chat/completions") {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprintf(w, `{"error":{"message":"Invalid URL (%s %s)","type":"invalid_request_error","param":null,"code":null}}`, r.Method, r.URL.Path)
		return
	}
	body, _ := io.ReadAll(r.Body)
	if s.Recorder != nil {
		s.Recorder.Record(body)
	}
	req, err := ParseRequest(body)
	if err != nil {
		providertest.WriteError(w, 400, fmt.Sprintf(`{"error":{"message":"We could not parse the JSON body of your request. (%s)","type":"invalid_request_error","param":null,"code":null}}`, jsonEscape(err.Error())), "")
		return
	}
	turn, err := decode(req)
	if err != nil {
		providertest.WriteError(w, 400, fmt.Sprintf(`{"error":{"message":%s,"type":"invalid_request_error","param":"messages","code":null}}`, providertest.JSONString(err.Error())), "")
		return
	}
	if err := CheckToolOrder(req); err != nil {
		re := err.(*RuleError)
		providertest.WriteError(w, 400, fmt.Sprintf(`{"error":{"message":"%s","type":"invalid_request_error","param":"%s","code":null}}`, jsonEscape(re.Message), re.Param), "")
		return
	}
	reply := s.Brain(turn)
	if providertest.WriteReplyError(w, reply, ErrorBodies) {
		return
	}
	if turn.Stream {
		s.stream(w, turn, reply, req.IncludeUsage())
		return
	}
	s.whole(w, turn, reply)
}

const head = `"id":"chatcmpl-fake","object":"chat.completion.chunk","created":1700000000,"model":%q,"system_fingerprint":"fp_fake"`

func (s *Server) stream(w http.ResponseWriter, t providertest.Turn, reply providertest.Reply, usage bool) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(200)
	n := providertest.SplitSize(s.SplitBytes)
	send := func(delta string, finish string) {
		fin := "null"
		if finish != "" {
			fin = fmt.Sprintf("%q", finish)
		}
		frame := fmt.Sprintf("data: {"+head+`,"choices":[{"index":0,"delta":%s,"logprobs":null,"finish_reason":%s}]}`+"\n\n", t.Model, delta, fin)
		providertest.WriteSplit(w, frame, n)
	}
	providertest.Flush(w, ": keep-alive\n\n")
	send(`{"role":"assistant","content":"","refusal":null}`, "")
	if reply.Reasoning != "" {
		for _, p := range providertest.Split(reply.Reasoning, 5) {
			send(fmt.Sprintf(`{"reasoning_content":%s}`, providertest.JSONString(p)), "")
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
		send(fmt.Sprintf(`{"content":%s}`, providertest.JSONString(c)), "")
		if i == 0 {
			providertest.Flush(w, ": OPENROUTER PROCESSING\n\n")
		}
	}
	if reply.StreamError != "" {
		providertest.WriteSplit(w, fmt.Sprintf(`data: {"error":{"message":%s,"type":"server_error","param":null,"code":null}}`+"\n\n", providertest.JSONString(reply.StreamError)), n)
		return
	}
	for i, c := range reply.Calls {
		id := c.ID
		if id == "" {
			id = fmt.Sprintf("call_%d", i)
		}
		send(fmt.Sprintf(`{"tool_calls":[{"index":%d,"id":%q,"type":"function","function":{"name":%q,"arguments":""}}]}`, i, id, c.Name), "")
		for _, frag := range providertest.Split(c.Arguments, 4) {
			send(fmt.Sprintf(`{"tool_calls":[{"index":%d,"function":{"arguments":%s}}]}`, i, providertest.JSONString(frag)), "")
		}
	}
	finish := "stop"
	if len(reply.Calls) > 0 {
		finish = "tool_calls"
	}
	if reply.Finish != "" {
		finish = reply.Finish
	}
	send(`{}`, finish)
	// The usage chunk comes only when the request asked for it.
	if usage {
		providertest.WriteSplit(w, "data: {"+fmt.Sprintf(head, t.Model)+`,"choices":[],"usage":{"prompt_tokens":9,"completion_tokens":12,"total_tokens":21}}`+"\n\n", n)
	}
	providertest.WriteSplit(w, "data: [DONE]\n\n", n)
}

func (s *Server) whole(w http.ResponseWriter, t providertest.Turn, reply providertest.Reply) {
	msg := map[string]any{"role": "assistant", "content": reply.Text(), "refusal": nil}
	finish := "stop"
	if len(reply.Calls) > 0 {
		finish = "tool_calls"
		calls := make([]any, len(reply.Calls))
		for i, c := range reply.Calls {
			id := c.ID
			if id == "" {
				id = fmt.Sprintf("call_%d", i)
			}
			calls[i] = map[string]any{"id": id, "type": "function", "function": map[string]any{"name": c.Name, "arguments": c.Arguments}}
		}
		msg["tool_calls"] = calls
		if reply.Text() == "" {
			msg["content"] = nil
		}
	}
	if reply.Finish != "" {
		finish = reply.Finish
	}
	if reply.Reasoning != "" {
		msg["reasoning_content"] = reply.Reasoning
	}
	out := map[string]any{
		"id": "chatcmpl-fake", "object": "chat.completion", "created": 1700000000, "model": t.Model,
		"system_fingerprint": "fp_fake",
		"choices":            []any{map[string]any{"index": 0, "message": msg, "logprobs": nil, "finish_reason": finish}},
		"usage":              map[string]any{"prompt_tokens": 9, "completion_tokens": 12, "total_tokens": 21},
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(out) //nolint:errcheck // client may have gone
}

// Decode reads a Chat Completions request body into a Turn, and enforces
// what the API does: stream_options only when streaming, image parts in
// user messages only, each tool call answered by the tool messages that
// follow it.
func Decode(body []byte) (providertest.Turn, error) {
	req, err := ParseRequest(body)
	if err != nil {
		return providertest.Turn{}, err
	}
	return decode(req)
}

func decode(req *Request) (providertest.Turn, error) {
	if len(req.StreamOptions) > 0 && string(req.StreamOptions) != "null" && !req.Stream {
		return providertest.Turn{}, fmt.Errorf("The 'stream_options' parameter is only allowed when 'stream' is enabled.")
	}
	if err := req.CheckToolAnswers(); err != nil {
		return providertest.Turn{}, err
	}
	return req.Turn(nil)
}

func jsonEscape(s string) string {
	b := providertest.JSONString(s)
	return b[1 : len(b)-1]
}
