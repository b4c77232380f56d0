package maritaca_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/nbots/nb/provider"
	"github.com/nbots/nb/provider/maritaca"
	"github.com/nbots/nb/provider/maritaca/maritacatest"
	"github.com/nbots/nb/provider/providertest"
	"github.com/nbots/nb/tool"
)

func setup(t *testing.T, brain providertest.Brain, settings, options map[string]any) (provider.Provider, *maritacatest.Server) {
	t.Helper()
	fake := maritacatest.New(brain)
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	if settings == nil {
		settings = map[string]any{"model": "sabia-3"}
	}
	p, err := provider.New(provider.Config{ID: "maritaca", Credentials: map[string]any{"address": srv.URL, "api-key": "100088-test"}, Options: options, Settings: settings, User: "soft-user", HTTPClient: srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	return p, fake
}

func user(s string) provider.Message { return provider.Message{Role: provider.RoleUser, Content: s} }

func TestStreamText(t *testing.T) {
	settings := map[string]any{"model": "sabia-3", "stream": false, "max_tokens": nil, "temperature": 0.7, "top_p": 0.95, "stop": []any{"."}}
	p, fake := setup(t, providertest.Echo, settings, nil)
	var deltas []string
	resp, err := p.Complete(context.Background(), provider.Request{System: "Seja breve.", Backdrop: "A Lua.", Messages: []provider.Message{user("olá")}, Stream: true},
		func(ev provider.Event) {
			if ev.Kind == provider.TextDelta {
				deltas = append(deltas, ev.Text)
			}
		})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text != "echo: olá" || strings.Join(deltas, "") != "echo: olá" || len(deltas) < 3 {
		t.Fatalf("text %q deltas %q", resp.Text, deltas)
	}
	if resp.FinishReason != "stop" || resp.Usage != (provider.Usage{InputTokens: 9, OutputTokens: 12}) {
		t.Errorf("finish %q usage %+v", resp.FinishReason, resp.Usage)
	}
	want := map[string]any{
		"model": "sabia-3", "stream": true, "temperature": 0.7, "top_p": 0.95, "stop": []any{"."},
		"messages": []any{
			map[string]any{"role": "system", "content": "Seja breve."},
			map[string]any{"role": "user", "content": "A Lua."},
			map[string]any{"role": "user", "content": "olá"},
		},
	}
	if diff := cmp.Diff(want, fake.Recorder.Last()); diff != "" {
		t.Errorf("request body (-want +got):\n%s", diff)
	}
	path, h := fake.Last()
	if path != "/api/chat/completions" || h.Get("Authorization") != "Bearer 100088-test" {
		t.Errorf("path %q auth %q", path, h.Get("Authorization"))
	}
}

func TestAddresses(t *testing.T) {
	for _, tc := range []struct {
		address string
		options map[string]any
		api     string
		url     string
	}{
		{"", nil, maritaca.APIChatCompletions, "https://chat.maritaca.ai/api/chat/completions"},
		{"https://chat.maritaca.ai/api", nil, maritaca.APIChatCompletions, "https://chat.maritaca.ai/api/chat/completions"},
		{"https://chat.maritaca.ai/api/chat/inference", nil, maritaca.APIInference, "https://chat.maritaca.ai/api/chat/inference"},
		{"https://proxy.example/", map[string]any{"api": "inference"}, maritaca.APIInference, "https://proxy.example/api/chat/inference"},
		{"https://chat.maritaca.ai/api/chat/inference", map[string]any{"api": "chat-completions"}, maritaca.APIChatCompletions, "https://chat.maritaca.ai/api/chat/completions"},
	} {
		p, err := maritaca.New(provider.Config{ID: "maritaca", Credentials: map[string]any{"address": tc.address, "api-key": "k"}, Options: tc.options})
		if err != nil {
			t.Fatal(err)
		}
		c := p.(*maritaca.Client)
		if c.API() != tc.api || c.URL() != tc.url {
			t.Errorf("%q %v: api %q url %q", tc.address, tc.options, c.API(), c.URL())
		}
	}
	if _, err := maritaca.New(provider.Config{ID: "maritaca", Credentials: map[string]any{"api-key": "k"}, Options: map[string]any{"api": "v9"}}); err == nil || !strings.Contains(err.Error(), "provider.options.api") {
		t.Errorf("unknown api: %v", err)
	}
}

func TestWhole(t *testing.T) {
	p, _ := setup(t, providertest.Echo, nil, nil)
	called := false
	resp, err := p.Complete(context.Background(), provider.Request{Messages: []provider.Message{user("oi")}}, func(provider.Event) { called = true })
	if err != nil || resp.Text != "echo: oi" || called || resp.Usage.OutputTokens != 12 {
		t.Fatalf("%+v %v called=%v", resp, err, called)
	}
}

func TestToolCalls(t *testing.T) {
	tools := []tool.Spec{{Name: "get-current-weather", Description: "Tempo.", Parameters: tool.DefaultParameters()}}
	for _, stream := range []bool{true, false} {
		p, fake := setup(t, providertest.Scripted(providertest.Reply{Calls: []providertest.Call{
			{ID: "call_XYZ", Name: "get-current-weather", Arguments: `{"location":"São Paulo"}`},
			{ID: "call_ZYX", Name: "what-time-is-it", Arguments: `{}`},
		}}), map[string]any{"model": "sabia-3", "tool_choice": "auto"}, nil)
		resp, err := p.Complete(context.Background(), provider.Request{Messages: []provider.Message{user("tempo?")}, Tools: tools, Stream: stream}, nil)
		if err != nil {
			t.Fatal(err)
		}
		want := []provider.ToolCall{{ID: "call_XYZ", Name: "get-current-weather", Arguments: `{"location":"São Paulo"}`}, {ID: "call_ZYX", Name: "what-time-is-it", Arguments: "{}"}}
		if diff := cmp.Diff(want, resp.ToolCalls); diff != "" {
			t.Errorf("stream=%v calls (-want +got):\n%s", stream, diff)
		}
		if resp.FinishReason != "tool_calls" {
			t.Errorf("finish %q", resp.FinishReason)
		}
		body := fake.Recorder.Last()
		wantTools := []any{map[string]any{"type": "function", "function": map[string]any{"name": "get-current-weather", "description": "Tempo.", "parameters": map[string]any{"type": "object", "properties": map[string]any{}}}}}
		if diff := cmp.Diff(wantTools, body["tools"]); diff != "" {
			t.Errorf("tools sent (-want +got):\n%s", diff)
		}
		if body["tool_choice"] != "auto" {
			t.Errorf("tool_choice %v", body["tool_choice"])
		}
	}
}

func TestHistoryWithTools(t *testing.T) {
	p, fake := setup(t, providertest.Echo, map[string]any{"model": "sabia-3", "tool_choice": "auto"}, nil)
	msgs := []provider.Message{
		user("tempo?"),
		{Role: provider.RoleAssistant, ToolCalls: []provider.ToolCall{{ID: "toolu_1", Name: "w", Arguments: `{"a":1}`}, {ID: "toolu_2", Name: "t"}}},
		{Role: provider.RoleTool, ToolCallID: "toolu_1", ToolName: "w", Content: "35.8°C"},
		{Role: provider.RoleTool, ToolCallID: "toolu_2", ToolName: "t", Content: "meio-dia"},
	}
	resp, err := p.Complete(context.Background(), provider.Request{Messages: msgs, Stream: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text != "tool w said: 35.8°C; tool t said: meio-dia" {
		t.Errorf("text %q", resp.Text)
	}
	body := fake.Recorder.Last()
	if _, ok := body["tool_choice"]; ok {
		t.Error("tool_choice sent without tools")
	}
	got, _ := json.Marshal(body["messages"])
	want := `[{"content":"tempo?","role":"user"},{"content":"","role":"assistant","tool_calls":[{"function":{"arguments":"{\"a\":1}","name":"w"},"id":"toolu_1","type":"function"},{"function":{"arguments":"{}","name":"t"},"id":"toolu_2","type":"function"}]},` +
		`{"content":"35.8°C","role":"tool","tool_call_id":"toolu_1"},{"content":"meio-dia","role":"tool","tool_call_id":"toolu_2"}]`
	if string(got) != want {
		t.Errorf("messages\n got %s\nwant %s", got, want)
	}
}

func TestLegacyAPI(t *testing.T) {
	settings := map[string]any{"model": "sabia-2-medium", "do_sample": true, "max_tokens": nil, "repetition_penalty": 1, "stopping_tokens": []any{"."}}
	for _, stream := range []bool{true, false} {
		p, fake := setup(t, providertest.Echo, settings, map[string]any{"api": "inference"})
		var deltas []string
		resp, err := p.Complete(context.Background(), provider.Request{System: "Seja breve.", Backdrop: "A Lua.", Messages: []provider.Message{user("olá")}, Stream: stream},
			func(ev provider.Event) { deltas = append(deltas, ev.Text) })
		if err != nil {
			t.Fatal(err)
		}
		if resp.Text != "echo: olá" || (stream && strings.Join(deltas, "") != resp.Text) || (!stream && deltas != nil) {
			t.Fatalf("text %q deltas %q", resp.Text, deltas)
		}
		want := map[string]any{
			"model": "sabia-2-medium", "stream": stream, "chat_mode": true, "do_sample": true, "repetition_penalty": 1.0, "stopping_tokens": []any{"."},
			"messages": []any{
				map[string]any{"role": "user", "content": "Seja breve."},
				map[string]any{"role": "user", "content": "A Lua."},
				map[string]any{"role": "user", "content": "olá"},
			},
		}
		if diff := cmp.Diff(want, fake.Recorder.Last()); diff != "" {
			t.Errorf("request body (-want +got):\n%s", diff)
		}
		path, h := fake.Last()
		if path != "/api/chat/inference" || h.Get("Authorization") != "Key 100088-test" {
			t.Errorf("path %q auth %q", path, h.Get("Authorization"))
		}
		_, err = p.Complete(context.Background(), provider.Request{Messages: []provider.Message{user("x")}, Tools: []tool.Spec{{Name: "f"}}}, nil)
		if !errors.Is(err, maritaca.ErrNoTools) {
			t.Errorf("tools on the legacy API: %v", err)
		}
	}
}

func TestReasoningNotInText(t *testing.T) {
	p, _ := setup(t, providertest.Scripted(
		providertest.Reply{Reasoning: "pensando", Chunks: []string{"4"}},
		providertest.Reply{Chunks: []string{"<think>", "hmm</think>", "\n5"}},
	), nil, nil)
	for _, want := range []string{"4", "5"} {
		var text string
		resp, err := p.Complete(context.Background(), provider.Request{Messages: []provider.Message{user("x")}, Stream: true}, func(ev provider.Event) {
			if ev.Kind == provider.TextDelta {
				text += ev.Text
			}
		})
		if err != nil || resp.Text != want || text != want || resp.Reasoning == "" {
			t.Fatalf("resp %+v text %q err %v", resp, text, err)
		}
	}
}

func TestErrors(t *testing.T) {
	for _, status := range []int{400, 401, 422, 429, 500} {
		p, _ := setup(t, providertest.Scripted(providertest.Reply{Status: status}), nil, nil)
		_, err := p.Complete(context.Background(), provider.Request{Messages: []provider.Message{user("x")}, Stream: true}, nil)
		var pe *provider.Error
		if !errors.As(err, &pe) || pe.Status != status {
			t.Fatalf("%d: %v", status, err)
		}
		msg, _ := provider.ParseErrorBody([]byte(maritacatest.ErrorBodies[status]))
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

func TestDroppedStream(t *testing.T) {
	for _, options := range []map[string]any{nil, {"api": "inference"}} {
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
	for _, options := range []map[string]any{nil, {"api": "inference"}} {
		p, _ := setup(t, providertest.Scripted(providertest.Reply{Chunks: []string{"a"}, StreamError: "Servidor sobrecarregado."}), nil, options)
		_, err := p.Complete(context.Background(), provider.Request{Messages: []provider.Message{user("x")}, Stream: true}, nil)
		var pe *provider.Error
		if !errors.As(err, &pe) || !strings.Contains(err.Error(), "Servidor sobrecarregado.") || !pe.Streamed {
			t.Fatalf("%v: got %v", options, err)
		}
	}
}

func TestMissingKey(t *testing.T) {
	_, err := maritaca.New(provider.Config{ID: "maritaca", Settings: map[string]any{"model": "sabia-3"}})
	var me *provider.MissingCredentialError
	if !errors.As(err, &me) || me.Key != "api-key" {
		t.Fatalf("got %v", err)
	}
}
