package cohere_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/nbots/nb/provider"
	"github.com/nbots/nb/provider/cohere"
	"github.com/nbots/nb/provider/cohere/coheretest"
	"github.com/nbots/nb/provider/providertest"
	"github.com/nbots/nb/tool"
)

func setup(t *testing.T, brain providertest.Brain, settings, options map[string]any) (provider.Provider, *coheretest.Server) {
	t.Helper()
	fake := coheretest.New(brain)
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	if settings == nil {
		settings = map[string]any{"model": "command-r-plus"}
	}
	p, err := provider.New(provider.Config{ID: "cohere", Credentials: map[string]any{"address": srv.URL, "api-key": "co-test"}, Options: options, Settings: settings, User: "soft-user", HTTPClient: srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	return p, fake
}

func user(s string) provider.Message { return provider.Message{Role: provider.RoleUser, Content: s} }

var (
	v1 = map[string]any{"api": "v1"}
	v2 = map[string]any{"api": "v2"}
)

// specSettings are the specification's example settings for cohere.
func specSettings() map[string]any {
	return map[string]any{
		"model": "command-r-plus", "stream": true, "prompt_truncation": "OFF", "connectors": []any{map[string]any{"id": "web-search"}},
		"search_queries_only": false, "documents": []any{map[string]any{"title": "Tall penguins", "text": "Emperor penguins are the tallest."}},
		"citation_quality": "accurate", "temperature": 0.3, "max_tokens": nil, "max_input_tokens": nil, "k": 0, "p": 0.75, "seed": nil,
		"stop_sequences": []any{"."}, "frequency_penalty": 0.0, "presence_penalty": 0.0, "force_single_step": false,
	}
}

func TestSelection(t *testing.T) {
	for _, tc := range []struct {
		name     string
		address  string
		options  map[string]any
		settings map[string]any
		url      string
	}{
		{"current by default", "", nil, map[string]any{"model": "command-a-03-2025", "temperature": 0.3}, "https://api.cohere.com/v2/chat"},
		{"the specification's settings", "", nil, specSettings(), "https://api.cohere.com/v1/chat"},
		{"v1 documents", "", nil, map[string]any{"documents": []any{map[string]any{"title": "a", "text": "b"}}}, "https://api.cohere.com/v1/chat"},
		{"v2 documents", "", nil, map[string]any{"documents": []any{"plain", map[string]any{"data": map[string]any{"text": "b"}}}}, "https://api.cohere.com/v2/chat"},
		{"option wins", "", v2, specSettings(), "https://api.cohere.com/v2/chat"},
		{"address with version", "https://api.cohere.ai/v1", nil, nil, "https://api.cohere.ai/v1/chat"},
		{"address with endpoint", "https://gw.example/cohere/v2/chat/", nil, specSettings(), "https://gw.example/cohere/v2/chat"},
		{"option over address", "https://gw.example/v2", v1, nil, "https://gw.example/v1/chat"},
	} {
		p, err := cohere.New(provider.Config{ID: "cohere", Credentials: map[string]any{"address": tc.address, "api-key": "k"}, Options: tc.options, Settings: tc.settings})
		if err != nil {
			t.Fatal(err)
		}
		if got := p.(*cohere.Client).URL(); got != tc.url {
			t.Errorf("%s: url %q, want %q", tc.name, got, tc.url)
		}
	}
	if _, err := cohere.New(provider.Config{ID: "cohere", Credentials: map[string]any{"api-key": "k"}, Options: map[string]any{"api": "v3"}}); err == nil || !strings.Contains(err.Error(), "provider.options.api") {
		t.Errorf("unknown api: %v", err)
	}
}

func stream(t *testing.T, p provider.Provider, req provider.Request) (*provider.Response, string, string) {
	t.Helper()
	var text, reasoning string
	resp, err := p.Complete(context.Background(), req, func(ev provider.Event) {
		switch ev.Kind {
		case provider.TextDelta:
			text += ev.Text
		case provider.ReasoningDelta:
			reasoning += ev.Text
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return resp, text, reasoning
}

func TestV2StreamText(t *testing.T) {
	p, fake := setup(t, providertest.Echo, map[string]any{"model": "command-a-03-2025", "temperature": 0.3, "seed": nil, "stream": false, "safety_mode": "CONTEXTUAL"}, nil)
	resp, text, _ := stream(t, p, provider.Request{System: "Be brief.", Backdrop: "The Moon.", Messages: []provider.Message{user("hello")}, Stream: true})
	if resp.Text != "echo: hello" || text != resp.Text {
		t.Fatalf("text %q streamed %q", resp.Text, text)
	}
	if resp.FinishReason != provider.FinishStop || resp.RawFinishReason != "COMPLETE" || resp.Usage != (provider.Usage{InputTokens: 9, OutputTokens: 12}) {
		t.Errorf("finish %q usage %+v", resp.FinishReason, resp.Usage)
	}
	want := map[string]any{
		"model": "command-a-03-2025", "temperature": 0.3, "stream": true, "safety_mode": "CONTEXTUAL",
		"messages": []any{
			map[string]any{"role": "system", "content": "Be brief."},
			map[string]any{"role": "user", "content": "The Moon."},
			map[string]any{"role": "user", "content": "hello"},
		},
	}
	if diff := cmp.Diff(want, fake.Recorder.Last()); diff != "" {
		t.Errorf("request body (-want +got):\n%s", diff)
	}
	path, h := fake.Last()
	if path != "/v2/chat" || h.Get("Authorization") != "Bearer co-test" {
		t.Errorf("path %q headers %v", path, h)
	}
}

func TestV1StreamTextWithSpecSettings(t *testing.T) {
	p, fake := setup(t, providertest.Echo, specSettings(), nil)
	msgs := []provider.Message{user("first"), {Role: provider.RoleAssistant, Content: "echo: first"}, user("hello")}
	resp, text, _ := stream(t, p, provider.Request{System: "Be brief.", Backdrop: "The Moon.", Messages: msgs, Stream: true})
	if resp.Text != "echo: hello" || text != resp.Text {
		t.Fatalf("text %q streamed %q", resp.Text, text)
	}
	if resp.FinishReason != provider.FinishStop || resp.RawFinishReason != "COMPLETE" || resp.Usage != (provider.Usage{InputTokens: 9, OutputTokens: 12}) {
		t.Errorf("finish %q usage %+v", resp.FinishReason, resp.Usage)
	}
	want := specSettings()
	for _, k := range []string{"max_tokens", "max_input_tokens", "seed"} {
		delete(want, k)
	}
	want["k"] = 0.0
	want["preamble"] = "Be brief."
	want["message"] = "hello"
	want["chat_history"] = []any{
		map[string]any{"role": "USER", "message": "The Moon."},
		map[string]any{"role": "USER", "message": "first"},
		map[string]any{"role": "CHATBOT", "message": "echo: first"},
	}
	if diff := cmp.Diff(want, fake.Recorder.Last()); diff != "" {
		t.Errorf("request body (-want +got):\n%s", diff)
	}
	if path, _ := fake.Last(); path != "/v1/chat" {
		t.Errorf("path %q", path)
	}
}

func TestWhole(t *testing.T) {
	for _, options := range []map[string]any{v1, v2} {
		p, fake := setup(t, providertest.Echo, nil, options)
		called := false
		resp, err := p.Complete(context.Background(), provider.Request{Messages: []provider.Message{user("hi")}}, func(provider.Event) { called = true })
		if err != nil || resp.Text != "echo: hi" || called || resp.Usage.OutputTokens != 12 {
			t.Fatalf("%v: %+v %v called=%v", options, resp, err, called)
		}
		if fake.Recorder.Last()["stream"] != false {
			t.Errorf("stream flag %v", fake.Recorder.Last()["stream"])
		}
	}
}

func weatherTools() []tool.Spec {
	return []tool.Spec{{Name: "get-current-weather", Description: "Weather.", Parameters: map[string]any{
		"type": "object", "required": []any{"location"},
		"properties": map[string]any{"location": map[string]any{"type": "string", "description": "City."}, "days": map[string]any{"type": "integer"}}}}}
}

func twoCalls() providertest.Brain {
	return providertest.Scripted(providertest.Reply{Reasoning: "I will look up the weather.", Calls: []providertest.Call{
		{ID: "get_current_weather_0x9z", Name: "get-current-weather", Arguments: `{"location":"Tokyo, Japan"}`},
		{ID: "what_time_1k2j", Name: "what-time-is-it", Arguments: `{}`},
	}})
}

func TestV2ToolCalls(t *testing.T) {
	for _, streamed := range []bool{true, false} {
		p, fake := setup(t, twoCalls(), map[string]any{"model": "command-a-03-2025", "tool_choice": "REQUIRED"}, nil)
		var started []string
		resp, err := p.Complete(context.Background(), provider.Request{Messages: []provider.Message{user("weather?")}, Tools: weatherTools(), Stream: streamed}, func(ev provider.Event) {
			if ev.Kind == provider.ToolCallStarted {
				started = append(started, ev.Text)
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		want := []provider.ToolCall{
			{ID: "get_current_weather_0x9z", Name: "get-current-weather", Arguments: `{"location":"Tokyo, Japan"}`},
			{ID: "what_time_1k2j", Name: "what-time-is-it", Arguments: "{}"},
		}
		if diff := cmp.Diff(want, resp.ToolCalls); diff != "" {
			t.Errorf("stream=%v calls (-want +got):\n%s", streamed, diff)
		}
		if resp.FinishReason != provider.FinishToolCalls || resp.RawFinishReason != "TOOL_CALL" || resp.Text != "" || resp.Reasoning != "I will look up the weather." || (streamed && len(started) != 2) {
			t.Errorf("finish %q text %q reasoning %q started %q", resp.FinishReason, resp.Text, resp.Reasoning, started)
		}
		if diff := cmp.Diff(map[string]any{"cohere": map[string]any{"tool_plan": "I will look up the weather."}}, resp.Extra); diff != "" {
			t.Errorf("extra: %s", diff)
		}
		body := fake.Recorder.Last()
		wantTools := []any{map[string]any{"type": "function", "function": map[string]any{"name": "get-current-weather", "description": "Weather.", "parameters": map[string]any{
			"type": "object", "required": []any{"location"},
			"properties": map[string]any{"location": map[string]any{"type": "string", "description": "City."}, "days": map[string]any{"type": "integer"}}}}}}
		if diff := cmp.Diff(wantTools, body["tools"]); diff != "" {
			t.Errorf("tools sent (-want +got):\n%s", diff)
		}
		if body["tool_choice"] != "REQUIRED" {
			t.Errorf("tool_choice %v", body["tool_choice"])
		}
	}
}

func TestV1ToolCalls(t *testing.T) {
	for _, streamed := range []bool{true, false} {
		p, fake := setup(t, twoCalls(), nil, v1)
		resp, err := p.Complete(context.Background(), provider.Request{Messages: []provider.Message{user("weather?")}, Tools: weatherTools(), Stream: streamed}, nil)
		if err != nil {
			t.Fatal(err)
		}
		want := []provider.ToolCall{
			{ID: "5e3c1b2a-gen_0", Name: "get-current-weather", Arguments: `{"location":"Tokyo, Japan"}`},
			{ID: "5e3c1b2a-gen_1", Name: "what-time-is-it", Arguments: "{}"},
		}
		if diff := cmp.Diff(want, resp.ToolCalls); diff != "" {
			t.Errorf("stream=%v calls (-want +got):\n%s", streamed, diff)
		}
		if resp.Text != "" || resp.Reasoning != "I will look up the weather." {
			t.Errorf("stream=%v text %q reasoning %q", streamed, resp.Text, resp.Reasoning)
		}
		wantTools := []any{map[string]any{"name": "get-current-weather", "description": "Weather.", "parameter_definitions": map[string]any{
			"location": map[string]any{"type": "str", "description": "City.", "required": true},
			"days":     map[string]any{"type": "int", "required": false},
		}}}
		if diff := cmp.Diff(wantTools, fake.Recorder.Last()["tools"]); diff != "" {
			t.Errorf("tools sent (-want +got):\n%s", diff)
		}
	}
}

// A conversation with tool calls, written by another provider, continued here.
func history() []provider.Message {
	return []provider.Message{
		user("weather?"),
		{Role: provider.RoleAssistant, ToolCalls: []provider.ToolCall{{ID: "toolu_1", Name: "w", Arguments: `{"a":1}`}, {ID: "toolu_2", Name: "t", Arguments: ""}},
			Extra: map[string]any{"cohere": map[string]any{"tool_plan": "Checking."}}},
		{Role: provider.RoleTool, ToolCallID: "toolu_1", ToolName: "w", Content: "35.8°C"},
		{Role: provider.RoleTool, ToolCallID: "toolu_2", ToolName: "t", Content: "noon"},
	}
}

func TestV2History(t *testing.T) {
	p, fake := setup(t, providertest.Echo, nil, v2)
	resp, _, _ := stream(t, p, provider.Request{Messages: history(), Stream: true})
	if resp.Text != "tool w said: 35.8°C; tool t said: noon" {
		t.Errorf("text %q", resp.Text)
	}
	got, _ := json.Marshal(fake.Recorder.Last()["messages"])
	want := `[{"content":"weather?","role":"user"},{"role":"assistant","tool_calls":[{"function":{"arguments":"{\"a\":1}","name":"w"},"id":"toolu_1","type":"function"},{"function":{"arguments":"{}","name":"t"},"id":"toolu_2","type":"function"}],"tool_plan":"Checking."},` +
		`{"content":"35.8°C","role":"tool","tool_call_id":"toolu_1"},{"content":"noon","role":"tool","tool_call_id":"toolu_2"}]`
	if string(got) != want {
		t.Errorf("messages\n got %s\nwant %s", got, want)
	}
}

func TestV1History(t *testing.T) {
	p, fake := setup(t, providertest.Echo, nil, v1)
	// The last results go in tool_results with an empty message.
	resp, _, _ := stream(t, p, provider.Request{Messages: history(), Stream: true})
	if resp.Text != "tool w said: 35.8°C; tool t said: noon" {
		t.Errorf("text %q", resp.Text)
	}
	body := fake.Recorder.Last()
	got, _ := json.Marshal(map[string]any{"message": body["message"], "chat_history": body["chat_history"], "tool_results": body["tool_results"]})
	want := `{"chat_history":[{"message":"weather?","role":"USER"},{"message":"","role":"CHATBOT","tool_calls":[{"name":"w","parameters":{"a":1}},{"name":"t","parameters":{}}]}],"message":"",` +
		`"tool_results":[{"call":{"name":"w","parameters":{"a":1}},"outputs":[{"result":"35.8°C"}]},{"call":{"name":"t","parameters":{}},"outputs":[{"result":"noon"}]}]}`
	if string(got) != want {
		t.Errorf("body\n got %s\nwant %s", got, want)
	}
	// Older results are TOOL turns of chat_history.
	msgs := append(history(), provider.Message{Role: provider.RoleAssistant, Content: "Hot at noon."}, user("thanks"))
	if _, err := p.Complete(context.Background(), provider.Request{Messages: msgs}, nil); err != nil {
		t.Fatal(err)
	}
	body = fake.Recorder.Last()
	got, _ = json.Marshal(body["chat_history"].([]any)[2:])
	want = `[{"role":"TOOL","tool_results":[{"call":{"name":"w","parameters":{"a":1}},"outputs":[{"result":"35.8°C"}]},{"call":{"name":"t","parameters":{}},"outputs":[{"result":"noon"}]}]},{"message":"Hot at noon.","role":"CHATBOT"}]`
	if string(got) != want || body["message"] != "thanks" || body["tool_results"] != nil {
		t.Errorf("chat_history\n got %s\nwant %s\nmessage %v", got, want, body["message"])
	}
}

func TestReasoning(t *testing.T) {
	p, _ := setup(t, providertest.Scripted(
		providertest.Reply{Reasoning: "thinking hard", Chunks: []string{"4"}},
		providertest.Reply{Chunks: []string{"<think>", "hmm</think>", "\n5"}},
	), nil, v2)
	for _, want := range []string{"4", "5"} {
		resp, text, reasoning := stream(t, p, provider.Request{Messages: []provider.Message{user("x")}, Stream: true})
		if resp.Text != want || text != want || resp.Reasoning == "" || reasoning != resp.Reasoning {
			t.Fatalf("resp %+v text %q reasoning %q", resp, text, reasoning)
		}
	}
}

func TestErrors(t *testing.T) {
	for _, options := range []map[string]any{v1, v2} {
		for _, status := range []int{400, 401, 429, 500} {
			p, _ := setup(t, providertest.Scripted(providertest.Reply{Status: status, RetryAfter: "3"}), nil, options)
			_, err := p.Complete(context.Background(), provider.Request{Messages: []provider.Message{user("x")}, Stream: true}, nil)
			var pe *provider.Error
			if !errors.As(err, &pe) || pe.Status != status {
				t.Fatalf("%d: %v", status, err)
			}
			msg, _ := provider.ParseErrorBody([]byte(coheretest.ErrorBodies[status]))
			if msg == "" || !strings.Contains(err.Error(), msg) {
				t.Errorf("%d: %q lacks the provider's message %q", status, err, msg)
			}
			if hint := strings.Contains(err.Error(), "check provider.credentials.api-key"); hint != (status == 401) {
				t.Errorf("%d: hint=%v %q", status, hint, err)
			}
			if pe.Retryable != (status == 429 || status == 500) || pe.RetryAfter.Seconds() != 3 {
				t.Errorf("%d: retryable=%v after %v", status, pe.Retryable, pe.RetryAfter)
			}
		}
	}
}

func TestFakeRequiresMessageOrResults(t *testing.T) {
	p, _ := setup(t, providertest.Echo, nil, v1)
	_, err := p.Complete(context.Background(), provider.Request{Messages: []provider.Message{user("a"), {Role: provider.RoleAssistant, Content: "b"}}}, nil)
	if err == nil || !strings.Contains(err.Error(), "message must be at least 1 token long") || !strings.Contains(err.Error(), "HTTP 400") {
		t.Fatalf("got %v", err)
	}
}

func TestDroppedStream(t *testing.T) {
	for _, options := range []map[string]any{v1, v2} {
		p, _ := setup(t, providertest.Scripted(providertest.Reply{Chunks: []string{"a", "b", "c"}, CutAfter: 2}), nil, options)
		var got string
		_, err := p.Complete(context.Background(), provider.Request{Messages: []provider.Message{user("x")}, Stream: true}, func(ev provider.Event) { got += ev.Text })
		var pe *provider.Error
		if !errors.As(err, &pe) || !pe.Streamed || provider.IsRetryable(err) || got != "ab" {
			t.Fatalf("%v: err %v streamed text %q", options, err, got)
		}
	}
}

func TestMidStreamError(t *testing.T) {
	for _, options := range []map[string]any{v1, v2} {
		p, _ := setup(t, providertest.Scripted(
			providertest.Reply{Chunks: []string{"a"}, StreamError: "internal error while generating"},
			providertest.Reply{StreamError: "internal error while generating"},
		), nil, options)
		_, err := p.Complete(context.Background(), provider.Request{Messages: []provider.Message{user("x")}, Stream: true}, nil)
		var pe *provider.Error
		if !errors.As(err, &pe) || !strings.Contains(err.Error(), "internal error while generating") || !pe.Streamed || provider.IsRetryable(err) {
			t.Fatalf("%v: got %v", options, err)
		}
		_, err = p.Complete(context.Background(), provider.Request{Messages: []provider.Message{user("x")}, Stream: true}, nil)
		if !provider.IsRetryable(err) {
			t.Fatalf("%v: before any text: got %v, want retryable", options, err)
		}
	}
}

func TestMissingKey(t *testing.T) {
	_, err := cohere.New(provider.Config{ID: "cohere", Settings: map[string]any{"model": "m"}})
	var me *provider.MissingCredentialError
	if !errors.As(err, &me) || me.Key != "api-key" {
		t.Fatalf("got %v", err)
	}
}
