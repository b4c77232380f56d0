package anthropic_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/nbots/nb/provider"
	"github.com/nbots/nb/provider/anthropic"
	"github.com/nbots/nb/provider/anthropic/anthropictest"
	"github.com/nbots/nb/provider/providertest"
	"github.com/nbots/nb/tool"
)

func setup(t *testing.T, brain providertest.Brain, settings map[string]any) (provider.Provider, *anthropictest.Server) {
	t.Helper()
	fake := anthropictest.New(brain)
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	if settings == nil {
		settings = map[string]any{"model": "claude-3-5-sonnet-20240620"}
	}
	p, err := provider.New(provider.Config{ID: "anthropic", Credentials: map[string]any{"address": srv.URL + "/", "api-key": "sk-ant-test"}, Options: map[string]any{"cache": false}, Settings: settings, User: "soft-user", HTTPClient: srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	return p, fake
}

func user(s string) provider.Message { return provider.Message{Role: provider.RoleUser, Content: s} }

func TestStreamText(t *testing.T) {
	settings := map[string]any{"model": "claude-3-5-sonnet-20240620", "stream": false, "max_tokens": 1024, "temperature": 1.0, "top_k": nil,
		"tool_choice": map[string]any{"type": "auto", "name": nil}, "stop_sequences": []any{"."}, "future_param": map[string]any{"x": 1}}
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
	if resp.FinishReason != provider.FinishStop || resp.RawFinishReason != "end_turn" || resp.Usage != (provider.Usage{InputTokens: 9, OutputTokens: 12}) {
		t.Errorf("finish %q usage %+v", resp.FinishReason, resp.Usage)
	}
	want := map[string]any{
		"model": "claude-3-5-sonnet-20240620", "stream": true, "max_tokens": 1024.0, "temperature": 1.0,
		"stop_sequences": []any{"."}, "future_param": map[string]any{"x": 1.0},
		"system":   "Be brief.",
		"metadata": map[string]any{"user_id": "soft-user"},
		"messages": []any{
			map[string]any{"role": "user", "content": "The Moon."},
			map[string]any{"role": "assistant", "content": "Ok."},
			map[string]any{"role": "user", "content": "hello"},
		},
	}
	if diff := cmp.Diff(want, fake.Recorder.Last()); diff != "" {
		t.Errorf("request body (-want +got):\n%s", diff)
	}
	h := fake.Header()
	if h.Get("x-api-key") != "sk-ant-test" || h.Get("anthropic-version") != "2023-06-01" || h.Get("Authorization") != "" {
		t.Errorf("headers %v", h)
	}
}

func TestDefaults(t *testing.T) {
	fake := anthropictest.New(providertest.Echo)
	srv := httptest.NewServer(fake)
	defer srv.Close()
	p, err := provider.New(provider.Config{ID: "anthropic", HTTPClient: srv.Client(),
		Credentials: map[string]any{"address": srv.URL, "api-key": "k", "anthropic-version": "2024-01-01"},
		Options:     map[string]any{"beta": []any{"a-1", "b-2"}},
		Settings:    map[string]any{"model": "m", "metadata": map[string]any{"user_id": "mine"}}, User: "soft"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Complete(context.Background(), provider.Request{Messages: []provider.Message{user("hi")}}, nil); err != nil {
		t.Fatal(err)
	}
	body := fake.Recorder.Last()
	if body["max_tokens"] != float64(anthropic.DefaultMaxTokens) {
		t.Errorf("max_tokens %v", body["max_tokens"])
	}
	if diff := cmp.Diff(map[string]any{"user_id": "mine"}, body["metadata"]); diff != "" {
		t.Errorf("metadata: %s", diff)
	}
	if _, ok := body["system"]; ok {
		t.Errorf("system sent without a directive")
	}
	h := fake.Header()
	if h.Get("anthropic-version") != "2024-01-01" || h.Get("anthropic-beta") != "a-1,b-2" {
		t.Errorf("headers %v", h)
	}
}

func TestWhole(t *testing.T) {
	p, _ := setup(t, providertest.Echo, nil)
	called := false
	resp, err := p.Complete(context.Background(), provider.Request{Messages: []provider.Message{user("hi")}}, func(provider.Event) { called = true })
	if err != nil || resp.Text != "echo: hi" || called || resp.FinishReason != provider.FinishStop || resp.RawFinishReason != "end_turn" || resp.Usage != (provider.Usage{InputTokens: 9, OutputTokens: 12}) {
		t.Fatalf("%+v %v called=%v", resp, err, called)
	}
}

func twoCalls() providertest.Brain {
	return providertest.Scripted(providertest.Reply{Calls: []providertest.Call{
		{ID: "toolu_01A09q90qw90lq917835lq9", Name: "get-current-weather", Arguments: `{"location":"Tokyo, Japan","unit":"celsius"}`},
		{ID: "toolu_01B", Name: "what-time-is-it", Arguments: `{}`},
	}})
}

func TestToolCalls(t *testing.T) {
	tools := []tool.Spec{
		{Name: "get-current-weather", Description: "Weather.", Parameters: map[string]any{"type": "object", "properties": map[string]any{"location": map[string]any{"type": "string"}}}},
		{Name: "what-time-is-it", Parameters: tool.DefaultParameters()},
	}
	for _, stream := range []bool{true, false} {
		p, fake := setup(t, twoCalls(), map[string]any{"model": "m", "tool_choice": "required"})
		var started []string
		resp, err := p.Complete(context.Background(), provider.Request{Messages: []provider.Message{user("weather?")}, Tools: tools, Stream: stream}, func(ev provider.Event) {
			if ev.Kind == provider.ToolCallStarted {
				started = append(started, ev.Text)
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		want := []provider.ToolCall{
			{ID: "toolu_01A09q90qw90lq917835lq9", Name: "get-current-weather", Arguments: `{"location":"Tokyo, Japan","unit":"celsius"}`},
			{ID: "toolu_01B", Name: "what-time-is-it", Arguments: "{}"},
		}
		if diff := cmp.Diff(want, resp.ToolCalls); diff != "" {
			t.Errorf("stream=%v calls (-want +got):\n%s", stream, diff)
		}
		if resp.FinishReason != provider.FinishToolCalls || resp.RawFinishReason != "tool_use" || resp.Text != "" {
			t.Errorf("finish %q text %q", resp.FinishReason, resp.Text)
		}
		if stream && len(started) != 2 {
			t.Errorf("started %q", started)
		}
		body := fake.Recorder.Last()
		wantTools := []any{
			map[string]any{"name": "get-current-weather", "description": "Weather.", "input_schema": map[string]any{"type": "object", "properties": map[string]any{"location": map[string]any{"type": "string"}}}},
			map[string]any{"name": "what-time-is-it", "input_schema": map[string]any{"type": "object", "properties": map[string]any{}}},
		}
		if diff := cmp.Diff(wantTools, body["tools"]); diff != "" {
			t.Errorf("tools sent (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(map[string]any{"type": "any"}, body["tool_choice"]); diff != "" {
			t.Errorf("tool_choice: %s", diff)
		}
	}
}

func TestToolChoiceDroppedWithoutTools(t *testing.T) {
	p, fake := setup(t, providertest.Echo, map[string]any{"model": "m", "tool_choice": map[string]any{"type": "auto"}})
	if _, err := p.Complete(context.Background(), provider.Request{Messages: []provider.Message{user("hi")}}, nil); err != nil {
		t.Fatal(err)
	}
	if _, ok := fake.Recorder.Last()["tool_choice"]; ok {
		t.Error("tool_choice sent without tools")
	}
}

func TestHistoryWithTools(t *testing.T) {
	p, fake := setup(t, providertest.Echo, nil)
	msgs := []provider.Message{
		user("weather?"),
		{Role: provider.RoleAssistant, Content: "Let me check.", ToolCalls: []provider.ToolCall{
			{ID: "toolu_1", Name: "w", Arguments: `{"a":1}`},
			{ID: "toolu_2", Name: "t", Arguments: ``},
		}},
		{Role: provider.RoleTool, ToolCallID: "toolu_1", ToolName: "w", Content: "35.8°C"},
		{Role: provider.RoleTool, ToolCallID: "toolu_2", ToolName: "t", Content: "noon"},
	}
	resp, err := p.Complete(context.Background(), provider.Request{System: "S", Backdrop: "B", Messages: msgs, Stream: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text != "tool w said: 35.8°C; tool t said: noon" {
		t.Errorf("text %q", resp.Text)
	}
	got, _ := json.Marshal(fake.Recorder.Last()["messages"])
	want := `[{"content":"B","role":"user"},{"content":"Ok.","role":"assistant"},{"content":"weather?","role":"user"},` +
		`{"content":[{"text":"Let me check.","type":"text"},{"id":"toolu_1","input":{"a":1},"name":"w","type":"tool_use"},{"id":"toolu_2","input":{},"name":"t","type":"tool_use"}],"role":"assistant"},` +
		`{"content":[{"content":"35.8°C","tool_use_id":"toolu_1","type":"tool_result"},{"content":"noon","tool_use_id":"toolu_2","type":"tool_result"}],"role":"user"}]`
	if string(got) != want {
		t.Errorf("messages\n got %s\nwant %s", got, want)
	}
}

func TestMergesSameRoleTurns(t *testing.T) {
	msgs := []provider.Message{
		{Role: provider.RoleAssistant, Content: "Hi, I am a bot."}, // right after the backdrop's Ok.
		user("one"), user("two"),
		{Role: provider.RoleAssistant, ToolCalls: []provider.ToolCall{{ID: "x", Name: "f", Arguments: "{}"}}},
		{Role: provider.RoleTool, ToolCallID: "x", Content: "r"},
		user("three"),
		{Role: provider.RoleAssistant}, // empty: nothing to send
	}
	got, _ := json.Marshal(must(anthropic.Messages(provider.Request{Backdrop: "B", Messages: msgs})))
	want := `[{"content":"B","role":"user"},{"content":[{"text":"Ok.","type":"text"},{"text":"Hi, I am a bot.","type":"text"}],"role":"assistant"},` +
		`{"content":[{"text":"one","type":"text"},{"text":"two","type":"text"}],"role":"user"},` +
		`{"content":[{"id":"x","input":{},"name":"f","type":"tool_use"}],"role":"assistant"},` +
		`{"content":[{"content":"r","tool_use_id":"x","type":"tool_result"},{"text":"three","type":"text"}],"role":"user"}]`
	if string(got) != want {
		t.Errorf("messages\n got %s\nwant %s", got, want)
	}
	// And the fake (which enforces alternation) accepts it.
	if _, err := anthropictest.Decode([]byte(`{"max_tokens":1,"messages":` + string(got) + `}`)); err != nil {
		t.Error(err)
	}
}

func TestThinkingKeptAndSentBack(t *testing.T) {
	for _, stream := range []bool{true, false} {
		p, fake := setup(t, providertest.Scripted(providertest.Reply{Reasoning: "Let me think about the weather.", Calls: []providertest.Call{{ID: "toolu_9", Name: "w", Arguments: `{"city":"Paris"}`}}}), nil)
		var text, reasoning string
		resp, err := p.Complete(context.Background(), provider.Request{Messages: []provider.Message{user("weather?")}, Tools: []tool.Spec{{Name: "w", Parameters: tool.DefaultParameters()}}, Stream: stream}, func(ev provider.Event) {
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
		if resp.Text != "" || text != "" || resp.Reasoning != "Let me think about the weather." || (stream && reasoning != resp.Reasoning) {
			t.Fatalf("stream=%v text %q/%q reasoning %q/%q", stream, resp.Text, text, resp.Reasoning, reasoning)
		}
		// Anthropic does not count reasoning tokens apart: they are
		// estimated, the output tokens (12 from the fake) not spent on
		// the call (~5), at least the thinking's own estimate (~8).
		if u := resp.Usage; u.OutputTokens != 12 || u.ReasoningTokens != 8 {
			t.Errorf("stream=%v usage %+v, want 8 of the 12 output tokens as reasoning", stream, u)
		}
		wantExtra := map[string]any{"anthropic": map[string]any{"thinking": []any{map[string]any{"type": "thinking", "thinking": "Let me think about the weather.", "signature": anthropictest.Signature}}}}
		if diff := cmp.Diff(wantExtra, resp.Extra); diff != "" {
			t.Fatalf("extra (-want +got):\n%s", diff)
		}
		// The state goes through JSON; the block must come back verbatim, first.
		stored, _ := json.Marshal(resp.Message())
		var m provider.Message
		if err := json.Unmarshal(stored, &m); err != nil {
			t.Fatal(err)
		}
		msgs := []provider.Message{user("weather?"), m, {Role: provider.RoleTool, ToolCallID: "toolu_9", ToolName: "w", Content: "sunny"}}
		resp, err = p.Complete(context.Background(), provider.Request{Messages: msgs, Tools: []tool.Spec{{Name: "w", Parameters: tool.DefaultParameters()}}, Stream: stream}, nil)
		if err != nil || resp.Text != "tool w said: sunny" || resp.Usage.ReasoningTokens != 0 {
			t.Fatalf("%+v %v", resp, err)
		}
		got, _ := json.Marshal(fake.Recorder.Last()["messages"].([]any)[1])
		want := `{"content":[{"signature":"` + anthropictest.Signature + `","thinking":"Let me think about the weather.","type":"thinking"},{"id":"toolu_9","input":{"city":"Paris"},"name":"w","type":"tool_use"}],"role":"assistant"}`
		if string(got) != want {
			t.Errorf("assistant turn\n got %s\nwant %s", got, want)
		}
	}
}

func TestReasoningFromOtherProviderNotSent(t *testing.T) {
	msgs := []provider.Message{user("a"), {Role: provider.RoleAssistant, Content: "b", Reasoning: "hmm", Extra: map[string]any{"openai": "x"}}}
	got, _ := json.Marshal(must(anthropic.Messages(provider.Request{Messages: msgs})))
	if want := `[{"content":"a","role":"user"},{"content":"b","role":"assistant"}]`; string(got) != want {
		t.Errorf("got %s", got)
	}
}

func TestErrors(t *testing.T) {
	for _, status := range []int{400, 401, 403, 429, 500, 529} {
		p, _ := setup(t, providertest.Scripted(providertest.Reply{Status: status, RetryAfter: "7"}), nil)
		_, err := p.Complete(context.Background(), provider.Request{Messages: []provider.Message{user("x")}, Stream: true}, nil)
		var pe *provider.Error
		if !errors.As(err, &pe) || pe.Status != status {
			t.Fatalf("%d: %v", status, err)
		}
		msg, code := provider.ParseErrorBody([]byte(anthropictest.ErrorBodies[status]))
		if msg == "" || !strings.Contains(err.Error(), msg) || pe.Code != code {
			t.Errorf("%d: %q lacks the provider's message %q (code %q)", status, err, msg, pe.Code)
		}
		if hint := strings.Contains(err.Error(), "check provider.credentials.api-key"); hint != (status == 401 || status == 403) {
			t.Errorf("%d: hint=%v: %q", status, hint, err)
		}
		if pe.Retryable != (status == 429 || status >= 500) {
			t.Errorf("%d: retryable=%v", status, pe.Retryable)
		}
		if pe.RetryAfter.Seconds() != 7 {
			t.Errorf("%d: retry after %v", status, pe.RetryAfter)
		}
	}
}

func TestFakeRejectsMissingKey(t *testing.T) {
	fake := anthropictest.New(providertest.Echo)
	srv := httptest.NewServer(fake)
	defer srv.Close()
	p, err := anthropic.New(provider.Config{ID: "anthropic", Credentials: map[string]any{"address": srv.URL}, HTTPClient: srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Complete(context.Background(), provider.Request{Messages: []provider.Message{user("x")}}, nil)
	if err == nil || !strings.Contains(err.Error(), "x-api-key header is required") || !strings.Contains(err.Error(), "HTTP 401") {
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

func TestStreamEndsWithoutMessageStop(t *testing.T) {
	// No text reached the user: the error may be retried.
	srv := httptest.NewServer(rawStream("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":3}}}\n\nevent: ping\ndata: {\"type\": \"ping\"}\n\n"))
	defer srv.Close()
	p, _ := anthropic.New(provider.Config{ID: "anthropic", Credentials: map[string]any{"address": srv.URL, "api-key": "k"}, HTTPClient: srv.Client()})
	_, err := p.Complete(context.Background(), provider.Request{Messages: []provider.Message{user("x")}, Stream: true}, nil)
	if !provider.IsRetryable(err) {
		t.Fatalf("got %v, want a retryable error", err)
	}
}

func TestMidStreamError(t *testing.T) {
	p, _ := setup(t, providertest.Scripted(
		providertest.Reply{Chunks: []string{"a"}, StreamError: "Overloaded"},
		providertest.Reply{StreamError: "Overloaded"},
	), nil)
	_, err := p.Complete(context.Background(), provider.Request{Messages: []provider.Message{user("x")}, Stream: true}, nil)
	var pe *provider.Error
	if !errors.As(err, &pe) || !strings.Contains(err.Error(), "Overloaded") || pe.Code != "overloaded_error" || !pe.Streamed || provider.IsRetryable(err) {
		t.Fatalf("got %v", err)
	}
	// Before any text: overloaded is worth a retry.
	_, err = p.Complete(context.Background(), provider.Request{Messages: []provider.Message{user("x")}, Stream: true}, nil)
	if !provider.IsRetryable(err) {
		t.Fatalf("got %v, want retryable", err)
	}
}

func TestUnknownEventsIgnored(t *testing.T) {
	// A recorded stream with pings, an unknown future event type and a
	// citations delta, split mid-line by the server.
	stream := "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":3,\"cache_read_input_tokens\":2,\"output_tokens\":1}}}\n\n" +
		"event: ping\ndata: {\"type\": \"ping\"}\n\n" +
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hel\"}}\n\n" +
		"event: brand_new_event\ndata: {\"type\":\"brand_new_event\",\"x\":1}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"citations_delta\",\"citation\":{}}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"lo\"}}\n\n" +
		"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n" +
		"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"max_tokens\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":2}}\n\n" +
		"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
	srv := httptest.NewServer(rawStream(stream))
	defer srv.Close()
	p, _ := anthropic.New(provider.Config{ID: "anthropic", Credentials: map[string]any{"address": srv.URL, "api-key": "k"}, HTTPClient: srv.Client()})
	resp, err := p.Complete(context.Background(), provider.Request{Messages: []provider.Message{user("x")}, Stream: true}, nil)
	if err != nil || resp.Text != "Hello" || resp.FinishReason != provider.FinishLength || resp.RawFinishReason != "max_tokens" || resp.Usage != (provider.Usage{InputTokens: 5, OutputTokens: 2, CacheReadTokens: 2}) {
		t.Fatalf("%+v %v", resp, err)
	}
}

func TestMissingKey(t *testing.T) {
	_, err := anthropic.New(provider.Config{ID: "anthropic", Settings: map[string]any{"model": "m"}})
	var me *provider.MissingCredentialError
	if !errors.As(err, &me) || me.Key != "api-key" || !strings.Contains(err.Error(), "provider.credentials.api-key") {
		t.Fatalf("got %v", err)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
