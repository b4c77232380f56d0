package openai_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/nbots/nb/provider"
	"github.com/nbots/nb/provider/openai"
	"github.com/nbots/nb/provider/openai/openaitest"
	"github.com/nbots/nb/provider/providertest"
	"github.com/nbots/nb/tool"
)

func setup(t *testing.T, brain providertest.Brain, settings map[string]any) (provider.Provider, *openaitest.Server) {
	t.Helper()
	fake := openaitest.New(brain)
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	if settings == nil {
		settings = map[string]any{"model": "gpt-4o"}
	}
	p, err := provider.New(provider.Config{ID: "openai", Credentials: map[string]any{"address": srv.URL, "access-token": "sk-test"}, Settings: settings, User: "soft-user", HTTPClient: srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	return p, fake
}

func TestStreamText(t *testing.T) {
	p, fake := setup(t, providertest.Echo, map[string]any{"model": "gpt-4o", "temperature": 0.5, "seed": nil, "stream": false})
	var deltas []string
	resp, err := p.Complete(context.Background(), provider.Request{System: "Be brief.", Backdrop: "The Moon.", Messages: []provider.Message{{Role: provider.RoleUser, Content: "hello"}}, Stream: true},
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
	if resp.FinishReason != "stop" || resp.Usage.InputTokens != 9 {
		t.Errorf("finish %q usage %+v", resp.FinishReason, resp.Usage)
	}
	body := fake.Recorder.Last()
	want := map[string]any{
		"model": "gpt-4o", "temperature": 0.5, "stream": true, "user": "soft-user",
		// The usage of a stream comes only when asked for.
		"stream_options": map[string]any{"include_usage": true},
		"messages": []any{
			map[string]any{"role": "system", "content": "Be brief."},
			map[string]any{"role": "user", "content": "The Moon."},
			map[string]any{"role": "user", "content": "hello"},
		},
	}
	if diff := cmp.Diff(want, body); diff != "" {
		t.Errorf("request body (-want +got):\n%s", diff)
	}
}

func TestWhole(t *testing.T) {
	p, _ := setup(t, providertest.Echo, nil)
	called := false
	resp, err := p.Complete(context.Background(), provider.Request{Messages: []provider.Message{{Role: provider.RoleUser, Content: "hi"}}}, func(provider.Event) { called = true })
	if err != nil || resp.Text != "echo: hi" || called {
		t.Fatalf("%v %v called=%v", resp, err, called)
	}
}

func TestToolCallsSplitAcrossChunks(t *testing.T) {
	brain := providertest.Scripted(providertest.Reply{Calls: []providertest.Call{
		{ID: "call_XYZ", Name: "get-current-weather", Arguments: `{"location":"Tokyo, Japan"}`},
		{ID: "call_ZYX", Name: "what-time-is-it", Arguments: `{}`},
	}})
	p, fake := setup(t, brain, nil)
	tools := []tool.Spec{{Name: "get-current-weather", Description: "Weather.", Parameters: tool.DefaultParameters()}}
	for _, stream := range []bool{true, false} {
		if !stream {
			brain = providertest.Scripted(providertest.Reply{Calls: []providertest.Call{
				{ID: "call_XYZ", Name: "get-current-weather", Arguments: `{"location":"Tokyo, Japan"}`},
				{ID: "call_ZYX", Name: "what-time-is-it", Arguments: `{}`},
			}})
			fake.Brain = brain
		}
		resp, err := p.Complete(context.Background(), provider.Request{Messages: []provider.Message{{Role: provider.RoleUser, Content: "weather?"}}, Tools: tools, Stream: stream}, nil)
		if err != nil {
			t.Fatal(err)
		}
		want := []provider.ToolCall{{ID: "call_XYZ", Name: "get-current-weather", Arguments: `{"location":"Tokyo, Japan"}`}, {ID: "call_ZYX", Name: "what-time-is-it", Arguments: "{}"}}
		if diff := cmp.Diff(want, resp.ToolCalls); diff != "" {
			t.Errorf("stream=%v calls (-want +got):\n%s", stream, diff)
		}
		if resp.FinishReason != "tool_calls" {
			t.Errorf("finish %q", resp.FinishReason)
		}
		sent := fake.Recorder.Last()["tools"]
		wantTools := []any{map[string]any{"type": "function", "function": map[string]any{"name": "get-current-weather", "description": "Weather.", "parameters": map[string]any{"type": "object", "properties": map[string]any{}}}}}
		if diff := cmp.Diff(wantTools, sent); diff != "" {
			t.Errorf("tools sent (-want +got):\n%s", diff)
		}
	}
}

func TestHistoryWithToolsRoundTrip(t *testing.T) {
	p, fake := setup(t, providertest.Echo, nil)
	msgs := []provider.Message{
		{Role: provider.RoleUser, Content: "weather?"},
		{Role: provider.RoleAssistant, ToolCalls: []provider.ToolCall{{ID: "call_1", Name: "w", Arguments: `{"a":1}`}}},
		{Role: provider.RoleTool, ToolCallID: "call_1", ToolName: "w", Content: "35.8°C"},
	}
	resp, err := p.Complete(context.Background(), provider.Request{Messages: msgs, Stream: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text != "tool w said: 35.8°C" {
		t.Errorf("text %q", resp.Text)
	}
	got, _ := json.Marshal(fake.Recorder.Last()["messages"])
	want := `[{"content":"weather?","role":"user"},{"content":null,"role":"assistant","tool_calls":[{"function":{"arguments":"{\"a\":1}","name":"w"},"id":"call_1","type":"function"}]},{"content":"35.8°C","role":"tool","tool_call_id":"call_1"}]`
	if string(got) != want {
		t.Errorf("messages\n got %s\nwant %s", got, want)
	}
}

func TestErrors(t *testing.T) {
	for _, status := range []int{400, 401, 429, 500} {
		p, _ := setup(t, providertest.Scripted(providertest.Reply{Status: status}), nil)
		_, err := p.Complete(context.Background(), provider.Request{Stream: true}, nil)
		var pe *provider.Error
		if !errors.As(err, &pe) || pe.Status != status {
			t.Fatalf("%d: %v", status, err)
		}
		msg, _ := provider.ParseErrorBody([]byte(openaitest.ErrorBodies[status]))
		if !strings.Contains(err.Error(), msg) {
			t.Errorf("%d: %q lacks the provider's message %q", status, err, msg)
		}
		if status == 401 && !strings.Contains(err.Error(), "check provider.credentials.access-token") {
			t.Errorf("401 without hint: %q", err)
		}
		if pe.Retryable != (status == 429 || status == 500) {
			t.Errorf("%d: retryable=%v", status, pe.Retryable)
		}
	}
}

func TestDroppedStream(t *testing.T) {
	p, _ := setup(t, providertest.Scripted(providertest.Reply{Chunks: []string{"a", "b", "c"}, CutAfter: 2}), nil)
	var got string
	_, err := p.Complete(context.Background(), provider.Request{Stream: true}, func(ev provider.Event) { got += ev.Text })
	var pe *provider.Error
	if !errors.As(err, &pe) || !pe.Streamed || got != "ab" {
		t.Fatalf("err %v streamed text %q", err, got)
	}
}

func TestMidStreamError(t *testing.T) {
	p, _ := setup(t, providertest.Scripted(providertest.Reply{Chunks: []string{"a"}, StreamError: "The model is overloaded."}), nil)
	_, err := p.Complete(context.Background(), provider.Request{Stream: true}, nil)
	if err == nil || !strings.Contains(err.Error(), "The model is overloaded.") {
		t.Fatalf("got %v", err)
	}
}

func TestReasoningNotInText(t *testing.T) {
	p, _ := setup(t, providertest.Scripted(
		providertest.Reply{Reasoning: "thinking hard", Chunks: []string{"4"}},
		providertest.Reply{Chunks: []string{"<think>", "hmm</think>", "\n5"}},
	), nil)
	for _, want := range []string{"4", "5"} {
		var text string
		resp, err := p.Complete(context.Background(), provider.Request{Stream: true}, func(ev provider.Event) {
			if ev.Kind == provider.TextDelta {
				text += ev.Text
			}
		})
		if err != nil || resp.Text != want || text != want || resp.Reasoning == "" {
			t.Fatalf("resp %+v text %q err %v", resp, text, err)
		}
	}
}

func TestMissingKey(t *testing.T) {
	_, err := openai.New(provider.Config{ID: "openai", Settings: map[string]any{"model": "gpt-4o"}})
	var me *provider.MissingCredentialError
	if !errors.As(err, &me) || me.Key != "access-token" {
		t.Fatalf("got %v", err)
	}
	// A local compatible server needs no key.
	if _, err := openai.New(provider.Config{ID: "openai", Credentials: map[string]any{"address": "http://localhost:8080"}}); err != nil {
		t.Fatal(err)
	}
}
