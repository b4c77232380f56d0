package agent

import (
	"fmt"
	"strings"
)

// Truncation bounds the tool output sent to the model: characters first,
// head and tail kept, then lines. The full output stays in the state and
// in the feedback.
type Truncation struct {
	MaxChars, MaxLines int
}

// DefaultTruncation keeps 30,000 characters and 500 lines.
func DefaultTruncation() Truncation { return Truncation{MaxChars: 30_000, MaxLines: 500} }

// Apply truncates s. Zero limits keep everything.
func (t Truncation) Apply(s string) string {
	if t.MaxChars > 0 && len(s) > t.MaxChars {
		half := t.MaxChars / 2
		head, tail := s[:cutBack(s, half)], s[cutForward(s, len(s)-half):]
		removed := len(s) - len(head) - len(tail)
		s = head + fmt.Sprintf("\n\n[WARNING: Tool output was truncated. %d characters were removed from the middle. If you need to see specific parts, call the tool with more targeted parameters.]\n\n", removed) + tail
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

// cutBack moves i back to a UTF-8 boundary; cutForward moves it forward.
func cutBack(s string, i int) int {
	for i > 0 && i < len(s) && s[i]&0xC0 == 0x80 {
		i--
	}
	return i
}

func cutForward(s string, i int) int {
	for i < len(s) && s[i]&0xC0 == 0x80 {
		i++
	}
	return i
}
