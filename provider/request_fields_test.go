package provider_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/nbots/nb/provider"
	_ "github.com/nbots/nb/provider/anthropic"
	_ "github.com/nbots/nb/provider/cohere"
	_ "github.com/nbots/nb/provider/google"
	_ "github.com/nbots/nb/provider/maritaca"
	_ "github.com/nbots/nb/provider/mistral"
	_ "github.com/nbots/nb/provider/ollama"
	_ "github.com/nbots/nb/provider/openai"
)

type bodyBuilder interface {
	Body(provider.Request) (map[string]any, error)
}

// Each provider puts a request's settings, stop sequences and output
// schema where its API takes them; the APIs without a structured-output
// mode ask for the schema in the system text.
func TestRequestFields(t *testing.T) {
	schema := map[string]any{"type": "object", "properties": map[string]any{"n": map[string]any{"type": "integer"}}, "required": []any{"n"}, "additionalProperties": false}
	cases := []struct {
		id       string
		creds    map[string]any
		settings map[string]any
		override map[string]any
		want     string // JSON paths and values that must be in the body
	}{
		{"openai", map[string]any{"access-token": "k"}, map[string]any{"model": "m", "temperature": 1.0}, map[string]any{"temperature": 0.2},
			`temperature=0.2 stop=["Observation:"] response_format.type="json_schema" response_format.json_schema.name="answer" response_format.json_schema.schema.required=["n"]`},
		{"mistral", map[string]any{"api-key": "k"}, map[string]any{"model": "m"}, map[string]any{"temperature": 0.3},
			`temperature=0.3 stop=["Observation:"] response_format.type="json_schema" response_format.json_schema.schema.type="object"`},
		{"maritaca", map[string]any{"api-key": "k"}, map[string]any{"model": "sabia-3"}, map[string]any{"max_tokens": 5},
			`max_tokens=5 stop=["Observation:"] messages.0.content~JSON_Schema`},
		{"anthropic", map[string]any{"api-key": "k"}, map[string]any{"model": "m"}, map[string]any{"max_tokens": 7},
			`max_tokens=7 stop_sequences=["Observation:"] system~valid_against_this_JSON_Schema`},
		{"cohere", map[string]any{"api-key": "k"}, map[string]any{"model": "command-r"}, map[string]any{"temperature": 0.4},
			`temperature=0.4 stop_sequences=["Observation:"] response_format.type="json_object" response_format.json_schema.type="object"`},
		{"ollama", map[string]any{"address": "http://localhost:11434"}, map[string]any{"model": "m", "options": map[string]any{"temperature": 1.0, "seed": 3}}, map[string]any{"options": map[string]any{"temperature": 0.5}},
			`options.temperature=0.5 options.seed=3 options.stop=["Observation:"] format.required=["n"]`},
		{"google", map[string]any{"service": "generative-language-api", "api-key": "k"}, map[string]any{"model": "gemini-pro", "generationConfig": map[string]any{"temperature": 1.0}}, map[string]any{"generationConfig": map[string]any{"temperature": 0.6}},
			`generationConfig.temperature=0.6 generationConfig.stopSequences=["Observation:"] generationConfig.responseMimeType="application/json" generationConfig.responseSchema.type="object" !generationConfig.responseSchema.additionalProperties`},
	}
	for _, tc := range cases {
		t.Run(tc.id, func(t *testing.T) {
			p, err := provider.New(provider.Config{ID: tc.id, Credentials: tc.creds, Settings: tc.settings, Options: map[string]any{"model": "gemini-pro"}})
			if err != nil {
				t.Fatal(err)
			}
			req := provider.Request{System: "S", Messages: []provider.Message{{Role: provider.RoleUser, Content: "hi"}},
				Override: &provider.Override{Settings: tc.override}, Stop: []string{"Observation:"}, Output: &provider.OutputSchema{Name: "answer", Schema: schema}}
			body, err := p.(bodyBuilder).Body(req)
			if err != nil {
				t.Fatal(err)
			}
			data, _ := json.Marshal(body)
			var plain map[string]any
			json.Unmarshal(data, &plain) //nolint:errcheck // just encoded
			for _, want := range strings.Fields(tc.want) {
				checkPath(t, plain, want, string(data))
			}
			// The cartridge's settings are not changed by an override.
			if b2, _ := p.(bodyBuilder).Body(provider.Request{Messages: req.Messages}); b2 != nil {
				d2, _ := json.Marshal(b2)
				if strings.Contains(string(d2), "Observation") || strings.Contains(string(d2), "0.2") || strings.Contains(string(d2), "0.5") || strings.Contains(string(d2), "0.6") {
					t.Errorf("a later request kept the override: %s", d2)
				}
			}
		})
	}
}

// checkPath checks "a.b=JSON", "a.b~substring" or "!a.b" (absent).
func checkPath(t *testing.T, body map[string]any, spec, all string) {
	t.Helper()
	absent := strings.HasPrefix(spec, "!")
	spec = strings.TrimPrefix(spec, "!")
	path, want, contains := spec, "", false
	if i := strings.IndexAny(spec, "=~"); i >= 0 {
		path, want, contains = spec[:i], spec[i+1:], spec[i] == '~'
	}
	var cur any = body
	for _, k := range strings.Split(path, ".") {
		switch c := cur.(type) {
		case map[string]any:
			cur = c[k]
		case []any:
			i := int(k[0] - '0')
			if i < len(c) {
				cur = c[i]
			} else {
				cur = nil
			}
		default:
			cur = nil
		}
	}
	if absent {
		if cur != nil {
			t.Errorf("%s is %v, want absent in %s", path, cur, all)
		}
		return
	}
	got, _ := json.Marshal(cur)
	if contains {
		want = strings.ReplaceAll(want, "_", " ")
		if !strings.Contains(string(got), want) {
			t.Errorf("%s = %s, want it to contain %q", path, got, want)
		}
		return
	}
	if string(got) != want {
		t.Errorf("%s = %s, want %s (body %s)", path, got, want, all)
	}
}
