package openaiapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/nbots/nb/bot"
	"github.com/nbots/nb/provider"
	"github.com/nbots/nb/provider/providertest"
	"github.com/nbots/nb/server"
)

// Every failure is answered in OpenAI's shape with its status.
func TestChatErrors(t *testing.T) {
	brain := func(turn providertest.Turn) providertest.Reply {
		switch turn.LastUser() {
		case "fail":
			return providertest.Reply{Status: 500}
		case "unauthorized":
			return providertest.Reply{Status: 401}
		case "slow down":
			return providertest.Reply{Status: 429, RetryAfter: "20"}
		}
		return providertest.Echo(turn)
	}
	s := newTestServer(t, brain, map[string]string{"echo": cartridgeOn("openai", weatherTool)}, Options{MaxBody: 4096})
	user := `"messages":[{"role":"user","content":"hi"}]`
	cases := []struct {
		name, body string
		status     int
		want       string // the error object, exactly
	}{
		{"unknown model", `{"model":"nope",` + user + `}`, 404,
			`{"message":"The model 'nope' does not exist or you do not have access to it.","type":"invalid_request_error","param":"model","code":"model_not_found"}`},
		{"model not allowed", `{"model":"forbidden",` + user + `}`, 403,
			`{"message":"this token may not use the cartridge forbidden","type":"invalid_request_error","param":"model","code":"model_not_allowed"}`},
		{"no model", `{` + user + `}`, 400,
			`{"message":"model is required: the id of a cartridge (GET /v1/models lists them)","type":"invalid_request_error","param":"model","code":null}`},
		{"not JSON", `{"model":`, 400,
			`{"message":"the request body is not valid JSON: unexpected end of JSON input","type":"invalid_request_error","param":null,"code":null}`},
		{"not an object", `[1]`, 400,
			`{"message":"the request body must be a JSON object, not array","type":"invalid_request_error","param":null,"code":null}`},
		{"a sampling setting", `{"model":"echo","temperature":"hot",` + user + `}`, 400,
			`{"message":"invalid value for temperature: expected a number, got JSON string","type":"invalid_request_error","param":"temperature","code":null}`},
		{"empty body", ``, 400,
			`{"message":"the request has no body: send a JSON object","type":"invalid_request_error","param":null,"code":null}`},
		{"wrong type", `{"model":"echo","messages":"hi"}`, 400,
			`{"message":"invalid value for messages: expected an array, got JSON string","type":"invalid_request_error","param":"messages","code":null}`},
		{"no messages", `{"model":"echo","messages":[]}`, 400,
			`{"message":"messages must hold at least one message","type":"invalid_request_error","param":"messages","code":null}`},
		{"n", `{"model":"echo","n":2,` + user + `}`, 400,
			`{"message":"n must be 1: nb answers with one choice","type":"invalid_request_error","param":"n","code":null}`},
		{"unknown role", `{"model":"echo","messages":[{"role":"robot","content":"hi"}]}`, 400,
			`{"message":"unknown role \"robot\": expected system, developer, user, assistant or tool","type":"invalid_request_error","param":"messages[0].role","code":null}`},
		{"result without call", `{"model":"echo","messages":[{"role":"user","content":"hi"},{"role":"tool","tool_call_id":"x","content":"r"}]}`, 400,
			`{"message":"no assistant message before this one has a tool call with id \"x\"","type":"invalid_request_error","param":"messages[1].tool_call_id","code":null}`},
		{"tool named as the cartridge's", `{"model":"echo","tools":[{"type":"function","function":{"name":"get_weather"}}],` + user + `}`, 400,
			`{"message":"the function name \"get_weather\" is taken by a tool of cartridge Test: rename the client's function","type":"invalid_request_error","param":"tools[0].function.name","code":null}`},
		{"bad tool name", `{"model":"echo","tools":[{"type":"function","function":{"name":"a b"}}],` + user + `}`, 400,
			`{"message":"invalid function name \"a b\": use letters, digits, '_' and '-' (at most 64, not starting with a digit or '-')","type":"invalid_request_error","param":"tools[0].function.name","code":null}`},
		{"http image", `{"model":"echo","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"http://example.com/a.png"}}]}]}`, 400,
			`{"message":"unsupported image URL \"http://example.com/a.png\": send a data: URL (base64) or an https URL","type":"invalid_request_error","param":"messages[0].content[0].image_url","code":null}`},
		{"audio", `{"model":"echo","messages":[{"role":"user","content":[{"type":"input_audio","input_audio":{}}]}]}`, 400,
			`{"message":"unsupported content part type \"input_audio\": nb takes text and images","type":"invalid_request_error","param":"messages[0].content[0].type","code":null}`},
		{"too large", `{"model":"echo","messages":[{"role":"user","content":"` + strings.Repeat("x", 5000) + `"}]}`, 413,
			`{"message":"the request body is larger than this server accepts (4096 bytes)","type":"invalid_request_error","param":null,"code":"request_too_large"}`},
		{"provider failed", `{"model":"echo","messages":[{"role":"user","content":"fail"}]}`, 502,
			`{"message":"model echo: the provider failed: openai: HTTP 500 Internal Server Error: The server had an error while processing your request. Sorry about that!","type":"upstream_error","param":null,"code":"server_error"}`},
		{"provider refused the key", `{"model":"echo","messages":[{"role":"user","content":"unauthorized"}]}`, 502,
			`{"message":"model echo: the provider openai refused the credentials of this cartridge (HTTP 401); the server's operator can read why in its log","type":"upstream_error","param":null,"code":"invalid_api_key"}`},
		{"provider over its limit", `{"model":"echo","messages":[{"role":"user","content":"slow down"}]}`, 429,
			`{"message":"model echo: the provider is over its rate limit: openai: HTTP 429 Too Many Requests: Rate limit reached for gpt-4o in organization org-test on requests per min (RPM): Limit 3, Used 3, Requested 1. Please try again in 20s.","type":"rate_limit_error","param":null,"code":"rate_limit_exceeded"}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, stream := range []string{"", `"stream":true,`} {
				body := tc.body
				if stream != "" && strings.HasPrefix(body, "{") && len(body) > 1 {
					body = "{" + stream + body[1:]
				}
				resp, got := s.post(t, "/v1/chat/completions", body)
				if resp.StatusCode != tc.status {
					t.Errorf("%sstatus %d, want %d: %s", stream, resp.StatusCode, tc.status, got)
				}
				if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
					t.Errorf("Content-Type %q", ct)
				}
				if want := `{"error":` + tc.want + "}\n"; got != want {
					t.Errorf("%sbody\n%s\nwant\n%s", stream, got, want)
				}
			}
		})
	}
}

// A stream that fails after it began ends with an error event, which
// OpenAI's SDKs raise, and no [DONE].
func TestChatStreamFailsMidway(t *testing.T) {
	brain := providertest.Scripted(providertest.Reply{Chunks: []string{"Hel", "lo"}, StreamError: "The model crashed."})
	s := newTestServer(t, brain, map[string]string{"echo": cartridgeOn("openai", "")}, Options{})
	resp, body := s.post(t, "/v1/chat/completions", `{"model":"echo","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	events := readSSE(t, body)
	last := events[len(events)-1].Data
	if !strings.HasPrefix(last, `{"error":{"message":"model echo: the provider failed: openai: error in the stream: The model crashed.","type":"upstream_error"`) {
		t.Errorf("last event %s", last)
	}
	if strings.Contains(body, "[DONE]") {
		t.Error("a failed stream ends with [DONE]")
	}
}

// An exchange past the server's deadline is a 504.
func TestChatTimeout(t *testing.T) {
	brain := providertest.Scripted(providertest.Reply{Chunks: []string{"a", "b"}, Delay: 200 * time.Millisecond})
	f := startFakes(t, brain)
	h := New(newCatalog(t, f, map[string]string{"slow": cartridgeOn("openai", "")}), Options{})
	deadline := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 50*time.Millisecond)
		defer cancel()
		h.ServeHTTP(w, r.WithContext(ctx))
	})
	srv := httptest.NewServer(deadline)
	defer srv.Close()
	ts := &testServer{Server: srv}
	// Streamed, so the fake waits before its first chunk; nothing was sent
	// yet when the deadline passes.
	resp, body := ts.post(t, "/v1/chat/completions", `{"model":"slow","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	if resp.StatusCode != http.StatusGatewayTimeout || !strings.Contains(body, `"type":"server_error","param":null,"code":"timeout"`) {
		t.Errorf("status %d: %s", resp.StatusCode, body)
	}
}

// The errors of the runtime map to their statuses.
func TestAPIErrorStatuses(t *testing.T) {
	cases := []struct {
		err        error
		status     int
		retryAfter string
	}{
		{&bot.BusyError{Key: "k"}, 429, "1"},
		{&statusError{429, "over the limit"}, 429, ""},
		{&statusError{500, "broken cartridge"}, 500, ""},
		{fmt.Errorf("wrapped: %w", &provider.Error{Provider: "openai", Status: 503, Message: "down"}), 502, ""},
		{&provider.Error{Provider: "openai", Status: 429, Message: "slow down", RetryAfter: 20 * time.Second}, 429, "20"},
		{&provider.Error{Provider: "openai", Status: 429, Message: "slow down"}, 429, "1"},
		{fmt.Errorf("ask: %w", context.DeadlineExceeded), 504, ""},
		{fmt.Errorf("send: %w", errors.ErrUnsupported), 400, ""},
		{&bot.PanicError{Value: "boom"}, 500, ""},
		{errors.New("anything else"), 500, ""},
	}
	for _, tc := range cases {
		e := apiError(tc.err, "m", "openai")
		rec := httptest.NewRecorder()
		WriteError(rec, e)
		if rec.Code != tc.status || rec.Header().Get("Retry-After") != tc.retryAfter {
			t.Errorf("%v: status %d, Retry-After %q", tc.err, rec.Code, rec.Header().Get("Retry-After"))
		}
	}
}

// Unknown paths under /v1/ are 404s in OpenAI's shape.
func TestUnknownPath(t *testing.T) {
	s := newTestServer(t, providertest.Echo, map[string]string{"echo": cartridgeOn("openai", "")}, Options{})
	resp, body := s.post(t, "/v1/embeddings", `{}`)
	if resp.StatusCode != 404 || !strings.HasPrefix(body, `{"error":{"message":"unknown path POST /v1/embeddings`) {
		t.Errorf("status %d: %s", resp.StatusCode, body)
	}
}

// Each exchange is admitted by the server: a refusal is the answer, and
// every admitted run ends.
func TestAdmit(t *testing.T) {
	var runs, ended int
	refuse := false
	admit := func(ctx context.Context, detached bool) (context.Context, func(), error) {
		if refuse {
			return nil, nil, &statusError{http.StatusTooManyRequests, "this token already has its maximum of 1 runs in progress"}
		}
		runs++
		return ctx, func() { ended++ }, nil
	}
	s := newTestServer(t, providertest.Echo, map[string]string{"echo": cartridgeOn("openai", "")}, Options{Admit: admit})
	body := `{"model":"echo","messages":[{"role":"user","content":"hi"}]}`
	if resp, got := s.post(t, "/v1/chat/completions", body); resp.StatusCode != 200 || runs != 1 || ended != 1 {
		t.Errorf("status %d, runs %d, ended %d: %s", resp.StatusCode, runs, ended, got)
	}
	refuse = true
	resp, got := s.post(t, "/v1/chat/completions", body)
	if resp.StatusCode != 429 || !strings.Contains(got, `"type":"rate_limit_error","param":null,"code":"rate_limit_exceeded"`) {
		t.Errorf("status %d: %s", resp.StatusCode, got)
	}
}

// A run the server stops says why: its deadline (504), the server
// stopping (503).
func TestRunStoppedByTheServer(t *testing.T) {
	brain := providertest.Scripted(providertest.Reply{Chunks: []string{"a"}, Delay: 300 * time.Millisecond}, providertest.Reply{Chunks: []string{"a"}, Delay: 300 * time.Millisecond})
	var cause error
	admit := func(ctx context.Context, detached bool) (context.Context, func(), error) {
		run, cancel := context.WithTimeoutCause(ctx, 50*time.Millisecond, cause)
		return run, cancel, nil
	}
	s := newTestServer(t, brain, map[string]string{"slow": cartridgeOn("openai", "")}, Options{Admit: admit})
	body := `{"model":"slow","stream":true,"messages":[{"role":"user","content":"hi"}]}`
	cause = fmt.Errorf("%w (--run-timeout)", server.ErrRunTimeout) // as nb serve names the limit
	resp, got := s.post(t, "/v1/chat/completions", body)
	if resp.StatusCode != 504 || !strings.Contains(got, `"message":"model slow: the run took longer than the server's limit per run (--run-timeout)","type":"server_error","param":null,"code":"timeout"`) {
		t.Errorf("status %d: %s", resp.StatusCode, got)
	}
	cause = server.ErrShutdown
	resp, got = s.post(t, "/v1/chat/completions", body)
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" || !strings.Contains(got, `"code":"shutting_down"`) {
		t.Errorf("status %d: %s", resp.StatusCode, got)
	}
}

// The server's own errors keep their status, code and Retry-After.
func TestServerErrors(t *testing.T) {
	for _, tc := range []struct {
		err              *server.Error
		want, retryAfter string
	}{
		{&server.Error{Status: 429, Code: "too_many_runs", Message: "max", RetryAfter: 2 * time.Second}, `{"error":{"message":"max","type":"rate_limit_error","param":null,"code":"too_many_runs"}}`, "2"},
		{&server.Error{Status: 404, Code: "model_not_found", Message: "no cartridge"}, `{"error":{"message":"no cartridge","type":"invalid_request_error","param":"model","code":"model_not_found"}}`, ""},
		{&server.Error{Status: 500, Message: "the cartridge \"x\" failed to load"}, `{"error":{"message":"the cartridge \"x\" failed to load","type":"server_error","param":null,"code":null}}`, ""},
	} {
		rec := httptest.NewRecorder()
		WriteError(rec, apiError(fmt.Errorf("bot: %w", tc.err), "m", ""))
		if got := strings.TrimSpace(rec.Body.String()); got != tc.want || rec.Code != tc.err.Status || rec.Header().Get("Retry-After") != tc.retryAfter {
			t.Errorf("%d %s %q", rec.Code, got, rec.Header().Get("Retry-After"))
		}
	}
}
