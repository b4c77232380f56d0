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
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
	"github.com/goccy/go-yaml/printer"

	"github.com/nbots/nb/yamlguard"
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

// Limits bounds what a cartridge file may be: its size, the nesting of
// its YAML and the number of its YAML tokens (yamlguard.Default: 512 KiB,
// 100 levels, 20,000 tokens). A larger or deeper file is refused before
// any parser sees it. The Markdown of a Markdown cartridge may nest 16
// block quotes and list items on a line.
var Limits = yamlguard.Default

// maxMarkdownNesting bounds the block quotes and list items a line of a
// Markdown cartridge opens: the Markdown parser's time grows with the
// square of that nesting (100,000 levels take minutes).
const maxMarkdownNesting = 16

// Load reads and parses the cartridge at path (already resolved by Find),
// resolving its ENV references with env. path may be anything readable:
// a file, a named pipe, /dev/stdin, a process substitution (/dev/fd/63);
// it is read once, and at most Limits.MaxBytes+1 bytes of it.
func Load(path string, env Lookup) (*Cartridge, error) {
	format, err := FormatOf(path)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, &Error{File: path, Msg: "cannot read the cartridge: " + unwrapPathError(err)}
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.IsDir() {
		return nil, &Error{File: path, Msg: "this is a folder: give the path of a cartridge file (.yml or .md)"}
	}
	src, err := io.ReadAll(io.LimitReader(f, int64(Limits.MaxBytes)+1))
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

// byteOrderMark is the UTF-8 BOM some editors put at the start of a file.
var byteOrderMark = []byte("\ufeff")

// Parse parses a cartridge's source, resolving its ENV references with
// env. path is used in messages only. A UTF-8 byte-order mark is ignored;
// a source larger or deeper than Limits, or that is not UTF-8 text, is
// refused.
func Parse(src []byte, path string, format Format, env Lookup) (*Cartridge, error) {
	src = bytes.TrimPrefix(src, byteOrderMark)
	if err := Limits.CheckSize(src); err != nil {
		return nil, guardError(path, err, 0)
	}
	if err := checkText(src, path); err != nil {
		return nil, err
	}
	if format == FormatMarkdown {
		return parseMarkdown(src, path, env)
	}
	raw, lines, offsets, err := parseYAML(src, path, 0)
	if err != nil {
		return nil, err
	}
	return build(raw, lines, offsets, path, env)
}

// guardError turns a refusal of yamlguard into an *Error of the file.
func guardError(path string, err error, lineOffset int) error {
	var ge *yamlguard.Error
	if !errors.As(err, &ge) {
		return &Error{File: path, Msg: err.Error()}
	}
	e := &Error{File: path, Line: ge.Line + lineOffset, Col: ge.Column, Msg: ge.Msg}
	if strings.HasPrefix(ge.Msg, "the file is larger") {
		e.Col = 0
		e.Msg += ", the most a cartridge may hold: is it the right file?"
	}
	return e
}

// checkText refuses a source that is not UTF-8 text, so that a binary
// file given by mistake is named, not dumped on the terminal in an
// excerpt.
func checkText(src []byte, path string) error {
	if i := bytes.IndexByte(src, 0); i >= 0 {
		return &Error{File: path, Line: 1 + bytes.Count(src[:i], []byte("\n")),
			Msg: "this is not a text cartridge: the file holds binary data; give the path of a YAML (.yml) or Markdown (.md) cartridge"}
	}
	if utf8.Valid(src) {
		return nil
	}
	i := 0
	for i < len(src) {
		r, n := utf8.DecodeRune(src[i:])
		if r == utf8.RuneError && n <= 1 {
			break
		}
		i += n
	}
	line := 1 + bytes.Count(src[:i], []byte("\n"))
	col := 1 + utf8.RuneCount(src[bytes.LastIndexByte(src[:i], '\n')+1:i])
	return &Error{File: path, Line: line, Col: col,
		Msg: fmt.Sprintf("the file is not UTF-8 text (byte 0x%02X): save it as UTF-8, or give the path of a YAML (.yml) or Markdown (.md) cartridge", src[i])}
}

// printable escapes the control characters of a message or an excerpt
// (a cartridge may hold an escape sequence that would drive the terminal).
func printable(s string) string {
	if strings.IndexFunc(s, isControl) < 0 {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if isControl(r) {
			fmt.Fprintf(&b, "\\x%02x", r)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

func isControl(r rune) bool {
	return r != '\n' && r != '\t' && (r < 0x20 || r >= 0x7f && r < 0xa0)
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
	if _, err := yamlguard.Check(src, Limits); err != nil {
		return nil, nil, nil, guardError(path, err, lineOffset)
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
		e := &Error{File: path, Msg: printable(ye.GetMessage())}
		if tk := ye.GetToken(); tk != nil {
			e.Line = tk.Position.Line + lineOffset
			e.Col = tk.Position.Column
			var pp printer.Printer
			if lineOffset == 0 {
				e.Excerpt = printable(pp.PrintErrorToken(tk, false))
			}
		}
		return e
	}
	return &Error{File: path, Msg: printable(err.Error())}
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

// Model is the provider's model: provider.settings.model, else
// provider.options.model (where Google's cartridges keep it); "" when
// neither names one.
func (p Provider) Model() string {
	if m, ok := p.Settings["model"].(string); ok && m != "" {
		return m
	}
	m, _ := p.Options["model"].(string)
	return m
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
