package channel

import (
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/parser"
	"github.com/yuin/goldmark/text"
	"github.com/yuin/goldmark/util"
)

// strikeNode is GitHub's ~~strikethrough~~ (one or two tildes each side).
// nb parses it itself rather than through goldmark's extension package,
// whose initialisation (linkify's large regular expressions, typographer
// tables) would run in every nb command: about 260 KB and 2,000
// allocations at start for one delimiter.
type strikeNode struct{ ast.BaseInline }

var kindStrike = ast.NewNodeKind("Strikethrough")

func (n *strikeNode) Kind() ast.NodeKind            { return kindStrike }
func (n *strikeNode) Dump(source []byte, level int) { ast.DumpHelper(n, source, level, nil, nil) }

// strikeDelimiters pairs runs of tildes of the same character.
type strikeDelimiters struct{}

func (strikeDelimiters) IsDelimiter(b byte) bool { return b == '~' }

func (strikeDelimiters) CanOpenCloser(opener, closer *parser.Delimiter) bool {
	return opener.Char == closer.Char
}

func (strikeDelimiters) OnMatch(int) ast.Node { return &strikeNode{} }

// strikeParser finds runs of one or two tildes; longer runs stay text.
type strikeParser struct{}

func (strikeParser) Trigger() []byte { return []byte{'~'} }

func (strikeParser) Parse(_ ast.Node, block text.Reader, pc parser.Context) ast.Node {
	before := block.PrecendingCharacter()
	line, segment := block.PeekLine()
	d := parser.ScanDelimiter(line, before, 1, strikeDelimiters{})
	if d == nil || d.OriginalLength > 2 || before == '~' {
		return nil
	}
	d.Segment = segment.WithStop(segment.Start + d.OriginalLength)
	block.Advance(d.OriginalLength)
	pc.PushDelimiter(d)
	return d
}

// newMarkdownParser is CommonMark's parser with strikethrough.
func newMarkdownParser() parser.Parser {
	return parser.NewParser(
		parser.WithBlockParsers(parser.DefaultBlockParsers()...),
		parser.WithInlineParsers(append(parser.DefaultInlineParsers(), util.Prioritized(strikeParser{}, 500))...),
		parser.WithParagraphTransformers(parser.DefaultParagraphTransformers()...),
	)
}
