package channel

import (
	"strings"
	"testing"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	extast "github.com/yuin/goldmark/extension/ast"
	"github.com/yuin/goldmark/text"
)

// strikeTree prints a parsed document's inline structure with its
// strikethrough nodes, whichever parser made them.
func strikeTree(n ast.Node, src []byte, b *strings.Builder) {
	switch n.(type) {
	case *strikeNode, *extast.Strikethrough:
		b.WriteString("<s>")
		for c := n.FirstChild(); c != nil; c = c.NextSibling() {
			strikeTree(c, src, b)
		}
		b.WriteString("</s>")
		return
	case *ast.Text:
		b.Write(n.(*ast.Text).Segment.Value(src))
		return
	}
	b.WriteString("<" + n.Kind().String() + ">")
	for c := n.FirstChild(); c != nil; c = c.NextSibling() {
		strikeTree(c, src, b)
	}
	b.WriteString("</" + n.Kind().String() + ">")
}

// TestStrikeMatchesGoldmark holds nb's own strikethrough parser to
// goldmark's extension, which it replaces, on the delimiter's edge cases.
func TestStrikeMatchesGoldmark(t *testing.T) {
	ext := goldmark.New(goldmark.WithExtensions(extension.Strikethrough)).Parser()
	inputs := []string{
		"~~s~~", "~s~", "~~~s~~~", "~~s~", "~s~~", "a~~b~~c", "~~ s ~~", "~~s ~~", "~~ s~~",
		"**~~bs~~**", "~~**sb**~~", "~~a *b~~ c*", "`~~c~~`", "~~[l](http://x)~~", "\\~~s~~",
		"~~a\nb~~", "~~a\n\nb~~", "x ~~y~~ z ~~w~~", "~~~~", "~~", "~", "a ~~ b ~~ c", "~~s~~~",
		"~~a ~b~ c~~", "~a ~~b~~ c~", "> ~~q~~", "- ~~i~~", "# ~~h~~", "~~é~~", "(~~p~~)", "~~p~~.",
	}
	for _, in := range inputs {
		src := []byte(in)
		var want, got strings.Builder
		strikeTree(ext.Parse(text.NewReader(src)), src, &want)
		strikeTree(markdown().Parse(text.NewReader(src)), src, &got)
		if got.String() != want.String() {
			t.Errorf("%q:\n got %s\nwant %s", in, got.String(), want.String())
		}
	}
}
