package memory

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"

	"github.com/nbots/nb/gateway/modelcall"
	"github.com/nbots/nb/provider"
	"github.com/nbots/nb/provider/anthropic"
	"github.com/nbots/nb/provider/anthropic/anthropictest"
	"github.com/nbots/nb/provider/cohere"
	"github.com/nbots/nb/provider/cohere/coheretest"
	"github.com/nbots/nb/provider/google"
	"github.com/nbots/nb/provider/google/googletest"
	"github.com/nbots/nb/provider/mistral"
	"github.com/nbots/nb/provider/mistral/mistraltest"
	"github.com/nbots/nb/provider/ollama"
	"github.com/nbots/nb/provider/ollama/ollamatest"
	"github.com/nbots/nb/provider/openai"
	"github.com/nbots/nb/provider/openai/openaitest"
	"github.com/nbots/nb/provider/providertest"
)

// TestConsolidationForcesSaveMemory: consolidation through each provider
// (over its fake) forces the save_memory call in that API's own form, as
// nanobot forces it with tool_choice; Ollama's /api/chat cannot force a
// call, so nothing is sent for it and the model chooses.
func TestConsolidationForcesSaveMemory(t *testing.T) {
	brain := func(providertest.Turn) providertest.Reply {
		return providertest.Reply{Calls: []providertest.Call{{ID: "callAbc12", Name: "save_memory",
			Arguments: `{"history_entry": "[2026-03-15 14:30] Asked.", "memory_update": "# Memory\n"}`}}}
	}
	type fake struct {
		handler  http.Handler
		recorder *providertest.Recorder
	}
	for _, tc := range []struct {
		name  string
		fake  func() fake
		new   func(provider.Config) (provider.Provider, error)
		cfg   func(url string) provider.Config
		field string
		want  string
	}{
		{"openai", func() fake { f := openaitest.New(brain); return fake{f, f.Recorder} }, openai.New,
			func(u string) provider.Config {
				return provider.Config{ID: "openai", Credentials: map[string]any{"address": u, "access-token": "k"}, Settings: map[string]any{"model": "gpt-4o"}}
			},
			"tool_choice", `{"function":{"name":"save_memory"},"type":"function"}`},
		{"anthropic", func() fake { f := anthropictest.New(brain); return fake{f, f.Recorder} }, anthropic.New,
			func(u string) provider.Config {
				return provider.Config{ID: "anthropic", Credentials: map[string]any{"address": u, "api-key": "k"}, Options: map[string]any{"cache": false},
					Settings: map[string]any{"model": "claude-sonnet-4-5", "max_tokens": 1024}}
			},
			"tool_choice", `{"name":"save_memory","type":"tool"}`},
		{"google", func() fake { f := googletest.New(brain); return fake{f, f.Recorder} }, google.New,
			func(u string) provider.Config {
				return provider.Config{ID: "google", Credentials: map[string]any{"service": "generative-language-api", "api-key": "k", "address": u},
					Options: map[string]any{"model": "gemini-2.5-flash"}}
			},
			"toolConfig", `{"functionCallingConfig":{"allowedFunctionNames":["save_memory"],"mode":"ANY"}}`},
		{"mistral", func() fake { f := mistraltest.New(brain); return fake{f, f.Recorder} }, mistral.New,
			func(u string) provider.Config {
				return provider.Config{ID: "mistral", Credentials: map[string]any{"address": u, "api-key": "k"}, Settings: map[string]any{"model": "mistral-large-latest"}}
			},
			"tool_choice", `{"function":{"name":"save_memory"},"type":"function"}`},
		{"cohere", func() fake { f := coheretest.New(brain); return fake{f, f.Recorder} }, cohere.New,
			func(u string) provider.Config {
				return provider.Config{ID: "cohere", Credentials: map[string]any{"address": u, "api-key": "k"}, Options: map[string]any{"api": "v2"},
					Settings: map[string]any{"model": "command-a-03-2025"}}
			},
			"tool_choice", `"REQUIRED"`},
		{"ollama", func() fake { f := ollamatest.New(brain); return fake{f, f.Recorder} }, ollama.New,
			func(u string) provider.Config {
				return provider.Config{ID: "ollama", Credentials: map[string]any{"address": u}, Settings: map[string]any{"model": "llama3.1"}}
			},
			"tool_choice", `null`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := tc.fake()
			srv := httptest.NewServer(f.handler)
			defer srv.Close()
			cfg := tc.cfg(srv.URL)
			cfg.HTTPClient = srv.Client()
			p, err := tc.new(cfg)
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			s := session(10)
			c := &Consolidator{Workspace: dir, Window: 10, Open: func(context.Context, string) (Session, error) { return s, nil },
				Model: modelcall.Provider(p)}
			if err := c.Consolidate(context.Background(), "telegram:42", false); err != nil {
				t.Fatal(err)
			}
			if h, _ := os.ReadFile(c.HistoryPath()); string(h) != "[2026-03-15 14:30] Asked.\n\n" {
				t.Errorf("HISTORY.md %q", h)
			}
			bodies := f.recorder.Bodies()
			if len(bodies) != 1 {
				t.Fatalf("%d requests, want 1", len(bodies))
			}
			var body map[string]any
			json.Unmarshal(bodies[0], &body)
			got, _ := json.Marshal(body[tc.field])
			if string(got) != tc.want {
				t.Errorf("%s %s, want %s", tc.field, got, tc.want)
			}
		})
	}
}
