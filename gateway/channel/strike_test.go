package channel

import (
	"fmt"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	"github.com/yuin/goldmark/text"
)

// shape is a node tree as text: each node's kind, and the text of Text
// nodes, so that two parsers' trees compare.
func shape(n ast.Node, src []byte) string {
	var b strings.Builder
	_ = ast.Walk(n, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			b.WriteString(")")
			return ast.WalkContinue, nil
		}
		fmt.Fprintf(&b, "(%s", n.Kind())
		if t, ok := n.(*ast.Text); ok {
			fmt.Fprintf(&b, " %q", t.Segment.Value(src))
		}
		return ast.WalkContinue, nil
	})
	return b.String()
}

// TestStrikeMatchesGFMExtension holds the channels' own strikethrough to
// what goldmark's GFM extension (which nb no longer links) makes of the
// same Markdown: the same tree, node for node.
func TestStrikeMatchesGFMExtension(t *testing.T) {
	gfm := goldmark.New(goldmark.WithExtensions(extension.Strikethrough)).Parser()
	inputs := []string{
		"~~s~~", "~s~", "~~~s~~~", "~~s~", "~s~~", "a~~b~~c", "~~ s ~~", "~~a **b** c~~",
		"**a ~~b~~**", "~~a\nb~~", "~~unclosed", "x~~~y", "\\~~a~~", "`~~code~~`",
		"~~a~~ ~~b~~", "~~[l](u)~~", "~~~\nfenced\n~~~", "a ~~ b ~~ c", "~~*a~~*", "*~~a*~~",
		"~~a ~b~ c~~", "~", "~~", "~~~~", "~~\u00e9~~", "-~~a~~-", "~~a~~b", "(~~a~~)",
	}
	for _, md := range inputs {
		src := []byte(md)
		want := shape(gfm.Parse(text.NewReader(src)), src)
		got := shape(markdown().Parse(text.NewReader(src)), src)
		if got != want {
			t.Errorf("%q:\n got %s\nwant %s", md, got, want)
		}
	}
}

// TestNoGoldmarkExtensionImport keeps goldmark's extension package out of
// the channel package's own files: every nb command initialises every
// linked package, and that one compiles Linkify's {1,256} expressions at
// start (264 KB, 2,049 allocations, about 230 page faults of an eval).
func TestNoGoldmarkExtensionImport(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			if imp.Path.Value == `"github.com/yuin/goldmark/extension"` {
				t.Errorf("%s imports goldmark/extension; the channels parse ~~strikethrough~~ with strike.go", fset.Position(imp.Pos()))
			}
		}
	}
}
