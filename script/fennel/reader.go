package fennel

import (
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// kind tells what a node of the syntax tree is.
type kind uint8

const (
	kSym   kind = iota // symbol (nil is a symbol too, as in Fennel)
	kStr               // string literal, including :keyword strings
	kNum               // number literal
	kBool              // true or false
	kVarg              // ...
	kList              // (a b c)
	kSeq               // [a b c]
	kTable             // {k v ...}: items hold keys and values in turn
)

// node is one form read from the source. Positions are file positions
// (1-based line and column).
type node struct {
	kind  kind
	line  int
	col   int
	s     string // symbol name or string value
	isInt bool   // for kNum: integer (i) or float (f)
	i     int64
	f     float64
	b     bool
	items []*node
	// raw marks a symbol made by the compiler itself that names a global
	// directly, bypassing local scope (for generated code such as case).
	raw bool
	// gensym marks a symbol made by the compiler: it can never be captured
	// by user code.
	gensym bool
	// quoted marks a symbol a macro made by quoting: binding it would
	// capture user names, so Fennel refuses it (use gensym or x#).
	quoted bool
}

func (n *node) isSym(name string) bool {
	return n != nil && n.kind == kSym && n.s == name
}

// maxDepth bounds nesting so that hostile input cannot exhaust the stack of
// the compiler or of the Lua parser that loads its output.
const maxDepth = 200

// reader turns Fennel source into nodes. It follows Fennel 1.5's reader:
// delimiters, strings with Lua escapes, :keyword strings, numbers as Lua's
// tonumber reads them, prefixes # ' ` , and comments.
type reader struct {
	src      string
	pos      int
	line     int
	col      int // column of src[pos], counted in characters, 1-based
	file     string
	baseLine int
	baseCol  int
	depth    int
}

func newReader(src string, opts Options) *reader {
	r := &reader{src: src, line: 1, col: 1, file: opts.Filename, baseLine: 1, baseCol: 1}
	if opts.Line > 0 {
		r.baseLine = opts.Line
	}
	if opts.Column > 0 {
		r.baseCol = opts.Column
	}
	return r
}

// filePos converts a snippet position into a file position.
func (r *reader) filePos(line, col int) (int, int) {
	if line == 1 {
		return r.baseLine, col + r.baseCol - 1
	}
	return line + r.baseLine - 1, col
}

func (r *reader) fail(line, col int, format string, args ...any) {
	l, c := r.filePos(line, col)
	failAt(r.file, l, c, format, args...)
}

// readAll reads every form of the source.
func (r *reader) readAll() []*node {
	var forms []*node
	for {
		r.skipSpace()
		if r.pos >= len(r.src) {
			return forms
		}
		forms = append(forms, r.form())
	}
}

func isSpace(b byte) bool { return b == ' ' || (b >= 9 && b <= 13) }

func isDelim(b byte) bool {
	switch b {
	case '(', ')', '[', ']', '{', '}':
		return true
	}
	return false
}

func isSymChar(b byte) bool {
	return b > 32 && !isDelim(b) && b != 127 && b != '"' && b != '\'' && b != '~' &&
		b != ';' && b != ',' && b != '@' && b != '`'
}

// advance moves over one byte, keeping line and column.
func (r *reader) advance() {
	b := r.src[r.pos]
	r.pos++
	if b == '\n' {
		r.line++
		r.col = 1
	} else if b < 0x80 || b >= 0xC0 {
		r.col++
	}
}

func (r *reader) skipSpace() {
	for r.pos < len(r.src) {
		b := r.src[r.pos]
		switch {
		case isSpace(b):
			r.advance()
		case b == ';':
			for r.pos < len(r.src) && r.src[r.pos] != '\n' {
				r.advance()
			}
		default:
			return
		}
	}
}

func closerOf(b byte) byte {
	switch b {
	case '(':
		return ')'
	case '[':
		return ']'
	}
	return '}'
}

// form reads one form; the caller has skipped space and checked for input.
func (r *reader) form() *node {
	line, col := r.line, r.col
	b := r.src[r.pos]
	switch {
	case b == '(' || b == '[' || b == '{':
		return r.collection(b)
	case b == ')' || b == ']' || b == '}':
		r.fail(line, col, "unexpected closing delimiter %c", b)
	case b == '"':
		return r.str()
	case b == '#' || b == '\'' || b == '`' || b == ',':
		return r.prefix(b)
	case isSymChar(b) || b == '~':
		return r.atom()
	}
	r.fail(line, col, "invalid character: %s", string(rune(b)))
	return nil
}

func (r *reader) collection(open byte) *node {
	line, col := r.line, r.col
	r.depth++
	if r.depth > maxDepth {
		r.fail(line, col, "too deeply nested: more than %d levels", maxDepth)
	}
	closer := closerOf(open)
	r.advance()
	var items []*node
	for {
		r.skipSpace()
		if r.pos >= len(r.src) {
			r.fail(r.line, r.col, "expected closing delimiter %c", closer)
		}
		b := r.src[r.pos]
		if b == ')' || b == ']' || b == '}' {
			if b != closer {
				r.fail(r.line, r.col, "mismatched closing delimiter %c, expected %c", b, closer)
			}
			r.advance()
			break
		}
		items = append(items, r.form())
	}
	r.depth--
	n := &node{line: line, col: col, items: items}
	l, c := r.filePos(line, col)
	n.line, n.col = l, c
	switch open {
	case '(':
		n.kind = kList
	case '[':
		n.kind = kSeq
	default:
		n.kind = kTable
		if len(items)%2 != 0 {
			r.fail(r.line, r.col-1, "expected even number of values in table literal")
		}
		// {: a : b} is short for {:a a :b b}.
		for i := 0; i+1 < len(items); i += 2 {
			k, v := items[i], items[i+1]
			if k.isSym(":") && v.kind == kSym {
				items[i] = &node{kind: kStr, s: v.s, line: k.line, col: k.col}
			}
		}
	}
	return n
}

func (r *reader) prefix(b byte) *node {
	line, col := r.line, r.col
	r.advance()
	next := byte(0)
	if r.pos < len(r.src) {
		next = r.src[r.pos]
	}
	trailing := r.pos >= len(r.src) || isSpace(next) || next == ')' || next == ']' || next == '}'
	if trailing {
		if b == '#' {
			l, c := r.filePos(line, col)
			return &node{kind: kSym, s: "#", line: l, col: c}
		}
		r.fail(line, col, "invalid whitespace after quoting prefix")
	}
	name := map[byte]string{'#': "hashfn", '\'': "quote", '`': "quote", ',': "unquote"}[b]
	r.skipSpace()
	if r.pos >= len(r.src) {
		r.fail(r.line, r.col, "expected a form after %c", b)
	}
	r.depth++
	if r.depth > maxDepth {
		r.fail(line, col, "too deeply nested: more than %d levels", maxDepth)
	}
	inner := r.form()
	r.depth--
	l, c := r.filePos(line, col)
	return &node{kind: kList, line: l, col: c, items: []*node{{kind: kSym, s: name, line: l, col: c}, inner}}
}

// str reads a string literal. Escapes are Lua's, as Fennel hands the
// literal to Lua's own parser.
func (r *reader) str() *node {
	line, col := r.line, r.col
	r.advance()
	var sb strings.Builder
	for {
		if r.pos >= len(r.src) {
			r.fail(r.line, r.col, "expected closing delimiter \"")
		}
		b := r.src[r.pos]
		if b == '"' {
			r.advance()
			break
		}
		if b != '\\' {
			sb.WriteByte(b)
			r.advance()
			continue
		}
		escLine, escCol := r.line, r.col
		r.advance()
		if r.pos >= len(r.src) {
			r.fail(r.line, r.col, "expected closing delimiter \"")
		}
		e := r.src[r.pos]
		bad := func() { r.fail(escLine, escCol, "invalid escape sequence in string") }
		switch e {
		case 'n':
			sb.WriteByte('\n')
			r.advance()
		case 't':
			sb.WriteByte('\t')
			r.advance()
		case 'r':
			sb.WriteByte('\r')
			r.advance()
		case 'a':
			sb.WriteByte(7)
			r.advance()
		case 'b':
			sb.WriteByte(8)
			r.advance()
		case 'f':
			sb.WriteByte(12)
			r.advance()
		case 'v':
			sb.WriteByte(11)
			r.advance()
		case '\\', '"', '\'':
			sb.WriteByte(e)
			r.advance()
		case '\n':
			sb.WriteByte('\n')
			r.advance()
		case 'z':
			// Fennel escapes literal control characters before Lua sees
			// them, so \z only skips spaces.
			r.advance()
			for r.pos < len(r.src) && r.src[r.pos] == ' ' {
				r.advance()
			}
		case 'x':
			r.advance()
			v := 0
			for k := 0; k < 2; k++ {
				if r.pos >= len(r.src) {
					bad()
				}
				d := hexVal(r.src[r.pos])
				if d < 0 {
					bad()
				}
				v = v*16 + d
				r.advance()
			}
			sb.WriteByte(byte(v))
		case 'u':
			r.advance()
			if r.pos >= len(r.src) || r.src[r.pos] != '{' {
				bad()
			}
			r.advance()
			var v uint64
			digits := 0
			for r.pos < len(r.src) && hexVal(r.src[r.pos]) >= 0 {
				v = v*16 + uint64(hexVal(r.src[r.pos]))
				if v > 0x7FFFFFFF {
					bad()
				}
				digits++
				r.advance()
			}
			if digits == 0 || r.pos >= len(r.src) || r.src[r.pos] != '}' {
				bad()
			}
			r.advance()
			sb.WriteString(utf8Encode(v))
		default:
			if e >= '0' && e <= '9' {
				v := 0
				for k := 0; k < 3 && r.pos < len(r.src) && r.src[r.pos] >= '0' && r.src[r.pos] <= '9'; k++ {
					v = v*10 + int(r.src[r.pos]-'0')
					r.advance()
				}
				if v > 255 {
					bad()
				}
				sb.WriteByte(byte(v))
			} else {
				bad()
			}
		}
	}
	l, c := r.filePos(line, col)
	return &node{kind: kStr, s: sb.String(), line: l, col: c}
}

func hexVal(b byte) int {
	switch {
	case b >= '0' && b <= '9':
		return int(b - '0')
	case b >= 'a' && b <= 'f':
		return int(b-'a') + 10
	case b >= 'A' && b <= 'F':
		return int(b-'A') + 10
	}
	return -1
}

// utf8Encode encodes like Lua's \u{...}: up to 2^31 with the old 6-byte
// UTF-8 forms.
func utf8Encode(v uint64) string {
	if v <= utf8.MaxRune && !(v >= 0xD800 && v <= 0xDFFF) {
		return string(rune(v))
	}
	var buf [8]byte
	n := 0
	mfb := uint64(0x3f)
	for v > mfb {
		buf[7-n] = byte(0x80 | (v & 0x3f))
		n++
		v >>= 6
		mfb >>= 1
	}
	buf[7-n] = byte((^mfb << 1) | v)
	n++
	return string(buf[8-n:])
}

// atom reads a symbol, number, boolean, ... or :keyword.
func (r *reader) atom() *node {
	line, col := r.line, r.col
	start := r.pos
	r.advance()
	for r.pos < len(r.src) && isSymChar(r.src[r.pos]) {
		r.advance()
	}
	raw := r.src[start:r.pos]
	l, c := r.filePos(line, col)
	n := &node{line: l, col: c}
	switch raw {
	case "true", "false":
		n.kind, n.b = kBool, raw == "true"
		return n
	case "...":
		n.kind = kVarg
		return n
	case ".inf", "-.inf":
		n.kind, n.f = kNum, math.Inf(1)
		if raw[0] == '-' {
			n.f = math.Inf(-1)
		}
		return n
	case ".nan", "-.nan":
		n.kind, n.f = kNum, math.NaN()
		return n
	}
	if len(raw) > 1 && raw[0] == ':' {
		n.kind, n.s = kStr, raw[1:]
		return n
	}
	if raw[0] != '_' {
		trimmed := strings.ReplaceAll(raw, "_", "")
		if trimmed != "nan" && trimmed != "-nan" {
			if isInt, i, f, ok := luaToNumber(trimmed); ok {
				n.kind, n.isInt, n.i, n.f = kNum, isInt, i, f
				return n
			}
			if raw[0] >= '0' && raw[0] <= '9' {
				r.fail(line, col, "could not read number \"%s\"", raw)
			}
		}
	}
	switch {
	case raw[0] == '~' && raw != "~=":
		r.fail(line, col, "invalid character: ~")
	case raw != ".." && raw != "$..." && (strings.Contains(raw, "..") || strings.Contains(raw, ".:") ||
		strings.Contains(raw, ":.") || strings.Contains(raw, "::")):
		r.fail(line, col, "malformed multisym: %s", raw)
	case raw != ":" && strings.HasSuffix(raw, ":"):
		r.fail(line, col, "malformed multisym: %s", raw)
	}
	if i := strings.IndexByte(raw, ':'); i >= 0 && i < len(raw)-1 && strings.ContainsAny(raw[i+1:], ".:") {
		r.fail(line, col, "method must be last component of multisym: %s", raw)
	}
	n.kind, n.s = kSym, raw
	return n
}

// luaToNumber converts like Lua 5.4's tonumber on a string without spaces.
func luaToNumber(s string) (isInt bool, i int64, f float64, ok bool) {
	if s == "" {
		return false, 0, 0, false
	}
	if i, ok := luaStrToInt(s); ok {
		return true, i, 0, true
	}
	if strings.ContainsAny(s, "nN") {
		return false, 0, 0, false
	}
	body := s
	neg := false
	if body[0] == '-' || body[0] == '+' {
		neg = body[0] == '-'
		body = body[1:]
	}
	if len(body) >= 2 && body[0] == '0' && (body[1] == 'x' || body[1] == 'X') {
		v, ok := hexFloat(body[2:])
		if !ok {
			return false, 0, 0, false
		}
		if neg {
			v = -v
		}
		return false, 0, v, true
	}
	// strtod syntax: digits [. digits] [e [sign] digits], at least one digit.
	k := 0
	digits := 0
	for k < len(body) && body[k] >= '0' && body[k] <= '9' {
		k++
		digits++
	}
	if k < len(body) && body[k] == '.' {
		k++
		for k < len(body) && body[k] >= '0' && body[k] <= '9' {
			k++
			digits++
		}
	}
	if digits == 0 {
		return false, 0, 0, false
	}
	if k < len(body) && (body[k] == 'e' || body[k] == 'E') {
		k++
		if k < len(body) && (body[k] == '+' || body[k] == '-') {
			k++
		}
		ed := 0
		for k < len(body) && body[k] >= '0' && body[k] <= '9' {
			k++
			ed++
		}
		if ed == 0 {
			return false, 0, 0, false
		}
	}
	if k != len(body) {
		return false, 0, 0, false
	}
	v, err := strconv.ParseFloat(body, 64)
	if err != nil {
		// Out of range: strtod gives ±HUGE_VAL or 0, as ParseFloat does.
		if ne, ok := err.(*strconv.NumError); !ok || ne.Err != strconv.ErrRange {
			return false, 0, 0, false
		}
	}
	if neg {
		v = -v
	}
	return false, 0, v, true
}

// luaStrToInt is Lua's l_str2int: decimal (no overflow) or hexadecimal
// (wrapping), with an optional minus sign.
func luaStrToInt(s string) (int64, bool) {
	neg := false
	if s[0] == '-' {
		neg = true
		s = s[1:]
	}
	if s == "" {
		return 0, false
	}
	var a uint64
	if len(s) > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X') {
		for _, c := range []byte(s[2:]) {
			d := hexVal(c)
			if d < 0 {
				return 0, false
			}
			a = a*16 + uint64(d)
		}
	} else {
		for _, c := range []byte(s) {
			if c < '0' || c > '9' {
				return 0, false
			}
			d := uint64(c - '0')
			// maxinteger / 10 and its last digit, plus one for the minus sign
			if a >= 922337203685477580 && (a > 922337203685477580 || d > 7+boolToUint(neg)) {
				return 0, false
			}
			a = a*10 + d
		}
	}
	if neg {
		return int64(0 - a), true
	}
	return int64(a), true
}

func boolToUint(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// hexFloat reads the part after 0x of a Lua hexadecimal float.
func hexFloat(s string) (float64, bool) {
	var m float64
	exp := 0
	any := false
	k := 0
	for k < len(s) && hexVal(s[k]) >= 0 {
		m = m*16 + float64(hexVal(s[k]))
		k++
		any = true
	}
	if k < len(s) && s[k] == '.' {
		k++
		for k < len(s) && hexVal(s[k]) >= 0 {
			m = m*16 + float64(hexVal(s[k]))
			exp -= 4
			k++
			any = true
		}
	}
	if !any {
		return 0, false
	}
	if k < len(s) && (s[k] == 'p' || s[k] == 'P') {
		k++
		sign := 1
		if k < len(s) && (s[k] == '+' || s[k] == '-') {
			if s[k] == '-' {
				sign = -1
			}
			k++
		}
		e, ed := 0, 0
		for k < len(s) && s[k] >= '0' && s[k] <= '9' {
			if e < 100000 {
				e = e*10 + int(s[k]-'0')
			}
			k++
			ed++
		}
		if ed == 0 {
			return 0, false
		}
		exp += sign * e
	}
	if k != len(s) {
		return 0, false
	}
	return math.Ldexp(m, exp), true
}
