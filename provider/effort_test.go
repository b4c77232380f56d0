package provider_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/nbots/nb/provider"
	_ "github.com/nbots/nb/provider/anthropic"
	_ "github.com/nbots/nb/provider/cohere"
	_ "github.com/nbots/nb/provider/google"
	_ "github.com/nbots/nb/provider/ollama"
	_ "github.com/nbots/nb/provider/openai"
)

// bodier is what the providers' clients offer to build a request body.
type bodier interface {
	Body(provider.Request) (map[string]any, error)
}

// TestReasoningEffort checks that provider.options.reasoning-effort lands
// on each API's native key, that a native key in the settings wins, and
// that APIs without one refuse the option at load.
func TestReasoningEffort(t *testing.T) {
	creds := map[string]map[string]any{
		"openai":    {"access-token": "k"},
		"anthropic": {"api-key": "k"},
		"google":    {"service": "generative-language-api", "api-key": "k"},
		"ollama":    {},
	}
	for _, tc := range []struct {
		id, effort string
		settings   map[string]any
		path       string
		want       any
	}{
		{"openai", "high", nil, "reasoning_effort", "high"},
		{"openai", "low", map[string]any{"reasoning_effort": "minimal"}, "reasoning_effort", "minimal"},
		{"anthropic", "medium", nil, "thinking", map[string]any{"type": "enabled", "budget_tokens": 8192}},
		{"anthropic", "medium", nil, "max_tokens", 8192 + 4096},
		{"anthropic", "none", nil, "thinking", nil},
		{"google", "low", nil, "generationConfig", map[string]any{"thinkingConfig": map[string]any{"thinkingBudget": 2048}}},
		{"google", "none", map[string]any{"generationConfig": map[string]any{"temperature": 0.5}}, "generationConfig", map[string]any{"temperature": 0.5, "thinkingConfig": map[string]any{"thinkingBudget": 0}}},
		{"ollama", "high", nil, "think", true},
		{"ollama", "none", nil, "think", false},
	} {
		settings := map[string]any{"model": "m"}
		for k, v := range tc.settings {
			settings[k] = v
		}
		p, err := provider.New(provider.Config{ID: tc.id, Credentials: creds[tc.id], Options: map[string]any{"model": "m", "reasoning-effort": tc.effort}, Settings: settings})
		if err != nil {
			t.Fatalf("%s: %v", tc.id, err)
		}
		body, err := p.(bodier).Body(provider.Request{Messages: []provider.Message{{Role: provider.RoleUser, Content: "hi"}}})
		if err != nil {
			t.Fatal(err)
		}
		if got := body[tc.path]; fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("%s %s: %s = %v, want %v", tc.id, tc.effort, tc.path, got, tc.want)
		}
	}
	_, err := provider.New(provider.Config{ID: "cohere", Credentials: map[string]any{"api-key": "k"}, Options: map[string]any{"reasoning-effort": "low"}})
	if err == nil || !strings.Contains(err.Error(), "provider.options.reasoning-effort") {
		t.Errorf("cohere with an effort: %v", err)
	}
	_, err = provider.New(provider.Config{ID: "openai", Credentials: map[string]any{"access-token": "k"}, Options: map[string]any{"reasoning-effort": "extreme"}})
	if err == nil || !strings.Contains(err.Error(), `"extreme" is not an effort (one of none, minimal, low, medium, high)`) {
		t.Errorf("a wrong effort: %v", err)
	}
}
