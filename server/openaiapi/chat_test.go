package openaiapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/nbots/nb/provider/providertest"
)

// A whole answer is a chat.completion object, field for field; the
// client's system message follows the cartridge's directive.
func TestChatCompletionWhole(t *testing.T) {
	s := newTestServer(t, providertest.Echo, map[string]string{"echo": cartridgeOn("openai", "")}, Options{})
	resp, body := s.post(t, "/v1/chat/completions", `{"model":"echo","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"hi"}]}`)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
	re := regexp.MustCompile(`^\{"id":"chatcmpl-[a-z2-7]{24}","object":"chat.completion","created":\d+,"model":"echo","choices":\[\{"index":0,"message":\{"role":"assistant","content":"echo: hi","refusal":null,"annotations":\[\]\},"logprobs":null,"finish_reason":"stop"\}\],"usage":\{"prompt_tokens":\d+,"completion_tokens":\d+,"total_tokens":\d+,"prompt_tokens_details":\{"cached_tokens":0,"audio_tokens":0\},"completion_tokens_details":\{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0\}\}\}$`)
	if !re.MatchString(strings.TrimSpace(body)) {
		t.Errorf("body:\n%s", body)
	}
	sent := s.fakes.recorder.Last()
	if got := path(sent, "messages", 0, "content"); got != "You are a test.\n\nBe brief." {
		t.Errorf("system sent = %#v", got)
	}
	if got := path(sent, "messages", 1, "content"); got != "hi" {
		t.Errorf("user sent = %#v", got)
	}
}

// A streamed answer: the role first, content deltas, the finish reason,
// the usage chunk with no choices (every other chunk has usage null), and
// [DONE].
func TestChatCompletionStream(t *testing.T) {
	s := newTestServer(t, providertest.Echo, map[string]string{"echo": cartridgeOn("openai", "")}, Options{})
	resp, body := s.post(t, "/v1/chat/completions", `{"model":"echo","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hello there"}]}`)
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("status %d %s: %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	events := readSSE(t, body)
	if n := len(events); n < 5 || events[n-1].Data != "[DONE]" {
		t.Fatalf("events:\n%s", body)
	}
	var text strings.Builder
	id := ""
	for i, ev := range events[:len(events)-1] {
		c := decodeJSON(t, ev.Data)
		if c["object"] != "chat.completion.chunk" || c["model"] != "echo" {
			t.Errorf("chunk %d: %s", i, ev.Data)
		}
		if id == "" {
			id, _ = c["id"].(string)
		} else if c["id"] != id {
			t.Errorf("chunk %d has id %v, want %s", i, c["id"], id)
		}
		last := i == len(events)-2
		if _, ok := c["usage"]; !ok {
			t.Errorf("chunk %d has no usage field: %s", i, ev.Data)
		}
		switch {
		case i == 0:
			want := `"choices":[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}],"usage":null}`
			if !strings.HasSuffix(ev.Data, want) {
				t.Errorf("first chunk: %s", ev.Data)
			}
		case last:
			if !strings.HasSuffix(ev.Data, `"choices":[],"usage":{"prompt_tokens":`+fmt.Sprint(path(c, "usage", "prompt_tokens"))+`,"completion_tokens":`+fmt.Sprint(path(c, "usage", "completion_tokens"))+`,"total_tokens":`+fmt.Sprint(path(c, "usage", "total_tokens"))+`,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}}`) {
				t.Errorf("usage chunk: %s", ev.Data)
			}
		case i == len(events)-3:
			if !strings.HasSuffix(ev.Data, `"choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}],"usage":null}`) {
				t.Errorf("finish chunk: %s", ev.Data)
			}
		default:
			if path(c, "choices", 0, "finish_reason") != nil || path(c, "usage") != nil {
				t.Errorf("chunk %d: %s", i, ev.Data)
			}
			text.WriteString(path(c, "choices", 0, "delta", "content").(string))
		}
	}
	if text.String() != "echo: hello there" {
		t.Errorf("streamed %q", text.String())
	}
	// The echo streams in pieces of three bytes: they arrive as they come.
	if len(events) < 8 {
		t.Errorf("only %d events: the answer was not streamed", len(events))
	}
}

// Without include_usage, chunks have no usage field and there is no usage
// chunk.
func TestChatCompletionStreamWithoutUsage(t *testing.T) {
	s := newTestServer(t, providertest.Echo, map[string]string{"echo": cartridgeOn("openai", "")}, Options{})
	_, body := s.post(t, "/v1/chat/completions", `{"model":"echo","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	events := readSSE(t, body)
	for _, ev := range events[:len(events)-1] {
		if strings.Contains(ev.Data, `"usage"`) || strings.Contains(ev.Data, `"choices":[]`) {
			t.Errorf("chunk: %s", ev.Data)
		}
	}
	if !strings.Contains(events[len(events)-2].Data, `"finish_reason":"stop"`) {
		t.Errorf("last chunk: %s", events[len(events)-2].Data)
	}
}

// A call to a client tool ends the answer with finish_reason tool_calls;
// the client sends the result back and the model answers.
func TestChatClientToolRoundTrip(t *testing.T) {
	s := newTestServer(t, providertest.Echo, map[string]string{"echo": cartridgeOn("openai", "")}, Options{})
	tools := `"tools":[{"type":"function","function":{"name":"lookup","description":"Looks up.","parameters":{"type":"object","properties":{"q":{"type":"string"}}}}}]`
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprint("stream=", stream), func(t *testing.T) {
			resp, body := s.post(t, "/v1/chat/completions", fmt.Sprintf(`{"model":"echo","stream":%v,%s,"messages":[{"role":"user","content":"call lookup {\"q\":\"x\"}"}]}`, stream, tools))
			if resp.StatusCode != 200 {
				t.Fatalf("status %d: %s", resp.StatusCode, body)
			}
			msg := assembled(t, body, stream)
			if msg.finish != "tool_calls" || len(msg.calls) != 1 || msg.calls[0].Name != "lookup" || msg.calls[0].Arguments != `{"q":"x"}` {
				t.Fatalf("answer %+v\n%s", msg, body)
			}
			if strings.Contains(msg.calls[0].ID, roundMark) {
				t.Errorf("a round of client calls only was kept: id %s", msg.calls[0].ID)
			}
			if n, _ := s.h.rounds.Memory().Stats(); n != 0 {
				t.Errorf("%d rounds kept", n)
			}
			sent := s.fakes.recorder.Last()
			if path(sent, "tools", 0, "function", "name") != "lookup" {
				t.Errorf("tools sent: %v", sent["tools"])
			}
			next := fmt.Sprintf(`{"model":"echo","stream":%v,%s,"messages":[{"role":"user","content":"call lookup {\"q\":\"x\"}"},{"role":"assistant","content":null,"tool_calls":[{"id":%q,"type":"function","function":{"name":"lookup","arguments":"{\"q\":\"x\"}"}}]},{"role":"tool","tool_call_id":%q,"content":"found"}]}`,
				stream, tools, msg.calls[0].ID, msg.calls[0].ID)
			resp, body = s.post(t, "/v1/chat/completions", next)
			if resp.StatusCode != 200 {
				t.Fatalf("status %d: %s", resp.StatusCode, body)
			}
			msg = assembled(t, body, stream)
			if msg.text != "tool lookup said: found" || msg.finish != "stop" {
				t.Errorf("answer %+v", msg)
			}
		})
	}
}

// One round that calls a cartridge tool and a client tool: the server
// runs its own, returns the client's, keeps its part, and puts it back
// when the client continues, so the model sees the whole round. When the
// server's part is gone, a header says so and the exchange goes on.
func TestChatMixedRound(t *testing.T) {
	s := newTestServer(t, providertest.Echo, map[string]string{"weather": cartridgeOn("openai", weatherTool)}, Options{})
	tools := `"tools":[{"type":"function","function":{"name":"lookup","parameters":{"type":"object","properties":{"q":{"type":"string"}}}}}]`
	ask := `{"role":"user","content":"call get-weather {\"city\":\"Paris\"}; lookup {\"q\":\"x\"}"}`
	resp, body := s.post(t, "/v1/chat/completions", `{"model":"weather",`+tools+`,"messages":[`+ask+`]}`)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	msg := assembled(t, body, false)
	if len(msg.calls) != 1 || msg.calls[0].Name != "lookup" || !strings.HasPrefix(msg.calls[0].ID, "call_2"+roundMark) {
		t.Fatalf("calls %+v", msg.calls)
	}
	continueWith := func(id string) (*http.Response, string) {
		return s.post(t, "/v1/chat/completions", fmt.Sprintf(`{"model":"weather",%s,"messages":[%s,{"role":"assistant","content":null,"tool_calls":[{"id":%q,"type":"function","function":{"name":"lookup","arguments":"{\"q\":\"x\"}"}}]},{"role":"tool","tool_call_id":%q,"content":"found"}]}`, tools, ask, id, id))
	}
	resp, body = continueWith(msg.calls[0].ID)
	if resp.StatusCode != 200 || resp.Header.Get(lostHeader) != "" {
		t.Fatalf("status %d, lost %q: %s", resp.StatusCode, resp.Header.Get(lostHeader), body)
	}
	if got := assembled(t, body, false).text; got != "tool get-weather said: sunny in Paris; tool lookup said: found" {
		t.Errorf("answer %q", got)
	}
	sent := s.fakes.recorder.Last()
	want := `[{"role":"system","content":"You are a test."},{"role":"user","content":"call get-weather {\"city\":\"Paris\"}; lookup {\"q\":\"x\"}"},` +
		`{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get-weather","arguments":"{\"city\":\"Paris\"}"}},{"id":"call_2","type":"function","function":{"name":"lookup","arguments":"{\"q\":\"x\"}"}}]},` +
		`{"role":"tool","tool_call_id":"call_1","content":"sunny in Paris"},{"role":"tool","tool_call_id":"call_2","content":"found"}]`
	if got := mustJSON(t, sent["messages"]); got != normJSON(t, want) {
		t.Errorf("sent\n%s\nwant\n%s", got, normJSON(t, want))
	}

	// The server's part expires (or the server restarts).
	_, key := splitID(msg.calls[0].ID)
	s.h.rounds.Memory().Delete(key, "")
	resp, body = continueWith(msg.calls[0].ID)
	if resp.StatusCode != 200 || resp.Header.Get(lostHeader) != "1" {
		t.Fatalf("status %d, lost %q: %s", resp.StatusCode, resp.Header.Get(lostHeader), body)
	}
	if got := assembled(t, body, false).text; got != "tool lookup said: found" {
		t.Errorf("answer %q", got)
	}
	sent = s.fakes.recorder.Last()
	if got := mustJSON(t, path(sent, "messages", 2, "tool_calls")); got != `[{"function":{"arguments":"{\"q\":\"x\"}","name":"lookup"},"id":"call_2","type":"function"}]` {
		t.Errorf("sent calls %s", got)
	}
}

func mustJSON(t testing.TB, v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// answer is a chat completion as a client assembles it.
type answer struct {
	text, reasoning, finish string
	calls                   []clientCall
	usage                   map[string]any
}

func assembled(t testing.TB, body string, stream bool) answer {
	t.Helper()
	var a answer
	if !stream {
		c := decodeJSON(t, body)
		a.text, _ = path(c, "choices", 0, "message", "content").(string)
		a.reasoning, _ = path(c, "choices", 0, "message", "reasoning_content").(string)
		a.finish, _ = path(c, "choices", 0, "finish_reason").(string)
		calls, _ := path(c, "choices", 0, "message", "tool_calls").([]any)
		for _, x := range calls {
			a.calls = append(a.calls, clientCall{ID: path(x, "id").(string), Name: path(x, "function", "name").(string), Arguments: path(x, "function", "arguments").(string)})
			if path(x, "type") != "function" {
				t.Errorf("call type %v", path(x, "type"))
			}
		}
		a.usage, _ = c["usage"].(map[string]any)
		return a
	}
	events := readSSE(t, body)
	if len(events) == 0 || events[len(events)-1].Data != "[DONE]" {
		t.Fatalf("no [DONE]:\n%s", body)
	}
	for _, ev := range events[:len(events)-1] {
		c := decodeJSON(t, ev.Data)
		if c["error"] != nil {
			t.Fatalf("error event: %s", ev.Data)
		}
		if u, ok := c["usage"].(map[string]any); ok {
			a.usage = u
		}
		d := path(c, "choices", 0, "delta")
		if s, ok := path(d, "content").(string); ok {
			a.text += s
		}
		if s, ok := path(d, "reasoning_content").(string); ok {
			a.reasoning += s
		}
		if f, ok := path(c, "choices", 0, "finish_reason").(string); ok {
			a.finish = f
		}
		calls, _ := path(d, "tool_calls").([]any)
		for _, x := range calls {
			i := int(mustInt(t, path(x, "index")))
			if i == len(a.calls) {
				if path(x, "id") == nil || path(x, "type") != "function" || path(x, "function", "name") == nil {
					t.Fatalf("the first delta of a call lacks id, type or name: %s", ev.Data)
				}
				a.calls = append(a.calls, clientCall{ID: path(x, "id").(string), Name: path(x, "function", "name").(string)})
			}
			if s, ok := path(x, "function", "arguments").(string); ok {
				a.calls[i].Arguments += s
			}
		}
	}
	return a
}

func mustInt(t testing.TB, v any) int64 {
	n, ok := v.(json.Number)
	if !ok {
		t.Fatalf("not a number: %#v", v)
	}
	i, err := n.Int64()
	if err != nil {
		t.Fatal(err)
	}
	return i
}

// The chunks of a streamed tool call, exactly: the call's index, id, type
// and name with empty arguments, then the arguments in fragments, then
// the finish reason.
func TestChatStreamToolCallChunks(t *testing.T) {
	long := strings.Repeat("y", 100)
	s := newTestServer(t, providertest.Echo, map[string]string{"echo": cartridgeOn("openai", "")}, Options{})
	tools := `"tools":[{"type":"function","function":{"name":"lookup","parameters":{"type":"object","properties":{"q":{"type":"string"}}}}},{"type":"function","function":{"name":"other"}}]`
	_, body := s.post(t, "/v1/chat/completions", `{"model":"echo","stream":true,`+tools+`,"messages":[{"role":"user","content":"call lookup {\"q\":\"`+long+`\"}; other"}]}`)
	var deltas []string
	for _, ev := range readSSE(t, body) {
		if ev.Data == "[DONE]" {
			continue
		}
		c := decodeJSON(t, ev.Data)
		deltas = append(deltas, mustJSON(t, path(c, "choices", 0, "delta"))+" "+fmt.Sprint(path(c, "choices", 0, "finish_reason")))
	}
	want := []string{
		`{"content":"","refusal":null,"role":"assistant"} <nil>`,
		`{"tool_calls":[{"function":{"arguments":"","name":"lookup"},"id":"call_1","index":0,"type":"function"}]} <nil>`,
		`{"tool_calls":[{"function":{"arguments":"{\"q\":\"` + long[:58] + `"},"index":0}]} <nil>`,
		`{"tool_calls":[{"function":{"arguments":"` + long[58:] + `\"}"},"index":0}]} <nil>`,
		`{"tool_calls":[{"function":{"arguments":"","name":"other"},"id":"call_2","index":1,"type":"function"}]} <nil>`,
		`{"tool_calls":[{"function":{"arguments":"{}"},"index":1}]} <nil>`,
		`{} tool_calls`,
	}
	if got := strings.Join(deltas, "\n"); got != strings.Join(want, "\n") {
		t.Errorf("deltas\n%s\nwant\n%s", got, strings.Join(want, "\n"))
	}
}

// The cartridge's adapters apply: the input adapter to the new message;
// a whole answer is asked of the provider whole (not streamed) and goes
// through the output adapter, a streamed one is streamed as it comes.
func TestChatAdapters(t *testing.T) {
	adapters := `interfaces:
  eval:
    input:
      adapter:
        lua: return content .. "!"
    output:
      adapter:
        lua: return "[" .. content .. "]"
`
	s := newTestServer(t, providertest.Echo, map[string]string{"adapted": cartridgeOn("openai", adapters)}, Options{})
	_, body := s.post(t, "/v1/chat/completions", `{"model":"adapted","messages":[{"role":"user","content":"hi"}]}`)
	if got := assembled(t, body, false).text; got != "[echo: hi!]" {
		t.Errorf("whole: %q", got)
	}
	if sent := s.fakes.recorder.Last(); sent["stream"] != false {
		t.Errorf("a whole answer was asked as a stream: %v", sent["stream"])
	}
	_, body = s.post(t, "/v1/chat/completions", `{"model":"adapted","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	if got := assembled(t, body, true).text; got != "echo: hi!" {
		t.Errorf("streamed: %q", got)
	}
	if sent := s.fakes.recorder.Last(); sent["stream"] != true {
		t.Errorf("a streamed answer was asked whole: %v", sent["stream"])
	}
}
