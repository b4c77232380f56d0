package config

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/nbots/nb/cartridge"
)

// This file is nanobot's provider registry (nanobot/providers/registry.py
// of v0.1.4.post5) and its choice of a provider for the model
// (Config._match_provider), with where each provider's requests go.

// API kinds: which of nb's providers speaks to a nanobot provider.
const (
	apiChat      = "chat"      // OpenAI Chat Completions at <base>/chat/completions (the OpenAI SDK's base_url)
	apiAnthropic = "anthropic" // Anthropic's Messages API
	apiGoogle    = "google"    // Gemini's generateContent (LiteLLM's gemini/ route)
	apiOllama    = "ollama"    // Ollama's /api/chat (LiteLLM's ollama_chat/ route)
	apiAzure     = "azure"     // an Azure OpenAI deployment
	apiMistral   = "mistral"   // Mistral's API (nb's, not in nanobot's registry)
	apiOAuth     = "oauth"     // logs in with OAuth: not supported
)

// providerSpec is one provider of nanobot's registry.
type providerSpec struct {
	name     string
	keywords []string
	api      string
	// base is where requests go without providers.<name>.apiBase: the
	// OpenAI SDK's base_url for apiChat (what LiteLLM or nanobot use),
	// the host for the native APIs; "" needs an apiBase.
	base string
	// envKey (nb) is the variable read when no provider has a key.
	envKey  string
	gateway bool // routes any model (nanobot's is_gateway)
	local   bool // a local server, needs no key (is_local)
	oauth   bool // logs in with OAuth (is_oauth)
	// stripModelPrefix sends only the model's last segment (aihubmix,
	// the coding plans, byteplus).
	stripModelPrefix bool
	// prefix is LiteLLM's prefix of the provider, taken off the model
	// with the provider's own name ("zai/glm-4" sends "glm-4").
	prefix string
	// detectKeyPrefix and detectBaseKeyword find a gateway from a key or
	// an address (LiteLLM's find_gateway).
	detectKeyPrefix, detectBaseKeyword string
}

// specs in nanobot's order, which is its order of priority; mistral is
// nb's own, last.
var specs = []providerSpec{
	{name: "custom", api: apiChat, base: "http://localhost:8000/v1"},
	{name: "azure_openai", keywords: []string{"azure", "azure-openai"}, api: apiAzure},
	{name: "openrouter", keywords: []string{"openrouter"}, api: apiChat, base: "https://openrouter.ai/api/v1", envKey: "OPENROUTER_API_KEY", gateway: true, detectKeyPrefix: "sk-or-", detectBaseKeyword: "openrouter"},
	{name: "aihubmix", keywords: []string{"aihubmix"}, api: apiChat, base: "https://aihubmix.com/v1", envKey: "AIHUBMIX_API_KEY", gateway: true, stripModelPrefix: true, detectBaseKeyword: "aihubmix"},
	{name: "siliconflow", keywords: []string{"siliconflow"}, api: apiChat, base: "https://api.siliconflow.cn/v1", envKey: "SILICONFLOW_API_KEY", gateway: true, detectBaseKeyword: "siliconflow"},
	{name: "volcengine", keywords: []string{"volcengine", "volces", "ark"}, api: apiChat, base: "https://ark.cn-beijing.volces.com/api/v3", envKey: "VOLCENGINE_API_KEY", gateway: true, detectBaseKeyword: "volces"},
	{name: "volcengine_coding_plan", keywords: []string{"volcengine-plan"}, api: apiChat, base: "https://ark.cn-beijing.volces.com/api/coding/v3", gateway: true, stripModelPrefix: true},
	{name: "byteplus", keywords: []string{"byteplus"}, api: apiChat, base: "https://ark.ap-southeast.bytepluses.com/api/v3", envKey: "BYTEPLUS_API_KEY", gateway: true, stripModelPrefix: true, detectBaseKeyword: "bytepluses"},
	{name: "byteplus_coding_plan", keywords: []string{"byteplus-plan"}, api: apiChat, base: "https://ark.ap-southeast.bytepluses.com/api/coding/v3", gateway: true, stripModelPrefix: true},
	{name: "anthropic", keywords: []string{"anthropic", "claude"}, api: apiAnthropic, envKey: "ANTHROPIC_API_KEY"},
	{name: "openai", keywords: []string{"openai", "gpt"}, api: apiChat, base: "https://api.openai.com/v1", envKey: "OPENAI_API_KEY"},
	{name: "openai_codex", keywords: []string{"openai-codex"}, api: apiOAuth, oauth: true, detectBaseKeyword: "codex"},
	{name: "github_copilot", keywords: []string{"github_copilot", "copilot"}, api: apiOAuth, oauth: true, prefix: "github_copilot"},
	{name: "deepseek", keywords: []string{"deepseek"}, api: apiChat, base: "https://api.deepseek.com/beta", envKey: "DEEPSEEK_API_KEY", prefix: "deepseek"},
	{name: "gemini", keywords: []string{"gemini"}, api: apiGoogle, envKey: "GEMINI_API_KEY", prefix: "gemini"},
	{name: "zhipu", keywords: []string{"zhipu", "glm", "zai"}, api: apiChat, base: "https://api.z.ai/api/paas/v4", envKey: "ZAI_API_KEY", prefix: "zai"},
	{name: "dashscope", keywords: []string{"qwen", "dashscope"}, api: apiChat, base: "https://dashscope-intl.aliyuncs.com/compatible-mode/v1", envKey: "DASHSCOPE_API_KEY", prefix: "dashscope"},
	{name: "moonshot", keywords: []string{"moonshot", "kimi"}, api: apiChat, base: "https://api.moonshot.ai/v1", envKey: "MOONSHOT_API_KEY", prefix: "moonshot"},
	{name: "minimax", keywords: []string{"minimax"}, api: apiChat, base: "https://api.minimax.io/v1", envKey: "MINIMAX_API_KEY", prefix: "minimax"},
	{name: "vllm", keywords: []string{"vllm"}, api: apiChat, local: true, prefix: "hosted_vllm"},
	{name: "ollama", keywords: []string{"ollama", "nemotron"}, api: apiOllama, base: "http://localhost:11434", local: true, prefix: "ollama_chat", detectBaseKeyword: "11434"},
	{name: "groq", keywords: []string{"groq"}, api: apiChat, base: "https://api.groq.com/openai/v1", envKey: "GROQ_API_KEY", prefix: "groq"},
	{name: "mistral", keywords: []string{"mistral"}, api: apiMistral, envKey: "MISTRAL_API_KEY", prefix: "mistral"},
}

// normName is a provider's name as nanobot's registry spells it
// ("azure-openai" and "azureOpenai" are azure_openai).
func normName(name string) string {
	var b strings.Builder
	for i, r := range name {
		switch {
		case r == '-':
			b.WriteByte('_')
		case r >= 'A' && r <= 'Z':
			if i > 0 {
				b.WriteByte('_')
			}
			b.WriteRune(r - 'A' + 'a')
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

func specOf(name string) (providerSpec, bool) {
	n := normName(name)
	for _, s := range specs {
		if s.name == n {
			return s, true
		}
	}
	return providerSpec{}, false
}

// provider returns providers.<name> whichever way it was written.
func (c *Config) provider(name string) Provider {
	for k, p := range c.Providers {
		if normName(k) == name {
			return p
		}
	}
	return Provider{}
}

// Route is where the model's requests go: the provider nanobot would
// choose, and what nb sends it.
type Route struct {
	// Provider is the name in nanobot's registry (providers.<Provider>).
	Provider string
	// API is the kind of API (see the api constants).
	API string
	// Base is the address requests go to: the OpenAI SDK's base_url for
	// Chat Completions, else the host of the native API.
	Base string
	// Model is the model sent.
	Model string
	// Key is the API key, "" when none (local servers); KeyEnv is the
	// variable nb reads it from when the configuration has none.
	Key, KeyEnv string
	// KeyFrom is the configuration key the key comes from
	// (providers.<name>.apiKey), BaseFrom that of an apiBase ("" when the
	// provider's default serves).
	KeyFrom, BaseFrom string
	// Headers are providers.<name>.extraHeaders.
	Headers map[string]string
}

// match is nanobot's Config._match_provider: a forced provider, else the
// provider named by the model's prefix, else the first whose keyword the
// model has, each only when it has a key (or is local, or OAuth); else
// the first local provider with an apiBase, else the first provider with
// a key. nb goes on where nanobot stops: a custom provider with an
// apiBase alone, then the provider the model names whose variable
// (ANTHROPIC_API_KEY...) is set.
func (c *Config) match() (providerSpec, error) {
	d := c.Agents.Defaults
	if forced := d.Provider; forced != "" && forced != "auto" {
		s, ok := specOf(forced)
		if !ok {
			names := make([]string, len(specs))
			for i, s := range specs {
				names[i] = s.name
			}
			msg := fmt.Sprintf("agents.defaults.provider: unknown provider %q", forced)
			if near := cartridge.Nearest(normName(forced), names); near != "" {
				msg += fmt.Sprintf(": did you mean %q?", near)
			}
			return providerSpec{}, fmt.Errorf("%s", msg)
		}
		return s, nil
	}
	model := strings.ToLower(d.Model)
	norm := strings.ReplaceAll(model, "-", "_")
	prefix, _, _ := strings.Cut(model, "/")
	if !strings.Contains(model, "/") {
		prefix = ""
	}
	usable := func(s providerSpec) bool { return s.oauth || s.local || c.provider(s.name).APIKey != "" }
	kwMatches := func(s providerSpec) bool {
		for _, kw := range s.keywords {
			if strings.Contains(model, kw) || strings.Contains(norm, strings.ReplaceAll(kw, "-", "_")) {
				return true
			}
		}
		return false
	}
	if prefix != "" {
		for _, s := range specs {
			if normName(prefix) == s.name && usable(s) {
				return s, nil
			}
		}
	}
	for _, s := range specs {
		if kwMatches(s) && usable(s) {
			return s, nil
		}
	}
	var local *providerSpec
	for _, s := range specs {
		if !s.local || c.provider(s.name).APIBase == "" {
			continue
		}
		if s.detectBaseKeyword != "" && strings.Contains(c.provider(s.name).APIBase, s.detectBaseKeyword) {
			return s, nil
		}
		if local == nil {
			local = &s
		}
	}
	if local != nil {
		return *local, nil
	}
	for _, s := range specs {
		if !s.oauth && c.provider(s.name).APIKey != "" {
			return s, nil
		}
	}
	// Where nanobot stops ("No API key configured"), nb goes on.
	if c.provider("custom").APIBase != "" {
		s, _ := specOf("custom")
		return s, nil
	}
	for _, s := range specs {
		if s.envKey == "" || (normName(prefix) != s.name && !kwMatches(s)) {
			continue
		}
		if v, _ := c.env.Lookup(s.envKey); v != "" {
			return s, nil
		}
	}
	if d.Model == "" {
		return providerSpec{}, fmt.Errorf("agents.defaults.model is not set: name the model (nanobot's default is anthropic/claude-opus-4-5)")
	}
	return providerSpec{}, fmt.Errorf("agents.defaults.model %q: no provider has an apiKey: set providers.<name>.apiKey (providers.openrouter.apiKey routes any model), or agents.defaults.provider", d.Model)
}

// Route says where the model's requests go, as nanobot would send them.
func (c *Config) Route() (Route, error) {
	s, err := c.match()
	if err != nil {
		return Route{}, err
	}
	d := c.Agents.Defaults
	p := c.provider(s.name)
	r := Route{Provider: s.name, API: s.api, Model: d.Model, Key: p.APIKey, Headers: p.ExtraHeaders}
	if p.APIKey != "" {
		r.KeyFrom = "providers." + s.name + ".apiKey"
	}
	if p.APIBase != "" {
		r.Base, r.BaseFrom = p.APIBase, "providers."+s.name+".apiBase"
		if u, err := url.Parse(p.APIBase); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return Route{}, fmt.Errorf("%s: %q is not the http:// or https:// address of the %s server (e.g. %s)", r.BaseFrom, p.APIBase, s.name, orString(s.base, "http://localhost:8000/v1"))
		}
	}
	switch s.api {
	case apiOAuth:
		return Route{}, fmt.Errorf("agents.defaults.model %q goes to %s, which logs in with OAuth (nanobot provider login): nb does not support OAuth logins yet; use a provider with an apiKey, e.g. providers.openrouter.apiKey", d.Model, s.name)
	case apiAzure:
		if p.APIKey == "" || p.APIBase == "" {
			return Route{}, fmt.Errorf("providers.azure_openai: Azure OpenAI needs apiKey and apiBase (https://<resource>.openai.azure.com); agents.defaults.model is the deployment's name")
		}
		return r, nil
	}
	if s.name == "custom" {
		// nanobot's CustomProvider: the OpenAI SDK, the model as written.
		if r.Base == "" {
			r.Base = s.base
		}
		return r, nil
	}
	// LiteLLM's route: a gateway or a local server (chosen, or found by
	// the key's prefix or the address) takes the model whole (or its last
	// segment); a standard provider takes it without its own prefix.
	route := s
	if !s.gateway && !s.local {
		for _, g := range specs {
			if g.detectKeyPrefix != "" && strings.HasPrefix(p.APIKey, g.detectKeyPrefix) ||
				g.detectBaseKeyword != "" && strings.Contains(p.APIBase, g.detectBaseKeyword) {
				if g.gateway || g.local {
					route = g
				}
				break
			}
		}
	}
	if route.gateway || route.local {
		if route.stripModelPrefix {
			r.Model = r.Model[strings.LastIndex(r.Model, "/")+1:]
		}
		r.API = route.api
	} else if first, rest, ok := strings.Cut(r.Model, "/"); ok {
		if n := normName(first); n == s.name || n == s.prefix {
			r.Model = rest
		}
	}
	if r.Base == "" {
		r.Base = route.base
	}
	if r.Base == "" && r.API != apiAnthropic && r.API != apiGoogle && r.API != apiMistral {
		return Route{}, fmt.Errorf("providers.%s.apiBase: the %s provider needs the address of its server (e.g. http://localhost:8000/v1)", s.name, s.name)
	}
	if r.Key == "" && !s.local {
		r.KeyEnv = s.envKey
		if v, _ := c.env.Lookup(s.envKey); s.envKey == "" || v == "" {
			return Route{}, fmt.Errorf("providers.%s.apiKey is not set: the %s provider serves agents.defaults.model %q and needs an API key", s.name, s.name, d.Model)
		}
	}
	return r, nil
}

// ProviderName is the provider nanobot would choose for the model ("" when
// none can serve it).
func (c *Config) ProviderName() string {
	s, err := c.match()
	if err != nil {
		return ""
	}
	return s.name
}

// Words rewrites a message of nb's (a provider's error, a limit's
// notice) in the configuration's words: the keys of the cartridge the
// gateway builds become the keys the user wrote
// (provider.credentials.access-token is providers.custom.apiKey,
// safety.tools.rounds is agents.defaults.maxToolIterations...).
func (c *Config) Words() func(string) string {
	pairs := []string{
		"safety.tools.rounds", "agents.defaults.maxToolIterations",
		"builtins.web.search.api-key", "tools.web.search.apiKey",
		"builtins.web.search.base-url", "tools.web.search.baseUrl",
	}
	if c.Agents.Defaults.Model != "" && c.Agents.Defaults.Cartridge == "" {
		if r, err := c.Route(); err == nil {
			key, base := "providers."+r.Provider+".apiKey", "providers."+r.Provider+".apiBase"
			pairs = append(pairs,
				"provider.credentials.access-token", key,
				"provider.credentials.api-key", key,
				"provider.credentials.address", base,
				"provider.settings.model", "agents.defaults.model",
				"provider.options.model", "agents.defaults.model")
		}
	}
	return strings.NewReplacer(pairs...).Replace
}

func orString(s, def string) string {
	if s != "" {
		return s
	}
	return def
}

// PromptTokens bounds a request's prompt (estimated tokens):
// agents.defaults.contextWindowTokens less the answer's maxTokens and a
// margin for the estimate; 0 when the window is not set (the model's own
// bound then serves).
func (c *Config) PromptTokens() int {
	d := c.Agents.Defaults
	if d.ContextWindowTokens <= 0 {
		return 0
	}
	return max(d.ContextWindowTokens-c.AnswerTokens()-1024, d.ContextWindowTokens/4)
}

// AnswerTokens is the cap of an answer: agents.defaults.maxTokens,
// 8,192 when unset (nanobot's default).
func (c *Config) AnswerTokens() int { return orDefault(c.Agents.Defaults.MaxTokens, 8192) }

// ProviderSetup is one provider of nanobot's registry as nanobot status
// shows it.
type ProviderSetup struct {
	// Name is the provider's (providers.<Name>).
	Name string
	// Set is true when it has an apiKey (a local provider: an apiBase).
	Set bool
	// Local and OAuth are its kind: a local server (Base is its apiBase)
	// or an OAuth login, which nanobot shows as set.
	Local, OAuth bool
	Base         string
}

// ProviderSetups are the providers of nanobot's registry, in its order,
// with what the configuration sets of each (never the key itself).
func (c *Config) ProviderSetups() []ProviderSetup {
	out := make([]ProviderSetup, 0, len(specs))
	for _, s := range specs {
		p := c.provider(s.name)
		ps := ProviderSetup{Name: s.name, Local: s.local, OAuth: s.oauth}
		switch {
		case s.oauth:
			ps.Set = true
		case s.local:
			ps.Set, ps.Base = p.APIBase != "", p.APIBase
		default:
			ps.Set = p.APIKey != ""
		}
		out = append(out, ps)
	}
	return out
}
