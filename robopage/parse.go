package robopage

import (
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"

	"github.com/nbots/nb/yamlguard"
)

// Parse reads one page. file is the page's path as reported in problems;
// dir replaces `${cwd}` in the text before it is parsed, as the reference
// does. The page has no categories: Load fills them from the folders.
// A page with an Error problem is nil.
func Parse(data []byte, file, dir string) (*Page, []Problem) {
	ps := &pageParser{file: file, lines: map[string]int{}}
	page := ps.parse(data, dir)
	if HasErrors(ps.problems) {
		return nil, ps.problems
	}
	return page, ps.problems
}

type pageParser struct {
	file     string
	lines    map[string]int
	problems []Problem
}

func (p *pageParser) add(sev Severity, line int, fn, format string, args ...any) {
	p.problems = append(p.problems, Problem{File: p.file, Line: line, Function: fn, Severity: sev, Message: fmt.Sprintf(format, args...)})
}

// line is the line of the key at path, or of its nearest known parent.
func (p *pageParser) line(path ...string) int {
	for n := len(path); n > 0; n-- {
		if l, ok := p.lines[strings.Join(path[:n], "\x00")]; ok {
			return l
		}
	}
	return 0
}

func (p *pageParser) parse(data []byte, dir string) *Page {
	if dir != "" {
		data = []byte(strings.ReplaceAll(string(data), "${cwd}", dir))
	}
	if _, err := yamlguard.Check(data, yamlguard.Default); err != nil {
		ge := err.(*yamlguard.Error)
		p.add(Error, ge.Line, "", "%s", ge.Msg)
		return nil
	}
	f, err := parser.ParseBytes(data, 0)
	if err != nil {
		line, msg := yamlError(err)
		p.add(Error, line, "", "invalid YAML: %s", msg)
		return nil
	}
	var docs []*ast.DocumentNode
	for _, d := range f.Docs {
		if d != nil && d.Body != nil {
			docs = append(docs, d)
		}
	}
	switch {
	case len(docs) == 0:
		p.add(Error, 0, "", "the page is empty: write a `description` and a `functions` mapping")
		return nil
	case len(docs) > 1:
		p.add(Error, docs[1].GetToken().Position.Line, "", "a page holds one YAML document, this file has %d: split it into one file per page", len(docs))
		return nil
	}
	p.walk(docs[0].Body, nil)
	var doc any
	if err := yaml.NodeToValue(docs[0].Body, &doc); err != nil {
		line, msg := yamlError(err)
		p.add(Error, line, "", "invalid YAML: %s", msg)
		return nil
	}
	root, ok := doc.(map[string]any)
	if !ok {
		p.add(Error, 1, "", "a page is a mapping with `description` and `functions`, not %s", kind(doc))
		return nil
	}
	page := &Page{}
	page.Name = p.scalar(root["name"], "", "name")
	page.Description = p.scalar(root["description"], "", "description")
	page.Categories = p.list(root["categories"], "", "categories")
	fv, ok := root["functions"]
	if !ok {
		p.add(Error, 1, "", "the page has no `functions`: add a `functions:` mapping of function name to description, parameters and cmdline")
		return nil
	}
	fm, ok := fv.(map[string]any)
	if !ok && fv != nil {
		p.add(Error, p.line("functions"), "", "`functions` must be a mapping of function name to function, not %s", kind(fv))
		return nil
	}
	names := sortedKeys(fm)
	for _, name := range names {
		if fn := p.function(name, fm[name]); fn != nil {
			fn.Page = page
			page.Functions = append(page.Functions, fn)
		}
	}
	return page
}

func (p *pageParser) function(name string, v any) *Function {
	at := func(path ...string) int { return p.line(append([]string{"functions", name}, path...)...) }
	m, ok := v.(map[string]any)
	if !ok {
		p.add(Error, at(), name, "a function is a mapping with `description`, `parameters` and `cmdline`, not %s", kind(v))
		return nil
	}
	fn := &Function{Name: name, Key: name, Line: at(), lineOf: at}
	if d, ok := m["description"]; !ok || d == nil {
		p.add(Error, at(), name, "missing `description`: say what the function does")
	} else {
		fn.Description = p.scalar(d, name, "functions", name, "description")
	}
	pv, ok := m["parameters"]
	switch {
	case !ok:
		p.add(Error, at(), name, "missing `parameters`: declare the arguments, or write `parameters: {}` when there are none")
	case pv == nil:
	default:
		pm, ok := pv.(map[string]any)
		if !ok {
			p.add(Error, at("parameters"), name, "`parameters` must be a mapping of parameter name to type and description, not %s", kind(pv))
			break
		}
		for _, pn := range sortedKeys(pm) {
			if par := p.parameter(name, pn, pm[pn]); par != nil {
				fn.Parameters = append(fn.Parameters, par)
			}
		}
	}
	_, hasCmd := m["cmdline"]
	_, hasPlat := m["platforms"]
	useCmd := hasCmd
	if hasCmd && hasPlat {
		first, second := "cmdline", "platforms"
		if at("platforms") < at("cmdline") {
			first, second = second, first
			useCmd = false
		}
		p.add(Warning, at(second), name, "both `cmdline` and `platforms` are given: `%s` is used because it comes first, remove `%s`", first, second)
	}
	switch {
	case useCmd:
		fn.Cmdline = p.cmdline(m["cmdline"], name, "cmdline")
		if fn.Cmdline == nil {
			fn.Cmdline = []string{}
		}
	case hasPlat:
		pm, ok := m["platforms"].(map[string]any)
		if !ok {
			p.add(Error, at("platforms"), name, "`platforms` must map an operating system (linux, macos, windows) to a command line, not %s", kind(m["platforms"]))
			break
		}
		fn.Platforms = map[string][]string{}
		for _, osName := range sortedKeys(pm) {
			fn.Platforms[osName] = p.cmdline(pm[osName], name, "platforms", osName)
		}
	default:
		p.add(Error, at(), name, "no command line: add `cmdline` (a list, one argument per item) or `platforms`")
	}
	if cv, ok := m["container"]; ok && cv != nil {
		fn.Container = p.container(name, cv)
	}
	return fn
}

func (p *pageParser) parameter(fn, name string, v any) *Parameter {
	path := []string{"functions", fn, "parameters", name}
	m, ok := v.(map[string]any)
	if !ok {
		p.add(Error, p.line(path...), fn, "parameter %s must be a mapping with `type` and `description`, not %s", name, kind(v))
		return nil
	}
	par := &Parameter{Name: name, Required: true}
	for _, key := range []string{"type", "description"} {
		if x, ok := m[key]; !ok || x == nil {
			p.add(Error, p.line(path...), fn, "parameter %s has no `%s`", name, key)
		}
	}
	par.Type = p.scalar(m["type"], fn, append(path, "type")...)
	par.Description = p.scalar(m["description"], fn, append(path, "description")...)
	par.Examples = p.list(m["examples"], fn, append(path, "examples")...)
	if r, ok := m["required"]; ok && r != nil {
		b, ok := r.(bool)
		if !ok {
			p.add(Error, p.line(append(path, "required")...), fn, "parameter %s: `required` must be true or false, not %s", name, kind(r))
		}
		par.Required = b
	}
	if d, ok := m["default"]; ok && d != nil {
		s := p.scalar(d, fn, append(path, "default")...)
		par.Default = &s
		par.Required = false
	}
	if a, ok := m["allow"]; ok && a != nil {
		if s, ok := a.(string); ok {
			a = []any{s}
		}
		for i, v := range p.list(a, fn, append(path, "allow")...) {
			switch v {
			case AllowLeadingDash:
				par.AllowLeadingDash = true
			case AllowParentDir:
				par.AllowParentDir = true
			default:
				p.add(Warning, p.line(append(path, "allow", strconv.Itoa(i))...), fn, "parameter %s: unknown `allow` value %q is ignored: use %s or %s", name, v, AllowLeadingDash, AllowParentDir)
			}
		}
	}
	return par
}

func (p *pageParser) container(fn string, v any) *Container {
	path := []string{"functions", fn, "container"}
	m, ok := v.(map[string]any)
	if !ok {
		p.add(Error, p.line(path...), fn, "`container` must be a mapping with `image` or `build`, not %s", kind(v))
		return nil
	}
	c := &Container{}
	_, hasImage := m["image"]
	bv, hasBuild := m["build"]
	useImage := hasImage
	if hasImage && hasBuild {
		first, second := "image", "build"
		if p.line(append(path, "build")...) < p.line(append(path, "image")...) {
			first, second = second, first
			useImage = false
		}
		p.add(Warning, p.line(append(path, second)...), fn, "both `image` and `build` are given: `%s` is used because it comes first, remove `%s`", first, second)
	}
	switch {
	case useImage:
		c.Image = p.scalar(m["image"], fn, append(path, "image")...)
		if c.Image == "" {
			p.add(Error, p.line(append(path, "image")...), fn, "`container.image` is empty: name an image such as alpine/curl")
		}
	case hasBuild:
		bm, ok := bv.(map[string]any)
		if !ok {
			p.add(Error, p.line(append(path, "build")...), fn, "`container.build` must be a mapping with `name` and `path`, not %s", kind(bv))
			break
		}
		c.Build = &Build{}
		for _, key := range []string{"name", "path"} {
			if x, ok := bm[key]; !ok || x == nil {
				p.add(Error, p.line(append(path, "build")...), fn, "`container.build` has no `%s`", key)
			}
		}
		c.Build.Name = p.scalar(bm["name"], fn, append(path, "build", "name")...)
		c.Build.Path = p.scalar(bm["path"], fn, append(path, "build", "path")...)
	default:
		p.add(Error, p.line(path...), fn, "`container` needs `image` (an image to pull) or `build` (a Dockerfile to build)")
	}
	c.Args = p.list(m["args"], fn, append(path, "args")...)
	c.Volumes = p.list(m["volumes"], fn, append(path, "volumes")...)
	c.Force = p.boolean(m["force"], fn, append(path, "force")...)
	c.PreserveApp = p.boolean(m["preserve_app"], fn, append(path, "preserve_app")...)
	c.Platform = p.scalar(m["platform"], fn, append(path, "platform")...)
	return c
}

// cmdline reads a command line: a list whose items are text (numbers and
// booleans are accepted as their text, unlike the reference).
func (p *pageParser) cmdline(v any, fn string, path ...string) []string {
	full := append([]string{"functions", fn}, path...)
	if v == nil {
		return nil
	}
	items, ok := v.([]any)
	if !ok {
		p.add(Error, p.line(full...), fn, "`%s` must be a list with one argument per item, not %s", strings.Join(path, "."), kind(v))
		return nil
	}
	out := make([]string, 0, len(items))
	for i, it := range items {
		s, ok := scalarText(it)
		if !ok || it == nil {
			p.add(Error, p.line(append(full, strconv.Itoa(i))...), fn, "`%s` item %d must be text, not %s", strings.Join(path, "."), i+1, kind(it))
			continue
		}
		out = append(out, s)
	}
	return out
}

func (p *pageParser) scalar(v any, fn string, path ...string) string {
	s, ok := scalarText(v)
	if !ok {
		p.add(Error, p.line(path...), fn, "`%s` must be text, not %s", lastKey(path), kind(v))
	}
	return s
}

func (p *pageParser) list(v any, fn string, path ...string) []string {
	if v == nil {
		return nil
	}
	items, ok := v.([]any)
	if !ok {
		p.add(Error, p.line(path...), fn, "`%s` must be a list, not %s", lastKey(path), kind(v))
		return nil
	}
	out := make([]string, 0, len(items))
	for i, it := range items {
		s, ok := scalarText(it)
		if !ok {
			p.add(Error, p.line(append(path, strconv.Itoa(i))...), fn, "`%s` item %d must be text, not %s", lastKey(path), i+1, kind(it))
			continue
		}
		out = append(out, s)
	}
	return out
}

func (p *pageParser) boolean(v any, fn string, path ...string) bool {
	if v == nil {
		return false
	}
	b, ok := v.(bool)
	if !ok {
		p.add(Error, p.line(path...), fn, "`%s` must be true or false, not %s", lastKey(path), kind(v))
	}
	return b
}

// walk records the line of every mapping key and sequence item.
func (p *pageParser) walk(n ast.Node, path []string) {
	switch n := n.(type) {
	case *ast.AnchorNode:
		p.walk(n.Value, path)
	case *ast.TagNode:
		p.walk(n.Value, path)
	case *ast.MappingNode:
		for _, v := range n.Values {
			p.walk(v, path)
		}
	case *ast.MappingValueNode:
		if n.Key == nil || n.Key.GetToken() == nil {
			return
		}
		sub := append(append([]string(nil), path...), n.Key.GetToken().Value)
		key := strings.Join(sub, "\x00")
		if _, seen := p.lines[key]; !seen {
			p.lines[key] = n.Key.GetToken().Position.Line
		}
		p.walk(n.Value, sub)
	case *ast.SequenceNode:
		for i, v := range n.Values {
			sub := append(append([]string(nil), path...), strconv.Itoa(i))
			if v != nil && v.GetToken() != nil {
				p.lines[strings.Join(sub, "\x00")] = v.GetToken().Position.Line
			}
			p.walk(v, sub)
		}
	}
}

// yamlError splits a YAML library error into its line and message.
func yamlError(err error) (int, string) {
	var ye yaml.Error
	if errors.As(err, &ye) {
		line := 0
		if t := ye.GetToken(); t != nil && t.Position != nil {
			line = t.Position.Line
		}
		return line, ye.GetMessage()
	}
	return 0, err.Error()
}

// scalarText is the text of a YAML scalar; false for mappings and lists.
func scalarText(v any) (string, bool) {
	switch v := v.(type) {
	case nil:
		return "", true
	case string:
		return v, true
	case bool:
		return strconv.FormatBool(v), true
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64), true
	case float32:
		return strconv.FormatFloat(float64(v), 'f', -1, 32), true
	case int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64:
		return fmt.Sprint(v), true
	}
	return "", false
}

// kind names a decoded YAML value's kind for messages.
func kind(v any) string {
	switch v.(type) {
	case nil:
		return "nothing"
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

func lastKey(path []string) string {
	if len(path) == 0 {
		return ""
	}
	// Point at the key of a list item rather than its index.
	for i := len(path) - 1; i >= 0; i-- {
		if _, err := strconv.Atoi(path[i]); err != nil {
			return path[i]
		}
	}
	return path[len(path)-1]
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// stem is the file name without its extension: the default page name.
func stem(path string) string {
	base := filepath.Base(path)
	return strings.TrimSuffix(base, filepath.Ext(base))
}
