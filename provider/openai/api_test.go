package openai_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/nbots/nb/provider"
	"github.com/nbots/nb/provider/openai"
	"github.com/nbots/nb/provider/openai/openaitest"
	"github.com/nbots/nb/provider/providertest"
	"github.com/nbots/nb/tool"
)

// toServer sends every request, whatever its address, to one test server,
// so a client configured for https://api.openai.com reaches the fakes.
type toServer struct {
	srv   *url.URL
	mu    sync.Mutex
	paths []string // host and path of each request, as the client addressed it
}

func (t *toServer) RoundTrip(r *http.Request) (*http.Response, error) {
	t.mu.Lock()
	t.paths = append(t.paths, r.URL.Host+r.URL.Path)
	t.mu.Unlock()
	r = r.Clone(r.Context())
	r.URL.Scheme, r.URL.Host = t.srv.Scheme, t.srv.Host
	return http.DefaultTransport.RoundTrip(r)
}

func (t *toServer) last() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.paths) == 0 {
		return ""
	}
	return t.paths[len(t.paths)-1]
}

// TestResponsesByDefault: on OpenAI's own address a reasoning model
// (gpt-5…, o1/o3/o4…, …codex…) speaks the Responses API unless the
// cartridge says otherwise, and its reasoning items travel across tool
// rounds with their encrypted content; other models, other addresses,
// provider.options.api: chat and settings only Chat Completions knows
// keep Chat Completions.
func TestResponsesByDefault(t *testing.T) {
	brain := func(providertest.Turn) providertest.Reply { return providertest.Reply{Chunks: []string{"ok"}} }
	chat, resp := openaitest.New(brain), openaitest.NewResponses(brain)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/v1/responses") {
			resp.ServeHTTP(w, r)
		} else {
			chat.ServeHTTP(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	tr := &toServer{srv: u}
	client := &http.Client{Transport: tr}

	const official, other = "api.openai.com/v1/responses", "api.openai.com/v1/chat/completions"
	cases := []struct {
		name     string
		address  string
		settings map[string]any
		options  map[string]any
		want     string
	}{
		{"gpt-5", "", map[string]any{"model": "gpt-5"}, nil, official},
		{"gpt-5-mini", "", map[string]any{"model": "gpt-5-mini"}, nil, official},
		{"gpt-5.1-codex", "", map[string]any{"model": "gpt-5.1-codex"}, nil, official},
		{"codex-mini-latest", "https://api.openai.com/", map[string]any{"model": "codex-mini-latest"}, nil, official},
		{"o1", "", map[string]any{"model": "o1"}, nil, official},
		{"o3-pro", "", map[string]any{"model": "o3-pro"}, nil, official},
		{"o4-mini", "", map[string]any{"model": "o4-mini", "max_completion_tokens": 100, "reasoning_effort": "low"}, nil, official},
		{"gpt-4o", "", map[string]any{"model": "gpt-4o"}, nil, other},
		{"gpt-4.1", "", map[string]any{"model": "gpt-4.1"}, nil, other},
		{"omni-moderation", "", map[string]any{"model": "omni-moderation-latest"}, nil, other},
		{"api chat", "", map[string]any{"model": "gpt-5"}, map[string]any{"api": "chat"}, other},
		{"chat-only setting", "", map[string]any{"model": "gpt-5", "response_format": map[string]any{"type": "json_object"}}, nil, other},
		{"compatible server", "https://openrouter.ai/api", map[string]any{"model": "openai/gpt-5"}, nil, "openrouter.ai/api/v1/chat/completions"},
		{"api responses elsewhere", "https://openrouter.ai/api", map[string]any{"model": "gpt-4o"}, map[string]any{"api": "responses"}, "openrouter.ai/api/v1/responses"},
	}
	for _, c := range cases {
		creds := map[string]any{"access-token": "sk-test"}
		if c.address != "" {
			creds["address"] = c.address
		}
		p, err := provider.New(provider.Config{ID: "openai", Credentials: creds, Settings: c.settings, Options: c.options, HTTPClient: client})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if _, err := p.Complete(context.Background(), provider.Request{Stream: true, Messages: []provider.Message{{Role: provider.RoleUser, Content: "hi"}}}, nil); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := tr.last(); got != c.want {
			t.Errorf("%s: sent to %s, want %s", c.name, got, c.want)
		}
		if c.name == "o4-mini" { // the Chat Completions names were moved
			body := resp.Recorder.Last()
			if body["max_output_tokens"] != float64(100) || body["reasoning"].(map[string]any)["effort"] != "low" || body["max_completion_tokens"] != nil || body["reasoning_effort"] != nil {
				t.Errorf("renamed settings: %v", body)
			}
		}
	}
}

// TestResponsesByDefaultCarriesReasoning: a gpt-5 cartridge with nothing
// but its model, on OpenAI's address, keeps its reasoning across two tool
// rounds: each request sends back the reasoning items it was given, with
// their encrypted content, store false.
func TestResponsesByDefaultCarriesReasoning(t *testing.T) {
	brain := providertest.Scripted(
		providertest.Reply{Reasoning: "Look at a.go first.", Calls: []providertest.Call{{Name: "read_file", Arguments: `{"path":"a.go"}`}}},
		providertest.Reply{Reasoning: "Then b.go.", Calls: []providertest.Call{{Name: "read_file", Arguments: `{"path":"b.go"}`}}},
		providertest.Reply{Chunks: []string{"Done."}},
	)
	fake := openaitest.NewResponses(brain)
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	p, err := provider.New(provider.Config{ID: "openai", Credentials: map[string]any{"access-token": "sk-test"},
		Settings: map[string]any{"model": "gpt-5"}, HTTPClient: &http.Client{Transport: &toServer{srv: u}}})
	if err != nil {
		t.Fatal(err)
	}
	req := provider.Request{Stream: true, Messages: []provider.Message{{Role: provider.RoleUser, Content: "Read both."}},
		Tools: []tool.Spec{{Name: "read_file", Parameters: map[string]any{"type": "object"}}}}
	for round := 1; ; round++ {
		r, err := p.Complete(context.Background(), req, nil)
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if len(r.ToolCalls) == 0 {
			if r.Text != "Done." {
				t.Errorf("answer %q", r.Text)
			}
			break
		}
		req.Messages = append(req.Messages, r.Message())
		for _, c := range r.ToolCalls {
			req.Messages = append(req.Messages, provider.Message{Role: provider.RoleTool, ToolCallID: c.ID, ToolName: c.Name, Content: "package x"})
		}
	}
	body := fake.Recorder.Last()
	if body["store"] != false || !strings.Contains(strings.Join(anyStrings(body["include"]), ","), "reasoning.encrypted_content") {
		t.Errorf("store %v include %v", body["store"], body["include"])
	}
	var reasoning []string
	for _, it := range body["input"].([]any) {
		m := it.(map[string]any)
		if m["type"] == "reasoning" {
			enc, _ := m["encrypted_content"].(string)
			reasoning = append(reasoning, enc)
		}
	}
	if len(reasoning) != 2 || reasoning[0] == "" || reasoning[1] == "" {
		t.Errorf("reasoning items sent back: %q", reasoning)
	}
}

func anyStrings(v any) []string {
	var out []string
	l, _ := v.([]any)
	for _, x := range l {
		s, _ := x.(string)
		out = append(out, s)
	}
	return out
}

func TestReasoningModel(t *testing.T) {
	for m, want := range map[string]bool{"gpt-5": true, "GPT-5-nano": true, "gpt-5.2": true, "o1": true, "o1-mini": true, "o3": true, "o4-mini-deep-research": true,
		"gpt-5-codex": true, "codex-mini-latest": true, "openai/o3": true, "gpt-4o": false, "gpt-4.1-mini": false, "o1x": false, "omni": false, "": false} {
		if got := openai.ReasoningModel(m); got != want {
			t.Errorf("ReasoningModel(%q) = %v", m, got)
		}
	}
}
