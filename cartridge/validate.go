package cartridge

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/nbots/nb/color"
)

// ProviderIDs are the providers of the specification.
var ProviderIDs = []string{"anthropic", "cohere", "google", "maritaca", "mistral", "ollama", "openai"}

// Languages are the source keys of adapters and tools.
var Languages = []string{"lua", "fennel", "clojure"}

type checker struct {
	c   *Cartridge
	err *Error
}

func (k *checker) fail(path, format string, args ...any) {
	if k.err != nil {
		return
	}
	// "tools[0] (name).parameters" is located as "tools[0].parameters".
	located := path
	if i := strings.Index(located, " ("); i >= 0 {
		if j := strings.Index(located[i:], ")"); j >= 0 {
			located = located[:i] + located[i+j+1:]
		}
	}
	k.err = &Error{File: k.c.Path, Line: k.c.lineOf(located), Key: path, Msg: fmt.Sprintf(format, args...)}
}

// lineOf finds the line of path, or of its closest parent that has one.
func (c *Cartridge) lineOf(path string) int {
	for path != "" {
		if l, ok := c.lines[path]; ok {
			return l
		}
		i := strings.LastIndexAny(path, ".[")
		if i < 0 {
			return 0
		}
		path = path[:i]
	}
	return 0
}

func kind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case map[string]any:
		return "a mapping"
	case []any:
		return "a list"
	case string:
		return "text"
	case bool:
		return "a boolean"
	default:
		return "a number"
	}
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// mapping checks that the value at path, if present and not null, is a
// mapping, and returns it.
func (k *checker) mapping(parent map[string]any, path, key string) map[string]any {
	v, ok := parent[key]
	if !ok || v == nil {
		return nil
	}
	m, isMap := v.(map[string]any)
	if !isMap {
		k.fail(join(path, key), "must be a mapping of keys, not %s", kind(v))
	}
	return m
}

// scalar checks that the value is text or a number (or null).
func (k *checker) scalar(parent map[string]any, path, key string) {
	v, ok := parent[key]
	if !ok || v == nil {
		return
	}
	switch v.(type) {
	case map[string]any, []any:
		k.fail(join(path, key), "must be text, not %s", kind(v))
	}
}

func (k *checker) boolean(parent map[string]any, path, key string) {
	v, ok := parent[key]
	if !ok || v == nil {
		return
	}
	if _, isBool := v.(bool); !isBool {
		k.fail(join(path, key), "must be true or false, not %s", kind(v))
	}
}

// positive checks that the value, if present and not null, is a whole
// number above zero.
func (k *checker) positive(parent map[string]any, path, key string) {
	v, ok := parent[key]
	if !ok || v == nil {
		return
	}
	if n, isInt := v.(int64); !isInt || n <= 0 {
		k.fail(join(path, key), "must be a whole number above 0, not %v", v)
	}
}

func (k *checker) colour(parent map[string]any, path, key string) {
	k.scalar(parent, path, key)
	if s, ok := parent[key].(string); ok && k.err == nil {
		if _, err := color.SGR(s); err != nil {
			k.fail(join(path, key), "%v", err)
		}
	}
}

func (k *checker) adapter(parent map[string]any, path string) {
	a := k.mapping(parent, path, "adapter")
	for _, lang := range Languages {
		k.scalar(a, join(path, "adapter"), lang)
	}
}

// validate checks the types of every key the specification defines.
// It does not require a provider: partial cartridges still load (for
// `nb … cartridge`); RequireProvider checks that before a run.
func (c *Cartridge) validate() error {
	k := &checker{c: c}
	d := c.Data
	c.unknownKeys()
	c.missingModel()

	meta := k.mapping(d, "", "meta")
	for _, key := range []string{"symbol", "name", "author", "version", "license", "description"} {
		k.scalar(meta, "meta", key)
	}

	if behaviors := k.mapping(d, "", "behaviors"); behaviors != nil {
		for _, section := range []string{"interaction", "boot"} {
			b := k.mapping(behaviors, "behaviors", section)
			for _, key := range []string{"directive", "backdrop", "instruction"} {
				k.scalar(b, "behaviors."+section, key)
			}
		}
	}

	if ifs := k.mapping(d, "", "interfaces"); ifs != nil {
		k.interfaceScope(ifs, "interfaces")
		for _, mode := range []string{"repl", "eval"} {
			if m := k.mapping(ifs, "interfaces", mode); m != nil {
				k.interfaceScope(m, "interfaces."+mode)
			}
		}
		if repl := k.mapping(ifs, "interfaces", "repl"); repl != nil {
			if p, ok := repl["prompt"]; ok && p != nil {
				switch t := p.(type) {
				case string:
				case []any:
					for i, part := range t {
						path := fmt.Sprintf("interfaces.repl.prompt[%d]", i)
						pm, ok := part.(map[string]any)
						if !ok {
							k.fail(path, "must be a mapping with text (and color), not %s", kind(part))
							break
						}
						k.scalar(pm, path, "text")
						k.colour(pm, path, "color")
					}
				default:
					k.fail("interfaces.repl.prompt", "must be a list of {text, color} or text, not %s", kind(p))
				}
			}
		}
	}

	if safety := k.mapping(d, "", "safety"); safety != nil {
		k.boolean(k.mapping(safety, "safety", "functions"), "safety.functions", "sandboxed")
		k.functionLimits(safety)
		tools := k.mapping(safety, "safety", "tools")
		k.boolean(tools, "safety.tools", "confirmable")
		k.positive(tools, "safety.tools", "rounds")
		k.positive(safety, "safety", "tokens")
		if v, ok := safety["loops"]; ok && v != nil {
			if n, isInt := v.(int64); !isInt || n < 2 || n > 1000 {
				k.fail("safety.loops", "must be the loop detector's window, a whole number of tool calls from 2 to 1000, not %v", v)
			}
		}
	}
	if state := k.mapping(d, "", "state"); state != nil {
		k.scalar(state, "state", "path")
		k.scalar(state, "state", "directory")
		k.positive(state, "state", "budget")
	}

	if p := k.mapping(d, "", "provider"); p != nil {
		if id, ok := p["id"]; ok && id != nil {
			s, isText := id.(string)
			if !isText {
				k.fail("provider.id", "must be text, not %s", kind(id))
			} else if !contains(ProviderIDs, s) {
				k.fail("provider.id", "unsupported provider %q (supported: %s)", s, strings.Join(ProviderIDs, ", "))
			}
		}
		for _, key := range []string{"credentials", "options", "settings"} {
			k.mapping(p, "provider", key)
		}
		k.address(k.mapping(p, "provider", "credentials"))
	}

	if tools, ok := d["tools"]; ok && tools != nil {
		list, isList := tools.([]any)
		if !isList {
			k.fail("tools", "must be a list of tools (- name: …), not %s", kind(tools))
		}
		seen := map[string]string{}
		for i, t := range list {
			path := fmt.Sprintf("tools[%d]", i)
			tm, isMap := t.(map[string]any)
			if !isMap {
				k.fail(path, "a tool must be a mapping with name, description and a lua, fennel or clojure source, not %s", kind(t))
				break
			}
			name, _ := tm["name"].(string)
			if strings.TrimSpace(name) == "" {
				k.fail(path, "the tool has no name")
				break
			}
			path = fmt.Sprintf("tools[%d] (%s)", i, name)
			if prev, dup := seen[matchKey(name)]; dup {
				k.fail(path, "a tool named %q is already defined (%s)", name, prev)
			}
			seen[matchKey(name)] = name
			k.scalar(tm, path, "description")
			if params, ok := tm["parameters"]; ok && params != nil {
				pm, isMap := params.(map[string]any)
				if !isMap {
					k.fail(path+".parameters", "must be a JSON Schema mapping (type: object, properties: …), not %s", kind(params))
				} else if t, ok := pm["type"]; ok && t != "object" {
					k.fail(path+".parameters", "the schema's type must be object, not %v", t)
				}
			}
			var langs []string
			for _, lang := range Languages {
				if v, ok := tm[lang]; ok && v != nil {
					k.scalar(tm, path, lang)
					if strings.TrimSpace(text(v)) != "" {
						langs = append(langs, lang)
					}
				}
			}
			_, hasRobo := tm["robopage"]
			switch {
			case len(langs) > 1:
				k.fail(path, "conflicting tools: the tool has more than one source (%s); keep one", strings.Join(langs, ", "))
			case len(langs) == 0 && !hasRobo:
				k.fail(path, "missing source code: give the tool a lua, fennel or clojure source")
			}
		}
	}

	if robo, ok := d["robopages"]; ok && robo != nil {
		list, isList := robo.([]any)
		if !isList {
			k.fail("robopages", "must be a list of {path, filter} entries, not %s", kind(robo))
		}
		for i, item := range list {
			path := fmt.Sprintf("robopages[%d]", i)
			switch t := item.(type) {
			case string:
			case map[string]any:
				if p, _ := t["path"].(string); strings.TrimSpace(p) == "" {
					k.fail(path, "needs a path: a robopage file or a folder of pages")
				}
				k.scalar(t, path, "filter")
			default:
				k.fail(path, "must be a path or {path, filter}, not %s", kind(item))
			}
		}
	}

	if k.err != nil {
		return k.err
	}
	return nil
}

func (k *checker) interfaceScope(scope map[string]any, path string) {
	for _, dir := range []string{"input", "output"} {
		m := k.mapping(scope, path, dir)
		if m == nil {
			continue
		}
		p := path + "." + dir
		k.scalar(m, p, "prefix")
		k.scalar(m, p, "suffix")
		k.colour(m, p, "color")
		if dir == "output" {
			k.boolean(m, p, "stream")
		}
		k.adapter(m, p)
	}
	tools := k.mapping(scope, path, "tools")
	if tools == nil {
		return
	}
	tp := path + ".tools"
	k.boolean(tools, tp, "feedback")
	for _, action := range []string{"confirming", "executing", "responding"} {
		m := k.mapping(tools, tp, action)
		if m == nil {
			continue
		}
		p := tp + "." + action
		k.boolean(m, p, "feedback")
		k.scalar(m, p, "prefix")
		k.scalar(m, p, "suffix")
		k.colour(m, p, "color")
		k.adapter(m, p)
		if action == "confirming" {
			k.scalar(m, p, "default")
			if y, ok := m["yeses"]; ok && y != nil {
				list, isList := y.([]any)
				if !isList {
					k.fail(p+".yeses", "must be a list of answers, not %s", kind(y))
				}
				for i, item := range list {
					if _, isText := item.(string); !isText {
						k.fail(fmt.Sprintf("%s.yeses[%d]", p, i), "must be text, not %s", kind(item))
					}
				}
			}
		}
	}
}

// address checks provider.credentials.address, after ENV substitution: a
// value that is not an http or https URL with a host would otherwise fail
// only when the first request does, after retries.
func (k *checker) address(cred map[string]any) {
	const path = "provider.credentials.address"
	v, ok := cred["address"]
	if !ok || v == nil {
		return
	}
	s, isText := v.(string)
	if !isText {
		k.fail(path, "must be the provider's URL as text, not %s", kind(v))
		return
	}
	s = strings.TrimSpace(s)
	if s == "" {
		return
	}
	problem := ""
	u, err := url.Parse(s)
	switch {
	case err != nil:
		problem = "it is not a URL"
	case u.Scheme == "" || u.Opaque != "" && !strings.Contains(s, "://"):
		problem = "it has no scheme"
	case !strings.EqualFold(u.Scheme, "http") && !strings.EqualFold(u.Scheme, "https"):
		problem = fmt.Sprintf("its scheme is %s", u.Scheme)
	case u.Host == "" || u.Hostname() == "":
		problem = "it has no host"
	}
	if problem == "" {
		return
	}
	from := ""
	for _, ref := range k.c.EnvRefs {
		if ref.Path == path {
			from = fmt.Sprintf(" (from the environment variable %s)", ref.Var)
		}
	}
	k.fail(path, "%q%s is not an address (%s): write the server's URL, such as http://localhost:11434 or https://api.openai.com", s, from, problem)
}

// RequireProvider checks that the cartridge names a provider, as every
// command that talks to one needs.
func (c *Cartridge) RequireProvider() error {
	if c.String("provider", "id") == "" {
		line := c.lineOf("provider")
		return &Error{File: c.Path, Line: line, Msg: "provider.id is missing: the cartridge does not say which provider to use (one of " + strings.Join(ProviderIDs, ", ") + ")"}
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// missingModel warns about a provider whose model is missing while a
// key near "model" is there (modle): the provider's own 400 would
// otherwise come at the first message. (A model left out altogether may
// be intended: some OpenAI-compatible servers have a default one; Google
// refuses it when the bot is built.)
func (c *Cartridge) missingModel() {
	p := c.Provider()
	if p.ID == "" || p.Model() != "" {
		return
	}
	for _, section := range []struct {
		path string
		m    map[string]any
	}{{"provider.settings", p.Settings}, {"provider.options", p.Options}} {
		for _, k := range sortedKeys(section.m) {
			if k != "model" && Nearest(k, []string{"model"}) == "model" {
				c.Warnings = append(c.Warnings, fmt.Sprintf("%s:%d: %s.%s: %s has no model, which %s needs: did you mean \"model\"?",
					displayName(c.Path), c.lineOf(section.path+"."+k), section.path, k, section.path, p.ID))
				return
			}
		}
	}
}
