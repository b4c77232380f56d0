package config

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/nbots/nb/cartridge"
)

// providerSpec is how nanobot's provider names map onto nb's providers.
type providerSpec struct {
	name     string
	id       string // nb's provider id
	base     string // the OpenAI-compatible address, "" for native APIs
	envKey   string
	gateway  bool // routes any model: the model name is sent whole
	local    bool // needs no key
	keywords []string
}

// specs in nanobot's order of priority.
var specs = []providerSpec{
	{name: "custom", id: "openai", local: true},
	{name: "openrouter", id: "openai", base: "https://openrouter.ai/api/v1", envKey: "OPENROUTER_API_KEY", gateway: true, keywords: []string{"openrouter"}},
	{name: "aihubmix", id: "openai", base: "https://aihubmix.com/v1", envKey: "AIHUBMIX_API_KEY", gateway: true, keywords: []string{"aihubmix"}},
	{name: "siliconflow", id: "openai", base: "https://api.siliconflow.cn/v1", envKey: "SILICONFLOW_API_KEY", gateway: true, keywords: []string{"siliconflow"}},
	{name: "volcengine", id: "openai", base: "https://ark.cn-beijing.volces.com/api/v3", envKey: "VOLCENGINE_API_KEY", gateway: true, keywords: []string{"volcengine", "doubao"}},
	{name: "anthropic", id: "anthropic", envKey: "ANTHROPIC_API_KEY", keywords: []string{"anthropic", "claude"}},
	{name: "openai", id: "openai", envKey: "OPENAI_API_KEY", keywords: []string{"openai", "gpt", "o1", "o3", "o4"}},
	{name: "deepseek", id: "openai", base: "https://api.deepseek.com/v1", envKey: "DEEPSEEK_API_KEY", keywords: []string{"deepseek"}},
	{name: "gemini", id: "google", envKey: "GEMINI_API_KEY", keywords: []string{"gemini"}},
	{name: "zhipu", id: "openai", base: "https://open.bigmodel.cn/api/paas/v4", envKey: "ZAI_API_KEY", keywords: []string{"zhipu", "glm", "zai"}},
	{name: "dashscope", id: "openai", base: "https://dashscope.aliyuncs.com/compatible-mode/v1", envKey: "DASHSCOPE_API_KEY", keywords: []string{"qwen", "dashscope"}},
	{name: "moonshot", id: "openai", base: "https://api.moonshot.ai/v1", envKey: "MOONSHOT_API_KEY", keywords: []string{"moonshot", "kimi"}},
	{name: "minimax", id: "openai", base: "https://api.minimax.io/v1", envKey: "MINIMAX_API_KEY", keywords: []string{"minimax"}},
	{name: "mistral", id: "mistral", envKey: "MISTRAL_API_KEY", keywords: []string{"mistral"}},
	{name: "groq", id: "openai", base: "https://api.groq.com/openai/v1", envKey: "GROQ_API_KEY", keywords: []string{"groq"}},
	{name: "vllm", id: "openai", local: true, keywords: []string{"vllm"}},
	{name: "ollama", id: "ollama", local: true, keywords: []string{"ollama"}},
}

// oauthOnly are nanobot providers that log in with OAuth, which nb does
// not do.
var oauthOnly = []string{"openai_codex", "github_copilot"}

func specOf(name string) (providerSpec, bool) {
	n := strings.ReplaceAll(strings.ToLower(name), "-", "_")
	for _, s := range specs {
		if s.name == n {
			return s, true
		}
	}
	return providerSpec{}, false
}

// provider returns providers.<name> whichever way it was written.
func (c *Config) provider(name string) (Provider, bool) {
	for k, p := range c.Providers {
		if strings.ReplaceAll(strings.ToLower(k), "-", "_") == name || camel(name) == k {
			return p, true
		}
	}
	return Provider{}, false
}

// choose picks the provider of the model as nanobot does: forced, the
// model's prefix, a keyword of the model for a provider with a key (or a
// local one with an address), else the first provider with a key.
func (c *Config) choose() (providerSpec, Provider, error) {
	d := c.Agents.Defaults
	if forced := strings.ToLower(d.Provider); forced != "" && forced != "auto" {
		if slices.Contains(oauthOnly, strings.ReplaceAll(forced, "-", "_")) {
			return providerSpec{}, Provider{}, fmt.Errorf("agents.defaults.provider: %s logs in with OAuth, which nb does not do: use an API key provider", forced)
		}
		s, ok := specOf(forced)
		if !ok {
			return providerSpec{}, Provider{}, fmt.Errorf("agents.defaults.provider: unknown provider %q", d.Provider)
		}
		p, _ := c.provider(s.name)
		return s, p, nil
	}
	model := strings.ToLower(d.Model)
	usable := func(s providerSpec) (Provider, bool) {
		p, ok := c.provider(s.name)
		if s.local {
			return p, ok && p.APIBase != ""
		}
		return p, ok && p.APIKey != ""
	}
	if prefix, _, ok := strings.Cut(model, "/"); ok {
		if s, ok := specOf(prefix); ok {
			p, _ := c.provider(s.name)
			return s, p, nil
		}
	}
	norm := strings.ReplaceAll(model, "_", "-")
	for _, s := range specs {
		for _, kw := range s.keywords {
			if strings.Contains(norm, strings.ReplaceAll(kw, "_", "-")) {
				if p, ok := usable(s); ok {
					return s, p, nil
				}
			}
		}
	}
	for _, s := range specs {
		if p, ok := usable(s); ok {
			return s, p, nil
		}
	}
	// No key anywhere: the model's keyword names the provider, whose key
	// then comes from its environment variable.
	for _, s := range specs {
		for _, kw := range s.keywords {
			if strings.Contains(norm, kw) && !s.local {
				return s, Provider{}, nil
			}
		}
	}
	return providerSpec{}, Provider{}, fmt.Errorf("agents.defaults.model %q: no provider matches it and none has an apiKey: set providers.<name>.apiKey (or agents.defaults.provider)", d.Model)
}

// DefaultMaxToolIterations is nanobot's agents.defaults.maxToolIterations
// when a configuration leaves it out (40; 200 from nanobot v0.1.5).
const DefaultMaxToolIterations = 40

// Mapped says whether the configuration names a model (or a cartridge):
// without either, the gateway runs on nb's default cartridge.
func (c *Config) Mapped() bool {
	return c.Agents.Defaults.Model != "" || c.Agents.Defaults.Cartridge != ""
}

// Cartridge builds the assistant's cartridge from the model settings, as
// nanobot maps them, with nanobot's tools on nb's built-in ones in the
// workspace. base is nb's default cartridge (its provider serves when no
// model is configured). It returns warnings to show at start.
func (c *Config) Cartridge(base *cartridge.Cartridge, env Env) (*cartridge.Cartridge, []string, error) {
	d := c.Agents.Defaults
	doc := map[string]any{
		"meta": map[string]any{"symbol": "🐈", "name": "nb gateway", "author": "nb", "version": "1.0.0", "license": "CC0-1.0",
			"description": "The personal assistant of nb gateway."},
		"safety": map[string]any{"functions": map[string]any{"sandboxed": true},
			"tools": map[string]any{"confirmable": false, "rounds": orDefault(d.MaxToolIterations, DefaultMaxToolIterations)}},
	}
	var warnings []string
	if d.Model == "" {
		doc["provider"] = baseProvider(base)
	} else {
		prov, err := c.providerSection()
		if err != nil {
			return nil, nil, err
		}
		doc["provider"] = prov
	}
	b, w := c.builtins()
	warnings = append(warnings, w...)
	doc["builtins"] = b
	// The gateway writes its own system prompt in nanobot's order (the
	// workspace's AGENTS.md among the bootstrap files): no second copy.
	doc["context"] = false
	if mcp := c.mcp(); len(mcp) > 0 {
		doc["mcp"] = mcp
	}
	src, err := json.Marshal(doc)
	if err != nil {
		return nil, nil, err
	}
	cart, err := cartridge.Parse(src, "", cartridge.FormatYAML, env.Lookup)
	if err != nil {
		return nil, nil, fmt.Errorf("the assistant built from %s: %w", c.name(), err)
	}
	return cart, warnings, nil
}

func (c *Config) name() string {
	if c.Path == "" {
		return "the default configuration"
	}
	return c.Path
}

// baseProvider is the provider section of nb's default cartridge, with
// its ENV references as written.
func baseProvider(base *cartridge.Cartridge) map[string]any {
	p := map[string]any{"id": base.String("provider", "id")}
	for _, k := range []string{"credentials", "settings", "options"} {
		if v, ok := base.Get("provider", k); ok {
			p[k] = raw(base, "provider", k, v)
		}
	}
	return p
}

// raw returns a value with its ENV references as written, so that the
// new cartridge resolves them itself (and names them in its errors).
func raw(c *cartridge.Cartridge, a, b string, v any) any {
	m, ok := v.(map[string]any)
	if !ok {
		return v
	}
	out := map[string]any{}
	for k, val := range m {
		if s := c.RawString(a, b, k); s != "" {
			out[k] = s
			continue
		}
		out[k] = val
	}
	return out
}

func (c *Config) providerSection() (map[string]any, error) {
	d := c.Agents.Defaults
	s, p, err := c.choose()
	if err != nil {
		return nil, err
	}
	model := d.Model
	if prefix, rest, ok := strings.Cut(model, "/"); ok && !s.gateway {
		if ps, ok := specOf(prefix); ok && ps.name == s.name {
			model = rest
		}
	}
	key := p.APIKey
	if key == "" && s.envKey != "" {
		key = "ENV/" + s.envKey
	}
	creds := map[string]any{}
	address := p.APIBase
	if address == "" {
		address = s.base
	}
	if s.local && address == "" && s.id == "openai" {
		return nil, fmt.Errorf("providers.%s.apiBase: the %s provider needs the address of its server", s.name, s.name)
	}
	if address != "" {
		creds["address"] = address
	}
	settings := map[string]any{"model": model}
	switch s.id {
	case "anthropic":
		if key != "" {
			creds["api-key"] = key
		}
		settings["max_tokens"] = orDefault(d.MaxTokens, 8192)
	case "google":
		if key != "" {
			creds["api-key"] = key
		}
		creds["service"] = "generative-language-api"
		delete(settings, "model")
		gc := map[string]any{"maxOutputTokens": orDefault(d.MaxTokens, 8192)}
		if d.Temperature != nil {
			gc["temperature"] = *d.Temperature
		}
		settings["generationConfig"] = gc
	case "mistral":
		if key != "" {
			creds["api-key"] = key
		}
		settings["max_tokens"] = orDefault(d.MaxTokens, 8192)
	case "ollama":
		if key != "" && !strings.HasPrefix(key, "ENV/") {
			creds["access-token"] = key
		}
	default:
		if key != "" && !(s.local && strings.HasPrefix(key, "ENV/")) {
			creds["access-token"] = key
		}
		settings["max_tokens"] = orDefault(d.MaxTokens, 8192)
	}
	if d.Temperature != nil && s.id != "google" {
		settings["temperature"] = *d.Temperature
	}
	out := map[string]any{"id": s.id, "credentials": creds, "settings": settings}
	options := map[string]any{}
	if s.id == "google" {
		options["model"] = model
	}
	if d.ReasoningEffort != "" {
		// nb maps it onto each API (OpenAI's reasoning_effort,
		// Anthropic's thinking budget, Gemini's thinkingBudget).
		options["reasoning-effort"] = d.ReasoningEffort
	}
	if len(options) > 0 {
		out["options"] = options
	}
	return out, nil
}

func orDefault(v, def int) int {
	if v > 0 {
		return v
	}
	return def
}

// ExtraHeaders are the chosen provider's extraHeaders (sent by the
// provider's HTTP client).
func (c *Config) ExtraHeaders() map[string]string {
	if c.Agents.Defaults.Model == "" {
		return nil
	}
	_, p, err := c.choose()
	if err != nil {
		return nil
	}
	return p.ExtraHeaders
}

// RestrictToWorkspace reports tools.restrictToWorkspace (default true in
// nb; nanobot's default false is honoured only when written).
func (c *Config) RestrictToWorkspace() bool {
	return c.Tools.RestrictToWorkspace == nil || *c.Tools.RestrictToWorkspace
}

// builtins maps nanobot's tools onto nb's built-in tools.
func (c *Config) builtins() (map[string]any, []string) {
	var warnings []string
	t := c.Tools
	b := map[string]any{
		// nanobot's editing tool (edit_file with old_text/new_text), whatever the model.
		"files": map[string]any{"workspace": c.Workspace, "write": true, "profile": "nanobot"},
		"web":   map[string]any{"fetch": true},
		"spawn": map[string]any{"max-depth": 1},
	}
	search := map[string]any{"api-key": "ENV/BRAVE_API_KEY"}
	if t.Web.Search.APIKey != "" {
		search["api-key"] = t.Web.Search.APIKey
	}
	if t.Web.Search.MaxResults > 0 {
		search["count"] = t.Web.Search.MaxResults
	}
	b["web"].(map[string]any)["search"] = search
	if t.Exec.Enable == nil || *t.Exec.Enable {
		e := map[string]any{"workspace": c.Workspace, "sandbox": "auto"}
		if t.Exec.Timeout > 0 {
			e["timeout"] = min(t.Exec.Timeout, 600)
		}
		if t.Exec.Sandbox == "bwrap" {
			e["sandbox"] = "on"
		}
		if !c.RestrictToWorkspace() {
			e["sandbox"] = "off"
			warnings = append(warnings, "tools.restrictToWorkspace is false: exec runs commands WITHOUT the sandbox, with your rights, on every file and the network of this machine (the file tools stay inside "+c.Workspace+"); remove the key, or set it to true, to keep commands in the sandbox")
		}
		b["exec"] = e
	}
	if t.Web.Proxy != "" {
		warnings = append(warnings, "tools.web.proxy is ignored: web_fetch connects directly, to the address it checked")
	}
	return b, warnings
}

// mcp maps tools.mcpServers onto a cartridge's mcp key.
func (c *Config) mcp() map[string]any {
	out := map[string]any{}
	for name, s := range c.Tools.MCPServers {
		m := map[string]any{}
		if s.Type != "" {
			m["type"] = map[string]string{"streamableHttp": "http", "streamable_http": "http"}[s.Type]
			if m["type"] == "" {
				m["type"] = s.Type
			}
		}
		if s.Command != "" {
			m["command"] = s.Command
		}
		if len(s.Args) > 0 {
			m["args"] = s.Args
		}
		if len(s.Env) > 0 {
			m["env"] = s.Env
		}
		if s.URL != "" {
			m["url"] = s.URL
		}
		if len(s.Headers) > 0 {
			m["headers"] = s.Headers
		}
		if s.ToolTimeout > 0 {
			m["timeout"] = s.ToolTimeout
		}
		if s.EnabledTools != nil && !slices.Contains(s.EnabledTools, "*") {
			tools := []string{}
			for _, t := range s.EnabledTools {
				tools = append(tools, strings.TrimPrefix(t, "mcp_"+name+"_"))
			}
			m["tools"] = tools
		}
		out[name] = m
	}
	return out
}
