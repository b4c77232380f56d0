package openaiapi

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nbots/nb/provider/providertest"
)

// clientToolsBody is a request body of the API at path with n distinct
// client function tools.
func clientToolsBody(path string, n int) string { return toolsBody(path, n, true) }

// toolsBody is clientToolsBody; without full, the tools have only a name
// (the shape of the 1.46 MB of 30,000 tools).
func toolsBody(path string, n int, full bool) string {
	var b strings.Builder
	b.WriteString(`{"model":"echo","tools":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		switch {
		case !full && path == "/v1/responses":
			fmt.Fprintf(&b, `{"type":"function","name":"t%d"}`, i)
		case !full:
			fmt.Fprintf(&b, `{"type":"function","function":{"name":"t%d"}}`, i)
		case path == "/v1/responses":
			fmt.Fprintf(&b, `{"type":"function","name":"client_tool_%d","description":"a tool of the client","parameters":{"type":"object","properties":{}}}`, i)
		default:
			fmt.Fprintf(&b, `{"type":"function","function":{"name":"client_tool_%d","description":"a tool of the client","parameters":{"type":"object","properties":{}}}}`, i)
		}
	}
	if path == "/v1/responses" {
		b.WriteString(`],"input":"hi"}`)
	} else {
		b.WriteString(`],"messages":[{"role":"user","content":"hi"}]}`)
	}
	return b.String()
}

// A body of 30,000 client tools (1.4 MB, well within the body limit) is
// refused at once in OpenAI's shape, on both endpoints; before, checking
// their names took each name against every earlier one (about a minute
// of CPU).
func TestClientToolsCapped(t *testing.T) {
	s := newTestServer(t, providertest.Echo, map[string]string{"echo": cartridgeOn("openai", "")}, Options{})
	for _, path := range []string{"/v1/chat/completions", "/v1/responses"} {
		body := toolsBody(path, 30_000, false)
		start := time.Now()
		resp, got := s.post(t, path, body)
		took := time.Since(start)
		want := `{"error":{"message":"Invalid 'tools': array too long. Expected an array with maximum length 512, but got an array with length 30000 instead.","type":"invalid_request_error","param":"tools","code":"array_above_max_length"}}` + "\n"
		if resp.StatusCode != http.StatusBadRequest || got != want {
			t.Errorf("%s: status %d, body\n%s\nwant\n%s", path, resp.StatusCode, got, want)
		}
		// Reading 1.4 MB of JSON takes tens of milliseconds, under the
		// race detector a few seconds.
		limit := 2 * time.Second
		if raceEnabled {
			limit = 20 * time.Second
		}
		if took > limit {
			t.Errorf("%s: 30,000 tools answered in %v", path, took)
		}
		t.Logf("%s: %d bytes, 30,000 tools answered in %v", path, len(body), took)
	}
}

// Up to the cap, the names are checked in linear time: 512 tools pass,
// and a duplicate (as OpenAI's tool names compare) at the end is found.
func TestClientToolsChecked(t *testing.T) {
	s := newTestServer(t, providertest.Echo, map[string]string{"echo": cartridgeOn("openai", "")}, Options{})
	for _, path := range []string{"/v1/chat/completions", "/v1/responses"} {
		if resp, got := s.post(t, path, clientToolsBody(path, MaxClientTools)); resp.StatusCode != 200 {
			t.Errorf("%s: %d tools: status %d: %s", path, MaxClientTools, resp.StatusCode, got)
		}
		body := clientToolsBody(path, MaxClientTools-1)
		body = strings.Replace(body, `],`, `,{"type":"function","function":{"name":"Client-Tool-7"},"name":"Client-Tool-7"}],`, 1)
		resp, got := s.post(t, path, body)
		param := "tools[511].function.name"
		if path == "/v1/responses" {
			param = "tools[511].name"
		}
		if resp.StatusCode != 400 || !strings.Contains(got, `"message":"two functions are named \"Client-Tool-7\"","type":"invalid_request_error","param":"`+param+`"`) {
			t.Errorf("%s: duplicate: status %d: %s", path, resp.StatusCode, got)
		}
	}
}

// Checking a request counts against the client's limits: a client over
// them is refused before its request is looked at, and the check happens
// inside the admitted run, which the client going away cancels.
func TestPreparationAdmitted(t *testing.T) {
	var admitted, ended int
	refuse := false
	admit := func(ctx context.Context, detached bool) (context.Context, func(), error) {
		if refuse {
			return nil, nil, &statusError{http.StatusTooManyRequests, "this token already has its maximum of 1 runs in progress"}
		}
		admitted++
		return ctx, func() { ended++ }, nil
	}
	s := newTestServer(t, providertest.Echo, map[string]string{"echo": cartridgeOn("openai", "")}, Options{Admit: admit})
	for _, path := range []string{"/v1/chat/completions", "/v1/responses"} {
		admitted, ended, refuse = 0, 0, false
		// A request the checks refuse was admitted (and ended) all the same.
		resp, got := s.post(t, path, toolsBody(path, 30_000, false))
		if resp.StatusCode != 400 || admitted != 1 || ended != 1 {
			t.Errorf("%s: status %d, admitted %d, ended %d: %s", path, resp.StatusCode, admitted, ended, got)
		}
		// One admission per request, not one for its checks and one for
		// its run.
		resp, got = s.post(t, path, clientToolsBody(path, 2))
		if resp.StatusCode != 200 || admitted != 2 || ended != 2 {
			t.Errorf("%s: status %d, admitted %d, ended %d: %s", path, resp.StatusCode, admitted, ended, got)
		}
		// Over its limits, a client is refused before its tools are read.
		refuse = true
		resp, got = s.post(t, path, toolsBody(path, 30_000, false))
		if resp.StatusCode != 429 {
			t.Errorf("%s: over the limits: status %d: %s", path, resp.StatusCode, got)
		}
	}
}

// A client gone stops the checks of its request.
func TestPreparationStopsWhenTheClientGoes(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	s := newTestServer(t, providertest.Echo, map[string]string{"echo": cartridgeOn("openai", "")}, Options{})
	b, err := s.h.catalog.Bot(context.Background(), "echo")
	if err != nil {
		t.Fatal(err)
	}
	tools := make([]chatTool, 100)
	for i := range tools {
		tools[i].Type = "function"
		tools[i].Function.Name = fmt.Sprintf("t%d", i)
	}
	if _, err := chatTools(ctx, b, tools); err == nil || !strings.Contains(err.Error(), "canceled") {
		t.Errorf("chatTools on a cancelled request: %v", err)
	}
}

// A tools value of the wrong shape names the field at fault.
func TestClientToolsShape(t *testing.T) {
	s := newTestServer(t, providertest.Echo, map[string]string{"echo": cartridgeOn("openai", "")}, Options{})
	for body, want := range map[string]string{
		`{"model":"echo","tools":"x","messages":[{"role":"user","content":"hi"}]}`:                                         `{"error":{"message":"tools must be an array of tool objects","type":"invalid_request_error","param":"tools","code":null}}`,
		`{"model":"echo","tools":[{"type":"function"},7],"messages":[{"role":"user","content":"hi"}]}`:                     `{"error":{"message":"a tool must be an object","type":"invalid_request_error","param":"tools[1]","code":null}}`,
		`{"model":"echo","tools":[{"type":"function","function":{"name":7}}],"messages":[{"role":"user","content":"hi"}]}`: `{"error":{"message":"invalid value for tools[0].function.name: expected a string, got JSON number","type":"invalid_request_error","param":"tools[0].function.name","code":null}}`,
	} {
		if resp, got := s.post(t, "/v1/chat/completions", body); resp.StatusCode != 400 || strings.TrimSpace(got) != want {
			t.Errorf("%s: status %d\n%s\nwant\n%s", body, resp.StatusCode, got, want)
		}
	}
}
