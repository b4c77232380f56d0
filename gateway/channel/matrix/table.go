package matrix

import (
	"bytes"

	"github.com/yuin/goldmark/ast"
	extast "github.com/yuin/goldmark/extension/ast"
	"github.com/yuin/goldmark/parser"
	"github.com/yuin/goldmark/text"
	"github.com/yuin/goldmark/util"
)

// GitHub's tables (https://github.github.com/gfm/#tables-extension-),
// here rather than from goldmark's extension package: that package
// compiles its Linkify and table expressions when the process starts
// (about 260 KB of heap and 2,000 allocations for every nb command). The
// nodes are goldmark's (extension/ast), so the trees and the HTML are the
// extension's; TestTableMatchesGFMExtension holds them equal.

// tableRows turns a paragraph whose second line (or a later one) is a
// delimiter row (| --- | :-: |) under a header row of as many cells into
// a table; the lines before the header stay a paragraph, every line
// after the delimiter row is a row.
type tableRows struct{}

// escapedPipesKey holds the source offsets of the backslashes of \| in
// table cells after a backtick (map[int]bool): in code spans the
// backslash is dropped (the pipe is the cell's, not a separator).
var escapedPipesKey = parser.NewContextKey()

func (tableRows) Transform(node *ast.Paragraph, reader text.Reader, pc parser.Context) {
	lines := node.Lines()
	src := reader.Source()
	for i := 1; i < lines.Len(); i++ {
		line := lines.At(i)
		aligns := delimiterRow(line.Value(src))
		if aligns == nil {
			continue
		}
		header := tableRow(lines.At(i-1), aligns, true, src, pc)
		if header.ChildCount() != len(aligns) {
			return
		}
		table := extast.NewTable()
		table.Alignments = aligns
		table.SetPos(node.Pos())
		table.AppendChild(table, extast.NewTableHeader(header))
		for j := i + 1; j < lines.Len(); j++ {
			table.AppendChild(table, tableRow(lines.At(j), aligns, false, src, pc))
		}
		parent := node.Parent()
		parent.InsertAfter(parent, node, table)
		lines.SetSliced(0, i-1)
		if lines.Len() == 0 {
			parent.RemoveChild(parent, node)
		} else {
			last := lines.At(i - 2)
			last.Stop-- // the header's line feed
			lines.Set(i-2, last)
		}
		return
	}
}

// delimiterRow is a delimiter row's alignments, nil if the line is not
// one: indented three spaces at most, only '-', ':', '|' and spaces (not
// only '-': that is a thematic break or a setext underline), each cell
// :?-+:?.
func delimiterRow(line []byte) []extast.Alignment {
	if w, _ := util.IndentWidth(line, 0); w > 3 {
		return nil
	}
	onlyDashes := true
	for _, b := range line {
		if b != '-' {
			onlyDashes = false
		}
		if b != '-' && b != '|' && b != ':' && !util.IsSpace(b) {
			return nil
		}
	}
	if onlyDashes {
		return nil
	}
	cols := bytes.Split(line, []byte{'|'})
	if util.IsBlank(cols[0]) {
		cols = cols[1:]
	}
	if len(cols) > 0 && util.IsBlank(cols[len(cols)-1]) {
		cols = cols[:len(cols)-1]
	}
	if len(cols) == 0 {
		return nil
	}
	aligns := make([]extast.Alignment, 0, len(cols))
	for _, col := range cols {
		c := bytes.Trim(col, " \t\n\f\r")
		left, right := bytes.HasPrefix(c, []byte{':'}), bytes.HasSuffix(c, []byte{':'})
		if left {
			c = c[1:]
		}
		if right && len(c) > 0 {
			c = c[:len(c)-1]
		}
		if len(c) == 0 || len(bytes.Trim(c, "-")) != 0 {
			return nil
		}
		switch {
		case left && right:
			aligns = append(aligns, extast.AlignCenter)
		case left:
			aligns = append(aligns, extast.AlignLeft)
		case right:
			aligns = append(aligns, extast.AlignRight)
		default:
			aligns = append(aligns, extast.AlignNone)
		}
	}
	return aligns
}

// tableRow splits a line into cells at the pipes no backslash escapes
// (the outer pipes optional). A body row's cells past the header's are
// dropped; a short row is filled with empty cells.
func tableRow(seg text.Segment, aligns []extast.Alignment, header bool, src []byte, pc parser.Context) *extast.TableRow {
	seg = seg.TrimLeftSpace(src)
	seg = seg.TrimRightSpace(src)
	line := seg.Value(src)
	row := extast.NewTableRow(aligns)
	pos, end := 0, len(line)
	if end > 0 && line[0] == '|' {
		pos++
	}
	if end > 0 && line[end-1] == '|' {
		end--
	}
	n := 0
	for ; pos < end; n++ {
		align := extast.AlignNone
		if n < len(aligns) {
			align = aligns[n]
		} else if !header {
			return row
		}
		stop, backtick := pos, false
		for ; stop < end; stop++ {
			if line[stop] == '`' {
				backtick = true
			}
			if line[stop] != '|' {
				continue
			}
			if stop == 0 || line[stop-1] != '\\' {
				break
			}
			if backtick {
				escaped, _ := pc.Get(escapedPipesKey).(map[int]bool)
				if escaped == nil {
					escaped = map[int]bool{}
					pc.Set(escapedPipesKey, escaped)
				}
				escaped[seg.Start+stop-1] = true
			}
		}
		cell := extast.NewTableCell()
		cell.Alignment = align
		cs := text.NewSegment(seg.Start+pos, seg.Start+stop)
		cs = cs.TrimLeftSpace(src)
		cs = cs.TrimRightSpace(src)
		cell.Lines().Append(cs)
		row.AppendChild(row, cell)
		pos = stop + 1
	}
	for ; n < len(aligns); n++ {
		row.AppendChild(row, extast.NewTableCell())
	}
	return row
}

// unescapePipes drops the backslash of \| in the code spans of table
// cells.
type unescapePipes struct{}

func (unescapePipes) Transform(doc *ast.Document, _ text.Reader, pc parser.Context) {
	escaped, _ := pc.Get(escapedPipesKey).(map[int]bool)
	if escaped == nil {
		return
	}
	pc.Set(escapedPipesKey, nil)
	_ = ast.Walk(doc, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering || n.Kind() != extast.KindTableCell {
			return ast.WalkContinue, nil
		}
		_ = ast.Walk(n, unescapeIn(escaped))
		return ast.WalkSkipChildren, nil
	})
}

// unescapeIn drops the escaped pipes' backslashes from code spans: only
// those of table cells (a header row that made no table keeps them).
func unescapeIn(escaped map[int]bool) ast.Walker {
	return func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering || n.Kind() != ast.KindCodeSpan {
			return ast.WalkContinue, nil
		}
		for c := n.FirstChild(); c != nil; {
			next := c.NextSibling()
			if t, ok := c.(*ast.Text); ok {
				cur := ast.Node(t)
				s := t.Segment
				for at := s.Start; at < s.Stop; at++ {
					if !escaped[at] {
						continue
					}
					before, after := ast.NewRawTextSegment(s.WithStop(at)), ast.NewRawTextSegment(s.WithStart(at+1))
					n.InsertAfter(n, cur, before)
					n.InsertAfter(n, before, after)
					n.RemoveChild(n, cur)
					cur, s = after, after.Segment
				}
			}
			c = next
		}
		return ast.WalkContinue, nil
	}
}

// renderTableHeader and the functions below write goldmark's table
// HTML (the table itself is enclosed by <table> and </table>): one tag a
// line, alignment as style="text-align:…".
func renderTableHeader(w util.BufWriter, _ []byte, n ast.Node, entering bool) (ast.WalkStatus, error) {
	switch {
	case entering:
		_, _ = w.WriteString("<thead>\n<tr>\n")
	case n.NextSibling() != nil:
		_, _ = w.WriteString("</tr>\n</thead>\n<tbody>\n")
	default:
		_, _ = w.WriteString("</tr>\n</thead>\n")
	}
	return ast.WalkContinue, nil
}

func renderTableRow(w util.BufWriter, _ []byte, n ast.Node, entering bool) (ast.WalkStatus, error) {
	switch {
	case entering:
		_, _ = w.WriteString("<tr>\n")
	case n.Parent().LastChild() == n:
		_, _ = w.WriteString("</tr>\n</tbody>\n")
	default:
		_, _ = w.WriteString("</tr>\n")
	}
	return ast.WalkContinue, nil
}

func renderTableCell(w util.BufWriter, _ []byte, node ast.Node, entering bool) (ast.WalkStatus, error) {
	n := node.(*extast.TableCell)
	tag := "td"
	if n.Parent().Kind() == extast.KindTableHeader {
		tag = "th"
	}
	switch {
	case !entering:
		_, _ = w.WriteString("</" + tag + ">\n")
	case n.Alignment != extast.AlignNone:
		_, _ = w.WriteString("<" + tag + ` style="text-align:` + n.Alignment.String() + `">`)
	default:
		_, _ = w.WriteString("<" + tag + ">")
	}
	return ast.WalkContinue, nil
}
