package channel

import (
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/parser"
	"github.com/yuin/goldmark/text"
)

// GitHub's ~~strikethrough~~ for the reply parser, here rather than from
// goldmark's extension package: that package compiles its Linkify and
// table expressions when the process starts (about 260 KB of heap and
// 2,000 allocations for every nb command), and the channels need only
// this one inline.

// strikeNode is a run of struck-through inlines.
type strikeNode struct{ ast.BaseInline }

// kindStrike is strikeNode's kind.
var kindStrike = ast.NewNodeKind("Strikethrough")

// Kind implements ast.Node.
func (*strikeNode) Kind() ast.NodeKind { return kindStrike }

// Dump implements ast.Node.
func (n *strikeNode) Dump(source []byte, level int) { ast.DumpHelper(n, source, level, nil, nil) }

// strikeDelims pairs runs of tildes: a run closes the nearest open run
// of tildes before it.
type strikeDelims struct{}

func (strikeDelims) IsDelimiter(b byte) bool { return b == '~' }

func (strikeDelims) CanOpenCloser(opener, closer *parser.Delimiter) bool {
	return opener.Char == closer.Char
}

func (strikeDelims) OnMatch(int) ast.Node { return &strikeNode{} }

// strikeParser takes a run of one or two tildes (GFM: three or more are
// text, and so is a run that follows a tilde) as a delimiter, which
// goldmark's delimiter pass pairs into strikeNodes once the block ends.
type strikeParser struct{}

func (strikeParser) Trigger() []byte { return []byte{'~'} }

func (strikeParser) Parse(_ ast.Node, block text.Reader, pc parser.Context) ast.Node {
	prev := block.PrecendingCharacter()
	if prev == '~' {
		return nil
	}
	line, seg := block.PeekLine()
	d := parser.ScanDelimiter(line, prev, 1, strikeDelims{})
	if d == nil || d.OriginalLength > 2 {
		return nil
	}
	d.Segment = seg.WithStop(seg.Start + d.OriginalLength)
	block.Advance(d.OriginalLength)
	pc.PushDelimiter(d)
	return d
}

func (strikeParser) CloseBlock(ast.Node, parser.Context) {}
