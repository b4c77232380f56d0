package openai_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/nbots/nb/provider"
)

// TestEndpoints: options.endpoint says how the address becomes the URL:
// the host (/v1 added unless there), the OpenAI SDK's base_url (nothing
// inserted: Zhipu's /api/paas/v4, VolcEngine's /api/v3) or an Azure
// OpenAI deployment.
func TestEndpoints(t *testing.T) {
	type seen struct {
		path, query, auth, apiKey string
		body                      map[string]any
	}
	var got seen
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got = seen{path: r.URL.Path, query: r.URL.RawQuery, auth: r.Header.Get("Authorization"), apiKey: r.Header.Get("api-key")}
		_ = json.Unmarshal(b, &got.body)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`)
	}))
	defer srv.Close()
	for _, tc := range []struct {
		name, address string
		options       map[string]any
		wantPath      string
		wantQuery     string
		azure         bool
	}{
		{"host", srv.URL, nil, "/v1/chat/completions", "", false},
		{"host with /v1", srv.URL + "/v1", nil, "/v1/chat/completions", "", false},
		{"base-url", srv.URL + "/api/paas/v4", map[string]any{"endpoint": "base-url"}, "/api/paas/v4/chat/completions", "", false},
		{"base-url /v1beta/openai/", srv.URL + "/v1beta/openai/", map[string]any{"endpoint": "base-url"}, "/v1beta/openai/chat/completions", "", false},
		{"azure", srv.URL, map[string]any{"endpoint": "azure"}, "/openai/deployments/my-gpt/chat/completions", "api-version=2024-10-21", true},
		{"azure version", srv.URL + "/", map[string]any{"endpoint": "azure", "api-version": "2025-01-01-preview"}, "/openai/deployments/my-gpt/chat/completions", "api-version=2025-01-01-preview", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			creds := map[string]any{"address": tc.address, "access-token": "k1"}
			if tc.azure {
				creds = map[string]any{"address": tc.address, "api-key": "k1"}
			}
			p, err := provider.New(provider.Config{ID: "openai", Credentials: creds, Options: tc.options, Settings: map[string]any{"model": "my-gpt"}, HTTPClient: srv.Client()})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := p.Complete(context.Background(), provider.Request{Messages: []provider.Message{{Role: provider.RoleUser, Content: "hi"}}}, nil); err != nil {
				t.Fatal(err)
			}
			if got.path != tc.wantPath || got.query != tc.wantQuery {
				t.Fatalf("URL %s?%s, want %s?%s", got.path, got.query, tc.wantPath, tc.wantQuery)
			}
			_, hasModel := got.body["model"]
			switch {
			case tc.azure && (got.apiKey != "k1" || got.auth != "" || hasModel):
				t.Fatalf("azure: api-key %q Authorization %q model in body %v", got.apiKey, got.auth, hasModel)
			case !tc.azure && (got.auth != "Bearer k1" || !hasModel):
				t.Fatalf("Authorization %q body %v", got.auth, got.body)
			}
		})
	}
	_, err := provider.New(provider.Config{ID: "openai", Credentials: map[string]any{"address": srv.URL, "access-token": "k"}, Options: map[string]any{"endpoint": "nope"}})
	if err == nil {
		t.Fatal("an unknown endpoint kind was accepted")
	}
}
