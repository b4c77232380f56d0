// Package ollamatest is an in-process fake of Ollama's /api/chat: NDJSON
// lines as Ollama documents them (message chunks, whole tool calls, a final
// line with done, done_reason and counters, {"error": ...} lines and bodies),
// written in small pieces so lines arrive split across reads.
package ollamatest

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/nbots/nb/media"
	"github.com/nbots/nb/provider/providertest"
)

// Server is the fake's HTTP handler.
type Server struct {
	Brain    providertest.Brain
	Recorder *providertest.Recorder
}

// New returns a fake answering with brain.
func New(brain providertest.Brain) *Server {
	return &Server{Brain: brain, Recorder: &providertest.Recorder{}}
}

// ErrorBodies are error bodies as Ollama sends them, by status.
var ErrorBodies = map[int]string{
	400: `{"error":"invalid options: temperature must be a number"}`,
	401: `{"error":"unauthorized"}`,
	404: `{"error":"model \"llama9\" not found, try pulling it first"}`,
	429: `{"error":"too many requests"}`,
	500: `{"error":"llama runner process has terminated: signal: killed"}`,
}

const created = `"created_at":"2024-07-22T20:33:28.123648Z"`

// ServeHTTP implements http.Handler for POST /api/chat.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/api/chat" {
		http.Error(w, "404 page not found", http.StatusNotFound)
		return
	}
	body, _ := io.ReadAll(r.Body)
	if s.Recorder != nil {
		s.Recorder.Record(body)
	}
	turn, err := Decode(body)
	if err != nil {
		writeError(w, 400, fmt.Sprintf(`{"error":%q}`, err.Error()))
		return
	}
	reply := s.Brain(turn)
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	if providertest.WriteReplyError(w, reply, ErrorBodies) {
		return
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	if !turn.Stream {
		w.Header().Set("Content-Type", "application/json")
	}
	w.WriteHeader(200)
	line := func(msg map[string]any, done bool) {
		b, _ := json.Marshal(msg)
		s := fmt.Sprintf(`{"model":%q,%s,"message":%s,"done":%v`, turn.Model, created, b, done)
		if done {
			reason := "stop"
			if reply.Finish != "" {
				reason = reply.Finish
			}
			s += `,"done_reason":` + providertest.JSONString(reason) + `,"total_duration":4883583458,"load_duration":1334875,"prompt_eval_count":26,"prompt_eval_duration":342546000,"eval_count":282,"eval_duration":4535599000`
		}
		providertest.WriteSplit(w, s+"}\n", 5)
	}
	calls := func() []any {
		var out []any
		for _, c := range reply.Calls {
			var args any
			if json.Unmarshal([]byte(c.Arguments), &args) != nil {
				args = map[string]any{}
			}
			out = append(out, map[string]any{"function": map[string]any{"name": c.Name, "arguments": args}})
		}
		return out
	}
	if !turn.Stream {
		msg := map[string]any{"role": "assistant", "content": reply.Text()}
		if reply.Reasoning != "" {
			msg["thinking"] = reply.Reasoning
		}
		if len(reply.Calls) > 0 {
			msg["tool_calls"] = calls()
		}
		line(msg, true)
		return
	}
	if reply.Reasoning != "" {
		for _, p := range providertest.Split(reply.Reasoning, 5) {
			line(map[string]any{"role": "assistant", "content": "", "thinking": p}, false)
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
		line(map[string]any{"role": "assistant", "content": c}, false)
	}
	if reply.StreamError != "" {
		providertest.WriteSplit(w, fmt.Sprintf(`{"error":%q}`+"\n", reply.StreamError), 5)
		return
	}
	if len(reply.Calls) > 0 {
		line(map[string]any{"role": "assistant", "content": "", "tool_calls": calls()}, false)
	}
	line(map[string]any{"role": "assistant", "content": ""}, true)
}

// writeError answers as Ollama's server does, with a charset in the
// Content-Type.
func writeError(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	providertest.WriteError(w, status, body, "")
}

// Decode reads an /api/chat request body into a Turn.
func Decode(body []byte) (providertest.Turn, error) {
	var req struct {
		Model    string `json:"model"`
		Stream   *bool  `json:"stream"`
		Messages []struct {
			Role      string   `json:"role"`
			Content   string   `json:"content"`
			ToolName  string   `json:"tool_name"`
			Images    []string `json:"images"`
			ToolCalls []struct {
				Function struct {
					Name      string          `json:"name"`
					Arguments json.RawMessage `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"messages"`
		Tools []struct {
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return providertest.Turn{}, err
	}
	// Ollama streams unless told not to.
	t := providertest.Turn{Model: req.Model, Stream: req.Stream == nil || *req.Stream}
	for i, m := range req.Messages {
		msg := providertest.Msg{Role: m.Role, Content: m.Content, ToolName: m.ToolName}
		for j, b64 := range m.Images {
			// The server decodes each image as base64 bytes ([]byte in
			// its API types): a data: URL prefix is refused.
			data, err := base64.StdEncoding.DecodeString(b64)
			if err != nil || len(data) == 0 {
				return t, fmt.Errorf("messages[%d].images[%d]: illegal base64 data", i, j)
			}
			msg.Images = append(msg.Images, media.Image{MediaType: http.DetectContentType(data), Data: data})
		}
		for _, c := range m.ToolCalls {
			msg.ToolCalls = append(msg.ToolCalls, c.Function.Name+"("+strings.TrimSpace(string(c.Function.Arguments))+")")
		}
		if m.Role == "system" && t.System == "" {
			t.System = m.Content
		}
		t.Messages = append(t.Messages, msg)
	}
	for _, tl := range req.Tools {
		t.Tools = append(t.Tools, tl.Function.Name)
	}
	return t, nil
}
