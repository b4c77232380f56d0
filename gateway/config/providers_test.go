package config

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nbots/nb/cartridge"
	"github.com/nbots/nb/provider"
	_ "github.com/nbots/nb/provider/anthropic"
	_ "github.com/nbots/nb/provider/google"
	_ "github.com/nbots/nb/provider/mistral"
	_ "github.com/nbots/nb/provider/ollama"
	_ "github.com/nbots/nb/provider/openai"
)

// recorder keeps the request a provider sent and answers 400, so that
// nothing leaves the test.
type recorder struct {
	url, auth string
	body      map[string]any
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	r.url = req.URL.String()
	for _, h := range []string{"Authorization", "x-api-key", "x-goog-api-key", "api-key"} {
		if v := req.Header.Get(h); v != "" {
			r.auth = h + ": " + v
		}
	}
	b, _ := io.ReadAll(req.Body)
	_ = json.Unmarshal(b, &r.body)
	return &http.Response{StatusCode: 400, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(strings.NewReader(`{"error":{"message":"recorded"}}`)), Request: req}, nil
}

func loadJSON(t *testing.T, src string, env Env) *Config {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load(path, "", env)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestProviderRoutes: every provider of nanobot's registry (v0.1.4.post5),
// chosen as its _match_provider chooses, receives the request where
// nanobot (LiteLLM, the OpenAI SDK, its Azure provider) sends it: the
// OpenAI SDK's base_url then /chat/completions, nothing inserted.
func TestProviderRoutes(t *testing.T) {
	for _, tc := range []struct {
		name, config string
		provider     string // nanobot's choice
		url, auth    string
		model        string // the model in the body ("" for none)
	}{
		// Matching (_match_provider).
		{"README quick start: OpenRouter key, anthropic/ model", `{"providers":{"openrouter":{"apiKey":"sk-or-v1"}},"agents":{"defaults":{"model":"anthropic/claude-opus-4-5"}}}`,
			"openrouter", "https://openrouter.ai/api/v1/chat/completions", "Authorization: Bearer sk-or-v1", "anthropic/claude-opus-4-5"},
		{"deepseek/ model, OpenRouter key only", `{"providers":{"openrouter":{"apiKey":"sk-or-v1"}},"agents":{"defaults":{"model":"deepseek/deepseek-chat"}}}`,
			"openrouter", "https://openrouter.ai/api/v1/chat/completions", "Authorization: Bearer sk-or-v1", "deepseek/deepseek-chat"},
		{"prefix with a key wins over a gateway", `{"providers":{"openrouter":{"apiKey":"sk-or-v1"},"deepseek":{"apiKey":"ds"}},"agents":{"defaults":{"model":"deepseek/deepseek-chat"}}}`,
			"deepseek", "https://api.deepseek.com/beta/chat/completions", "Authorization: Bearer ds", "deepseek-chat"},
		{"keyword with a key", `{"providers":{"anthropic":{"apiKey":"a"},"openai":{"apiKey":"o"}},"agents":{"defaults":{"model":"gpt-4.1"}}}`,
			"openai", "https://api.openai.com/v1/chat/completions", "Authorization: Bearer o", "gpt-4.1"},
		{"no match: the first provider with a key", `{"providers":{"groq":{"apiKey":"g"},"moonshot":{"apiKey":"m"}},"agents":{"defaults":{"model":"llama-3.3-70b"}}}`,
			"moonshot", "https://api.moonshot.ai/v1/chat/completions", "Authorization: Bearer m", "llama-3.3-70b"},
		{"no match: a local provider with an apiBase first", `{"providers":{"openrouter":{"apiKey":"k"},"vllm":{"apiBase":"http://gpu:8000/v1"}},"agents":{"defaults":{"model":"Llama-3-8B"}}}`,
			"vllm", "http://gpu:8000/v1/chat/completions", "", "Llama-3-8B"},
		{"local fallback: the address names Ollama", `{"providers":{"vllm":{"apiBase":"http://gpu:8000/v1"},"ollama":{"apiBase":"http://box:11434"}},"agents":{"defaults":{"model":"llama3.2"}}}`,
			"ollama", "http://box:11434/api/chat", "", "llama3.2"},
		{"forced provider", `{"providers":{"openrouter":{"apiKey":"k"},"dashscope":{"apiKey":"d"}},"agents":{"defaults":{"model":"qwen-max","provider":"dashscope"}}}`,
			"dashscope", "https://dashscope-intl.aliyuncs.com/compatible-mode/v1/chat/completions", "Authorization: Bearer d", "qwen-max"},
		{"an OpenRouter key under another provider", `{"providers":{"openai":{"apiKey":"sk-or-v1-x"}},"agents":{"defaults":{"model":"gpt-4o"}}}`,
			"openai", "https://openrouter.ai/api/v1/chat/completions", "Authorization: Bearer sk-or-v1-x", "gpt-4o"},
		{"the provider's apiBase is the base_url", `{"providers":{"deepseek":{"apiKey":"ds","apiBase":"https://proxy.example/ds"}},"agents":{"defaults":{"model":"deepseek-chat"}}}`,
			"deepseek", "https://proxy.example/ds/chat/completions", "Authorization: Bearer ds", "deepseek-chat"},
		{"Kimi K2.5 takes temperature 1", `{"providers":{"moonshot":{"apiKey":"m"}},"agents":{"defaults":{"model":"kimi-k2.5","temperature":0.1}}}`,
			"moonshot", "https://api.moonshot.ai/v1/chat/completions", "Authorization: Bearer m", "kimi-k2.5"},

		// Every provider of the registry, in its order.
		{"custom", `{"providers":{"custom":{"apiKey":"c","apiBase":"https://generativelanguage.googleapis.com/v1beta/openai/"}},"agents":{"defaults":{"model":"gemini-2.5-flash","provider":"custom"}}}`,
			"custom", "https://generativelanguage.googleapis.com/v1beta/openai/chat/completions", "Authorization: Bearer c", "gemini-2.5-flash"},
		{"custom without apiBase", `{"providers":{"custom":{"apiKey":"c"}},"agents":{"defaults":{"model":"m"}}}`,
			"custom", "http://localhost:8000/v1/chat/completions", "Authorization: Bearer c", "m"},
		{"azure_openai", `{"providers":{"azure_openai":{"apiKey":"az","apiBase":"https://res.openai.azure.com"}},"agents":{"defaults":{"model":"my-gpt-deploy","provider":"azure_openai"}}}`,
			"azure_openai", "https://res.openai.azure.com/openai/deployments/my-gpt-deploy/chat/completions?api-version=2024-10-21", "api-key: az", ""},
		{"openrouter", `{"providers":{"openrouter":{"apiKey":"k"}},"agents":{"defaults":{"model":"openrouter/auto"}}}`,
			"openrouter", "https://openrouter.ai/api/v1/chat/completions", "Authorization: Bearer k", "openrouter/auto"},
		{"aihubmix", `{"providers":{"aihubmix":{"apiKey":"k"}},"agents":{"defaults":{"model":"anthropic/claude-3-5-sonnet"}}}`,
			"aihubmix", "https://aihubmix.com/v1/chat/completions", "Authorization: Bearer k", "claude-3-5-sonnet"},
		{"siliconflow", `{"providers":{"siliconflow":{"apiKey":"k"}},"agents":{"defaults":{"model":"Qwen/Qwen2.5-72B-Instruct"}}}`,
			"siliconflow", "https://api.siliconflow.cn/v1/chat/completions", "Authorization: Bearer k", "Qwen/Qwen2.5-72B-Instruct"},
		{"volcengine", `{"providers":{"volcengine":{"apiKey":"k"}},"agents":{"defaults":{"model":"doubao-seed-1-6"}}}`,
			"volcengine", "https://ark.cn-beijing.volces.com/api/v3/chat/completions", "Authorization: Bearer k", "doubao-seed-1-6"},
		{"volcengine_coding_plan", `{"providers":{"volcengine_coding_plan":{"apiKey":"k"}},"agents":{"defaults":{"model":"volcengine-plan/doubao-seed-code"}}}`,
			"volcengine_coding_plan", "https://ark.cn-beijing.volces.com/api/coding/v3/chat/completions", "Authorization: Bearer k", "doubao-seed-code"},
		{"byteplus", `{"providers":{"byteplus":{"apiKey":"k"}},"agents":{"defaults":{"model":"byteplus/seed-1-6"}}}`,
			"byteplus", "https://ark.ap-southeast.bytepluses.com/api/v3/chat/completions", "Authorization: Bearer k", "seed-1-6"},
		{"byteplus_coding_plan", `{"providers":{"byteplusCodingPlan":{"apiKey":"k"}},"agents":{"defaults":{"model":"byteplus-plan/seed-code"}}}`,
			"byteplus_coding_plan", "https://ark.ap-southeast.bytepluses.com/api/coding/v3/chat/completions", "Authorization: Bearer k", "seed-code"},
		{"anthropic", `{"providers":{"anthropic":{"apiKey":"a"}},"agents":{"defaults":{"model":"anthropic/claude-opus-4-5"}}}`,
			"anthropic", "https://api.anthropic.com/v1/messages", "x-api-key: a", "claude-opus-4-5"},
		// A reasoning model on OpenAI's own address goes to the Responses API
		// (nb's default, docs/providers.md), where nanobot's LiteLLM uses
		// Chat Completions: the same key, the reasoning kept across rounds.
		{"openai", `{"providers":{"openai":{"apiKey":"o"}},"agents":{"defaults":{"model":"openai/gpt-5"}}}`,
			"openai", "https://api.openai.com/v1/responses", "Authorization: Bearer o", "gpt-5"},
		{"deepseek", `{"providers":{"deepseek":{"apiKey":"d"}},"agents":{"defaults":{"model":"deepseek-reasoner"}}}`,
			"deepseek", "https://api.deepseek.com/beta/chat/completions", "Authorization: Bearer d", "deepseek-reasoner"},
		{"gemini", `{"providers":{"gemini":{"apiKey":"g"}},"agents":{"defaults":{"model":"gemini/gemini-2.5-pro"}}}`,
			"gemini", "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-pro:generateContent", "x-goog-api-key: g", ""},
		{"zhipu", `{"providers":{"zhipu":{"apiKey":"z"}},"agents":{"defaults":{"model":"glm-4.6"}}}`,
			"zhipu", "https://api.z.ai/api/paas/v4/chat/completions", "Authorization: Bearer z", "glm-4.6"},
		{"zhipu at bigmodel.cn", `{"providers":{"zhipu":{"apiKey":"z","apiBase":"https://open.bigmodel.cn/api/paas/v4"}},"agents":{"defaults":{"model":"zai/glm-4.6"}}}`,
			"zhipu", "https://open.bigmodel.cn/api/paas/v4/chat/completions", "Authorization: Bearer z", "glm-4.6"},
		{"dashscope", `{"providers":{"dashscope":{"apiKey":"d"}},"agents":{"defaults":{"model":"dashscope/qwen3-max"}}}`,
			"dashscope", "https://dashscope-intl.aliyuncs.com/compatible-mode/v1/chat/completions", "Authorization: Bearer d", "qwen3-max"},
		{"moonshot", `{"providers":{"moonshot":{"apiKey":"m","apiBase":"https://api.moonshot.cn/v1"}},"agents":{"defaults":{"model":"moonshot/kimi-k2-turbo"}}}`,
			"moonshot", "https://api.moonshot.cn/v1/chat/completions", "Authorization: Bearer m", "kimi-k2-turbo"},
		{"minimax", `{"providers":{"minimax":{"apiKey":"m"}},"agents":{"defaults":{"model":"MiniMax-M2.1"}}}`,
			"minimax", "https://api.minimax.io/v1/chat/completions", "Authorization: Bearer m", "MiniMax-M2.1"},
		{"vllm", `{"providers":{"vllm":{"apiBase":"http://localhost:8000/v1"}},"agents":{"defaults":{"model":"vllm/meta-llama/Llama-3-8B"}}}`,
			"vllm", "http://localhost:8000/v1/chat/completions", "", "vllm/meta-llama/Llama-3-8B"},
		{"ollama", `{"agents":{"defaults":{"model":"ollama/llama3.2"}}}`,
			"ollama", "http://localhost:11434/api/chat", "", "ollama/llama3.2"},
		{"groq", `{"providers":{"groq":{"apiKey":"g"}},"agents":{"defaults":{"model":"groq/llama-3.3-70b-versatile"}}}`,
			"groq", "https://api.groq.com/openai/v1/chat/completions", "Authorization: Bearer g", "llama-3.3-70b-versatile"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := Env{"HOME=/h"}
			c := loadJSON(t, tc.config, env)
			if got := c.ProviderName(); got != tc.provider {
				t.Fatalf("provider %q, nanobot chooses %q", got, tc.provider)
			}
			cart, _, err := c.Cartridge(cartridge.Default(env.Lookup), env)
			if err != nil {
				t.Fatal(err)
			}
			p := cart.Provider()
			rec := &recorder{}
			prov, err := provider.New(provider.Config{ID: p.ID, Credentials: p.Credentials, Options: p.Options, Settings: p.Settings, HTTPClient: &http.Client{Transport: rec}})
			if err != nil {
				t.Fatal(err)
			}
			_, err = prov.Complete(context.Background(), provider.Request{Messages: []provider.Message{{Role: provider.RoleUser, Content: "hi"}}}, nil)
			if err == nil || !strings.Contains(err.Error(), "recorded") {
				t.Fatalf("the request did not reach the recorder: %v", err)
			}
			model, _ := rec.body["model"].(string)
			if rec.url != tc.url || rec.auth != tc.auth || model != tc.model {
				t.Fatalf("sent %s (%s) model %q\nwant %s (%s) model %q", rec.url, rec.auth, model, tc.url, tc.auth, tc.model)
			}
			if tc.name == "Kimi K2.5 takes temperature 1" && rec.body["temperature"] != 1.0 {
				t.Fatalf("temperature %v", rec.body["temperature"])
			}
		})
	}
}

// TestProviderErrors: setups nanobot refuses, or nb cannot serve, say so
// in the configuration's words.
func TestProviderErrors(t *testing.T) {
	for _, tc := range []struct{ config, want string }{
		{`{"providers":{"openai_codex":{}},"agents":{"defaults":{"model":"openai-codex/gpt-5.1-codex"}}}`, "logs in with OAuth"},
		{`{"agents":{"defaults":{"model":"github-copilot/gpt-4.1"}}}`, "github_copilot, which logs in with OAuth"},
		{`{"agents":{"defaults":{"model":"gpt-4.1","provider":"openai_codex"}}}`, "OAuth"},
		{`{"providers":{"azure_openai":{"apiKey":"k"}},"agents":{"defaults":{"model":"d","provider":"azure_openai"}}}`, "providers.azure_openai: Azure OpenAI needs apiKey and apiBase"},
		{`{"agents":{"defaults":{"model":"anthropic/claude-opus-4-5"}}}`, `agents.defaults.model "anthropic/claude-opus-4-5": no provider has an apiKey`},
		{`{"agents":{"defaults":{"model":"x","provider":"deepseek"}}}`, "providers.deepseek.apiKey is not set"},
		{`{"agents":{"defaults":{"model":"x","provider":"vllm"}}}`, "providers.vllm.apiBase"},
		{`{"agents":{"defaults":{"model":"x","provider":"openruoter"}}}`, `unknown provider "openruoter": did you mean "openrouter"?`},
	} {
		env := Env{"HOME=/h"}
		c := loadJSON(t, tc.config, env)
		_, _, err := c.Cartridge(cartridge.Default(env.Lookup), env)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.config, err, tc.want)
		}
	}
	// nb goes on where nanobot stops: the variable of the provider the
	// model names.
	env := Env{"HOME=/h", "ANTHROPIC_API_KEY=a"}
	c := loadJSON(t, `{"agents":{"defaults":{"model":"claude-sonnet-4-5"}}}`, env)
	if c.ProviderName() != "anthropic" {
		t.Fatal(c.ProviderName())
	}
	if _, _, err := c.Cartridge(cartridge.Default(env.Lookup), env); err != nil {
		t.Fatal(err)
	}
}

// TestErrorsInTheUsersWords: what the configuration causes is told with
// the keys the user wrote.
func TestErrorsInTheUsersWords(t *testing.T) {
	env := Env{"HOME=/h"}
	c := loadJSON(t, `{"agents":{"defaults":{"modle":"gpt-4o"}},"providers":{"openai":{"apiKey":"k"}}}`, env)
	_, _, err := c.Cartridge(cartridge.Default(env.Lookup), env)
	if err == nil || !strings.Contains(err.Error(), `agents.defaults.modle: unknown key: did you mean "model"?`) || strings.Contains(err.Error(), "OPENAI_API_KEY") {
		t.Fatalf("a misspelt model: %v", err)
	}
	c = loadJSON(t, `{"agents":{"defaults":{"model":"m","provider":"custom"}},"providers":{"custom":{"apiBase":"localhost:8000/v1"}}}`, env)
	if _, _, err := c.Cartridge(cartridge.Default(env.Lookup), env); err == nil || !strings.HasPrefix(err.Error(), `providers.custom.apiBase: "localhost:8000/v1" is not the http:// or https:// address`) {
		t.Fatalf("a bad apiBase: %v", err)
	}
	c = loadJSON(t, `{"agents":{"defaults":{"model":"m","provider":"custom"}},"providers":{"custom":{"apiBase":"http://localhost:8000/v1","apiKey":"k"}}}`, env)
	words := c.Words()
	for in, want := range map[string]string{
		"openai: HTTP 401 Unauthorized: bad key (check provider.credentials.access-token)": "openai: HTTP 401 Unauthorized: bad key (check providers.custom.apiKey)",
		"cannot reach provider.credentials.address":                                        "cannot reach providers.custom.apiBase",
		"(infinite loop prevention; safety.tools.rounds sets the limit)":                   "(infinite loop prevention; agents.defaults.maxToolIterations sets the limit)",
	} {
		if got := words(in); got != want {
			t.Errorf("%q\n got %q\nwant %q", in, got, want)
		}
	}
}

// tools.exec.pathAppend reaches exec: appended to the commands' PATH, its
// folders shown (read-only) by the sandbox.
func TestPathAppend(t *testing.T) {
	env := Env{"HOME=/h"}
	c := loadJSON(t, `{"agents":{"defaults":{"model":"gpt-4o"}},"providers":{"openai":{"apiKey":"k"}},"tools":{"exec":{"pathAppend":"~/bin:/opt/tools/bin"}}}`, env)
	cart, _, err := c.Cartridge(cartridge.Default(env.Lookup), env)
	if err != nil {
		t.Fatal(err)
	}
	bi, err := cart.Builtins()
	if err != nil || bi.Exec == nil || bi.Exec.PathAppend != "~/bin:/opt/tools/bin" || strings.Join(bi.Exec.ReadOnly, ",") != "/h/bin,/opt/tools/bin" {
		t.Fatalf("%+v %v", bi.Exec, err)
	}
}

// tools.web.search.provider chooses the engine; without its key (or
// SearXNG's baseUrl) web_search is left out with one warning that names
// the key to set, where nanobot would fall back to DuckDuckGo.
func TestWebSearchProviders(t *testing.T) {
	for _, tc := range []struct {
		search, env                string
		provider, key, base, warns string
	}{
		{`{"provider":"tavily","apiKey":"tvly-1","maxResults":3}`, "", "tavily", "tvly-1", "", ""},
		{`{"provider":"searxng","baseUrl":"https://searx.example.org"}`, "", "searxng", "", "https://searx.example.org", ""},
		{`{"provider":"jina"}`, "JINA_API_KEY=jk", "jina", "jk", "", ""},
		{`{"provider":"brave","apiKey":"b","baseUrl":"https://brave-proxy.example"}`, "", "brave", "b", "https://brave-proxy.example", ""},
		{`{}`, "", "", "", "", "tools.web.search.apiKey is not set (nor BRAVE_API_KEY)"},
		{`{"provider":"searxng"}`, "", "", "", "", "tools.web.search.baseUrl is not set"},
		{`{"provider":"duckduckgo"}`, "", "", "", "", "duckduckgo, which has no API nb speaks"},
	} {
		env := Env{"HOME=/h", tc.env}
		c := loadJSON(t, `{"agents":{"defaults":{"model":"gpt-4o"}},"providers":{"openai":{"apiKey":"k"}},"tools":{"web":{"search":`+tc.search+`}}}`, env)
		cart, warnings, err := c.Cartridge(cartridge.Default(env.Lookup), env)
		if err != nil {
			t.Fatal(err)
		}
		bi, err := cart.Builtins()
		if err != nil {
			t.Fatal(err)
		}
		if tc.warns != "" {
			if bi.Web.Search != nil || len(warnings) != 1 || !strings.Contains(warnings[0], tc.warns) {
				t.Errorf("%s: search %+v warnings %q", tc.search, bi.Web.Search, warnings)
			}
			continue
		}
		s := bi.Web.Search
		if s == nil || s.Provider != tc.provider || s.APIKey != tc.key || s.BaseURL != tc.base || len(warnings) != 0 {
			t.Errorf("%s: search %+v warnings %q", tc.search, s, warnings)
		}
	}
}

// tools.mcpServers' tools are named as nanobot names them.
func TestMCPToolNames(t *testing.T) {
	env := Env{"HOME=/h"}
	c := loadJSON(t, `{"agents":{"defaults":{"model":"gpt-4o"}},"providers":{"openai":{"apiKey":"k"}},"tools":{"mcpServers":{"my_files":{"command":"npx","enabledTools":["mcp_my_files_read"]}}}}`, env)
	cart, _, err := c.Cartridge(cartridge.Default(env.Lookup), env)
	if err != nil {
		t.Fatal(err)
	}
	servers, err := cart.MCP(env.Lookup)
	if err != nil || len(servers) != 1 || servers[0].ToolPrefix != "mcp_my_files_" || strings.Join(servers[0].Tools, ",") != "read" {
		t.Fatalf("%+v %v", servers, err)
	}
}
