package google_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nbots/nb/provider"
	"github.com/nbots/nb/provider/google"
	"github.com/nbots/nb/provider/google/googletest"
	"github.com/nbots/nb/provider/providertest"
	"github.com/nbots/nb/tool"
)

const model = "gemini-2.0-flash"

func setup(t *testing.T, brain providertest.Brain, settings map[string]any) (provider.Provider, *googletest.Server) {
	t.Helper()
	fake := googletest.New(brain)
	fake.APIKey = "AIza-test"
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	p, err := provider.New(provider.Config{ID: "google",
		Credentials: map[string]any{"service": "generative-language-api", "api-key": "AIza-test", "address": srv.URL},
		Options:     map[string]any{"model": model, "stream": true},
		Settings:    settings, HTTPClient: srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	return p, fake
}

func collect(kind provider.EventKind, out *[]string) func(provider.Event) {
	return func(ev provider.Event) {
		if ev.Kind == kind {
			*out = append(*out, ev.Text)
		}
	}
}

func user(s string) provider.Message { return provider.Message{Role: provider.RoleUser, Content: s} }

func TestStreamText(t *testing.T) {
	settings := map[string]any{
		"safetySettings":   []any{map[string]any{"category": "HARM_CATEGORY_DANGEROUS_CONTENT", "threshold": "BLOCK_NONE"}},
		"generationConfig": map[string]any{"temperature": 0.9, "maxOutputTokens": nil, "topP": 1.0, "stopSequences": []any{"."}},
		"futureParameter":  map[string]any{"x": 1},
	}
	p, fake := setup(t, providertest.Echo, settings)
	var deltas []string
	resp, err := p.Complete(context.Background(), provider.Request{System: "Be brief.", Backdrop: "The Moon.",
		Messages: []provider.Message{user("hello")}, Stream: true}, collect(provider.TextDelta, &deltas))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text != "echo: hello" || strings.Join(deltas, "") != "echo: hello" || len(deltas) < 3 {
		t.Fatalf("text %q deltas %q", resp.Text, deltas)
	}
	if resp.FinishReason != "stop" || resp.Usage.InputTokens != 9 || resp.Usage.OutputTokens != len(deltas) {
		t.Errorf("finish %q usage %+v", resp.FinishReason, resp.Usage)
	}
	want := map[string]any{
		"safetySettings":    []any{map[string]any{"category": "HARM_CATEGORY_DANGEROUS_CONTENT", "threshold": "BLOCK_NONE"}},
		"generationConfig":  map[string]any{"temperature": 0.9, "topP": 1.0, "stopSequences": []any{"."}},
		"futureParameter":   map[string]any{"x": 1.0},
		"systemInstruction": map[string]any{"parts": []any{map[string]any{"text": "Be brief."}}},
		"contents": []any{
			map[string]any{"role": "user", "parts": []any{map[string]any{"text": "The Moon."}}},
			map[string]any{"role": "model", "parts": []any{map[string]any{"text": "Understood."}}},
			map[string]any{"role": "user", "parts": []any{map[string]any{"text": "hello"}}},
		},
	}
	if diff := cmp.Diff(want, fake.Recorder.Last()); diff != "" {
		t.Errorf("request body (-want +got):\n%s", diff)
	}
	r := fake.Requests()[0]
	if r.Path != "/v1beta/models/gemini-2.0-flash:streamGenerateContent" || r.Query.Get("alt") != "sse" || r.Query.Has("key") || r.APIKey != "AIza-test" {
		t.Errorf("request %+v", r)
	}
}

func TestWhole(t *testing.T) {
	p, fake := setup(t, providertest.Scripted(providertest.Reply{Reasoning: "hmm", Chunks: []string{"4"}}), nil)
	called := false
	resp, err := p.Complete(context.Background(), provider.Request{Messages: []provider.Message{user("2+2?")}}, func(provider.Event) { called = true })
	if err != nil || resp.Text != "4" || resp.Reasoning != "hmm" || called || resp.FinishReason != "stop" || resp.Usage.OutputTokens != 12 {
		t.Fatalf("%+v %v called=%v", resp, err, called)
	}
	if r := fake.Requests()[0]; r.Path != "/v1beta/models/gemini-2.0-flash:generateContent" || len(r.Query) != 0 {
		t.Errorf("request %+v", r)
	}
	if _, ok := fake.Recorder.Last()["systemInstruction"]; ok {
		t.Error("systemInstruction sent without system text")
	}
}

var weatherTools = []tool.Spec{
	{Name: "get-current-weather", Description: "Weather.", Parameters: map[string]any{
		"$schema": "http://json-schema.org/draft-07/schema#", "type": "object", "additionalProperties": false,
		"properties": map[string]any{"location": map[string]any{"type": "string"}, "unit": map[string]any{"type": []any{"string", "null"}, "enum": []any{"c", "f"}}},
		"required":   []any{"location", "gone"},
	}},
	{Name: "clock", Parameters: tool.DefaultParameters()},
}

func TestParallelCalls(t *testing.T) {
	calls := []providertest.Call{
		{Name: "get_current_weather", Arguments: `{"location":"Tokyo, Japan"}`},
		{Name: "what_time_is_it", Arguments: `{"timezone":"local"}`},
	}
	for _, stream := range []bool{true, false} {
		p, fake := setup(t, providertest.Scripted(providertest.Reply{Calls: calls}), map[string]any{"toolConfig": map[string]any{"functionCallingConfig": map[string]any{"mode": "AUTO"}}})
		var started []string
		resp, err := p.Complete(context.Background(), provider.Request{Messages: []provider.Message{user("weather?")}, Tools: weatherTools, Stream: stream}, collect(provider.ToolCallStarted, &started))
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.ToolCalls) != 2 || resp.FinishReason != "tool_calls" || resp.Text != "" {
			t.Fatalf("stream=%v: %+v", stream, resp)
		}
		for i, c := range calls {
			got := resp.ToolCalls[i]
			if got.Name != c.Name || got.Arguments != c.Arguments || !strings.HasPrefix(got.ID, "call_") || len(got.ID) < 10 {
				t.Errorf("stream=%v call %d: %+v", stream, i, got)
			}
		}
		if resp.ToolCalls[0].ID == resp.ToolCalls[1].ID {
			t.Errorf("synthetic ids repeat: %s", resp.ToolCalls[0].ID)
		}
		if stream && !cmp.Equal(started, []string{"get_current_weather", "what_time_is_it"}) {
			t.Errorf("started events %q", started)
		}
		// The answer is marked as Gemini's even without signatures.
		if diff := cmp.Diff(map[string]any{"google": map[string]any{}}, resp.Extra); diff != "" {
			t.Errorf("extra (-want +got):\n%s", diff)
		}
		body := fake.Recorder.Last()
		wantTools := []any{map[string]any{"functionDeclarations": []any{
			map[string]any{"name": "get-current-weather", "description": "Weather.", "parameters": map[string]any{
				"type": "object",
				"properties": map[string]any{"location": map[string]any{"type": "string"},
					"unit": map[string]any{"type": "string", "nullable": true, "enum": []any{"c", "f"}}},
				"required": []any{"location"},
			}},
			map[string]any{"name": "clock"},
		}}}
		if diff := cmp.Diff(wantTools, body["tools"]); diff != "" {
			t.Errorf("tools (-want +got):\n%s", diff)
		}
		if body["toolConfig"] == nil {
			t.Error("toolConfig from settings dropped although tools are sent")
		}
	}
	// Without tools, toolConfig would be refused: it is left out.
	p, fake := setup(t, providertest.Echo, map[string]any{"toolConfig": map[string]any{"functionCallingConfig": map[string]any{"mode": "AUTO"}}})
	if _, err := p.Complete(context.Background(), provider.Request{Messages: []provider.Message{user("hi")}}, nil); err != nil {
		t.Fatal(err)
	}
	if _, ok := fake.Recorder.Last()["toolConfig"]; ok {
		t.Error("toolConfig sent without tools")
	}
}

func TestHistoryMapping(t *testing.T) {
	p, fake := setup(t, providertest.Echo, nil)
	msgs := []provider.Message{
		user("weather?"),
		{Role: provider.RoleAssistant, Content: "Let me look.", ToolCalls: []provider.ToolCall{
			{ID: "g-1", Name: "w", Arguments: `{"city":"Tokyo"}`},
			{ID: "call_x", Name: "t", Arguments: ``},
		}, Extra: map[string]any{"google": map[string]any{"thoughtSignatures": map[string]any{"g-1": "U0lH"}, "callIds": []any{"g-1"}}}},
		{Role: provider.RoleTool, ToolCallID: "g-1", ToolName: "w", Content: "35.8°C"},
		{Role: provider.RoleTool, ToolCallID: "call_x", Content: "noon"},
	}
	var text []string
	resp, err := p.Complete(context.Background(), provider.Request{Messages: msgs, Stream: true}, collect(provider.TextDelta, &text))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text != "tool w said: 35.8°C; tool t said: noon" {
		t.Errorf("text %q", resp.Text)
	}
	got, _ := json.Marshal(fake.Recorder.Last()["contents"])
	want := `[{"parts":[{"text":"weather?"}],"role":"user"},` +
		`{"parts":[{"text":"Let me look."},{"functionCall":{"args":{"city":"Tokyo"},"id":"g-1","name":"w"},"thoughtSignature":"U0lH"},{"functionCall":{"args":{},"name":"t"}}],"role":"model"},` +
		`{"parts":[{"functionResponse":{"id":"g-1","name":"w","response":{"output":"35.8°C"}}},{"functionResponse":{"name":"t","response":{"output":"noon"}}}],"role":"user"}]`
	if string(got) != want {
		t.Errorf("contents\n got %s\nwant %s", got, want)
	}
}

func TestForeignHistory(t *testing.T) {
	// A conversation written with another provider: calls without
	// signatures get Google's documented placeholder on the first call;
	// consecutive user messages are merged into one content.
	msgs := []provider.Message{
		user("a"), user("b"),
		{Role: provider.RoleAssistant, ToolCalls: []provider.ToolCall{{ID: "toolu_1", Name: "w", Arguments: `{}`}, {ID: "toolu_2", Name: "w", Arguments: `{}`}}},
		{Role: provider.RoleTool, ToolCallID: "toolu_1", ToolName: "w", Content: "1"},
		{Role: provider.RoleTool, ToolCallID: "toolu_2", ToolName: "w", Content: "2"},
		{Role: provider.RoleAssistant, Content: "done"},
		{Role: provider.RoleAssistant, Content: "really"},
	}
	got, _ := json.Marshal(must(google.Contents(provider.Request{Messages: msgs})))
	want := `[{"parts":[{"text":"a"},{"text":"b"}],"role":"user"},` +
		`{"parts":[{"functionCall":{"args":{},"name":"w"},"thoughtSignature":"skip_thought_signature_validator"},{"functionCall":{"args":{},"name":"w"}}],"role":"model"},` +
		`{"parts":[{"functionResponse":{"name":"w","response":{"output":"1"}}},{"functionResponse":{"name":"w","response":{"output":"2"}}}],"role":"user"},` +
		`{"parts":[{"text":"done"},{"text":"really"}],"role":"model"}]`
	if string(got) != want {
		t.Errorf("contents\n got %s\nwant %s", got, want)
	}
}

func TestThoughtsAndSignatures(t *testing.T) {
	brain := providertest.Scripted(
		providertest.Reply{Reasoning: "Thinking about the weather.", Calls: []providertest.Call{{ID: "fc-1", Name: "w", Arguments: `{"city":"Tokyo"}`}, {ID: "fc-2", Name: "w", Arguments: `{"city":"Paris"}`}}},
		providertest.Reply{Reasoning: "Now the answer.", Chunks: []string{"Sun", "ny."}},
	)
	p, fake := setup(t, brain, nil)
	fake.SendCallIDs, fake.Signatures = true, true
	var text, thoughts []string
	events := func(ev provider.Event) {
		switch ev.Kind {
		case provider.TextDelta:
			text = append(text, ev.Text)
		case provider.ReasoningDelta:
			thoughts = append(thoughts, ev.Text)
		}
	}
	req := provider.Request{Messages: []provider.Message{user("weather?")}, Tools: weatherTools, Stream: true}
	resp, err := p.Complete(context.Background(), req, events)
	if err != nil {
		t.Fatal(err)
	}
	if len(text) != 0 || resp.Text != "" || resp.Reasoning != "Thinking about the weather." || strings.Join(thoughts, "") != resp.Reasoning || len(thoughts) < 2 {
		t.Fatalf("text %q thoughts %q resp %+v", text, thoughts, resp)
	}
	if resp.ToolCalls[0].ID != "fc-1" || resp.ToolCalls[1].ID != "fc-2" {
		t.Errorf("ids %+v", resp.ToolCalls)
	}
	wantExtra := map[string]any{"google": map[string]any{"thoughtSignatures": map[string]any{"fc-1": "c2lnLWNhbGw="}, "callIds": []any{"fc-1", "fc-2"}}}
	if diff := cmp.Diff(wantExtra, resp.Extra); diff != "" {
		t.Errorf("extra (-want +got):\n%s", diff)
	}
	// The state goes through JSON; what comes back must still work.
	var stored provider.Message
	b, _ := json.Marshal(resp.Message())
	json.Unmarshal(b, &stored)
	req.Messages = append(req.Messages, stored,
		provider.Message{Role: provider.RoleTool, ToolCallID: "fc-1", ToolName: "w", Content: "sun"},
		provider.Message{Role: provider.RoleTool, ToolCallID: "fc-2", ToolName: "w", Content: "rain"})
	text, thoughts = nil, nil
	resp2, err := p.Complete(context.Background(), req, events)
	if err != nil {
		t.Fatal(err)
	}
	if resp2.Text != "Sunny." || strings.Join(text, "") != "Sunny." || resp2.Reasoning != "Now the answer." {
		t.Errorf("second answer %+v text %q", resp2, text)
	}
	got, _ := json.Marshal(fake.Recorder.Last()["contents"].([]any)[1:])
	want := `[{"parts":[{"functionCall":{"args":{"city":"Tokyo"},"id":"fc-1","name":"w"},"thoughtSignature":"c2lnLWNhbGw="},{"functionCall":{"args":{"city":"Paris"},"id":"fc-2","name":"w"}}],"role":"model"},` +
		`{"parts":[{"functionResponse":{"id":"fc-1","name":"w","response":{"output":"sun"}}},{"functionResponse":{"id":"fc-2","name":"w","response":{"output":"rain"}}}],"role":"user"}]`
	if string(got) != want {
		t.Errorf("contents sent back\n got %s\nwant %s", got, want)
	}
	// A text answer's signature is kept and returned on its text part.
	if diff := cmp.Diff(map[string]any{"google": map[string]any{"textSignature": "c2lnLXRleHQ="}}, resp2.Extra); diff != "" {
		t.Errorf("text extra (-want +got):\n%s", diff)
	}
	parts, _ := json.Marshal(must(google.Contents(provider.Request{Messages: []provider.Message{user("x"), resp2.Message()}}))[1])
	if string(parts) != `{"parts":[{"text":"Sunny.","thoughtSignature":"c2lnLXRleHQ="}],"role":"model"}` {
		t.Errorf("text part sent back: %s", parts)
	}
}

// raw serves one fixed answer, as recorded from the API.
func raw(t *testing.T, status int, contentType, body string) provider.Provider {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", contentType)
		w.WriteHeader(status)
		providertest.WriteSplit(w, body, 5)
	}))
	t.Cleanup(srv.Close)
	p, err := provider.New(provider.Config{ID: "google",
		Credentials: map[string]any{"service": "generative-language-api", "api-key": "k", "address": srv.URL},
		Options:     map[string]any{"model": model}, HTTPClient: srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestStoppedAnswers(t *testing.T) {
	for _, tc := range []struct {
		name, body, want string
	}{
		{"safety", `data: {"candidates": [{"content": {"parts": [{"text": ""}],"role": "model"},"finishReason": "SAFETY","index": 0,"safetyRatings": [{"category": "HARM_CATEGORY_SEXUALLY_EXPLICIT","probability": "NEGLIGIBLE"},{"category": "HARM_CATEGORY_DANGEROUS_CONTENT","probability": "HIGH","blocked": true}]}],"usageMetadata": {"promptTokenCount": 8,"totalTokenCount": 8},"modelVersion": "gemini-2.0-flash"}` + "\r\n\r\n",
			"google: generation stopped for safety reasons (SAFETY) [HARM_CATEGORY_DANGEROUS_CONTENT: HIGH]"},
		{"recitation", `data: {"candidates": [{"content": {"role": "model"},"finishReason": "RECITATION","index": 0}],"modelVersion": "gemini-2.0-flash"}` + "\r\n\r\n",
			"google: generation stopped for recitation reasons (RECITATION)"},
		{"prompt blocked", `data: {"promptFeedback": {"blockReason": "PROHIBITED_CONTENT"},"usageMetadata": {"promptTokenCount": 8,"totalTokenCount": 8},"modelVersion": "gemini-2.0-flash"}` + "\r\n\r\n",
			"google: the prompt was blocked (PROHIBITED_CONTENT)"},
		{"malformed call", `data: {"candidates": [{"content": {},"finishReason": "MALFORMED_FUNCTION_CALL","finishMessage": "Malformed function call: print(default_api.w(city=))","index": 0}]}` + "\r\n\r\n",
			"google: generation stopped (MALFORMED_FUNCTION_CALL): Malformed function call: print(default_api.w(city=))"},
	} {
		p := raw(t, 200, "text/event-stream", tc.body)
		_, err := p.Complete(context.Background(), provider.Request{Messages: []provider.Message{user("x")}, Stream: true}, nil)
		if err == nil || err.Error() != tc.want {
			t.Errorf("%s: got %v\nwant %s", tc.name, err, tc.want)
		}
		if provider.IsRetryable(err) {
			t.Errorf("%s: retryable", tc.name)
		}
	}
	// Text before a SAFETY stop is the answer, marked content_filter.
	p := raw(t, 200, "text/event-stream", `data: {"candidates": [{"content": {"parts": [{"text": "Once"}],"role": "model"},"index": 0}]}`+"\r\n\r\n"+
		`data: {"candidates": [{"content": {"parts": [{"text": ""}],"role": "model"},"finishReason": "SAFETY","index": 0}]}`+"\r\n\r\n")
	resp, err := p.Complete(context.Background(), provider.Request{Stream: true}, nil)
	if err != nil || resp.Text != "Once" || resp.FinishReason != "content_filter" {
		t.Errorf("%+v %v", resp, err)
	}
	// MAX_TOKENS is an answer, not an error.
	p = raw(t, 200, "text/event-stream", `data: {"candidates": [{"content": {"parts": [{"text": "Lo"}],"role": "model"},"finishReason": "MAX_TOKENS","index": 0}],"usageMetadata": {"promptTokenCount": 3,"candidatesTokenCount": 1,"thoughtsTokenCount": 4,"totalTokenCount": 8}}`+"\n\n")
	resp, err = p.Complete(context.Background(), provider.Request{Stream: true}, nil)
	if err != nil || resp.Text != "Lo" || resp.FinishReason != "length" || resp.Usage != (provider.Usage{InputTokens: 3, OutputTokens: 5, ReasoningTokens: 4}) {
		t.Errorf("%+v %v", resp, err)
	}
}

func TestMidStreamError(t *testing.T) {
	p, _ := setup(t, providertest.Scripted(
		providertest.Reply{Chunks: []string{"a"}, StreamError: "The model is overloaded."},
		providertest.Reply{StreamError: "Internal error encountered."},
	), nil)
	var got []string
	_, err := p.Complete(context.Background(), provider.Request{Stream: true}, collect(provider.TextDelta, &got))
	var pe *provider.Error
	if !errors.As(err, &pe) || !strings.Contains(err.Error(), "The model is overloaded.") || !pe.Streamed || pe.Code != "INTERNAL" || provider.IsRetryable(err) || len(got) != 1 {
		t.Fatalf("got %v (%+v) text %q", err, pe, got)
	}
	// Before any text, the same error may be retried.
	_, err = p.Complete(context.Background(), provider.Request{Stream: true}, nil)
	if !errors.As(err, &pe) || !strings.Contains(err.Error(), "Internal error encountered.") || pe.Streamed || !provider.IsRetryable(err) {
		t.Fatalf("got %v (%+v)", err, pe)
	}
}

func TestDroppedStream(t *testing.T) {
	p, _ := setup(t, providertest.Scripted(providertest.Reply{Chunks: []string{"a", "b", "c"}, CutAfter: 2}), nil)
	var got []string
	_, err := p.Complete(context.Background(), provider.Request{Stream: true}, collect(provider.TextDelta, &got))
	var pe *provider.Error
	if !errors.As(err, &pe) || !pe.Streamed || strings.Join(got, "") != "ab" {
		t.Fatalf("err %v text %q", err, got)
	}
	// A stream that ends cleanly without a finishReason is cut short too.
	p = raw(t, 200, "text/event-stream", `data: {"candidates": [{"content": {"parts": [{"text": "Hel"}],"role": "model"},"index": 0}]}`+"\r\n\r\n")
	_, err = p.Complete(context.Background(), provider.Request{Stream: true}, nil)
	if !errors.As(err, &pe) || !pe.Streamed || !strings.Contains(err.Error(), "ended before the answer was complete") {
		t.Fatalf("err %v", err)
	}
}

func TestErrors(t *testing.T) {
	for _, status := range []int{400, 401, 403, 404, 429, 500, 503} {
		p, _ := setup(t, providertest.Scripted(providertest.Reply{Status: status}), nil)
		_, err := p.Complete(context.Background(), provider.Request{Stream: true}, nil)
		var pe *provider.Error
		if !errors.As(err, &pe) || pe.Status != status {
			t.Fatalf("%d: %v", status, err)
		}
		var body struct {
			Error struct{ Message, Status string }
		}
		json.Unmarshal([]byte(googletest.ErrorBodies[status]), &body)
		if !strings.Contains(err.Error(), body.Error.Message) || pe.Code != body.Error.Status || !strings.Contains(err.Error(), fmt.Sprintf("HTTP %d ", status)) {
			t.Errorf("%d: %q lacks the provider's message %q or code %q", status, err, body.Error.Message, pe.Code)
		}
		wantHint := status == 400 || status == 401 || status == 403
		if strings.Contains(err.Error(), "(check provider.credentials.api-key)") != wantHint {
			t.Errorf("%d: hint: %q", status, err)
		}
		if pe.Retryable != (status == 429 || status >= 500) {
			t.Errorf("%d: retryable=%v", status, pe.Retryable)
		}
		if status == 429 && pe.RetryAfter != 33*time.Second {
			t.Errorf("429: RetryAfter %v, want 33s from RetryInfo", pe.RetryAfter)
		}
	}
	// A wrong key is refused by the fake as Google does: 400 API_KEY_INVALID.
	p, fake := setup(t, providertest.Echo, nil)
	fake.APIKey = "another"
	_, err := p.Complete(context.Background(), provider.Request{Stream: true}, nil)
	if err == nil || err.Error() != "google: HTTP 400 Bad Request: API key not valid. Please pass a valid API key. (check provider.credentials.api-key)" {
		t.Errorf("got %v", err)
	}
	// A 400 about the request itself names no credential.
	p = raw(t, 400, "application/json", `{"error":{"code":400,"message":"* GenerateContentRequest.contents: contents is not specified\n","status":"INVALID_ARGUMENT"}}`)
	_, err = p.Complete(context.Background(), provider.Request{}, nil)
	if err == nil || strings.Contains(err.Error(), "check") || !strings.Contains(err.Error(), "contents is not specified") {
		t.Errorf("got %v", err)
	}
}

func TestConfigErrors(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", "")
	t.Setenv("CLOUDSDK_CONFIG", dir)
	noProject := writeFile(t, dir, "np.json", `{"type":"service_account","client_email":"a@b","private_key":"x"}`)
	for _, tc := range []struct {
		name  string
		creds map[string]any
		opts  map[string]any
		want  string
	}{
		{"no service", map[string]any{"api-key": "k"}, nil, "google: provider.credentials.service is not set"},
		{"bad service", map[string]any{"service": "gemini", "api-key": "k"}, nil, `google: provider.credentials.service is "gemini"; expected generative-language-api or vertex-ai-api`},
		{"exclusive", map[string]any{"service": "vertex-ai-api", "region": "us-central1", "api-key": "k", "file_path": "/x"}, nil,
			"google: provider.credentials.api-key, provider.credentials.file-path are mutually exclusive: keep only one of api-key, file-path and file-contents"},
		{"exclusive files", map[string]any{"service": "vertex-ai-api", "region": "r", "file-path": "/x", "file_contents": "{}"}, nil,
			"google: provider.credentials.file-path, provider.credentials.file-contents are mutually exclusive: keep only one of api-key, file-path and file-contents"},
		{"no key", map[string]any{"service": "generative-language-api"}, nil, "google: provider.credentials.api-key is not set"},
		{"file for language api", map[string]any{"service": "generative-language-api", "file-path": "/x"}, nil,
			"google: provider.credentials.file-path is for service vertex-ai-api; service generative-language-api needs provider.credentials.api-key"},
		{"no region", map[string]any{"service": "vertex-ai-api", "file-path": "/x"}, nil, "google: provider.credentials.region is not set"},
		{"missing file", map[string]any{"service": "vertex-ai-api", "region": "r", "file-path": dir + "/none.json"}, nil,
			"google: cannot read provider.credentials.file-path: open " + dir + "/none.json: no such file or directory"},
		{"not json", map[string]any{"service": "vertex-ai-api", "region": "r", "file-contents": "hello"}, nil,
			"google: provider.credentials.file-contents is not a Google credentials JSON file: invalid character 'h' looking for beginning of value"},
		{"other type", map[string]any{"service": "vertex-ai-api", "region": "r", "file-contents": `{"type":"external_account"}`}, nil,
			`google: provider.credentials.file-contents: credentials of type "external_account" are not supported; use a service-account key (type service_account) or ` + "`gcloud auth application-default login`"},
		{"no project", map[string]any{"service": "vertex-ai-api", "region": "r", "file-path": noProject}, nil,
			"google: no project: set provider.credentials.project-id (the credentials in file-path name none)"},
		{"no model", map[string]any{"service": "generative-language-api", "api-key": "k"}, map[string]any{}, "google: provider.options.model is not set (for example gemini-2.5-flash)"},
	} {
		opts := tc.opts
		if opts == nil {
			opts = map[string]any{"model": model}
		}
		_, err := provider.New(provider.Config{ID: "google", Credentials: tc.creds, Options: opts, AllowHostCredentials: true})
		if err == nil || err.Error() != tc.want {
			t.Errorf("%s:\n got %v\nwant %s", tc.name, err, tc.want)
		}
	}
}

func TestSchema(t *testing.T) {
	in := map[string]any{
		"type": "object", "$schema": "x", "additionalProperties": false, "$defs": map[string]any{},
		"properties": map[string]any{
			"mode":  map[string]any{"const": "fast"},
			"tags":  map[string]any{"type": "array", "items": map[string]any{"type": "string", "examples": []any{"a"}}, "maxItems": 3},
			"n":     map[string]any{"type": []any{"integer", "string"}, "minimum": 1},
			"level": map[string]any{"enum": []any{1, 2}, "type": "integer"},
			"x":     map[string]any{"oneOf": []any{map[string]any{"type": "string", "format": "date-time"}, map[string]any{"type": "null"}}},
		},
		"required": []any{"mode"},
	}
	want := map[string]any{
		"type": "object",
		"properties": map[string]any{
			"mode":  map[string]any{"enum": []any{"fast"}},
			"tags":  map[string]any{"type": "array", "items": map[string]any{"type": "string"}, "maxItems": 3},
			"n":     map[string]any{"anyOf": []any{map[string]any{"type": "integer"}, map[string]any{"type": "string"}}, "minimum": 1},
			"level": map[string]any{"enum": []any{"1", "2"}, "type": "integer"},
			"x":     map[string]any{"type": "string", "format": "date-time", "nullable": true},
		},
		"required": []any{"mode"},
	}
	if diff := cmp.Diff(want, google.Schema(in)); diff != "" {
		t.Errorf("schema (-want +got):\n%s", diff)
	}
}

// TestToolLoopLikeEcho runs the exchange the cross-provider test runs:
// a call, its result, the final answer, with the same text Echo gives.
func TestToolLoopLikeEcho(t *testing.T) {
	p, _ := setup(t, providertest.Echo, nil)
	tools := []tool.Spec{{Name: "get-current-weather", Parameters: tool.DefaultParameters()}}
	req := provider.Request{System: "s", Messages: []provider.Message{user(`call get-current-weather {"location":"Tokyo"}`)}, Tools: tools, Stream: true}
	resp, err := p.Complete(context.Background(), req, nil)
	if err != nil || len(resp.ToolCalls) != 1 || resp.ToolCalls[0].Arguments != `{"location":"Tokyo"}` {
		t.Fatalf("%+v %v", resp, err)
	}
	c := resp.ToolCalls[0]
	req.Messages = append(req.Messages, resp.Message(), provider.Message{Role: provider.RoleTool, ToolCallID: c.ID, ToolName: c.Name, Content: "35.8°C"})
	resp, err = p.Complete(context.Background(), req, nil)
	if err != nil || resp.Text != "tool get-current-weather said: 35.8°C" {
		t.Fatalf("%+v %v", resp, err)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestThinkingAndCachedTokens reads Gemini's thoughtsTokenCount (reasoning,
// part of the output) and cachedContentTokenCount (part of the prompt).
func TestThinkingAndCachedTokens(t *testing.T) {
	p := raw(t, 200, "application/json", `{"candidates":[{"content":{"parts":[{"text":"Hi"}],"role":"model"},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":5000,"candidatesTokenCount":40,"totalTokenCount":5540,"cachedContentTokenCount":4096,"thoughtsTokenCount":500,"promptTokensDetails":[{"modality":"TEXT","tokenCount":5000}]},"modelVersion":"gemini-2.5-flash","responseId":"r1"}`)
	resp, err := p.Complete(context.Background(), provider.Request{Messages: []provider.Message{{Role: provider.RoleUser, Content: "hi"}}}, nil)
	want := provider.Usage{InputTokens: 5000, OutputTokens: 540, ReasoningTokens: 500, CacheReadTokens: 4096}
	if err != nil || resp.Usage != want {
		t.Fatalf("usage %+v (%v), want %+v", resp, err, want)
	}
}
