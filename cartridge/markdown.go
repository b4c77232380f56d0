package cartridge

import (
	"bytes"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/goccy/go-yaml"
	yamlparser "github.com/goccy/go-yaml/parser"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/parser"
	mdtext "github.com/yuin/goldmark/text"

	"github.com/nbots/nb/yamlguard"
)

// A Markdown cartridge is prose with fenced code blocks: the yaml blocks
// are merged into one cartridge and a lua, fennel or clojure block right
// after a block that defines tools becomes the source of the last of
// those tools (the specification's "Markdown Support", as the reference
// implementation reads it).

// fenceAfterText is the reference's pre-pass: it inserts two newlines
// before every three backticks followed by a word character, so that a
// fence directly after a paragraph line (or an HTML line, which would
// otherwise swallow it into an HTML block) still opens a code block. \w is
// ASCII in Go as in Ruby.
//
// The blocks are those the reference sees, but their text is the file's:
// the reference also inserts the newlines inside a block's text (a
// directive quoting "```text" in a block scalar, a Fennel adapter that
// wraps content in a fence), which breaks the YAML or changes the code;
// nb leaves the text of a block as written.
var fenceAfterText = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile("```\\w") })

// markdown is a parser of Markdown blocks only: the cartridge needs the
// fenced code blocks, never the inline markup, whose parsing costs most of
// the time (and is quadratic on unclosed links: 120 KB of "[a](" took 3 s).
var markdown = sync.OnceValue(func() parser.Parser {
	return parser.NewParser(parser.WithBlockParsers(parser.DefaultBlockParsers()...))
})

// blockPosition is a "[line:column]" in a YAML parser message.
var blockPosition = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\[\d+:\d+\]`) })

// mdBlock is a fenced code block in a language a cartridge uses.
type mdBlock struct {
	lang      string // yaml, lua, fennel or clojure
	text      []byte // the block's text, ending with a newline
	fenceLine int    // line of the opening fence in the original file
	// lines[i] is the original line of the block's line i+1.
	lines []int
}

// blockLanguages maps an info string's first word (lower-cased) to the
// language it selects; any other block is invisible.
var blockLanguages = map[string]string{
	"yml": "yaml", "yaml": "yaml",
	"lua": "lua",
	"fnl": "fennel", "fennel": "fennel",
	"clj": "clojure", "clojure": "clojure",
}

// prePass applies the reference's fence insertion and returns the new
// text with, for each of its lines (1-based; index 0 unused), the line of
// the original text it comes from, and the offsets in the new text where
// two newlines were inserted.
func prePass(src []byte) ([]byte, []int, []int) {
	matches := fenceAfterText().FindAllIndex(src, -1)
	out := make([]byte, 0, len(src)+2*len(matches))
	origin := []int{0, 1}
	inserted := make([]int, 0, len(matches))
	line := 1
	copyOriginal := func(b []byte) {
		for _, c := range b {
			out = append(out, c)
			if c == '\n' {
				line++
				origin = append(origin, line)
			}
		}
	}
	last := 0
	for _, m := range matches {
		copyOriginal(src[last:m[0]])
		inserted = append(inserted, len(out))
		out = append(out, '\n', '\n')
		origin = append(origin, line, line)
		last = m[0]
	}
	copyOriginal(src[last:])
	return out, origin, inserted
}

// original returns a segment's text without the newlines the pre-pass
// inserted: the sub-lines of a line the pre-pass split join again.
func original(seg mdtext.Segment, pre []byte, inserted []int) []byte {
	value := seg.Value(pre)
	// The first insertion that may overlap the segment.
	i := sort.SearchInts(inserted, seg.Start-1)
	if i == len(inserted) || inserted[i] >= seg.Stop {
		return value
	}
	out := make([]byte, 0, len(value))
	out = append(out, bytes.Repeat([]byte{' '}, seg.Padding)...)
	for pos := seg.Start; pos < seg.Stop; pos++ {
		for i < len(inserted) && inserted[i]+2 <= pos {
			i++
		}
		if i < len(inserted) && pos >= inserted[i] && pos < inserted[i]+2 {
			continue
		}
		out = append(out, pre[pos])
	}
	// A line that ends where the pre-pass split it goes on in the next
	// segment.
	split := i < len(inserted) && seg.Stop-1 >= inserted[i] && seg.Stop-1 < inserted[i]+2
	if !split && seg.ForceNewline && len(out) > 0 && out[len(out)-1] != '\n' {
		out = append(out, '\n')
	}
	return out
}

// extractBlocks returns the fenced code blocks of a Markdown text whose
// language a cartridge uses, in document order.
func extractBlocks(src []byte) []mdBlock {
	pre, origin, inserted := prePass(src)
	var lineStarts []int // offsets where the lines of pre start
	lineStarts = append(lineStarts, 0)
	for i, c := range pre {
		if c == '\n' {
			lineStarts = append(lineStarts, i+1)
		}
	}
	lineAt := func(offset int) int { // original line of a byte offset in pre
		l := sort.Search(len(lineStarts), func(i int) bool { return lineStarts[i] > offset })
		if l < len(origin) {
			return origin[l]
		}
		return origin[len(origin)-1]
	}

	doc := markdown().Parse(mdtext.NewReader(pre))
	var blocks []mdBlock
	_ = ast.Walk(doc, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		fenced, ok := n.(*ast.FencedCodeBlock)
		if !entering || !ok || fenced.Info == nil {
			return ast.WalkContinue, nil
		}
		words := strings.Fields(strings.ToLower(string(fenced.Info.Segment.Value(pre))))
		if len(words) == 0 || blockLanguages[words[0]] == "" {
			return ast.WalkContinue, nil
		}
		b := mdBlock{lang: blockLanguages[words[0]], fenceLine: lineAt(fenced.Info.Segment.Start)}
		segs := fenced.Lines()
		for i := 0; i < segs.Len(); i++ {
			seg := segs.At(i)
			b.text = append(b.text, original(seg, pre, inserted)...)
			if l := lineAt(seg.Start); len(b.lines) == 0 || b.lines[len(b.lines)-1] != l {
				b.lines = append(b.lines, l)
			}
		}
		if len(b.text) > 0 && b.text[len(b.text)-1] != '\n' {
			b.text = append(b.text, '\n') // an unclosed block at the end of the file
		}
		blocks = append(blocks, b)
		return ast.WalkSkipChildren, nil
	})
	return blocks
}

// normalizeNewlines turns CRLF and lone CR line ends into LF: CommonMark
// and YAML both count a lone CR as a line end, and lines are counted on
// LF afterwards.
func normalizeNewlines(src []byte) []byte {
	if bytes.IndexByte(src, '\r') < 0 {
		return src
	}
	src = bytes.ReplaceAll(src, []byte("\r\n"), []byte("\n"))
	return bytes.ReplaceAll(src, []byte("\r"), []byte("\n"))
}

// codeLine is the original line where the block's text starts.
func (b *mdBlock) codeLine() int {
	if len(b.lines) > 0 {
		return b.lines[0]
	}
	return b.fenceLine + 1
}

// mdSource is one YAML source of the merge, with the lines of its keys.
type mdSource struct {
	raw            yaml.MapSlice
	lines, offsets map[string]int
}

// parseBlock parses a yaml block with the lines of the Markdown file.
func parseBlock(b *mdBlock, path string) (mdSource, error) {
	offset := b.codeLine() - 1
	// The lines parseYAML reports are offset + the line in the block;
	// b.lines says which line of the file that is (the same line, as a
	// block's lines follow each other in the file, but b.lines is the
	// record).
	remap := func(l int) int {
		if i := l - offset - 1; i >= 0 && i < len(b.lines) {
			return b.lines[i]
		}
		return l
	}
	raw, lines, offsets, err := parseYAML(b.text, path, offset)
	if err != nil {
		if e, ok := err.(*Error); ok {
			if e.Line > 0 {
				e.Line = remap(e.Line)
			}
			// The parser's own positions ("already defined at [1:1]") are
			// in the block; the messages speak of a file.
			e.Msg = blockPosition().ReplaceAllStringFunc(e.Msg, func(m string) string {
				var l, c int
				if _, err := fmt.Sscanf(m, "[%d:%d]", &l, &c); err != nil {
					return m
				}
				return fmt.Sprintf("[%d:%d]", remap(l+offset), c)
			})
			e.Msg = strings.ReplaceAll(e.Msg, "this file", "this yaml block")
		}
		return mdSource{}, err
	}
	for _, m := range []map[string]int{lines, offsets} {
		for k, l := range m {
			m[k] = remap(l)
		}
	}
	return mdSource{raw: raw, lines: lines, offsets: offsets}, nil
}

// isEmptyYAML reports whether a block holds no YAML document (only
// blanks or comments): such a block contributes nothing.
func isEmptyYAML(src []byte) bool {
	if len(bytes.TrimSpace(src)) == 0 {
		return true
	}
	file, err := yamlparser.ParseBytes(src, 0)
	if err != nil {
		return false // parseBlock reports it
	}
	for _, d := range file.Docs {
		if d.Body != nil {
			return false
		}
	}
	return true
}

// parseMarkdown reads a Markdown cartridge: it extracts the blocks, turns
// them into YAML sources, deep-merges them and builds the cartridge as
// for YAML (ENV substitution and validation included).
func parseMarkdown(src []byte, path string, env Lookup) (*Cartridge, error) {
	var (
		sources   []mdSource
		tools     []any
		toolLines = map[string]int{}
		toolOffs  = map[string]int{}
		prevTools bool // the previous visible block defined tools
		sawYAML   bool
	)
	src = normalizeNewlines(src)
	if err := checkNesting(src, path); err != nil {
		return nil, err
	}
	blocks := extractBlocks(src)
	if err := guardBlocks(blocks, path); err != nil {
		return nil, err
	}
	for i := range blocks {
		b := &blocks[i]
		if b.lang != "yaml" {
			if !prevTools {
				continue
			}
			prevTools = false
			last, ok := tools[len(tools)-1].(yaml.MapSlice)
			if !ok {
				continue // not a mapping: validation rejects the tool
			}
			tools[len(tools)-1] = setKey(last, b.lang, string(b.text))
			p := fmt.Sprintf("tools[%d].%s", len(tools)-1, b.lang)
			toolLines[p] = b.fenceLine
			toolOffs[p] = b.codeLine()
			continue
		}
		sawYAML = true
		if isEmptyYAML(b.text) {
			prevTools = false
			continue
		}
		s, err := parseBlock(b, path)
		if err != nil {
			return nil, err
		}
		list, isList := valueOf(s.raw, "tools").([]any)
		if !isList || len(list) == 0 {
			sources = append(sources, s)
			prevTools = false
			continue
		}
		if _, ok := toolLines["tools"]; !ok {
			toolLines["tools"] = s.lines["tools"]
			toolOffs["tools"] = s.offsets["tools"]
		}
		copyElements(toolLines, s.lines, "tools", len(tools))
		copyElements(toolOffs, s.offsets, "tools", len(tools))
		tools = append(tools, list...)
		s.raw = withoutKey(s.raw, "tools")
		deleteLines(s.lines, "tools")
		deleteLines(s.offsets, "tools")
		if len(s.raw) > 0 {
			sources = append(sources, s)
		}
		prevTools = true
	}
	if len(tools) > 0 {
		sources = append(sources, mdSource{raw: yaml.MapSlice{{Key: "tools", Value: tools}}, lines: toolLines, offsets: toolOffs})
	}
	if len(sources) == 0 {
		if !sawYAML {
			return nil, &Error{File: path, Msg: "no yaml code block found: a Markdown cartridge keeps its settings in fenced blocks marked ```yaml (or ```yml); the rest of the text is ignored"}
		}
		return nil, &Error{File: path, Msg: "the yaml code blocks are empty: a cartridge needs at least a provider section"}
	}
	merged := mdSource{lines: map[string]int{}, offsets: map[string]int{}}
	for _, s := range sources {
		merged.raw = merge(merged.raw, s.raw, "", &merged, s)
	}
	return build(merged.raw, merged.lines, merged.offsets, path, env)
}

// checkNesting refuses a line that opens more than maxMarkdownNesting
// block quotes and list items, before the Markdown parser sees it.
func checkNesting(src []byte, path string) error {
	for line := 1; len(src) > 0; line++ {
		l, rest, _ := bytes.Cut(src, []byte("\n"))
		if containers(l) > maxMarkdownNesting {
			return &Error{File: path, Line: line, Msg: fmt.Sprintf("the Markdown nests deeper than %d block quotes and lists on this line: no cartridge needs that; flatten it", maxMarkdownNesting)}
		}
		src = rest
	}
	return nil
}

// containers counts the block quote markers (>) and list markers (-, *,
// +, 1. or 1)) that start a line, one after the other. A thematic break
// (- - -) is not a list.
func containers(l []byte) int {
	n, i := 0, 0
	for {
		for i < len(l) && (l[i] == ' ' || l[i] == '\t') {
			i++
		}
		if i >= len(l) {
			return n
		}
		switch c := l[i]; {
		case c == '>':
			i++
		case (c == '-' || c == '*' || c == '+') && (i+1 == len(l) || l[i+1] == ' ' || l[i+1] == '\t'):
			if thematicBreak(l[i:]) {
				return n
			}
			i++
		case c >= '0' && c <= '9':
			j := i
			for j < len(l) && j-i < 9 && l[j] >= '0' && l[j] <= '9' {
				j++
			}
			if j == len(l) || l[j] != '.' && l[j] != ')' || j+1 < len(l) && l[j+1] != ' ' && l[j+1] != '\t' {
				return n
			}
			i = j + 1
		default:
			return n
		}
		n++
	}
}

// thematicBreak reports whether l is three or more of one of - * _ and
// blanks.
func thematicBreak(l []byte) bool {
	count := 0
	for _, c := range l {
		switch {
		case c == l[0]:
			count++
		case c == ' ' || c == '\t':
		default:
			return false
		}
	}
	return count >= 3
}

// guardBlocks runs yamlguard on every yaml block before any is parsed,
// with one budget of tokens for the whole file.
func guardBlocks(blocks []mdBlock, path string) error {
	tokens := 0
	for i := range blocks {
		b := &blocks[i]
		if b.lang != "yaml" {
			continue
		}
		st, err := yamlguard.Check(b.text, Limits)
		if err != nil {
			e := guardError(path, err, 0).(*Error)
			if e.Line > 0 && e.Line <= len(b.lines) {
				e.Line = b.lines[e.Line-1]
			} else if e.Line > 0 {
				e.Line += b.codeLine() - 1
			}
			return e
		}
		if tokens += st.Tokens; Limits.MaxTokens > 0 && tokens > Limits.MaxTokens {
			return &Error{File: path, Line: b.fenceLine, Msg: fmt.Sprintf("the yaml blocks hold more than %d YAML tokens (keys, values, list entries, separators, comments): the file is far larger than any cartridge needs", Limits.MaxTokens)}
		}
	}
	return nil
}

// merge deep-merges src into dst and returns dst, keeping keys in order of
// first appearance: mappings merge recursively, other values are replaced
// by the later one, except at the root, where two lists are concatenated.
//
// The reference concatenates only tools; the specification says "Root keys
// that are array values should be concatenated", and nb follows the
// specification for every root list (tools, robopages, and keys nb does
// not know). Nested lists (a prompt, stop sequences) are replaced, as
// both do.
//
// The key lines follow the values: a merged mapping keeps the line of its
// first appearance, a replaced value takes the lines of its replacement,
// and concatenated elements are renumbered.
func merge(dst, src yaml.MapSlice, prefix string, to *mdSource, from mdSource) yaml.MapSlice {
	for _, item := range src {
		key := fmt.Sprint(item.Key)
		p := key
		if prefix != "" {
			p = prefix + "." + key
		}
		i := indexOf(dst, key)
		if i < 0 {
			dst = append(dst, item)
			copyLines(to.lines, from.lines, p, 0)
			copyLines(to.offsets, from.offsets, p, 0)
			continue
		}
		if dm, ok := dst[i].Value.(yaml.MapSlice); ok {
			if sm, ok := item.Value.(yaml.MapSlice); ok {
				dst[i].Value = merge(dm, sm, p, to, from)
				continue
			}
		}
		if da, ok := dst[i].Value.([]any); ok && prefix == "" {
			if sa, ok := item.Value.([]any); ok {
				copyElements(to.lines, from.lines, p, len(da))
				copyElements(to.offsets, from.offsets, p, len(da))
				dst[i].Value = append(da, sa...)
				continue
			}
		}
		dst[i].Value = item.Value
		deleteLines(to.lines, p)
		deleteLines(to.offsets, p)
		copyLines(to.lines, from.lines, p, 0)
		copyLines(to.offsets, from.offsets, p, 0)
	}
	return dst
}

func indexOf(m yaml.MapSlice, key string) int {
	for i, item := range m {
		if fmt.Sprint(item.Key) == key {
			return i
		}
	}
	return -1
}

func valueOf(m yaml.MapSlice, key string) any {
	if i := indexOf(m, key); i >= 0 {
		return m[i].Value
	}
	return nil
}

func withoutKey(m yaml.MapSlice, key string) yaml.MapSlice {
	out := make(yaml.MapSlice, 0, len(m))
	for _, item := range m {
		if fmt.Sprint(item.Key) != key {
			out = append(out, item)
		}
	}
	return out
}

// setKey sets key in m, in place when it exists (replacing an inline
// source), else at the end.
func setKey(m yaml.MapSlice, key string, v any) yaml.MapSlice {
	if i := indexOf(m, key); i >= 0 {
		m[i].Value = v
		return m
	}
	return append(m, yaml.MapItem{Key: key, Value: v})
}

// under reports whether key path k is p or below it.
func under(k, p string) bool {
	return k == p || strings.HasPrefix(k, p+".") || strings.HasPrefix(k, p+"[")
}

func deleteLines(m map[string]int, p string) {
	for k := range m {
		if under(k, p) {
			delete(m, k)
		}
	}
}

// copyLines copies the lines at and below p from src to dst, adding shift
// to the index of p's elements when p is a list.
func copyLines(dst, src map[string]int, p string, shift int) {
	for k, l := range src {
		if !under(k, p) {
			continue
		}
		if shift != 0 {
			k = renumber(k, p, shift)
		}
		dst[k] = l
	}
}

// copyElements copies the lines of the elements of list p (not of p
// itself), shifted by shift.
func copyElements(dst, src map[string]int, p string, shift int) {
	for k, l := range src {
		if strings.HasPrefix(k, p+"[") {
			dst[renumber(k, p, shift)] = l
		}
	}
}

// renumber turns "p[i]rest" into "p[i+shift]rest".
func renumber(k, p string, shift int) string {
	rest := strings.TrimPrefix(k, p+"[")
	if len(rest) == len(k) {
		return k
	}
	end := strings.IndexByte(rest, ']')
	if end < 0 {
		return k
	}
	n, err := strconv.Atoi(rest[:end])
	if err != nil {
		return k
	}
	return p + "[" + strconv.Itoa(n+shift) + "]" + rest[end+1:]
}
