package mistral_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/nbots/nb/provider"
	"github.com/nbots/nb/provider/mistral"
	"github.com/nbots/nb/provider/mistral/mistraltest"
	"github.com/nbots/nb/provider/providertest"
	"github.com/nbots/nb/tool"
)

func setup(t *testing.T, brain providertest.Brain, settings map[string]any) (provider.Provider, *mistraltest.Server) {
	t.Helper()
	fake := mistraltest.New(brain)
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	if settings == nil {
		settings = map[string]any{"model": "mistral-large-latest"}
	}
	p, err := provider.New(provider.Config{ID: "mistral", Credentials: map[string]any{"address": srv.URL + "/v1/", "api-key": "mk-test"}, Settings: settings, User: "soft-user", HTTPClient: srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	return p, fake
}

func user(s string) provider.Message { return provider.Message{Role: provider.RoleUser, Content: s} }

func TestStreamText(t *testing.T) {
	settings := map[string]any{"model": "mistral-large-latest", "temperature": 0.7, "top_p": 1, "max_tokens": nil, "stream": false, "safe_prompt": false, "random_seed": 42,
		"tool_choice": "any"}
	p, fake := setup(t, providertest.Echo, settings)
	var deltas []string
	resp, err := p.Complete(context.Background(), provider.Request{System: "Be brief.", Backdrop: "The Moon.", Messages: []provider.Message{user("hello")}, Stream: true},
		func(ev provider.Event) {
			if ev.Kind == provider.TextDelta {
				deltas = append(deltas, ev.Text)
			}
		})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text != "echo: hello" || strings.Join(deltas, "") != "echo: hello" || len(deltas) < 3 {
		t.Fatalf("text %q deltas %q", resp.Text, deltas)
	}
	if resp.FinishReason != "stop" || resp.Usage != (provider.Usage{InputTokens: 9, OutputTokens: 12}) {
		t.Errorf("finish %q usage %+v", resp.FinishReason, resp.Usage)
	}
	// No user field: the API refuses fields it does not know.
	want := map[string]any{
		"model": "mistral-large-latest", "temperature": 0.7, "top_p": 1.0, "stream": true, "safe_prompt": false, "random_seed": 42.0,
		"messages": []any{
			map[string]any{"role": "system", "content": "Be brief."},
			map[string]any{"role": "user", "content": "The Moon."},
			map[string]any{"role": "user", "content": "hello"},
		},
	}
	if diff := cmp.Diff(want, fake.Recorder.Last()); diff != "" {
		t.Errorf("request body (-want +got):\n%s", diff)
	}
}

func TestWhole(t *testing.T) {
	p, _ := setup(t, providertest.Echo, nil)
	called := false
	resp, err := p.Complete(context.Background(), provider.Request{Messages: []provider.Message{user("hi")}}, func(provider.Event) { called = true })
	if err != nil || resp.Text != "echo: hi" || called || resp.Usage.OutputTokens != 12 {
		t.Fatalf("%+v %v called=%v", resp, err, called)
	}
}

func TestToolCalls(t *testing.T) {
	tools := []tool.Spec{{Name: "get-current-weather", Description: "Weather.", Parameters: tool.DefaultParameters()}}
	for _, stream := range []bool{true, false} {
		p, fake := setup(t, providertest.Scripted(providertest.Reply{Calls: []providertest.Call{
			{ID: "D681PevKs", Name: "get-current-weather", Arguments: `{"location":"Tokyo, Japan"}`},
			{ID: "x8RmAnkT2", Name: "what-time-is-it", Arguments: `{}`},
		}}), map[string]any{"model": "m", "tool_choice": "any", "parallel_tool_calls": true})
		var started []string
		resp, err := p.Complete(context.Background(), provider.Request{Messages: []provider.Message{user("weather?")}, Tools: tools, Stream: stream}, func(ev provider.Event) {
			if ev.Kind == provider.ToolCallStarted {
				started = append(started, ev.Text)
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		want := []provider.ToolCall{{ID: "D681PevKs", Name: "get-current-weather", Arguments: `{"location":"Tokyo, Japan"}`}, {ID: "x8RmAnkT2", Name: "what-time-is-it", Arguments: "{}"}}
		if diff := cmp.Diff(want, resp.ToolCalls); diff != "" {
			t.Errorf("stream=%v calls (-want +got):\n%s", stream, diff)
		}
		if resp.FinishReason != "tool_calls" || (stream && len(started) != 2) {
			t.Errorf("finish %q started %q", resp.FinishReason, started)
		}
		body := fake.Recorder.Last()
		wantTools := []any{map[string]any{"type": "function", "function": map[string]any{"name": "get-current-weather", "description": "Weather.", "parameters": map[string]any{"type": "object", "properties": map[string]any{}}}}}
		if diff := cmp.Diff(wantTools, body["tools"]); diff != "" {
			t.Errorf("tools sent (-want +got):\n%s", diff)
		}
		if body["tool_choice"] != "any" || body["parallel_tool_calls"] != true {
			t.Errorf("tool_choice %v parallel %v", body["tool_choice"], body["parallel_tool_calls"])
		}
	}
}

func TestToolChoiceDroppedWithoutTools(t *testing.T) {
	p, fake := setup(t, providertest.Echo, map[string]any{"model": "m", "tool_choice": "auto", "parallel_tool_calls": false})
	if _, err := p.Complete(context.Background(), provider.Request{Messages: []provider.Message{user("hi")}}, nil); err != nil {
		t.Fatal(err)
	}
	body := fake.Recorder.Last()
	if _, ok := body["tool_choice"]; ok {
		t.Error("tool_choice sent without tools")
	}
	if _, ok := body["parallel_tool_calls"]; ok {
		t.Error("parallel_tool_calls sent without tools")
	}
}

// Mistral sends each call whole, and may number every call of an answer 0.
func TestWholeCallsWithSameIndex(t *testing.T) {
	stream := `data: {"id":"a","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}` + "\n\n" +
		`data: {"id":"a","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"id":"D681PevKs","function":{"name":"w","arguments":"{\"city\":\"Paris\"}"},"index":0},{"id":"Q2zr5vLx9","function":{"name":"t","arguments":"{}"},"index":0}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":3,"total_tokens":5,"completion_tokens":2}}` + "\n\n" +
		"data: [DONE]\n\n"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		providertest.WriteSplit(w, stream, 5)
	}))
	defer srv.Close()
	p, _ := mistral.New(provider.Config{ID: "mistral", Credentials: map[string]any{"address": srv.URL, "api-key": "k"}, HTTPClient: srv.Client()})
	resp, err := p.Complete(context.Background(), provider.Request{Messages: []provider.Message{user("x")}, Stream: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []provider.ToolCall{{ID: "D681PevKs", Name: "w", Arguments: `{"city":"Paris"}`}, {ID: "Q2zr5vLx9", Name: "t", Arguments: "{}"}}
	if diff := cmp.Diff(want, resp.ToolCalls); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
}

func TestHistoryWithToolsFromAnotherProvider(t *testing.T) {
	p, fake := setup(t, providertest.Echo, nil)
	msgs := []provider.Message{
		user("weather?"),
		{Role: provider.RoleAssistant, ToolCalls: []provider.ToolCall{{ID: "toolu_01A09q90qw90lq917835lq9", Name: "w", Arguments: `{"a":1}`}, {ID: "D681PevKs", Name: "t", Arguments: ""}}},
		{Role: provider.RoleTool, ToolCallID: "toolu_01A09q90qw90lq917835lq9", ToolName: "w", Content: "35.8°C"},
		{Role: provider.RoleTool, ToolCallID: "D681PevKs", ToolName: "t", Content: "noon"},
	}
	resp, err := p.Complete(context.Background(), provider.Request{Messages: msgs, Stream: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text != "tool w said: 35.8°C; tool t said: noon" {
		t.Errorf("text %q", resp.Text)
	}
	id := mistral.CallID("toolu_01A09q90qw90lq917835lq9")
	if len(id) != 9 || id != mistral.CallID("toolu_01A09q90qw90lq917835lq9") || mistral.CallID("D681PevKs") != "D681PevKs" {
		t.Fatalf("CallID %q", id)
	}
	got, _ := json.Marshal(fake.Recorder.Last()["messages"])
	want := `[{"content":"weather?","role":"user"},{"content":"","role":"assistant","tool_calls":[{"function":{"arguments":"{\"a\":1}","name":"w"},"id":"` + id + `","type":"function"},{"function":{"arguments":"{}","name":"t"},"id":"D681PevKs","type":"function"}]},` +
		`{"content":"35.8°C","name":"w","role":"tool","tool_call_id":"` + id + `"},{"content":"noon","name":"t","role":"tool","tool_call_id":"D681PevKs"}]`
	if string(got) != want {
		t.Errorf("messages\n got %s\nwant %s", got, want)
	}
}

func TestReasoning(t *testing.T) {
	for _, stream := range []bool{true, false} {
		p, _ := setup(t, providertest.Scripted(
			providertest.Reply{Reasoning: "thinking hard", Chunks: []string{"4"}},
			providertest.Reply{Chunks: []string{"<think>", "hmm</think>", "\n5"}},
		), nil)
		for _, want := range []string{"4", "5"} {
			var text string
			resp, err := p.Complete(context.Background(), provider.Request{Messages: []provider.Message{user("x")}, Stream: stream}, func(ev provider.Event) {
				if ev.Kind == provider.TextDelta {
					text += ev.Text
				}
			})
			if err != nil || resp.Text != want || (stream && text != want) || resp.Reasoning == "" {
				t.Fatalf("stream=%v resp %+v text %q err %v", stream, resp, text, err)
			}
		}
	}
}

func TestErrors(t *testing.T) {
	for _, status := range []int{400, 401, 422, 429, 500} {
		p, _ := setup(t, providertest.Scripted(providertest.Reply{Status: status}), nil)
		_, err := p.Complete(context.Background(), provider.Request{Messages: []provider.Message{user("x")}, Stream: true}, nil)
		var pe *provider.Error
		if !errors.As(err, &pe) || pe.Status != status {
			t.Fatalf("%d: %v", status, err)
		}
		msg, _ := provider.ParseErrorBody([]byte(mistraltest.ErrorBodies[status]))
		if msg == "" || !strings.Contains(err.Error(), msg) {
			t.Errorf("%d: %q lacks the provider's message %q", status, err, msg)
		}
		if hint := strings.Contains(err.Error(), "check provider.credentials.api-key"); hint != (status == 401) {
			t.Errorf("%d: hint=%v %q", status, hint, err)
		}
		if pe.Retryable != (status == 429 || status == 500) {
			t.Errorf("%d: retryable=%v", status, pe.Retryable)
		}
	}
}

func TestFakeRejectsForeignIDs(t *testing.T) {
	_, err := mistraltest.Decode([]byte(`{"messages":[{"role":"assistant","tool_calls":[{"id":"call_1","function":{"name":"w","arguments":"{}"}}]}]}`))
	if err == nil || !strings.Contains(err.Error(), "must be a-z, A-Z, 0-9, with a length of 9") {
		t.Fatalf("got %v", err)
	}
}

func TestDroppedStream(t *testing.T) {
	p, _ := setup(t, providertest.Scripted(providertest.Reply{Chunks: []string{"a", "b", "c"}, CutAfter: 2}), nil)
	var got string
	_, err := p.Complete(context.Background(), provider.Request{Messages: []provider.Message{user("x")}, Stream: true}, func(ev provider.Event) { got += ev.Text })
	var pe *provider.Error
	if !errors.As(err, &pe) || !pe.Streamed || provider.IsRetryable(err) || got != "ab" {
		t.Fatalf("err %v streamed text %q", err, got)
	}
}

func TestMidStreamError(t *testing.T) {
	p, _ := setup(t, providertest.Scripted(providertest.Reply{Chunks: []string{"a"}, StreamError: "Service unavailable."}), nil)
	_, err := p.Complete(context.Background(), provider.Request{Messages: []provider.Message{user("x")}, Stream: true}, nil)
	var pe *provider.Error
	if !errors.As(err, &pe) || !strings.Contains(err.Error(), "Service unavailable.") || !pe.Streamed {
		t.Fatalf("got %v", err)
	}
}

func TestMissingKey(t *testing.T) {
	_, err := mistral.New(provider.Config{ID: "mistral", Settings: map[string]any{"model": "m"}})
	var me *provider.MissingCredentialError
	if !errors.As(err, &me) || me.Key != "api-key" {
		t.Fatalf("got %v", err)
	}
}
