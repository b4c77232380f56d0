package config

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/nbots/nb/cartridge"
)

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
	for typo, key := range c.typos {
		if key == "agents.defaults.model" && d.Model == "" {
			// Without it nb's default model would answer, on a key the
			// user never set: the typo is the error.
			return nil, nil, fmt.Errorf("%s: %s: unknown key: did you mean %q? (agents.defaults.model is not set)", c.name(), typo, "model")
		}
	}
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
	r, err := c.Route()
	if err != nil {
		return nil, err
	}
	key := r.Key
	if key == "" && r.KeyEnv != "" {
		key = "ENV/" + r.KeyEnv
	}
	creds := map[string]any{}
	settings := map[string]any{"model": r.Model}
	options := map[string]any{}
	maxTokens := c.AnswerTokens()
	temperature := d.Temperature
	if strings.Contains(strings.ToLower(r.Model), "kimi-k2.5") {
		// nanobot's model override: Kimi K2.5 takes temperature 1.0 only.
		one := 1.0
		temperature = &one
	}
	id := r.API
	switch r.API {
	case apiAnthropic:
		if key != "" {
			creds["api-key"] = key
		}
		if r.Base != "" {
			creds["address"] = r.Base
		}
		settings["max_tokens"] = maxTokens
	case apiGoogle:
		if key != "" {
			creds["api-key"] = key
		}
		if r.Base != "" {
			creds["address"] = r.Base
		}
		creds["service"] = "generative-language-api"
		delete(settings, "model")
		options["model"] = r.Model
		gc := map[string]any{"maxOutputTokens": maxTokens}
		if temperature != nil {
			gc["temperature"] = *temperature
		}
		settings["generationConfig"] = gc
		temperature = nil
	case apiMistral:
		if key != "" {
			creds["api-key"] = key
		}
		if r.Base != "" {
			creds["address"] = r.Base
		}
		settings["max_tokens"] = maxTokens
	case apiOllama:
		creds["address"] = r.Base
		if key != "" && !strings.HasPrefix(key, "ENV/") {
			creds["access-token"] = key
		}
	case apiAzure:
		id = "openai"
		creds["address"], creds["api-key"] = r.Base, key
		options["endpoint"] = "azure"
		settings["max_completion_tokens"] = maxTokens
		if d.ReasoningEffort != "" || azureNoTemperature(r.Model) {
			temperature = nil // nanobot leaves it out for reasoning deployments
		}
	default: // Chat Completions at the OpenAI SDK's base_url
		id = "openai"
		creds["address"] = r.Base
		options["endpoint"] = "base-url"
		if key != "" {
			creds["access-token"] = key
		}
		if r.Provider == "openai" && r.BaseFrom == "" {
			settings["max_completion_tokens"] = maxTokens // OpenAI's reasoning models refuse max_tokens
		} else {
			settings["max_tokens"] = maxTokens
		}
	}
	if temperature != nil {
		settings["temperature"] = *temperature
	}
	if d.ReasoningEffort != "" {
		// nb maps it onto each API (OpenAI's reasoning_effort,
		// Anthropic's thinking budget, Gemini's thinkingBudget).
		options["reasoning-effort"] = d.ReasoningEffort
	}
	out := map[string]any{"id": id, "credentials": creds, "settings": settings}
	if len(options) > 0 {
		out["options"] = options
	}
	return out, nil
}

// azureNoTemperature says whether an Azure deployment is one nanobot
// sends no temperature (gpt-5, o1, o3, o4: reasoning models).
func azureNoTemperature(deployment string) bool {
	name := strings.ToLower(deployment)
	for _, t := range []string{"gpt-5", "o1", "o3", "o4"} {
		if strings.Contains(name, t) {
			return true
		}
	}
	return false
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
	r, err := c.Route()
	if err != nil {
		return nil
	}
	return r.Headers
}

// RestrictToWorkspace reports tools.restrictToWorkspace (default true in
// nb; nanobot's default false is honoured only when written: the file
// tools then reach paths outside the workspace, exec keeps its sandbox).
func (c *Config) RestrictToWorkspace() bool {
	return c.Tools.RestrictToWorkspace == nil || *c.Tools.RestrictToWorkspace
}

// builtins maps nanobot's tools onto nb's built-in tools.
func (c *Config) builtins() (map[string]any, []string) {
	var warnings []string
	t := c.Tools
	b := map[string]any{
		// nanobot's editing tool (edit_file with old_text/new_text), whatever the model.
		"files": map[string]any{"workspace": c.Workspace, "write": true, "profile": "nanobot", "anywhere": !c.RestrictToWorkspace()},
		"web":   map[string]any{"fetch": true},
		"spawn": map[string]any{"max-depth": 1},
	}
	if search, w := c.search(); search != nil {
		b["web"].(map[string]any)["search"] = search
	} else {
		warnings = append(warnings, w)
	}
	if len(t.SSRFWhitelist) > 0 {
		warnings = append(warnings, "tools.ssrfWhitelist is ignored: web_fetch reaches public addresses only")
	}
	if c.Agents.Defaults.MaxToolResultChars > 0 {
		warnings = append(warnings, "agents.defaults.maxToolResultChars is ignored: each tool bounds its own output (see docs/builtins.md)")
	}
	if t.Exec.Enable == nil || *t.Exec.Enable {
		e := map[string]any{"workspace": c.Workspace, "sandbox": "auto"}
		if t.Exec.Timeout > 0 {
			e["timeout"] = min(t.Exec.Timeout, 600)
		}
		if t.Exec.PathAppend != "" {
			// nanobot appends it to the commands' PATH; the sandbox shows
			// its folders (read-only) so that their programs run.
			e["path-append"] = t.Exec.PathAppend
			var dirs []string
			for _, dir := range filepath.SplitList(t.Exec.PathAppend) {
				if dir = expandHome(dir, c.env); filepath.IsAbs(dir) {
					dirs = append(dirs, dir)
				}
			}
			if len(dirs) > 0 {
				e["read-only"] = dirs
			}
		}
		switch strings.ToLower(t.Exec.Sandbox) {
		case "bwrap", "on":
			e["sandbox"] = "on"
		case "off", "none":
			// Only an explicit word turns the sandbox off.
			e["sandbox"] = "off"
			warnings = append(warnings, "tools.exec.sandbox is "+t.Exec.Sandbox+": exec runs commands WITHOUT the sandbox, with your rights, on every file and the network of this machine")
		}
		b["exec"] = e
	}
	if !c.RestrictToWorkspace() {
		exec := "exec stays in its sandbox (tools.exec.sandbox: off turns it off)"
		if t.Exec.Enable != nil && !*t.Exec.Enable {
			exec = "exec is off"
		}
		warnings = append(warnings, "tools.restrictToWorkspace is false: the file tools (read_file, write_file, edit_file, list_dir, glob, grep) read and write any path you can, outside "+c.Workspace+" too (relative paths start there), as nanobot's do; "+exec+"; set it to true to keep the file tools in the workspace")
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
		// nanobot names the tools mcp_<server>_<tool>: prompts and
		// skills that name them keep working.
		m := map[string]any{"tool-prefix": "mcp_" + name + "_"}
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

// searchKeys are the variables nanobot reads a search engine's key (or
// SearXNG's address) from when tools.web.search leaves it out.
var searchKeys = map[string]string{"brave": "BRAVE_API_KEY", "tavily": "TAVILY_API_KEY", "jina": "JINA_API_KEY", "searxng": "SEARXNG_BASE_URL"}

// search maps tools.web.search onto builtins.web.search: nil, with the
// warning that says why, when web_search cannot search (no key, where
// nanobot would fall back to DuckDuckGo, which nb does not scrape).
func (c *Config) search() (map[string]any, string) {
	s := c.Tools.Web.Search
	engine := strings.ToLower(strings.TrimSpace(s.Provider))
	if engine == "" {
		engine = "brave"
	}
	out := map[string]any{"provider": engine}
	if s.MaxResults > 0 {
		out["count"] = min(s.MaxResults, 10)
	}
	if s.BaseURL != "" {
		out["base-url"] = s.BaseURL
	}
	variable, known := searchKeys[engine]
	switch {
	case engine == "duckduckgo":
		return nil, "tools.web.search.provider is duckduckgo, which has no API nb speaks: web_search is left out (set brave, tavily, jina or searxng with tools.web.search.apiKey or baseUrl)"
	case !known:
		return nil, fmt.Sprintf("tools.web.search.provider: unknown search provider %q (brave, tavily, searxng, jina): web_search is left out", s.Provider)
	case engine == "searxng":
		if s.BaseURL == "" {
			if v, _ := c.env.Lookup(variable); v == "" {
				return nil, "tools.web.search.baseUrl is not set (nor SEARXNG_BASE_URL): the searxng provider needs the address of its instance; web_search is left out"
			}
			out["base-url"] = "ENV/" + variable
		}
	case s.APIKey != "":
		out["api-key"] = s.APIKey
	default:
		if v, _ := c.env.Lookup(variable); v == "" {
			return nil, fmt.Sprintf("tools.web.search.apiKey is not set (nor %s): web_search is left out (nanobot falls back to DuckDuckGo, which nb does not scrape)", variable)
		}
		out["api-key"] = "ENV/" + variable
	}
	return out, ""
}
