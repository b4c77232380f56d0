package matrix

import (
	"bytes"
	stdhtml "html"
	"net/url"
	"strings"
	"sync"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/parser"
	"github.com/yuin/goldmark/renderer"
	"github.com/yuin/goldmark/renderer/html"
	"github.com/yuin/goldmark/text"
	"github.com/yuin/goldmark/util"

	extast "github.com/yuin/goldmark/extension/ast"

	"github.com/nbots/nb/gateway/channel"
)

// The Markdown the bot sends is rendered to the HTML of formatted_body
// as Matrix clients read it (what Element and mautrix bots send):
// CommonMark with GitHub's strikethrough and tables, ||spoilers||
// (data-mx-spoiler, with an optional reason: ||reason|text||), every
// line break a <br>, the model's raw HTML shown as text (escaped), and a
// message of one paragraph sent without its <p>. formatted_body is left
// out when the HTML shows nothing the plain body does not, and m.mentions
// lists the users the text links to (matrix.to or matrix: links).
// TestRenderGolden holds the output byte for byte.

// markdown is the renderer, built on first use: most nb commands never
// render a Matrix message.
var markdown = sync.OnceValue(func() goldmark.Markdown {
	return goldmark.New(
		goldmark.WithParserOptions(
			parser.WithInlineParsers(
				util.Prioritized(channel.StrikethroughParser(), 500),
				util.Prioritized(spoilerParser{}, 500),
			),
			parser.WithParagraphTransformers(util.Prioritized(tableRows{}, 200)),
			parser.WithASTTransformers(util.Prioritized(unescapePipes{}, 0)),
		),
		goldmark.WithRendererOptions(
			html.WithHardWraps(),
			// Links keep any scheme (clients sanitise formatted_body);
			// raw HTML is escaped by matrixHTML all the same.
			html.WithUnsafe(),
			renderer.WithNodeRenderers(util.Prioritized(matrixHTML{}, 0)),
		),
	)
})

// render is one message's content: the Markdown as body, its HTML as
// formatted_body. Mentions are only what the text links to, never @room.
func render(md string) *messageContent {
	content := &messageContent{MsgType: msgText, Body: md, Mentions: &mentions{}}
	src := []byte(md)
	m := markdown()
	doc := m.Parser().Parse(text.NewReader(src))
	var buf bytes.Buffer
	if err := m.Renderer().Render(&buf, src, doc); err != nil {
		return content // a writer into memory does not fail
	}
	out := strings.TrimRight(buf.String(), "\n")
	if oneParagraph(doc) {
		out = strings.TrimSuffix(strings.TrimPrefix(out, "<p>"), "</p>")
	}
	if plain(out) {
		return content
	}
	content.Format, content.FormattedBody = formatHTML, out
	_ = ast.Walk(doc, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			return ast.WalkContinue, nil
		}
		var href []byte
		switch n := n.(type) {
		case *ast.Link:
			href = util.URLEscape(n.Destination, true)
		case *ast.AutoLink:
			if n.AutoLinkType == ast.AutoLinkURL {
				href = util.URLEscape(n.URL(src), false)
			}
		}
		if user, ok := linkedUser(string(href)); ok {
			content.Mentions.add(user)
		}
		return ast.WalkContinue, nil
	})
	return content
}

// oneParagraph tells whether the document is a single paragraph (link
// reference definitions, which show nothing, aside).
func oneParagraph(doc ast.Node) bool {
	paragraphs := 0
	for n := doc.FirstChild(); n != nil; n = n.NextSibling() {
		switch n.Kind() {
		case ast.KindLinkReferenceDefinition:
		case ast.KindParagraph:
			paragraphs++
		default:
			return false
		}
	}
	return paragraphs == 1
}

// plain tells whether the HTML reads as its own text: no element, no
// character reference, no white space a client would collapse or trim.
func plain(h string) bool {
	if strings.ContainsAny(h, "<>&\t\n\r\x00") || strings.Contains(h, "  ") {
		return false
	}
	return strings.TrimSpace(h) == h
}

// linkedUser is the user a link points at: https://matrix.to/#/@user:server
// (any further /event and ?via= ignored; the id may be percent-encoded)
// or matrix:u/user:server.
func linkedUser(href string) (string, bool) {
	if href == "" {
		return "", false
	}
	u, err := url.Parse(href)
	if err != nil {
		return "", false
	}
	if u.Scheme == "matrix" {
		parts := strings.Split(u.Opaque, "/")
		if (len(parts) != 2 && len(parts) != 4) || (parts[0] != "u" && parts[0] != "user") || parts[1] == "" {
			return "", false
		}
		id, err := url.PathUnescape(parts[1])
		return "@" + id, err == nil
	}
	if host := u.Hostname(); host != "matrix.to" && !strings.HasSuffix(host, ".matrix.to") {
		return "", false
	}
	frag, _, _ := strings.Cut(u.Fragment, "?")
	parts := strings.Split(frag, "/")
	if len(parts) < 2 || len(parts) > 3 || parts[0] != "" || len(parts[1]) < 2 || parts[1][0] != '@' {
		return "", false
	}
	return parts[1], true
}

// matrixHTML renders what goldmark's HTML renderer does not as Matrix
// wants it: the model's raw HTML as text, spoilers as data-mx-spoiler;
// and strikethrough (the channels' parser) and tables (table.go) as
// goldmark's extension does.
type matrixHTML struct{}

func (matrixHTML) RegisterFuncs(r renderer.NodeRendererFuncRegisterer) {
	r.Register(ast.KindRawHTML, renderRawHTML)
	r.Register(ast.KindHTMLBlock, renderHTMLBlock)
	r.Register(kindSpoiler, renderSpoiler)
	r.Register(channel.KindStrikethrough, enclose("<del>", "</del>"))
	r.Register(extast.KindTable, enclose("<table>\n", "</table>\n"))
	r.Register(extast.KindTableHeader, renderTableHeader)
	r.Register(extast.KindTableRow, renderTableRow)
	r.Register(extast.KindTableCell, renderTableCell)
}

// enclose renders a node's children between open and end.
func enclose(open, end string) renderer.NodeRendererFunc {
	return func(w util.BufWriter, _ []byte, _ ast.Node, entering bool) (ast.WalkStatus, error) {
		if entering {
			_, _ = w.WriteString(open)
		} else {
			_, _ = w.WriteString(end)
		}
		return ast.WalkContinue, nil
	}
}

// renderRawHTML writes inline HTML escaped.
func renderRawHTML(w util.BufWriter, src []byte, n ast.Node, entering bool) (ast.WalkStatus, error) {
	if entering {
		segs := n.(*ast.RawHTML).Segments
		for i := range segs.Len() {
			seg := segs.At(i)
			html.DefaultWriter.RawWrite(w, seg.Value(src))
		}
	}
	return ast.WalkSkipChildren, nil
}

// renderHTMLBlock writes an HTML block's lines escaped.
func renderHTMLBlock(w util.BufWriter, src []byte, n ast.Node, entering bool) (ast.WalkStatus, error) {
	b := n.(*ast.HTMLBlock)
	if entering {
		lines := b.Lines()
		for i := range lines.Len() {
			line := lines.At(i)
			html.DefaultWriter.RawWrite(w, line.Value(src))
		}
	} else if b.HasClosure() {
		closure := b.ClosureLine
		html.DefaultWriter.RawWrite(w, closure.Value(src))
	}
	return ast.WalkContinue, nil
}

func renderSpoiler(w util.BufWriter, _ []byte, n ast.Node, entering bool) (ast.WalkStatus, error) {
	switch s := n.(*spoilerNode); {
	case !entering:
		_, _ = w.WriteString("</span>")
	case s.reason == "":
		_, _ = w.WriteString("<span data-mx-spoiler>")
	default:
		_, _ = w.WriteString(`<span data-mx-spoiler="` + stdhtml.EscapeString(s.reason) + `">`)
	}
	return ast.WalkContinue, nil
}

// spoilerNode is ||hidden text||, with its reason if any.
type spoilerNode struct {
	ast.BaseInline
	reason string
}

var kindSpoiler = ast.NewNodeKind("MatrixSpoiler")

func (*spoilerNode) Kind() ast.NodeKind { return kindSpoiler }

func (n *spoilerNode) Dump(src []byte, level int) { ast.DumpHelper(n, src, level, nil, nil) }

// spoilerKey holds the paragraph's open spoiler (*openSpoiler).
var spoilerKey = parser.NewContextKey()

// openSpoiler is a "||" (or "||reason|") waiting for its "||": a
// delimiter that pairs with nothing, so that it turns back into its text
// if the paragraph ends first.
type openSpoiler struct {
	mark   *parser.Delimiter
	reason string
}

// inert is the open spoiler's delimiter processor: it pairs with nothing.
type inert struct{}

func (inert) IsDelimiter(b byte) bool                   { return b == '|' }
func (inert) CanOpenCloser(_, _ *parser.Delimiter) bool { return false }
func (inert) OnMatch(int) ast.Node                      { return ast.NewText() }
func (spoilerParser) Trigger() []byte                   { return []byte{'|'} }
func (spoilerParser) CloseBlock(_ ast.Node, _ text.Reader, pc parser.Context) {
	pc.Set(spoilerKey, nil)
}

// spoilerParser reads spoilers: "||" opens one (with a reason when
// "reason|" follows, the reason free of '|'), the next "||" of the same
// run of text closes it, whatever the white space around them. Emphasis
// pairs inside a spoiler, not across it. A "||" left open is text.
type spoilerParser struct{}

func (spoilerParser) Parse(parent ast.Node, block text.Reader, pc parser.Context) ast.Node {
	line, seg := block.PeekLine()
	if len(line) < 2 || line[0] != '|' || line[1] != '|' {
		return nil
	}
	if open, _ := pc.Get(spoilerKey).(*openSpoiler); open != nil && open.mark.Parent() == parent {
		// Emphasis inside pairs inside; emphasis before the spoiler
		// pairs before it, and what stays open there is text: emphasis
		// does not reach across a spoiler.
		parser.ProcessDelimiters(open.mark, pc)
		n := &spoilerNode{reason: open.reason}
		for c := open.mark.NextSibling(); c != nil; {
			next := c.NextSibling()
			parent.RemoveChild(parent, c)
			n.AppendChild(n, c)
			c = next
		}
		open.mark.Length = 0
		pc.RemoveDelimiter(open.mark)
		parser.ProcessDelimiters(nil, pc)
		pc.Set(spoilerKey, nil)
		block.Advance(2)
		return n
	}
	length, reason := 2, ""
	if i := bytes.IndexByte(line[2:], '|'); i > 0 && 2+i+1 < len(line) && line[2+i+1] != '|' {
		reason = string(line[2 : 2+i])
		length += i + 1
	}
	mark := parser.NewDelimiter(false, false, length, '|', inert{})
	mark.Segment = seg.WithStop(seg.Start + length)
	block.Advance(length)
	pc.PushDelimiter(mark)
	pc.Set(spoilerKey, &openSpoiler{mark: mark, reason: reason})
	return mark
}
