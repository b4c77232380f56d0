// Package yamlguard refuses YAML text that would make a parser build an
// enormous tree, before the parser sees it: text larger than a size,
// nesting deeper than a number of levels (open flow collections [ { plus
// block indentation levels and "- " entries), or more tokens than a count.
//
// The YAML parser nb uses (github.com/goccy/go-yaml) spends memory
// quadratic in the nesting depth: 200 KB of "[" (100,000 levels) takes
// 115 s and 14.7 GB before it fails. Check reads the text once, keeping a
// stack of indentation columns no deeper than the limit, and follows that
// parser's reading of quotes, comments, block scalars, plain scalars that
// go on over several lines, and flow collections, so that a bracket inside
// a string or a comment never counts and one the parser sees always does.
// It follows go-yaml v1.19.2 down to its quirks (columns that tabs do not
// move, characters skipped after some quoted scalars): when go-yaml is
// upgraded, run FuzzCheck, which compares the two, for several minutes.
package yamlguard

import (
	"fmt"
	"unicode/utf8"

	"github.com/nbots/nb/internal/bytesize"
)

// Limits bounds what Check accepts. A zero field is no limit.
type Limits struct {
	// MaxBytes bounds the size of the text.
	MaxBytes int
	// MaxDepth bounds the nesting: block levels (indentation, "- " and
	// "? " entries) plus open flow collections ([ and {).
	MaxDepth int
	// MaxTokens bounds the number of tokens: keys and other scalars,
	// ":" and "," and "- ", brackets, tags, anchors and comments.
	MaxTokens int
}

// Default is what nb accepts in a cartridge or a robopage. The largest
// real cartridge or page nb knows is 13 KB, the deepest 8 levels, the
// busiest 501 tokens; the limits leave 12 to 40 times that, and the text
// they let through that costs go-yaml the most takes about 0.6 s of CPU
// and 40 MB (bench/README.md).
var Default = Limits{MaxBytes: 512 << 10, MaxDepth: 100, MaxTokens: 20000}

// Error is a limit the text exceeds, located where the scan crossed it.
type Error struct {
	// Line and Column are 1-based; Column counts characters.
	Line, Column int
	// Msg says which limit and what to do.
	Msg string
}

func (e *Error) Error() string {
	return fmt.Sprintf("%d:%d: %s", e.Line, e.Column, e.Msg)
}

// Stats is what Check measured.
type Stats struct {
	// Depth is the deepest nesting seen, Flow the deepest flow nesting.
	Depth, Flow int
	// Tokens is the number of tokens counted.
	Tokens int
}

// Check scans src and returns what it measured, with an *Error for the
// first limit src exceeds (the scan stops there). It allocates only the
// stack of indentation levels, at most MaxDepth deep.
func Check(src []byte, lim Limits) (Stats, error) {
	if err := lim.CheckSize(src); err != nil {
		return Stats{}, err
	}
	s := scanner{src: src, lim: lim, line: 1, col: 1, first: true}
	err := s.run()
	return s.stats, err
}

// CheckSize returns an *Error when src is larger than MaxBytes, located
// where it crosses the limit. Check does it first; a caller reading a
// file should read at most MaxBytes+1 bytes of it.
func (lim Limits) CheckSize(src []byte) error {
	if lim.MaxBytes <= 0 || len(src) <= lim.MaxBytes {
		return nil
	}
	line, col := position(src, lim.MaxBytes)
	return &Error{Line: line, Column: col, Msg: fmt.Sprintf("the file is larger than %s", bytesize.String(int64(lim.MaxBytes)))}
}

// position returns the line and column (in characters) of byte offset.
func position(src []byte, offset int) (line, col int) {
	line, col = 1, 1
	for i := 0; i < offset && i < len(src); i++ {
		switch c := src[i]; {
		case c == '\n', c == '\r' && (i+1 >= len(src) || src[i+1] != '\n'):
			line++
			col = 1
		case c == '\r':
		case !utf8.RuneStart(c):
		default:
			col++
		}
	}
	return line, col
}

// token kinds the scanner remembers about the last token.
// kinds of openValue.
const (
	openNone = iota
	openEntry
	openKey
)

const (
	tokOther = iota
	tokQuoted
	tokValue // a ':' mapping value indicator
)

// scanner mirrors the decisions of go-yaml's scanner (scanner/scanner.go
// of v1.19.2) that decide what a character is: an indicator, the start of
// a quoted or block scalar, a comment, or part of a plain scalar.
// Columns are 1-based and count characters as go-yaml counts them (some
// tabs do not move it).
type scanner struct {
	src  []byte
	lim  Limits
	i    int // offset of the current byte
	line int
	col  int // column of the current character
	// first: only spaces and tabs so far on this line.
	first bool
	// indent counts the spaces and tabs go-yaml counts as indentation
	// (a document marker or a directive needs none).
	indent int

	// buf: characters of a plain scalar are pending (go-yaml's buffer).
	buf    bool
	bufCol int // column where the pending plain scalar starts
	// lastDelim is the column of the last key, "- " or "? " (0: none);
	// a line starting at or left of it ends a plain or block scalar.
	lastDelim int
	lastTok   int
	quoteCol  int // column of the last quoted scalar
	// anchor: inside an &anchor or *alias name; directive: on a % line.
	anchor, directive bool
	// keyOnLine: a block mapping key came on this line.
	keyOnLine bool
	// openValue: the last line ended with a block "-" (openEntry) or key
	// (openKey) whose value is on the lines below. go-yaml nests the next
	// node in it even at the same column when it is of the other kind
	// ("-\n0:\n-\n0:" is 4 levels deep); a node of the same kind is a
	// sibling.
	openValue int

	flowSeq, flowMap int // go-yaml's counters, which may go below 0
	flow             int // open flow collections, never below 0
	levels           []int
	// inBlock: inside a block scalar (or a plain scalar go-yaml reads as
	// one), whose lines are those that start right of lastDelim. Its
	// first line sets blockCol, and lastDelim becomes blockCol-1.
	inBlock  bool
	blockCol int
	// blockLines counts the line breaks since a block header, blockText
	// whether a line of text came; blockKeep is the + chomping indicator.
	blockLines           int
	blockText, blockKeep bool

	stats Stats
}

func (s *scanner) flowMode() bool { return s.flowSeq > 0 || s.flowMap > 0 }

func (s *scanner) errorf(format string, args ...any) error {
	return &Error{Line: s.line, Column: s.col, Msg: fmt.Sprintf(format, args...)}
}

func (s *scanner) token() error {
	s.stats.Tokens++
	if s.lim.MaxTokens > 0 && s.stats.Tokens > s.lim.MaxTokens {
		return s.errorf("more than %d YAML tokens (keys, values, list entries, separators, comments): the file is far larger than any cartridge or page needs", s.lim.MaxTokens)
	}
	return nil
}

func (s *scanner) depth() error {
	d := len(s.levels) + s.flow
	if d > s.stats.Depth {
		s.stats.Depth = d
	}
	if s.flow > s.stats.Flow {
		s.stats.Flow = s.flow
	}
	if s.lim.MaxDepth > 0 && d > s.lim.MaxDepth {
		return s.errorf("the YAML nests deeper than %d levels here (open [ and { plus indentation): no cartridge or page needs that; flatten the data", s.lim.MaxDepth)
	}
	return nil
}

func (s *scanner) peek(off int) byte {
	if s.i+off < len(s.src) {
		return s.src[s.i+off]
	}
	return 0
}

func isBreak(c byte) bool { return c == '\n' || c == '\r' }

// blankOrEnd: a space, a tab, a line break, or the end of the text (or a
// NUL, which go-yaml takes for the end in some places).
func blankOrEnd(c byte) bool { return c == 0 || c == ' ' || c == '\t' || isBreak(c) }

// blankAt reports whether the byte at off is a space, a tab or a line
// break, or off is past the end (a NUL is not).
func (s *scanner) blankAt(off int) bool {
	if s.i+off >= len(s.src) {
		return true
	}
	c := s.src[s.i+off]
	return c == ' ' || c == '\t' || isBreak(c)
}

// advance moves past one character (a whole UTF-8 sequence).
func (s *scanner) advance() {
	_, n := utf8.DecodeRune(s.src[s.i:])
	s.i += n
	s.col++
}

// newline moves past a line break (CRLF counts once).
func (s *scanner) newline() {
	if s.src[s.i] == '\r' && s.peek(1) == '\n' {
		s.i++
	}
	s.i++
	s.line++
	s.col = 1
	s.first = true
	s.indent = 0
	s.keyOnLine = false
	if (s.anchor || s.directive) && s.buf {
		s.endToken(tokOther) // a name ends with its line
	}
	if s.inBlock {
		s.blockLines++
	}
	s.anchor = false
	s.directive = false
}

func (s *scanner) run() error {
	for s.i < len(s.src) {
		c := s.src[s.i]
		if isBreak(c) {
			s.newline()
			continue
		}
		if s.first {
			if c == ' ' {
				s.indent++
				s.i++
				s.col++
				continue
			}
			if c == '\t' {
				s.leadingTab()
				continue
			}
			s.first = false
			skip, err := s.lineStart()
			if err != nil {
				return err
			}
			if skip {
				s.skipLine()
				continue
			}
		} else if s.inBlock {
			s.skipLine()
			continue
		}
		if err := s.char(c); err != nil {
			return err
		}
	}
	return nil
}

// leadingTab mirrors go-yaml on a tab before the first character of a
// line.
func (s *scanner) leadingTab() {
	if s.inBlock {
		s.i++
		s.col++
		return
	}
	s.tab()
}

// tab mirrors go-yaml on a tab outside scalars: most tabs count as
// indentation and do not move the column.
func (s *scanner) tab() {
	s.i++
	if s.buf && s.lastDelim == 0 || s.lastDelim < s.col {
		s.indent++
		return
	}
	s.col++
}

func (s *scanner) skipLine() {
	for s.i < len(s.src) && !isBreak(s.src[s.i]) {
		s.i++
	}
}

// lineStart handles the first character of a line: it ends a block
// scalar or a plain scalar that the line does not continue, and sets the
// block level. It reports whether the rest of the line is skipped.
func (s *scanner) lineStart() (bool, error) {
	down := s.lastDelim > 0 && s.col <= s.lastDelim
	docMarker := s.indent == 0 && s.col == 1 && s.marker()
	phantom := false
	if s.inBlock {
		if !down && !docMarker {
			if s.blockCol == 0 {
				s.blockCol = s.col
			}
			if s.blockCol > 1 {
				s.lastDelim = s.blockCol - 1
			}
			s.blockText = true
			return true, nil // block scalar content
		}
		s.inBlock = false
		// A block scalar of blank lines only (its value empty once
		// chomped) leaves go-yaml believing a plain scalar is pending:
		// the line goes on it.
		phantom = !docMarker && !s.blockText && !s.blockKeep && s.blockLines > 1 && !s.buf
	}
	if down && s.buf {
		s.endToken(tokOther) // the pending plain scalar ends
	}
	if phantom {
		s.buf, s.bufCol = true, s.col
	}
	if s.buf && !down && s.src[s.i] == '-' && s.lastDelim > 0 {
		// go-yaml reads a continuation line that starts with '-' up to
		// the end of the scalar as text ("raw folded").
		s.inBlock = true
		s.blockCol, s.blockText = s.col, true
		if s.blockCol > 1 {
			s.lastDelim = s.blockCol - 1
		}
		return true, nil
	}
	if s.buf {
		return false, nil // the plain scalar goes on
	}
	c := s.src[s.i]
	if c == '#' || s.flowMode() || docMarker {
		return false, nil
	}
	// A block node at this column: close the deeper levels (and, unless
	// it is the value of the line above, the extra levels opened at this
	// very column), open its own.
	entry := c == '-' && s.blankAt(1)
	open := s.openValue == openEntry && !entry || s.openValue == openKey && entry
	s.openValue = openNone
	for n := len(s.levels); n > 0 && (s.levels[n-1] > s.col ||
		!open && n > 1 && s.levels[n-1] == s.col && s.levels[n-2] == s.col); n = len(s.levels) {
		s.levels = s.levels[:n-1]
	}
	if n := len(s.levels); n == 0 || s.levels[n-1] < s.col || open {
		s.levels = append(s.levels, s.col)
		if err := s.depth(); err != nil {
			return false, err
		}
	}
	return false, nil
}

// marker reports whether "---" or "..." followed by a blank starts here.
func (s *scanner) marker() bool {
	c := s.src[s.i]
	if (c != '-' && c != '.') || s.peek(1) != c || s.peek(2) != c {
		return false
	}
	return s.blankAt(3)
}

// docEnd reports whether "..." ends a document here: go-yaml wants
// exactly three dots, whatever follows.
func (s *scanner) docEnd() bool {
	return s.src[s.i] == '.' && s.peek(1) == '.' && s.peek(2) == '.' && s.peek(3) != '.'
}

// char handles one character outside scalars that span lines.
func (s *scanner) char(c byte) error {
	switch c {
	case '{':
		if !s.buf || s.flowMode() {
			s.flowMap++
			return s.open()
		}
	case '[':
		if !s.buf || s.flowMode() {
			s.flowSeq++
			return s.open()
		}
	case '}':
		if s.flowMap > 0 {
			s.flowMap--
			s.close()
			return nil
		}
	case ']':
		if !s.buf || s.flowSeq > 0 {
			s.flowSeq--
			s.close()
			return nil
		}
	case ',':
		if s.flowMode() {
			s.endToken(tokOther)
			s.advance()
			return s.token()
		}
	case '.':
		if s.indent == 0 && s.col == 1 && s.docEnd() {
			s.endToken(tokOther)
			s.i += 3
			s.col += 3
			return nil
		}
	case '-':
		if s.indent == 0 && s.col == 1 && s.marker() {
			// A new document: go-yaml forgets the delimiter column.
			s.endToken(tokOther)
			s.lastDelim = 0
			s.levels = s.levels[:0]
			s.i += 3
			s.col += 3
			return nil
		}
		if !s.buf && blankOrEnd(s.peek(1)) {
			return s.entry()
		}
	case '?':
		if !s.buf && (s.peek(1) == ' ' || s.peek(1) == '\t') {
			return s.entry()
		}
	case ':':
		if s.mapValue() {
			key := s.col
			if s.buf {
				key = s.bufCol
				s.lastDelim = s.bufCol
			} else if s.lastTok == tokQuoted {
				key = s.quoteCol
				s.lastDelim = s.quoteCol
			}
			if !s.flowMode() {
				// A key in the value of another key on the same line
				// ("a: &x b: &y c:") is a mapping one level deeper, which
				// go-yaml builds.
				if s.keyOnLine {
					if err := s.push(key); err != nil {
						return err
					}
				}
				s.keyOnLine = true
				s.openValue = openNone
				if s.restBlank(s.i + 1) {
					s.openValue = openKey
				}
			}
			s.endToken(tokValue)
			s.advance()
			return s.token()
		}
	case '|', '>':
		if !s.buf {
			return s.blockHeader()
		}
	case '!':
		if !s.buf && !s.directive {
			return s.tag()
		}
	case '%':
		if !s.buf && s.indent == 0 {
			s.endToken(tokOther)
			s.directive = true
			s.advance()
			return nil
		}
	case '&', '*':
		if !s.buf {
			s.endToken(tokOther)
			s.anchor = true
			s.advance()
			return s.token()
		}
	case '#':
		if !s.buf || s.prevBlank() {
			s.endToken(tokOther)
			s.skipLine()
			return s.token()
		}
	case '\'', '"':
		if !s.buf {
			return s.quoted(c)
		}
	case ' ':
		if s.anchor || s.directive {
			s.endToken(tokOther)
			s.anchor = false
		}
		s.i++
		s.col++
		return nil
	case '\t':
		s.tab()
		return nil
	}
	// Part of a plain scalar (or of an anchor, tag or directive name).
	if !s.buf {
		s.buf = true
		s.bufCol = s.col
		if err := s.token(); err != nil {
			return err
		}
	}
	s.advance()
	return nil
}

// endToken ends the pending plain scalar, if any.
func (s *scanner) endToken(kind int) {
	s.buf = false
	s.lastTok = kind
}

func (s *scanner) prevBlank() bool {
	if s.i == 0 {
		return true
	}
	p := s.src[s.i-1]
	return p == ' ' || p == '\t' || isBreak(p)
}

func (s *scanner) open() error {
	s.endToken(tokOther) // an anchor's name goes on: go-yaml ends it at a space
	s.flow++
	if err := s.depth(); err != nil {
		return err
	}
	s.advance()
	return s.token()
}

func (s *scanner) close() {
	s.endToken(tokOther)
	s.advance()
	if s.flow > 0 {
		s.flow--
	}
}

// entry handles "- " and "? ": in block context, content on the same
// line is one level deeper, at its column.
func (s *scanner) entry() error {
	s.endToken(tokOther)
	s.lastDelim = s.col
	if !s.flowMode() {
		j := s.i + 1
		for j < len(s.src) && s.src[j] == ' ' {
			j++
		}
		s.openValue = openNone
		if s.restBlank(j) {
			s.openValue = openEntry
		}
		if j < len(s.src) && !isBreak(s.src[j]) && s.src[j] != '#' {
			col := s.col + j - s.i
			if s.src[j] == '\t' {
				col = s.col + 1
			}
			if err := s.push(col); err != nil {
				return err
			}
		}
	}
	s.advance()
	return s.token()
}

// restBlank reports whether only spaces, tabs and a comment follow
// offset j on its line.
func (s *scanner) restBlank(j int) bool {
	for j < len(s.src) && (s.src[j] == ' ' || s.src[j] == '\t') {
		j++
	}
	return j >= len(s.src) || isBreak(s.src[j]) || s.src[j] == '#'
}

// push opens a block level at col, right of the current ones.
func (s *scanner) push(col int) error {
	if n := len(s.levels); n > 0 && col <= s.levels[n-1] {
		col = s.levels[n-1] + 1
	}
	s.levels = append(s.levels, col)
	return s.depth()
}

// mapValue reports whether ':' here is a mapping value indicator.
func (s *scanner) mapValue() bool {
	if s.directive || s.anchor {
		return false
	}
	next := s.peek(1)
	if s.flowMap <= 0 && !s.blankAt(1) {
		return false
	}
	// go-yaml looks at the last token, not at a pending plain scalar.
	if s.flowMap > 0 && (next == '/' || s.lastTok == tokValue) {
		return false
	}
	return true
}

// blockHeader reads a | or > header; the lines after it that start right
// of the last delimiter column are the block scalar's text.
func (s *scanner) blockHeader() error {
	if s.col == 1 {
		s.lastDelim = 1
	}
	s.endToken(tokOther)
	s.inBlock = true
	s.blockCol, s.blockLines, s.blockText, s.blockKeep = 0, 0, false, false
	// An indentation indicator (|2, >-1) fixes the column of the text.
	for j := s.i + 1; j < len(s.src) && j < s.i+3; j++ {
		if c := s.src[j]; c >= '1' && c <= '9' {
			s.blockCol = s.lastDelim + int(c-'0')
			break
		}
	}
	for j := s.i + 1; j < len(s.src) && s.src[j] != ' ' && s.src[j] != '\t' && s.src[j] != '#' && !isBreak(s.src[j]); j++ {
		if s.src[j] == '+' {
			s.blockKeep = true
		}
	}
	s.skipLine()
	return s.token()
}

// tag reads a !tag up to a space (which it takes), a line break, or a
// comma in flow. go-yaml's column then lags one character behind.
func (s *scanner) tag() error {
	s.endToken(tokOther)
	s.advance()
	for s.i < len(s.src) {
		c := s.src[s.i]
		if c == ' ' {
			s.i++
			break
		}
		if isBreak(c) || c == ',' && s.flowMode() || c == '{' || c == '}' {
			s.col--
			break
		}
		s.advance()
	}
	return s.token()
}

// quoted reads a single- or double-quoted scalar, which may span lines.
func (s *scanner) quoted(q byte) error {
	s.endToken(tokOther)
	start := s.col
	if err := s.token(); err != nil {
		return err
	}
	s.advance()
	lineStart := false // only blanks so far on a continuation line
	drift := 0         // characters go-yaml will skip after the quote
	for s.i < len(s.src) {
		c := s.src[s.i]
		switch {
		case isBreak(c):
			s.newline()
			s.first = false
			lineStart = true
			continue
		case c == ' ':
			s.advance()
			continue
		case c == '\t' && (lineStart || q == '\''):
			s.advance()
			continue
		case c == '\t':
			drift += s.quotedTab()
			continue
		}
		lineStart = false
		switch {
		case c == '\\' && q == '"':
			s.escape()
			continue
		case c == q:
			if q == '\'' && s.peek(1) == '\'' {
				s.i += 2
				s.col += 2
				continue
			}
			s.advance()
			s.lastTok = tokQuoted
			s.quoteCol = start
			s.skip(drift)
			return nil
		}
		s.advance()
	}
	return nil // unterminated: go-yaml refuses the text
}

// escape moves past a backslash escape in a double-quoted scalar as
// go-yaml reads it (\x takes two more characters, \u four, \U eight).
func (s *scanner) escape() {
	s.advance()
	if s.i >= len(s.src) {
		return
	}
	n := 1
	switch s.src[s.i] {
	case 'x':
		n = 3
	case 'u':
		n = 5
	case 'U':
		n = 9
	case '\n', '\r':
		s.newline()
		s.first = false
		return
	}
	for ; n > 0 && s.i < len(s.src); n-- {
		if isBreak(s.src[s.i]) {
			s.newline()
			s.first = false
			continue
		}
		s.advance()
	}
}

// quotedTab mirrors go-yaml on a tab inside a double-quoted scalar. A
// tab followed by more text on its line, but not right by a quote, moves
// go-yaml one character further than the text: it returns 1, and go-yaml
// skips that many characters after the closing quote.
func (s *scanner) quotedTab() int {
	j := s.i + 1
	for j < len(s.src) && (s.src[j] == ' ' || s.src[j] == '\t') {
		j++
	}
	if j < len(s.src) && !isBreak(s.src[j]) {
		s.i++
		s.col++
		if s.src[s.i] != '"' {
			s.col++
			return 1
		}
		return 0
	}
	s.col += j - s.i
	s.i = j
	return 0
}

// skip moves past n characters that go-yaml never looks at (its column
// already counts them; a line break among them does not start a line).
func (s *scanner) skip(n int) {
	for ; n > 0 && s.i < len(s.src); n-- {
		if isBreak(s.src[s.i]) {
			s.line++
			s.i++
			continue
		}
		_, size := utf8.DecodeRune(s.src[s.i:])
		s.i += size
	}
}
