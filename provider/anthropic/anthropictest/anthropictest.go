// Package anthropictest is an in-process fake of Anthropic's Messages API
// (https://docs.anthropic.com/en/api/messages): it checks the headers and
// the rules the API enforces (max_tokens present, user and assistant
// turns alternating, tool_result blocks answering tool_use blocks),
// decodes requests into a providertest.Turn and answers in the documented
// wire format: message objects, or the streamed event sequence
// (message_start, ping, content_block_start/delta/stop with text_delta,
// thinking_delta, signature_delta and input_json_delta, message_delta,
// message_stop, error events) written in small pieces.
package anthropictest

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nbots/nb/media"
	"github.com/nbots/nb/provider/providertest"
)

// Signature is the signature the fake puts on its thinking blocks.
const Signature = "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds"

// Server is the fake's HTTP handler.
type Server struct {
	Brain    providertest.Brain
	Recorder *providertest.Recorder
	// SplitBytes is the size of the pieces streams are written in (default 7).
	SplitBytes int
	// Cache, when set, simulates the prompt cache in the usage the fake
	// reports; without it every answer reports 9 input tokens.
	Cache *PromptCache

	mu     sync.Mutex
	header http.Header
}

// New returns a fake answering with brain.
func New(brain providertest.Brain) *Server {
	return &Server{Brain: brain, Recorder: &providertest.Recorder{}}
}

// Header returns the headers of the last request.
func (s *Server) Header() http.Header {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.header.Clone()
}

// ErrorBodies are error objects as the API documents them, by status.
var ErrorBodies = map[int]string{
	400: `{"type":"error","error":{"type":"invalid_request_error","message":"messages: roles must alternate between \"user\" and \"assistant\", but found multiple \"user\" roles in a row"},"request_id":"req_011CSHoEeqs5C35K2UUqR7Fy"}`,
	401: `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"},"request_id":"req_011CSHoEeqs5C35K2UUqR7Fz"}`,
	403: `{"type":"error","error":{"type":"permission_error","message":"Your API key does not have permission to use the specified resource."},"request_id":"req_011CSHoEeqs5C35K2UUqR7G0"}`,
	429: `{"type":"error","error":{"type":"rate_limit_error","message":"This request would exceed the rate limit for your organization of 50 input tokens per minute. For details, refer to: https://docs.claude.com/en/api/rate-limits."},"request_id":"req_011CSHoEeqs5C35K2UUqR7G1"}`,
	500: `{"type":"error","error":{"type":"api_error","message":"Internal server error"},"request_id":"req_011CSHoEeqs5C35K2UUqR7G2"}`,
	529: `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"},"request_id":"req_011CSHoEeqs5C35K2UUqR7G3"}`,
}

func invalid(msg string) string {
	return fmt.Sprintf(`{"type":"error","error":{"type":"invalid_request_error","message":%s},"request_id":"req_fake"}`, providertest.JSONString(msg))
}

// ServeHTTP implements http.Handler for POST /v1/messages.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/v1/messages") {
		providertest.WriteError(w, 404, `{"type":"error","error":{"type":"not_found_error","message":"Not Found"},"request_id":"req_fake"}`, "")
		return
	}
	s.mu.Lock()
	s.header = r.Header.Clone()
	s.mu.Unlock()
	body, _ := io.ReadAll(r.Body)
	if s.Recorder != nil {
		s.Recorder.Record(body)
	}
	if r.Header.Get("x-api-key") == "" {
		providertest.WriteError(w, 401, `{"type":"error","error":{"type":"authentication_error","message":"x-api-key header is required"},"request_id":"req_fake"}`, "")
		return
	}
	if r.Header.Get("anthropic-version") == "" {
		providertest.WriteError(w, 400, invalid("anthropic-version: header is required"), "")
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
	usage := CacheUsage{Input: 9}
	if s.Cache != nil {
		usage = s.Cache.Use(body)
	}
	if turn.Stream {
		s.stream(w, turn, reply, usage)
		return
	}
	whole(w, turn, reply, usage)
}

func callID(c providertest.Call, i int) string {
	if c.ID != "" {
		return c.ID
	}
	return fmt.Sprintf("toolu_01fake%d", i)
}

func (s *Server) stream(w http.ResponseWriter, t providertest.Turn, reply providertest.Reply, u CacheUsage) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(200)
	n := providertest.SplitSize(s.SplitBytes)
	send := func(typ, data string) {
		providertest.WriteSplit(w, "event: "+typ+"\ndata: "+data+"\n\n", n)
	}
	send("message_start", fmt.Sprintf(`{"type":"message_start","message":{"id":"msg_01fake","type":"message","role":"assistant","content":[],"model":%s,"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":%d,"cache_creation_input_tokens":%d,"cache_read_input_tokens":%d,"output_tokens":1}}}`, providertest.JSONString(t.Model), u.Input, u.CacheCreation, u.CacheRead))
	send("ping", `{"type": "ping"}`)
	index := 0
	if reply.Reasoning != "" {
		send("content_block_start", fmt.Sprintf(`{"type":"content_block_start","index":%d,"content_block":{"type":"thinking","thinking":"","signature":""}}`, index))
		for _, p := range providertest.Split(reply.Reasoning, 5) {
			send("content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":%d,"delta":{"type":"thinking_delta","thinking":%s}}`, index, providertest.JSONString(p)))
		}
		half := len(Signature) / 2
		for _, p := range []string{Signature[:half], Signature[half:]} {
			send("content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":%d,"delta":{"type":"signature_delta","signature":%q}}`, index, p))
		}
		send("content_block_stop", fmt.Sprintf(`{"type":"content_block_stop","index":%d}`, index))
		index++
	}
	if len(reply.Chunks) > 0 || reply.StreamError != "" {
		send("content_block_start", fmt.Sprintf(`{"type":"content_block_start","index":%d,"content_block":{"type":"text","text":""}}`, index))
		for i, c := range reply.Chunks {
			if reply.CutAfter > 0 && i >= reply.CutAfter {
				providertest.Hijack(w)
				return
			}
			if reply.Delay > 0 {
				time.Sleep(reply.Delay)
			}
			send("content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":%d,"delta":{"type":"text_delta","text":%s}}`, index, providertest.JSONString(c)))
			if i == 0 {
				send("ping", `{"type": "ping"}`)
			}
		}
		if reply.StreamError != "" {
			send("error", fmt.Sprintf(`{"type":"error","error":{"type":"overloaded_error","message":%s}}`, providertest.JSONString(reply.StreamError)))
			return
		}
		send("content_block_stop", fmt.Sprintf(`{"type":"content_block_stop","index":%d}`, index))
		index++
	}
	for i, c := range reply.Calls {
		send("content_block_start", fmt.Sprintf(`{"type":"content_block_start","index":%d,"content_block":{"type":"tool_use","id":%q,"name":%s,"input":{}}}`, index, callID(c, i), providertest.JSONString(c.Name)))
		send("content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":%d,"delta":{"type":"input_json_delta","partial_json":""}}`, index))
		for _, frag := range providertest.Split(c.Arguments, 4) {
			send("content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":%d,"delta":{"type":"input_json_delta","partial_json":%s}}`, index, providertest.JSONString(frag)))
		}
		send("content_block_stop", fmt.Sprintf(`{"type":"content_block_stop","index":%d}`, index))
		index++
	}
	stop := "end_turn"
	if len(reply.Calls) > 0 {
		stop = "tool_use"
	}
	if reply.Finish != "" {
		stop = reply.Finish
	}
	send("message_delta", fmt.Sprintf(`{"type":"message_delta","delta":{"stop_reason":%q,"stop_sequence":null},"usage":{"output_tokens":12}}`, stop))
	send("message_stop", `{"type":"message_stop"}`)
}

func whole(w http.ResponseWriter, t providertest.Turn, reply providertest.Reply, u CacheUsage) {
	content := []any{}
	if reply.Reasoning != "" {
		content = append(content, map[string]any{"type": "thinking", "thinking": reply.Reasoning, "signature": Signature})
	}
	if reply.Text() != "" {
		content = append(content, map[string]any{"type": "text", "text": reply.Text()})
	}
	stop := "end_turn"
	for i, c := range reply.Calls {
		stop = "tool_use"
		var input any
		if json.Unmarshal([]byte(c.Arguments), &input) != nil || input == nil {
			input = map[string]any{}
		}
		content = append(content, map[string]any{"type": "tool_use", "id": callID(c, i), "name": c.Name, "input": input})
	}
	if reply.Finish != "" {
		stop = reply.Finish
	}
	out := map[string]any{
		"id": "msg_01fake", "type": "message", "role": "assistant", "model": t.Model, "content": content,
		"stop_reason": stop, "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": u.Input, "cache_creation_input_tokens": u.CacheCreation, "cache_read_input_tokens": u.CacheRead, "output_tokens": 12},
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(out) //nolint:errcheck // client may have gone
}

// Decode reads a Messages API request body into a Turn, and enforces the
// rules the API does: max_tokens present, messages alternating between
// user and assistant, non-empty text, each tool_result answering a
// tool_use of the previous assistant turn, and thinking blocks signed.
func Decode(body []byte) (providertest.Turn, error) {
	var req struct {
		Model     string          `json:"model"`
		Stream    bool            `json:"stream"`
		MaxTokens *int            `json:"max_tokens"`
		System    json.RawMessage `json:"system"`
		Messages  []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
		Tools []struct {
			Name        string         `json:"name"`
			InputSchema map[string]any `json:"input_schema"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return providertest.Turn{}, err
	}
	if req.MaxTokens == nil {
		return providertest.Turn{}, fmt.Errorf("max_tokens: Field required")
	}
	t := providertest.Turn{Model: req.Model, Stream: req.Stream}
	if len(req.System) > 0 {
		var s string
		if json.Unmarshal(req.System, &s) != nil {
			var blocks []struct{ Text string }
			json.Unmarshal(req.System, &blocks) //nolint:errcheck // best effort
			for _, b := range blocks {
				s += b.Text
			}
		}
		t.System = s
	}
	names := map[string]string{}
	pending := map[string]bool{}
	for i, m := range req.Messages {
		if m.Role != "user" && m.Role != "assistant" {
			return t, fmt.Errorf("messages.%d.role: Input should be 'user' or 'assistant'", i)
		}
		if i > 0 && req.Messages[i-1].Role == m.Role {
			return t, fmt.Errorf("messages: roles must alternate between \"user\" and \"assistant\", but found multiple %q roles in a row", m.Role)
		}
		var blocks []struct {
			Type      string          `json:"type"`
			Text      *string         `json:"text"`
			ID        string          `json:"id"`
			Name      string          `json:"name"`
			Input     json.RawMessage `json:"input"`
			ToolUseID string          `json:"tool_use_id"`
			Content   json.RawMessage `json:"content"`
			Signature string          `json:"signature"`
			Source    json.RawMessage `json:"source"`
		}
		var s string
		if json.Unmarshal(m.Content, &s) == nil {
			if s == "" {
				return t, fmt.Errorf("messages.%d: all messages must have non-empty content", i)
			}
			t.Messages = append(t.Messages, providertest.Msg{Role: m.Role, Content: s})
			continue
		}
		if err := json.Unmarshal(m.Content, &blocks); err != nil || len(blocks) == 0 {
			return t, fmt.Errorf("messages.%d.content: all messages must have non-empty content", i)
		}
		msg := providertest.Msg{Role: m.Role}
		for j, b := range blocks {
			switch b.Type {
			case "text":
				if b.Text == nil || *b.Text == "" {
					return t, fmt.Errorf("messages.%d.content.%d.text: text content blocks must be non-empty", i, j)
				}
				msg.Content += *b.Text
			case "tool_use":
				if m.Role != "assistant" {
					return t, fmt.Errorf("messages.%d.content.%d: tool_use blocks are only allowed in assistant messages", i, j)
				}
				var input map[string]any
				if json.Unmarshal(b.Input, &input) != nil || input == nil {
					return t, fmt.Errorf("messages.%d.content.%d.tool_use.input: Input should be a valid dictionary", i, j)
				}
				names[b.ID] = b.Name
				pending[b.ID] = true
				args, _ := json.Marshal(input)
				msg.ToolCalls = append(msg.ToolCalls, b.Name+"("+string(args)+")")
			case "image":
				if m.Role != "user" {
					return t, fmt.Errorf("messages.%d.content.%d: image blocks are only allowed in user messages", i, j)
				}
				img, err := decodeImage(b.Source, fmt.Sprintf("messages.%d.content.%d.image.source", i, j))
				if err != nil {
					return t, err
				}
				msg.Images = append(msg.Images, img)
			case "tool_result":
				if !pending[b.ToolUseID] {
					return t, fmt.Errorf("messages.%d.content.%d: unexpected `tool_use_id` found in `tool_result` blocks: %s. Each `tool_result` block must have a corresponding `tool_use` block in the previous message.", i, j, b.ToolUseID)
				}
				delete(pending, b.ToolUseID)
				tm := providertest.Msg{Role: "tool", ToolCallID: b.ToolUseID, ToolName: names[b.ToolUseID]}
				if json.Unmarshal(b.Content, &tm.Content) != nil {
					var parts []struct {
						Type   string          `json:"type"`
						Text   string          `json:"text"`
						Source json.RawMessage `json:"source"`
					}
					if err := json.Unmarshal(b.Content, &parts); err != nil {
						return t, fmt.Errorf("messages.%d.content.%d.tool_result.content: Input should be a valid string or list of blocks", i, j)
					}
					for k, p := range parts {
						switch p.Type {
						case "text":
							tm.Content += p.Text
						case "image":
							img, err := decodeImage(p.Source, fmt.Sprintf("messages.%d.content.%d.tool_result.content.%d.image.source", i, j, k))
							if err != nil {
								return t, err
							}
							tm.Images = append(tm.Images, img)
						default:
							return t, fmt.Errorf("messages.%d.content.%d.tool_result.content.%d.type: Input tag '%s' found using 'type' does not match any of the expected tags: 'text', 'image', 'search_result', 'document'", i, j, k, p.Type)
						}
					}
				}
				t.Messages = append(t.Messages, tm)
			case "thinking":
				if b.Signature == "" {
					return t, fmt.Errorf("messages.%d.content.%d.thinking.signature: Field required", i, j)
				}
			case "redacted_thinking":
			default:
				return t, fmt.Errorf("messages.%d.content.%d.type: unknown block type %q", i, j, b.Type)
			}
		}
		if msg.Content != "" || len(msg.ToolCalls) > 0 || len(msg.Images) > 0 {
			t.Messages = append(t.Messages, msg)
		}
	}
	for _, tl := range req.Tools {
		if tl.InputSchema == nil {
			return t, fmt.Errorf("tools.%s.input_schema: Field required", tl.Name)
		}
		t.Tools = append(t.Tools, tl.Name)
	}
	return t, nil
}

// MediaTypes are the image types the API takes.
var MediaTypes = []string{"image/jpeg", "image/png", "image/gif", "image/webp"}

// decodeImage checks an image block's source as the API does and decodes
// it: {type: base64, media_type, data} or {type: url, url}.
func decodeImage(raw json.RawMessage, path string) (media.Image, error) {
	var src struct {
		Type      string `json:"type"`
		MediaType string `json:"media_type"`
		Data      string `json:"data"`
		URL       string `json:"url"`
	}
	if err := json.Unmarshal(raw, &src); err != nil {
		return media.Image{}, fmt.Errorf("%s: Field required", path)
	}
	switch src.Type {
	case "base64":
		if !slices.Contains(MediaTypes, src.MediaType) {
			return media.Image{}, fmt.Errorf("%s.base64.media_type: Input should be 'image/jpeg', 'image/png', 'image/gif' or 'image/webp'", path)
		}
		data, err := base64.StdEncoding.DecodeString(src.Data)
		if err != nil || len(data) == 0 {
			return media.Image{}, fmt.Errorf("%s.base64.data: The image data is not valid base64", path)
		}
		return media.Image{MediaType: src.MediaType, Data: data}, nil
	case "url":
		if !strings.HasPrefix(src.URL, "https://") && !strings.HasPrefix(src.URL, "http://") {
			return media.Image{}, fmt.Errorf("%s.url.url: Input should be a valid URL", path)
		}
		return media.Image{URL: src.URL}, nil
	}
	return media.Image{}, fmt.Errorf("%s: Input tag '%s' found using 'type' does not match any of the expected tags: 'base64', 'url', 'file'", path, src.Type)
}
