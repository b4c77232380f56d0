// Package cartridge finds, parses and validates Nano Bots cartridges (YAML
// or Markdown), substitutes ENV references, and answers every question the
// rest of nb asks of a cartridge through the specification's defaults
// cascade (affixes, streaming, tool feedback, safety, adapters).
package cartridge

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
	"github.com/goccy/go-yaml/printer"
)

// Cartridge is a loaded cartridge.
type Cartridge struct {
	// Path is the file it was read from; empty for the default cartridge.
	Path string
	// Raw is the cartridge as parsed, before ENV substitution, with the
	// keys in file order (what `nb … cartridge` prints).
	Raw yaml.MapSlice
	// Data is the cartridge after ENV substitution.
	Data map[string]any
	// Missing lists the ENV references whose variable is not set.
	Missing []MissingEnv
	// EnvRefs lists every ENV reference of the cartridge, set or not, so
	// a server can refuse a client's cartridge that names any.
	EnvRefs []EnvRef
	// Warnings are problems that do not stop the cartridge from running
	// (unknown top-level keys), each naming the file and line.
	Warnings []string

	lines map[string]int // key path ("provider.id", "tools[0].lua") -> line
	// offsets maps a key path to the line where a block scalar's text
	// starts, for source positions of code in the cartridge.
	offsets map[string]int
}

// EnvRef is an ENV reference in a cartridge.
type EnvRef struct {
	// Path is the key path, e.g. "provider.credentials.access-token".
	Path string
	// Var is the variable name, e.g. "OPENAI_API_KEY".
	Var string
}

// MissingEnv is an ENV reference whose variable is not set.
type MissingEnv = EnvRef

// Lookup resolves the variable an ENV reference names, as os.LookupEnv
// does. nil resolves nothing: every reference is missing. Nothing in this
// package reads the process environment: the caller says which
// environment a cartridge may see (none, for a cartridge a client sent).
type Lookup func(name string) (value string, ok bool)

// Error is a problem with a cartridge, located in its file.
type Error struct {
	File string
	Line int // 0 when unknown
	Col  int // 0 when unknown
	// Key is the key path the problem is about, when there is one.
	Key string
	Msg string
	// Excerpt is the annotated source around the problem, when known.
	Excerpt string
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(displayName(e.File))
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
		if e.Col > 0 {
			fmt.Fprintf(&b, ":%d", e.Col)
		}
	}
	b.WriteString(": ")
	if e.Key != "" {
		b.WriteString(e.Key + ": ")
	}
	b.WriteString(e.Msg)
	if e.Excerpt != "" {
		b.WriteString("\n" + strings.TrimRight(e.Excerpt, "\n"))
	}
	return b.String()
}

func displayName(path string) string {
	if path == "" {
		return "default cartridge"
	}
	return path
}

//go:embed default.yml
var defaultCartridge []byte

// Default returns the specification's default cartridge, used for "-",
// with its ENV references resolved by env.
func Default(env Lookup) *Cartridge {
	c, err := Parse(defaultCartridge, "", FormatYAML, env)
	if err != nil {
		panic("default cartridge: " + err.Error()) // embedded, covered by tests
	}
	return c
}

// Format is a cartridge's source format.
type Format int

// Formats.
const (
	FormatYAML Format = iota + 1
	FormatMarkdown
)

// FormatOf returns the format a file name's extension selects.
func FormatOf(path string) (Format, error) {
	ext := strings.ToLower(filepath.Ext(path))
	switch ext {
	case ".yml", ".yaml", "":
		// The reference refused a file without an extension ("Unknown
		// cartridge format: ''"); nb reads it as YAML, which is what such
		// a file found by its exact path is meant to be.
		return FormatYAML, nil
	case ".md", ".markdown", ".mdown", ".mkdn":
		return FormatMarkdown, nil
	}
	return 0, &Error{File: path, Msg: fmt.Sprintf("unknown cartridge format %q: use a .yml or .yaml file (or .md, .markdown, .mdown, .mkdn for Markdown)", ext)}
}

// Load reads and parses the cartridge at path (already resolved by Find),
// resolving its ENV references with env.
func Load(path string, env Lookup) (*Cartridge, error) {
	format, err := FormatOf(path)
	if err != nil {
		return nil, err
	}
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, &Error{File: path, Msg: "cannot read the cartridge: " + unwrapPathError(err)}
	}
	return Parse(src, path, format, env)
}

func unwrapPathError(err error) string {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// Parse parses a cartridge's source, resolving its ENV references with
// env. path is used in messages only.
func Parse(src []byte, path string, format Format, env Lookup) (*Cartridge, error) {
	if format == FormatMarkdown {
		return parseMarkdown(src, path, env)
	}
	raw, lines, offsets, err := parseYAML(src, path, 0)
	if err != nil {
		return nil, err
	}
	return build(raw, lines, offsets, path, env)
}

func build(raw yaml.MapSlice, lines, offsets map[string]int, path string, env Lookup) (*Cartridge, error) {
	c := &Cartridge{Path: path, Raw: raw, lines: lines, offsets: offsets}
	data, _ := toPlain(raw).(map[string]any)
	if data == nil {
		data = map[string]any{}
	}
	c.Data = substituteEnv(data, "", env, &c.EnvRefs, &c.Missing).(map[string]any)
	if err := c.validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// parseYAML parses one YAML document into an ordered mapping, recording
// the line of every key. lineOffset is added to every line (Markdown
// blocks start in the middle of a file).
func parseYAML(src []byte, path string, lineOffset int) (yaml.MapSlice, map[string]int, map[string]int, error) {
	if len(bytes.TrimSpace(src)) == 0 {
		return nil, nil, nil, &Error{File: path, Msg: "the file is empty: a cartridge needs at least a provider section"}
	}
	file, err := parser.ParseBytes(src, 0)
	if err != nil {
		return nil, nil, nil, yamlError(path, err, lineOffset)
	}
	var docs []*ast.DocumentNode
	for _, d := range file.Docs {
		if d.Body != nil {
			docs = append(docs, d)
		}
	}
	if len(docs) == 0 {
		return nil, nil, nil, &Error{File: path, Msg: "the file has no YAML content: a cartridge needs at least a provider section"}
	}
	if len(docs) > 1 {
		return nil, nil, nil, &Error{File: path, Line: docs[1].Body.GetToken().Position.Line + lineOffset, Msg: "a cartridge is one YAML document, but this file has several (separated by ---)"}
	}
	body := docs[0].Body
	for {
		// A top-level tag or anchor wraps the mapping.
		if t, ok := body.(*ast.TagNode); ok {
			body = t.Value
			continue
		}
		break
	}
	if _, ok := body.(ast.MapNode); !ok {
		line := body.GetToken().Position.Line + lineOffset
		return nil, nil, nil, &Error{File: path, Line: line, Msg: fmt.Sprintf("a cartridge must be a YAML mapping of keys (meta:, provider:, ...), but this file holds %s", describeNode(body))}
	}
	// Like the reference (Ruby's safe YAML), anchors and aliases are
	// refused: they are never needed in a cartridge, and nested aliases
	// can expand a small file into gigabytes.
	if n := findAlias(body); n != nil {
		return nil, nil, nil, &Error{File: path, Line: n.GetToken().Position.Line + lineOffset, Col: n.GetToken().Position.Column,
			Msg: "YAML anchors and aliases (&name, *name) are not allowed in a cartridge: write the values out"}
	}
	var raw yaml.MapSlice
	if err := yaml.NodeToValue(body, &raw, yaml.UseOrderedMap()); err != nil {
		return nil, nil, nil, yamlError(path, err, lineOffset)
	}
	lines := map[string]int{}
	offsets := map[string]int{}
	recordLines(body, "", lines, offsets, lineOffset)
	return raw, lines, offsets, nil
}

// findAlias returns the first anchor or alias node below n, or nil.
func findAlias(n ast.Node) ast.Node {
	var found ast.Node
	ast.Walk(visitor(func(n ast.Node) bool {
		switch n.(type) {
		case *ast.AnchorNode, *ast.AliasNode:
			if found == nil {
				found = n
			}
			return false
		}
		return found == nil
	}), n)
	return found
}

// visitor adapts a function to ast.Visitor.
type visitor func(ast.Node) bool

func (v visitor) Visit(n ast.Node) ast.Visitor {
	if n == nil || !v(n) {
		return nil
	}
	return v
}

func describeNode(n ast.Node) string {
	switch n.Type() {
	case ast.SequenceType:
		return "a list"
	case ast.StringType, ast.LiteralType:
		return "text"
	case ast.NullType:
		return "nothing (null)"
	default:
		return "a " + strings.ToLower(n.Type().String())
	}
}

func yamlError(path string, err error, lineOffset int) error {
	var ye yaml.Error
	if errors.As(err, &ye) {
		e := &Error{File: path, Msg: ye.GetMessage()}
		if tk := ye.GetToken(); tk != nil {
			e.Line = tk.Position.Line + lineOffset
			e.Col = tk.Position.Column
			var pp printer.Printer
			if lineOffset == 0 {
				e.Excerpt = pp.PrintErrorToken(tk, false)
			}
		}
		return e
	}
	return &Error{File: path, Msg: err.Error()}
}

// recordLines walks the AST and stores the line of every mapping key and
// sequence element under its key path.
func recordLines(n ast.Node, prefix string, lines, offsets map[string]int, off int) {
	switch v := n.(type) {
	case *ast.MappingNode:
		for _, mv := range v.Values {
			recordLines(mv, prefix, lines, offsets, off)
		}
	case *ast.MappingValueNode:
		key := keyString(v.Key)
		path := key
		if prefix != "" {
			path = prefix + "." + key
		}
		lines[path] = v.Key.GetToken().Position.Line + off
		if lit, ok := v.Value.(*ast.LiteralNode); ok {
			// A block scalar (|) starts on the line after its indicator.
			offsets[path] = lit.Start.Position.Line + 1 + off
		} else if v.Value != nil && v.Value.GetToken() != nil {
			offsets[path] = v.Value.GetToken().Position.Line + off
		}
		recordLines(v.Value, path, lines, offsets, off)
	case *ast.SequenceNode:
		for i, item := range v.Values {
			path := fmt.Sprintf("%s[%d]", prefix, i)
			if item != nil && item.GetToken() != nil {
				lines[path] = item.GetToken().Position.Line + off
			}
			recordLines(item, path, lines, offsets, off)
		}
	case *ast.TagNode:
		recordLines(v.Value, prefix, lines, offsets, off)
	case *ast.AnchorNode:
		recordLines(v.Value, prefix, lines, offsets, off)
	}
}

func keyString(k ast.MapKeyNode) string {
	if s, ok := k.(*ast.StringNode); ok {
		return s.Value
	}
	return strings.Trim(k.String(), `"'`)
}

// toPlain converts decoded YAML (ordered maps, assorted number types) to
// plain Go values: map[string]any, []any, string, int64, float64, bool, nil.
func toPlain(v any) any {
	switch t := v.(type) {
	case yaml.MapSlice:
		m := make(map[string]any, len(t))
		for _, item := range t {
			m[fmt.Sprint(item.Key)] = toPlain(item.Value)
		}
		return m
	case map[string]any:
		m := make(map[string]any, len(t))
		for k, x := range t {
			m[k] = toPlain(x)
		}
		return m
	case []any:
		out := make([]any, len(t))
		for i, x := range t {
			out[i] = toPlain(x)
		}
		return out
	case int:
		return int64(t)
	case int64:
		return t
	case uint64:
		if t > math.MaxInt64 {
			return float64(t)
		}
		return int64(t)
	case float32:
		return float64(t)
	case time.Time:
		return t.Format(time.RFC3339)
	default:
		return v
	}
}

// Get returns the value at a key path and whether the key exists (an
// explicit null exists). Paths go through mappings only.
func (c *Cartridge) Get(path ...string) (any, bool) {
	return lookup(c.Data, path)
}

func lookup(m map[string]any, path []string) (any, bool) {
	var cur any = m
	for _, k := range path {
		mm, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		cur, ok = mm[k]
		if !ok {
			return nil, false
		}
	}
	return cur, true
}

// String returns the text at path, or "" when absent, null or not text
// (numbers are formatted).
func (c *Cartridge) String(path ...string) string {
	v, _ := c.Get(path...)
	return text(v)
}

func text(v any) string {
	switch t := v.(type) {
	case string:
		return t
	case int64:
		return strconv.FormatInt(t, 10)
	case float64:
		return strconv.FormatFloat(t, 'f', -1, 64)
	case bool:
		return strconv.FormatBool(t)
	}
	return ""
}

// Map returns the mapping at path, or nil.
func (c *Cartridge) Map(path ...string) map[string]any {
	v, _ := c.Get(path...)
	m, _ := v.(map[string]any)
	return m
}

// Line returns the line of the key at a dotted path ("provider.id",
// "tools[1].name"), or 0 when unknown.
func (c *Cartridge) Line(path string) int {
	return c.lines[path]
}

// SourceLine returns the line where the value at a dotted path starts
// (the first line of a block scalar's text), or 0 when unknown.
func (c *Cartridge) SourceLine(path string) int {
	return c.offsets[path]
}

// Meta is the cartridge's meta section.
type Meta struct {
	Symbol, Name, Author, Version, License, Description string
}

// Meta returns the meta section (empty strings for absent keys).
func (c *Cartridge) Meta() Meta {
	return Meta{
		Symbol: c.String("meta", "symbol"), Name: c.String("meta", "name"), Author: c.String("meta", "author"),
		Version: c.String("meta", "version"), License: c.String("meta", "license"), Description: c.String("meta", "description"),
	}
}

// Behavior is one behaviors section (interaction or boot).
type Behavior struct {
	Directive, Backdrop, Instruction string
}

// Behavior returns behaviors.<kind> ("interaction" or "boot").
func (c *Cartridge) Behavior(kind string) Behavior {
	return Behavior{
		Directive:   c.String("behaviors", kind, "directive"),
		Backdrop:    c.String("behaviors", kind, "backdrop"),
		Instruction: c.String("behaviors", kind, "instruction"),
	}
}

// Provider is the cartridge's provider section, after ENV substitution.
type Provider struct {
	ID                             string
	Credentials, Options, Settings map[string]any
}

// Provider returns the provider section.
func (c *Cartridge) Provider() Provider {
	return Provider{
		ID:          c.String("provider", "id"),
		Credentials: c.Map("provider", "credentials"),
		Options:     c.Map("provider", "options"),
		Settings:    c.Map("provider", "settings"),
	}
}

// RawString returns the text at path before ENV substitution.
func (c *Cartridge) RawString(path ...string) string {
	var cur any = c.Raw
	for _, k := range path {
		ms, ok := cur.(yaml.MapSlice)
		if !ok {
			return ""
		}
		found := false
		for _, item := range ms {
			if fmt.Sprint(item.Key) == k {
				cur, found = item.Value, true
				break
			}
		}
		if !found {
			return ""
		}
	}
	s, _ := cur.(string)
	return s
}

// MissingFor returns the unset variable behind the value at a dotted
// path, if that value was an ENV reference.
func (c *Cartridge) MissingFor(path string) (string, bool) {
	for _, m := range c.Missing {
		if m.Path == path {
			return m.Var, true
		}
	}
	return "", false
}

// TopLevelKeys lists the top-level keys a cartridge may have.
var TopLevelKeys = []string{"meta", "behaviors", "interfaces", "provider", "tools", "safety", "state", "miscellaneous", "robopages"}

// Marshal returns the cartridge as loaded (before ENV substitution) as YAML.
func (c *Cartridge) Marshal() ([]byte, error) {
	return yaml.MarshalWithOptions(stringKeys(c.Raw), yaml.UseLiteralStyleIfMultiline(true), yaml.Indent(2), yaml.IndentSequence(true))
}

// stringKeys copies v with every mapping key as text: the encoder panics
// on a MapSlice key that is not a string (`0: x`, `true: x`).
func stringKeys(v any) any {
	switch t := v.(type) {
	case yaml.MapSlice:
		out := make(yaml.MapSlice, len(t))
		for i, item := range t {
			out[i] = yaml.MapItem{Key: fmt.Sprint(item.Key), Value: stringKeys(item.Value)}
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, x := range t {
			out[i] = stringKeys(x)
		}
		return out
	}
	return v
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
