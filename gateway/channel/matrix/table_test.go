package matrix

import (
	"bytes"
	"math/rand"
	"strings"
	"testing"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	"github.com/yuin/goldmark/parser"
	"github.com/yuin/goldmark/renderer"
	"github.com/yuin/goldmark/renderer/html"
	"github.com/yuin/goldmark/util"
)

// extensionHTML is matrixHTML without the tables and strikethrough,
// which goldmark's extension renders in the reference.
type extensionHTML struct{}

func (extensionHTML) RegisterFuncs(r renderer.NodeRendererFuncRegisterer) {
	r.Register(ast.KindRawHTML, renderRawHTML)
	r.Register(ast.KindHTMLBlock, renderHTMLBlock)
	r.Register(kindSpoiler, renderSpoiler)
}

// TestTableMatchesGFMExtension: the renderer's own tables (table.go) and
// the channels' strikethrough give the HTML of goldmark's extension
// package, which mautrix rendered with, for the golden file's messages,
// table edge cases and 20,000 random ones.
func TestTableMatchesGFMExtension(t *testing.T) {
	ref := goldmark.New(
		goldmark.WithExtensions(extension.Strikethrough, extension.Table),
		goldmark.WithParserOptions(parser.WithInlineParsers(util.Prioritized(spoilerParser{}, 500))),
		goldmark.WithRendererOptions(html.WithHardWraps(), html.WithUnsafe(),
			renderer.WithNodeRenderers(util.Prioritized(extensionHTML{}, 0))),
	)
	cases := append([]string{
		"a | b\n-|-\n1 | 2",
		"| a |\n| - |\n| `x \\| y` | z |",
		"| `a\\|b` | c\\|d |\n|---|---|\n| `\\|` | ~~\\|~~ |",
		"text\nmore\n| h1 | h2 |\n|:-:|--:|\n| x |",
		"| a | b |\n| --- |\n| 1 | 2 |",
		"| a |\n|:-|\n",
		"|a|\n|-|\n|b|c|d|",
		"    | a |\n    |---|",
		"| a |\n   |---|\n| b |",
		"| a |\n    |---|",
		"| a |\n| :-: : |",
		"| a |\n|---|\n\nafter",
		"> | a |\n> |---|\n> | b |",
		"- | a |\n  |---|\n  | b |",
		"| a | b |\n|---|---|\n| ~~x~~ | ~y~ |\n| ~~~z~~~ | ||s|| |",
		"~~a~~ ~b~ ~~~c~~~ ~~d~ a~~b~~c ~~ e ~~",
		"|\n|-|",
		"||\n|-|-|",
		"| a |\n|---|\n|",
		"-: `~~> \\|||-:#-:~~- `\n-:",
	}, renderCases...)
	toks := []string{"a", "b", " ", "|", "||", "-", "---", ":", ":-", "-:", "\n", "\n", "`", "\\", "\\|", "~", "~~", "*", "**", "> ", "- ", "#", "<b>", "&", "\t", "    "}
	r := rand.New(rand.NewSource(36))
	for range 20000 {
		var b strings.Builder
		for n := r.Intn(16); n >= 0; n-- {
			b.WriteString(toks[r.Intn(len(toks))])
		}
		cases = append(cases, b.String())
	}
	bad := 0
	for _, md := range cases {
		var want, got bytes.Buffer
		if err := ref.Convert([]byte(md), &want); err != nil {
			t.Fatal(err)
		}
		if err := markdown().Convert([]byte(md), &got); err != nil {
			t.Fatal(err)
		}
		if got.String() != want.String() {
			t.Errorf("%q:\n got %q\nwant %q", md, got.String(), want.String())
			if bad++; bad == 10 {
				t.FailNow()
			}
		}
	}
}
