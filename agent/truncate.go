package agent

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Truncation bounds the tool output sent to the model: characters first,
// head and tail kept, then lines. The full output stays in the state and
// in the feedback.
type Truncation struct {
	MaxChars, MaxLines int
	// Tail keeps the last MaxChars characters, not the head and the
	// tail (the reference's tail mode).
	Tail bool
}

// DefaultTruncation keeps 30,000 characters and 500 lines.
func DefaultTruncation() Truncation { return Truncation{MaxChars: 30_000, MaxLines: 500} }

// Apply truncates s. Zero limits keep everything. Limits and counts are
// in characters (runes), never cutting inside one.
func (t Truncation) Apply(s string) string {
	if t.MaxChars > 0 && len(s) > t.MaxChars { // bytes >= runes: a cheap first test
		if n := utf8.RuneCountInString(s); n > t.MaxChars && t.Tail {
			s = fmt.Sprintf("[WARNING: Tool output was truncated. The first %d characters were removed. If you need them, call the tool with more targeted parameters.]\n\n", n-t.MaxChars) +
				s[runeOffset(s, n-t.MaxChars):]
		} else if n > t.MaxChars {
			half := t.MaxChars / 2
			head, tail := s[:runeOffset(s, half)], s[runeOffset(s, n-half):]
			removed := n - 2*half
			s = head + fmt.Sprintf("\n\n[WARNING: Tool output was truncated. %d characters were removed from the middle. If you need to see specific parts, call the tool with more targeted parameters.]\n\n", removed) + tail
		}
	}
	if t.MaxLines > 0 {
		lines := strings.Split(s, "\n")
		if len(lines) > t.MaxLines {
			head := t.MaxLines / 2
			tail := t.MaxLines - head
			omitted := len(lines) - head - tail
			s = strings.Join(lines[:head], "\n") + fmt.Sprintf("\n[... %d lines omitted ...]\n", omitted) + strings.Join(lines[len(lines)-tail:], "\n")
		}
	}
	return s
}

// runeOffset is the byte offset of the n-th rune of s.
func runeOffset(s string, n int) int {
	for i := range s {
		if n == 0 {
			return i
		}
		n--
	}
	return len(s)
}
