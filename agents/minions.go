package agents

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"

	"github.com/nbots/nb/agentproto"
	"github.com/nbots/nb/bot"
	"github.com/nbots/nb/cartridge"
	"github.com/nbots/nb/yamlguard"
)

// minionKeys are the keys of an entry of a minion file, in clippy's
// spelling; "-" and "_" are the same (clippy turns one into the other).
var minionKeys = []string{"name", "description", "prompt", "tool_names", "model", "use_openai_functions", "allow_feedback"}

var requiredMinionKeys = []string{"name", "description", "prompt", "tool_names"}

// LoadMinions reads a minion file in the format of clippy's
// specialized_minions.yaml (see ParseMinions) and builds its agents on
// base (see BuildMinions).
func LoadMinions(ctx context.Context, path string, base *cartridge.Cartridge, h bot.Host) ([]*Agent, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("minion file: %w", err)
	}
	specs, err := ParseMinions(src, path)
	if err != nil {
		return nil, err
	}
	return BuildMinions(ctx, specs, base, h)
}

// Minion is one agent of a minion file, as parsed.
type Minion struct {
	Name, Description, Prompt, Model string
	ToolNames                        []string
	// Functions is use-openai-functions (false: a ReAct agent);
	// Feedback is allow-feedback.
	Functions, Feedback bool
	// Source is where the agent is written (file:line of its name).
	Source string

	toolWhere []string // file:line: [i].tool_names[j], per tool name
}

// ParseMinions reads the text of a minion file (path names it in
// messages): a YAML list of agents, each with a name, a description, a
// prompt (added to the base cartridge's directive) and tool_names (a
// subset of the base cartridge's tools), and optionally a model (instead
// of the base cartridge's), use-openai-functions (false makes a ReAct
// agent; default true, function calling) and allow-feedback (true lets a
// client steer the agent while it runs; default false). The text goes
// through the same guard as cartridges (yamlguard: size, depth, aliases)
// before it is parsed. Every error names the file, the line and the key.
func ParseMinions(src []byte, path string) ([]Minion, error) {
	if _, err := yamlguard.Check(src, cartridge.Limits); err != nil {
		var ge *yamlguard.Error
		if errors.As(err, &ge) {
			return nil, fmt.Errorf("%s:%d: %s", path, ge.Line, ge.Msg)
		}
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	file, err := parser.ParseBytes(src, 0)
	if err != nil {
		return nil, fmt.Errorf("%s: %s", path, strings.TrimSpace(yaml.FormatError(err, false, false)))
	}
	line := func(p string) int {
		yp, err := yaml.PathString(p)
		if err != nil {
			return 0
		}
		n, err := yp.FilterFile(file)
		if err != nil || n == nil {
			return 0
		}
		if m, ok := n.(*ast.MappingValueNode); ok {
			return m.Key.GetToken().Position.Line
		}
		return n.GetToken().Position.Line
	}
	where := func(p, key string) string {
		loc := path
		if l := line(p); l > 0 {
			loc = fmt.Sprintf("%s:%d", path, l)
		}
		if key != "" {
			loc += ": " + key
		}
		return loc
	}
	fail := func(p, key, format string, args ...any) error {
		return fmt.Errorf("%s: %s", where(p, key), fmt.Sprintf(format, args...))
	}
	var entries []map[string]any
	if err := yaml.Unmarshal(src, &entries); err != nil {
		return nil, fail("$", "", "a minion file is a list of agents (- name: …, description: …, prompt: …, tool_names: […])")
	}
	if len(entries) == 0 {
		return nil, fail("$", "", "no agents: a minion file is a list of agents (- name: …, description: …, prompt: …, tool_names: […])")
	}
	var out []Minion
	seen := map[string]int{}
	for i, raw := range entries {
		at := fmt.Sprintf("$[%d]", i)
		e := map[string]any{}
		orig := map[string]string{} // the key as written, for messages
		keys := make([]string, 0, len(raw))
		for k := range raw {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			norm := strings.ReplaceAll(k, "-", "_")
			if !contains(minionKeys, norm) {
				return nil, fail(at+"."+k, fmt.Sprintf("[%d].%s", i, k), "unknown key; an agent has %s", strings.Join(minionKeys, ", "))
			}
			e[norm] = raw[k]
			orig[norm] = k
		}
		for _, k := range requiredMinionKeys {
			if _, ok := e[k]; !ok {
				return nil, fail(at, fmt.Sprintf("[%d]", i), "%s is missing; an agent needs %s", k, strings.Join(requiredMinionKeys, ", "))
			}
		}
		str := func(k string) (string, error) {
			v, ok := e[k]
			if !ok || v == nil {
				return "", nil
			}
			s, isText := v.(string)
			if !isText {
				return "", fail(at+"."+orig[k], fmt.Sprintf("[%d].%s", i, orig[k]), "must be text")
			}
			return s, nil
		}
		flag := func(k string, def bool) (bool, error) {
			v, ok := e[k]
			if !ok || v == nil {
				return def, nil
			}
			b, isBool := v.(bool)
			if !isBool {
				return false, fail(at+"."+orig[k], fmt.Sprintf("[%d].%s", i, orig[k]), "must be true or false")
			}
			return b, nil
		}
		m := Minion{Source: fmt.Sprintf("%s:%d", path, line(at+".name"))}
		var err error
		if m.Name, err = str("name"); err != nil {
			return nil, err
		}
		if strings.TrimSpace(m.Name) == "" {
			return nil, fail(at+".name", fmt.Sprintf("[%d].name", i), "must not be empty")
		}
		if j, dup := seen[m.Name]; dup {
			return nil, fail(at+".name", fmt.Sprintf("[%d].name", i), "%q is already the name of agent %d", m.Name, j)
		}
		seen[m.Name] = i
		if m.Description, err = str("description"); err != nil {
			return nil, err
		}
		if m.Prompt, err = str("prompt"); err != nil {
			return nil, err
		}
		if m.Model, err = str("model"); err != nil {
			return nil, err
		}
		if m.Functions, err = flag("use_openai_functions", true); err != nil {
			return nil, err
		}
		if m.Feedback, err = flag("allow_feedback", false); err != nil {
			return nil, err
		}
		list, isList := e["tool_names"].([]any)
		if !isList && e["tool_names"] != nil {
			return nil, fail(at+".tool_names", fmt.Sprintf("[%d].tool_names", i), "must be a list of tool names")
		}
		for j, x := range list {
			s, isText := x.(string)
			if !isText {
				s = fmt.Sprint(x) // never a tool's name: BuildMinions says so
			}
			m.ToolNames = append(m.ToolNames, s)
			m.toolWhere = append(m.toolWhere, where(fmt.Sprintf("%s.tool_names[%d]", at, j), fmt.Sprintf("[%d].tool_names[%d]", i, j)))
		}
		out = append(out, m)
	}
	return out, nil
}

// BuildMinions builds the agents of a parsed minion file on base: each
// runs on base's provider with base's tools that it names. Unlike clippy,
// which drops them silently, a tool name that names none of base's tools
// is an error that names it. Nothing of a file that fails keeps running
// (MCP servers).
func BuildMinions(ctx context.Context, minions []Minion, base *cartridge.Cartridge, h bot.Host) (_ []*Agent, err error) {
	var out []*Agent
	defer func() {
		if err != nil {
			for _, a := range out {
				a.Bot.Close() //nolint:errcheck // the load's error matters more
			}
		}
	}()
	baseBot, err := bot.New(ctx, base, h)
	if err != nil {
		return nil, err
	}
	defer baseBot.Close()
	known := baseBot.Tools()
	for _, m := range minions {
		for j, s := range m.ToolNames {
			if _, ok := known.Lookup(s); !ok || s == "" {
				var names []string
				for _, sp := range known.Specs() {
					names = append(names, sp.Name)
				}
				have := "it has no tools"
				if len(names) > 0 {
					have = "its tools are " + strings.Join(names, ", ")
				}
				where := m.Source
				if j < len(m.toolWhere) {
					where = m.toolWhere[j]
				}
				return nil, fmt.Errorf("%s: %v is not a tool of %s (%s): add it to that cartridge, or remove it from the list", where, s, bot.DisplayPath(base), have)
			}
		}
		c := derive(base, m.Name, m.Description, m.Prompt, m.Model)
		b, err := bot.New(ctx, c, h)
		if err != nil {
			return nil, err
		}
		typ := TypeFunctions
		if !m.Functions {
			typ = TypeReAct
		}
		a := &Agent{Bot: b, Type: typ, ToolNames: m.ToolNames, NoFeedback: !m.Feedback, Source: m.Source}
		a.Repr = agentproto.AgentRepr{Name: m.Name, Description: m.Description, Type: typ, RequiredTools: m.ToolNames}
		out = append(out, a)
		if err := a.compile(); err != nil {
			return nil, fmt.Errorf("%s: %w", a.Source, err)
		}
	}
	return out, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// derive returns base with a minion's name, description, prompt (after
// the directive) and model.
func derive(base *cartridge.Cartridge, name, desc, prompt, model string) *cartridge.Cartridge {
	c := *base
	c.Data = deepCopy(base.Data).(map[string]any)
	set := func(v any, path ...string) { setPath(c.Data, path, v) }
	set(name, "meta", "name")
	set(desc, "meta", "description")
	if strings.TrimSpace(prompt) != "" {
		directive := c.String("behaviors", "interaction", "directive")
		if directive != "" {
			directive += "\n\n"
		}
		set(directive+strings.TrimSpace(prompt), "behaviors", "interaction", "directive")
	}
	if model != "" {
		if _, ok := c.Get("provider", "options", "model"); ok {
			set(model, "provider", "options", "model")
		}
		if _, ok := c.Get("provider", "options", "model"); !ok || c.String("provider", "settings", "model") != "" {
			set(model, "provider", "settings", "model")
		}
	}
	return &c
}

func deepCopy(v any) any {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, x := range t {
			out[k] = deepCopy(x)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, x := range t {
			out[i] = deepCopy(x)
		}
		return out
	}
	return v
}

// setPath sets the value at path in m, making the mappings on the way.
func setPath(m map[string]any, path []string, v any) {
	for _, k := range path[:len(path)-1] {
		next, _ := m[k].(map[string]any)
		if next == nil {
			next = map[string]any{}
			m[k] = next
		}
		m = next
	}
	m[path[len(path)-1]] = v
}
