package guard

import (
	"fmt"

	"github.com/arnodel/golua/scanner"
	"github.com/arnodel/golua/token"
)

// MaxSyntaxDepth bounds the nesting a Lua source may have, as C Lua's
// LUAI_MAXCCALLS (200) does for its parser ("C stack overflow").
const MaxSyntaxDepth = 200

// MaxGeneratedDepth bounds the nesting of Lua that nb generates (from
// Fennel, whose reader allows 200 levels of its own, each of which may
// take a few levels of Lua). golua handles ten thousand levels in well
// under 64 MiB of Go stack.
const MaxGeneratedDepth = 1000

// NestingError reports a source nested more deeply than the limit.
type NestingError struct {
	// Line is the line of the token that went past the limit.
	Line int
	// Limit is the limit that was exceeded.
	Limit int
}

func (e *NestingError) Error() string {
	return fmt.Sprintf("the code is nested too deeply (more than %d levels of brackets, blocks, unary operators or chained '..', '^', '.' and calls)", e.Limit)
}

// CheckNesting refuses, before golua parses it, a Lua source whose
// nesting would make golua's parser and compiler recurse deeper than
// limit levels: they recurse on the Go stack without bound, and a Go
// stack overflow ends the process. It scans the tokens with golua's own
// scanner and keeps, for the expression being read, an upper bound of
// the depth of the syntax tree:
//
//   - each bracket and each block (function, do, then, repeat) is one level
//     over the expression it opens in;
//   - right-associative chains (a .. b .. c, a ^ b ^ c), unary operators
//     (- - x, not not x) and suffix chains (a.b.c, f()(), s:m():n()) each
//     add a level per link, as golua nests them one node per link;
//   - left-associative chains (a + b + c, x == 1 or x == 2) add nothing:
//     golua keeps them flat.
//
// A token golua's scanner rejects ends the scan; golua reports the error.
// opts are passed to the scanner (golua's scanner.WithStartLine).
func CheckNesting(src []byte, limit int, opts ...scanner.Option) error {
	type level struct {
		base                       int
		concat, pow, unary, suffix int
	}
	var (
		stack                      []level
		base                       int // levels of the open brackets and blocks
		concat, pow, unary, suffix int // links of the chains of the current expression
		prevEnds                   bool
	)
	s := scanner.New("", src, opts...)
	for {
		tok := s.Scan()
		if tok == nil {
			return nil
		}
		typ := tok.Type
		switch typ {
		case token.EOF, token.INVALID, token.UNFINISHED:
			return nil
		}
		open := func() {
			stack = append(stack, level{base, concat, pow, unary, suffix})
			base += concat + pow + unary + suffix + 1
			concat, pow, unary, suffix = 0, 0, 0, 0
		}
		closeLevel := func() {
			if n := len(stack); n > 0 {
				l := stack[n-1]
				stack = stack[:n-1]
				base, concat, pow, unary, suffix = l.base, l.concat, l.pow, l.unary, l.suffix
			} else {
				base, concat, pow, unary, suffix = 0, 0, 0, 0, 0
			}
		}
		reset := func() { concat, pow, unary, suffix = 0, 0, 0, 0 }
		ends := false
		switch typ {
		case token.SgOpenBkt, token.SgOpenSquareBkt, token.SgOpenBrace:
			if prevEnds {
				suffix++ // a call or an index
			}
			open()
		case token.SgCloseBkt, token.SgCloseSquareBkt, token.SgCloseBrace:
			closeLevel()
			ends = true
		case token.KwFunction, token.KwDo, token.KwThen, token.KwRepeat:
			open()
		case token.KwEnd:
			closeLevel()
			ends = true // function ... end in an expression
		case token.KwUntil, token.KwElseIf:
			closeLevel()
			reset()
		case token.SgDot, token.SgColon:
			suffix++
		case token.STRING, token.LONGSTRING:
			if prevEnds {
				suffix++ // f "text"
			}
			ends = true
		case token.IDENT:
			if prevEnds {
				reset() // a new statement: `f() g()`, `a = b c = d`
			}
			ends = true
		case token.NUMDEC, token.NUMHEX, token.KwNil, token.KwTrue, token.KwFalse, token.SgEtc:
			ends = true
		case token.KwNot, token.SgHash:
			unary++
		case token.SgMinus, token.SgTilde:
			if prevEnds {
				// binary minus (same precedence as +), binary xor (below ..)
				if typ == token.SgTilde {
					concat = 0
				}
				pow, unary, suffix = 0, 0, 0
			} else {
				unary++
			}
		case token.SgConcat:
			concat++
			pow, unary, suffix = 0, 0, 0
		case token.SgHat:
			pow++
			suffix = 0
		case token.SgPlus, token.SgStar, token.SgSlash, token.SgSlashSlash, token.SgPct:
			// Above .. in precedence: a chain of .. goes on across them.
			pow, unary, suffix = 0, 0, 0
		default:
			// Binary operators below .. (comparison, bitwise, and, or) and
			// statement punctuation (, ; = ::) end every chain; so do the
			// other keywords (local, return, if, while, for, in, else...).
			reset()
		}
		prevEnds = ends
		if base+concat+pow+unary+suffix > limit {
			return &NestingError{Line: tok.Pos.Line, Limit: limit}
		}
	}
}
