package cartridge

import (
	"strconv"
	"strings"
	"sync"

	"github.com/nbots/nb/tool"
)

// Mode is the interface a cartridge runs in.
type Mode string

// The specification's two interfaces.
const (
	REPL Mode = "repl"
	Eval Mode = "eval"
)

// Defaults returns the specification's default values (defaults.yml),
// which apply wherever a cartridge is silent. They are Go values rather
// than the YAML parsed at run time: parsing it was about 1 ms of every
// command's start (TestDefaultsMatchYAML holds the two equal).
func Defaults() map[string]any { return defaults() }

var defaults = sync.OnceValue(func() map[string]any {
	return map[string]any{
		"safety": map[string]any{
			"functions": map[string]any{"sandboxed": true},
			"tools":     map[string]any{"confirmable": true},
		},
		"interfaces": map[string]any{
			"repl": map[string]any{
				"output": map[string]any{"stream": true, "prefix": "\n", "suffix": "\n"},
				"prompt": []any{map[string]any{"text": "🤖"}, map[string]any{"text": "> "}},
			},
			"eval": map[string]any{
				"output": map[string]any{"stream": true, "suffix": "\n"},
			},
			"tools": map[string]any{
				"confirming": map[string]any{"suffix": " [yN] ", "default": "n", "yeses": []any{"y", "yes"}},
				"executing":  map[string]any{"feedback": false},
				"responding": map[string]any{"suffix": "\n\n", "feedback": true},
			},
		},
		"provider": map[string]any{
			"options":  map[string]any{"stream": true},
			"settings": map[string]any{"stream": true},
		},
	}
})

func split(path string) []string { return strings.Split(path, ".") }

// fetch is the reference's "first non-null" rule: the first non-null
// value among paths in the cartridge, else among the same paths in the
// defaults. An explicit null falls back to the default.
func (c *Cartridge) fetch(paths ...string) any {
	for _, p := range paths {
		if v, _ := c.Get(split(p)...); v != nil {
			return v
		}
	}
	for _, p := range paths {
		if v, _ := lookup(Defaults(), split(p)); v != nil {
			return v
		}
	}
	return nil
}

// Affix returns an input or output prefix or suffix with the reference's
// "key exists" rule: the mode-specific key beats the global one even when
// it is an explicit null (which switches the default off); only when
// neither key exists does the default apply. direction is "input" or
// "output"; kind is "prefix" or "suffix".
func (c *Cartridge) Affix(mode Mode, direction, kind string) string {
	candidates := [][]string{
		{"interfaces", direction, kind},
		{"interfaces", string(mode), direction, kind},
	}
	var value any
	found := false
	for _, p := range candidates {
		if v, ok := c.Get(p...); ok {
			value, found = v, true
		}
	}
	if !found {
		value, _ = lookup(Defaults(), []string{"interfaces", string(mode), direction, kind})
	}
	return text(value)
}

// Stream reports whether answers stream in mode: off when the provider's
// own flag is false, else the interface's setting, else on.
func (c *Cartridge) Stream(mode Mode) bool {
	flag := []string{"provider", "settings", "stream"}
	switch c.String("provider", "id") {
	case "google", "maritaca":
		flag = []string{"provider", "options", "stream"}
	}
	if v, _ := c.Get(flag...); v == false {
		return false
	}
	for _, p := range [][]string{{"interfaces", string(mode), "output", "stream"}, {"interfaces", "output", "stream"}} {
		if v, _ := c.Get(p...); v != nil {
			b, _ := v.(bool)
			return b
		}
	}
	return true
}

// OutputColor returns the output colour name for mode, or "".
func (c *Cartridge) OutputColor(mode Mode) string {
	return text(c.fetch("interfaces."+string(mode)+".output.color", "interfaces.output.color"))
}

// ToolAction is a step of the tool feedback loop.
type ToolAction string

// Tool actions.
const (
	Confirming ToolAction = "confirming"
	Executing  ToolAction = "executing"
	Responding ToolAction = "responding"
)

// Feedback reports whether feedback is shown for action in mode.
// Confirming is always shown (the user must see what they allow).
func (c *Cartridge) Feedback(mode Mode, action ToolAction) bool {
	if action == Confirming {
		return true
	}
	v := c.fetch(
		"interfaces."+string(mode)+".tools."+string(action)+".feedback",
		"interfaces.tools."+string(action)+".feedback",
		"interfaces.tools.feedback",
	)
	b, _ := v.(bool)
	return b
}

// ToolSetting returns a feedback setting (prefix, suffix, color, default)
// for action in mode, by the fetch rule.
func (c *Cartridge) ToolSetting(mode Mode, action ToolAction, key string) string {
	return text(c.fetch(
		"interfaces."+string(mode)+".tools."+string(action)+"."+key,
		"interfaces.tools."+string(action)+"."+key,
		"interfaces.tools."+key,
	))
}

// Yeses returns the answers that allow a tool to run. The reference read
// only interfaces.tools.confirming.yeses; the specification shows per-mode
// values too, so they are honoured first.
func (c *Cartridge) Yeses(mode Mode) []string {
	v := c.fetch("interfaces."+string(mode)+".tools.confirming.yeses", "interfaces.tools.confirming.yeses")
	list, _ := v.([]any)
	out := make([]string, 0, len(list))
	for _, x := range list {
		out = append(out, strings.ToLower(strings.TrimSpace(text(x))))
	}
	return out
}

// Confirmable reports whether tools ask before they run.
func (c *Cartridge) Confirmable() bool {
	b, _ := c.fetch("safety.tools.confirmable").(bool)
	return b
}

// Sandboxed reports whether adapters and tools run sandboxed.
func (c *Cartridge) Sandboxed() bool {
	b, _ := c.fetch("safety.functions.sandboxed").(bool)
	return b
}

// PromptPart is one piece of the REPL prompt.
type PromptPart struct {
	Text, Color string
}

// Prompt returns the REPL prompt parts. Like the reference, only the
// cartridge's interfaces.repl.prompt is read: a list of {text, color}, or
// text; anything else gives the default 🤖 + blue "> ".
func (c *Cartridge) Prompt() []PromptPart {
	v, _ := c.Get("interfaces", "repl", "prompt")
	switch t := v.(type) {
	case string:
		return []PromptPart{{Text: t}}
	case []any:
		var parts []PromptPart
		for _, p := range t {
			m, _ := p.(map[string]any)
			parts = append(parts, PromptPart{Text: text(m["text"]), Color: text(m["color"])})
		}
		return parts
	}
	return []PromptPart{{Text: "🤖"}, {Text: "> ", Color: "blue"}}
}

// Source is code in a cartridge: an adapter or a tool.
type Source struct {
	Lang string // lua, fennel or clojure
	Code string
	// Path is the key path of the code ("interfaces.eval.input.adapter.lua").
	Path string
	// File and Line locate the code's first line, for error messages.
	File string
	Line int
}

// Adapter returns the input or output adapter for mode, or nil. Each
// language is looked up with the key-existence rule over
// interfaces.<direction>.adapter.<lang> then
// interfaces.<mode>.<direction>.adapter.<lang>; more than one language left
// is the reference's "conflicting adapters" error.
func (c *Cartridge) Adapter(mode Mode, direction string) (*Source, error) {
	// Looked up key by key, not by dotted paths: every exchange asks, and
	// most cartridges have no adapter.
	interfaces, _ := c.Data["interfaces"].(map[string]any)
	if interfaces == nil {
		return nil, nil
	}
	general, _ := lookup(interfaces, []string{direction, "adapter"})
	byMode, _ := lookup(interfaces, []string{string(mode), direction, "adapter"})
	generalMap, _ := general.(map[string]any)
	modeMap, _ := byMode.(map[string]any)
	if generalMap == nil && modeMap == nil {
		return nil, nil
	}
	var found []*Source
	for _, lang := range Languages {
		var src *Source
		for _, at := range []struct {
			m    map[string]any
			path string
		}{{generalMap, "interfaces." + direction + ".adapter." + lang}, {modeMap, "interfaces." + string(mode) + "." + direction + ".adapter." + lang}} {
			if v, ok := at.m[lang]; ok {
				src = nil
				if s := text(v); s != "" {
					src = &Source{Lang: lang, Code: s, Path: at.path, File: c.Path, Line: c.SourceLine(at.path)}
				}
			}
		}
		if src != nil {
			found = append(found, src)
		}
	}
	return oneAdapter(c, found, "interfaces."+string(mode)+"."+direction+".adapter")
}

// FeedbackAdapter returns the adapter for a tool action in mode, by the
// fetch rule per language, or nil.
func (c *Cartridge) FeedbackAdapter(mode Mode, action ToolAction) (*Source, error) {
	var found []*Source
	for _, lang := range Languages {
		for _, p := range []string{
			"interfaces." + string(mode) + ".tools." + string(action) + ".adapter." + lang,
			"interfaces.tools." + string(action) + ".adapter." + lang,
			"interfaces.tools.adapter." + lang,
		} {
			if s := c.String(split(p)...); s != "" {
				found = append(found, &Source{Lang: lang, Code: s, Path: p, File: c.Path, Line: c.SourceLine(p)})
				break
			}
		}
	}
	return oneAdapter(c, found, "interfaces."+string(mode)+".tools."+string(action)+".adapter")
}

func oneAdapter(c *Cartridge, found []*Source, key string) (*Source, error) {
	switch len(found) {
	case 0:
		return nil, nil
	case 1:
		return found[0], nil
	}
	var langs []string
	for _, s := range found {
		langs = append(langs, s.Lang+" ("+s.Path+")")
	}
	return nil, &Error{File: c.Path, Line: c.lineOf(found[1].Path), Key: key,
		Msg: "conflicting adapters: " + strings.Join(langs, " and ") + "; keep one language"}
}

// ToolDef is a function the cartridge defines in its tools section.
type ToolDef struct {
	Spec   tool.Spec
	Source Source
}

// Tools returns the cartridge's tools with their sources. Validation has
// already checked each has a name and exactly one source.
func (c *Cartridge) Tools() []ToolDef {
	list, _ := c.Data["tools"].([]any)
	var out []ToolDef
	for i, t := range list {
		m, _ := t.(map[string]any)
		params, _ := m["parameters"].(map[string]any)
		if params == nil {
			params = tool.DefaultParameters()
		}
		def := ToolDef{Spec: tool.Spec{Name: text(m["name"]), Description: text(m["description"]), Parameters: params}}
		for _, lang := range Languages {
			if code := text(m[lang]); code != "" {
				p := "tools[" + strconv.Itoa(i) + "]." + lang
				def.Source = Source{Lang: lang, Code: code, Path: p, File: c.Path, Line: c.SourceLine(p)}
			}
		}
		out = append(out, def)
	}
	return out
}

func matchKey(name string) string { return tool.MatchName(name) }

// RobopageRef is one entry of the cartridge's robopages key: a page file
// or a folder of pages, and an optional filter on the pages' paths.
type RobopageRef struct {
	Path, Filter string
	Line         int
}

// Robopages returns the cartridge's robopages entries.
func (c *Cartridge) Robopages() []RobopageRef {
	list, _ := c.Data["robopages"].([]any)
	var out []RobopageRef
	for i, item := range list {
		var ref RobopageRef
		switch t := item.(type) {
		case string:
			ref.Path = t
		case map[string]any:
			ref.Path, ref.Filter = text(t["path"]), text(t["filter"])
		}
		ref.Line = c.lineOf("robopages[" + strconv.Itoa(i) + "]")
		if ref.Path != "" {
			out = append(out, ref)
		}
	}
	return out
}
