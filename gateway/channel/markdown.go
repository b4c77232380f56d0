package channel

import (
	"strconv"
	"strings"
	"sync"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/parser"
	"github.com/yuin/goldmark/text"
	"github.com/yuin/goldmark/util"
)

// SpanKind is a formatting that platforms without Markdown take as ranges
// over plain text (Telegram's entities, Matrix's HTML).
type SpanKind string

// Span kinds.
const (
	Bold   SpanKind = "bold"
	Italic SpanKind = "italic"
	Strike SpanKind = "strikethrough"
	Code   SpanKind = "code"
	Pre    SpanKind = "pre"
	Link   SpanKind = "link"
	Quote  SpanKind = "blockquote"
)

// Span is one formatting over Rich.Text[Start:End] (byte offsets).
type Span struct {
	Kind       SpanKind
	Start, End int
	// URL is a Link's target.
	URL string
	// Lang is a Pre block's language, if the fence named one.
	Lang string
}

// Rich is text with its formatting as spans, what the model's Markdown
// becomes for a platform that takes ranges rather than markup.
type Rich struct {
	Text  string
	Spans []Span
}

// markdown is CommonMark's parser with GitHub's strikethrough (strike.go),
// built on first use: most nb commands never parse a reply.
var markdown = sync.OnceValue(func() parser.Parser {
	return goldmark.New(goldmark.WithParserOptions(
		parser.WithInlineParsers(util.Prioritized(strikeParser{}, 500)),
	)).Parser()
})

// ParseMarkdown turns the model's Markdown (CommonMark with GitHub's
// ~~strikethrough~~) into plain text and spans: emphasis, code, links
// and quotes become spans; headings become bold lines; list items get a
// bullet or their number; blocks are separated by a blank line. Anything
// it does not know stays as written, so no text is lost.
func ParseMarkdown(src string) Rich {
	source := []byte(src)
	doc := markdown().Parse(text.NewReader(source))
	r := &richWriter{src: source}
	r.blocks(doc, 0)
	out := strings.TrimRight(r.b.String(), "\n ")
	spans := r.spans[:0]
	for _, s := range r.spans {
		s.End = min(s.End, len(out))
		if s.Start < s.End {
			spans = append(spans, s)
		}
	}
	return Rich{Text: out, Spans: spans}
}

type richWriter struct {
	src   []byte
	b     strings.Builder
	spans []Span
}

func (r *richWriter) open(kind SpanKind) int {
	r.spans = append(r.spans, Span{Kind: kind, Start: r.b.Len()})
	return len(r.spans) - 1
}

func (r *richWriter) close(i int) { r.spans[i].End = r.b.Len() }

// blocks writes the block children of n, separated by a blank line (a
// line break in a tight list item).
func (r *richWriter) blocks(n ast.Node, depth int) {
	sep := "\n\n"
	if li, ok := n.(*ast.ListItem); ok {
		if l, ok := li.Parent().(*ast.List); ok && l.IsTight {
			sep = "\n"
		}
	}
	for c := n.FirstChild(); c != nil; c = c.NextSibling() {
		if c != n.FirstChild() {
			r.b.WriteString(sep)
		}
		r.block(c, depth)
	}
}

func (r *richWriter) block(n ast.Node, depth int) {
	switch n := n.(type) {
	case *ast.Paragraph, *ast.TextBlock:
		r.inlines(n)
	case *ast.Heading:
		i := r.open(Bold)
		r.inlines(n)
		r.close(i)
	case *ast.ThematicBreak:
		r.b.WriteString("———")
	case *ast.FencedCodeBlock:
		i := r.open(Pre)
		if lang := n.Language(r.src); lang != nil {
			r.spans[i].Lang = string(lang)
		}
		r.lines(n)
		r.close(i)
	case *ast.CodeBlock:
		i := r.open(Pre)
		r.lines(n)
		r.close(i)
	case *ast.HTMLBlock:
		r.lines(n)
		if n.HasClosure() {
			r.b.Write(n.ClosureLine.Value(r.src))
		}
	case *ast.Blockquote:
		i := r.open(Quote)
		r.blocks(n, depth)
		r.close(i)
	case *ast.List:
		num := n.Start
		for item := n.FirstChild(); item != nil; item = item.NextSibling() {
			if item != n.FirstChild() {
				r.b.WriteString("\n")
			}
			r.b.WriteString(strings.Repeat("  ", depth))
			if n.IsOrdered() {
				r.b.WriteString(strconv.Itoa(num) + ". ")
				num++
			} else {
				r.b.WriteString("• ")
			}
			r.blocks(item, depth+1)
		}
	default:
		r.blocks(n, depth)
	}
}

// lines writes a block's raw lines without the last line break.
func (r *richWriter) lines(n ast.Node) {
	var b strings.Builder
	ls := n.Lines()
	for i := 0; i < ls.Len(); i++ {
		seg := ls.At(i)
		b.Write(seg.Value(r.src))
	}
	r.b.WriteString(strings.TrimRight(b.String(), "\n"))
}

func (r *richWriter) inlines(n ast.Node) {
	for c := n.FirstChild(); c != nil; c = c.NextSibling() {
		r.inline(c)
	}
}

func (r *richWriter) inline(n ast.Node) {
	switch n := n.(type) {
	case *ast.Text:
		r.b.Write(n.Segment.Value(r.src))
		if n.SoftLineBreak() || n.HardLineBreak() {
			r.b.WriteString("\n")
		}
	case *ast.String:
		r.b.Write(n.Value)
	case *ast.CodeSpan:
		i := r.open(Code)
		r.inlines(n)
		r.close(i)
	case *ast.Emphasis:
		kind := Italic
		if n.Level >= 2 {
			kind = Bold
		}
		i := r.open(kind)
		r.inlines(n)
		r.close(i)
	case *strikeNode:
		i := r.open(Strike)
		r.inlines(n)
		r.close(i)
	case *ast.Link:
		i := r.open(Link)
		r.spans[i].URL = string(n.Destination)
		r.inlines(n)
		r.close(i)
	case *ast.Image:
		i := r.open(Link)
		r.spans[i].URL = string(n.Destination)
		r.inlines(n)
		r.close(i)
	case *ast.AutoLink:
		r.b.Write(n.Label(r.src))
	case *ast.RawHTML:
		for i := 0; i < n.Segments.Len(); i++ {
			seg := n.Segments.At(i)
			r.b.Write(seg.Value(r.src))
		}
	default:
		r.inlines(n)
	}
}
