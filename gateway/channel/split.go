package channel

import (
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// UTF16Len is the length of s in UTF-16 code units: how Telegram counts a
// message's characters and its entities' offsets (a character outside the
// Basic Multilingual Plane, most emoji, counts twice).
func UTF16Len(s string) int {
	n := 0
	for _, r := range s {
		n += utf16.RuneLen(r)
	}
	return n
}

// RuneLen is the length of s in characters (code points): how Discord and
// Slack count.
func RuneLen(s string) int { return utf8.RuneCountInString(s) }

// Split cuts text into pieces no longer than max as measured by length
// (RuneLen if nil), preferring to cut after a line break, then after a
// space, and only then inside a word. The pieces concatenated are text
// again, byte for byte, so offsets into text map onto the pieces. A max
// of 0 or less does not split.
func Split(text string, max int, length func(string) int) []string {
	if length == nil {
		length = RuneLen
	}
	if max <= 0 || length(text) <= max {
		return []string{text}
	}
	var out []string
	for text != "" {
		if length(text) <= max {
			out = append(out, text)
			break
		}
		cut := fit(text, max, length)
		out = append(out, text[:cut])
		text = text[cut:]
	}
	return out
}

// fit returns the byte length of the longest prefix of text that fits in
// max and ends on the best boundary available: a line break, a space, any
// character.
func fit(text string, max int, length func(string) int) int {
	// The longest prefix that fits at all, on a character boundary.
	end, n := 0, 0
	for end < len(text) {
		_, size := utf8.DecodeRuneInString(text[end:])
		w := length(text[end : end+size])
		if n+w > max {
			break
		}
		n += w
		end += size
	}
	if end == 0 {
		// One character longer than max: it goes alone rather than never.
		_, size := utf8.DecodeRuneInString(text)
		return size
	}
	prefix := text[:end]
	if i := strings.LastIndexByte(prefix, '\n'); i > 0 {
		return i + 1
	}
	if i := strings.LastIndexFunc(prefix, unicode.IsSpace); i > 0 {
		_, size := utf8.DecodeRuneInString(prefix[i:])
		return i + size
	}
	return end
}

// SplitRich cuts formatted text like Split, measuring its plain text, and
// gives every piece the spans that fall in it, clipped and moved to its
// offsets. White space around a piece is trimmed (platforms trim it, and
// the offsets must stay true) and pieces left empty are dropped.
func SplitRich(r Rich, limit int, length func(string) int) []Rich {
	var out []Rich
	start := 0
	for _, chunk := range Split(r.Text, limit, length) {
		a, b := start, start+len(chunk)
		start = b
		for a < b && strings.ContainsRune("\n \t", rune(r.Text[a])) {
			a++
		}
		for b > a && strings.ContainsRune("\n \t", rune(r.Text[b-1])) {
			b--
		}
		if a == b {
			continue
		}
		p := Rich{Text: r.Text[a:b]}
		for _, s := range r.Spans {
			x, y := max(s.Start, a), min(s.End, b)
			if x >= y {
				continue
			}
			s.Start, s.End = x-a, y-a
			p.Spans = append(p.Spans, s)
		}
		out = append(out, p)
	}
	return out
}

// SplitFenced splits Markdown on line boundaries, closing a code fence
// at the end of a piece and reopening it (with its language) at the
// start of the next, so no piece shows half a code block as prose.
func SplitFenced(md string, limit int) []string {
	const reserve = 64 // room for a closing and an opening fence line
	var out []string
	open := "" // the fence line open at the end of the previous piece
	for _, piece := range Split(strings.TrimSpace(md), limit-reserve-len(open), nil) {
		text := piece
		if open != "" {
			text = open + "\n" + text
		}
		for _, line := range strings.Split(piece, "\n") {
			if t := strings.TrimSpace(line); strings.HasPrefix(t, "```") {
				if open == "" {
					open = t
				} else {
					open = ""
				}
			}
		}
		text = strings.TrimRight(text, "\n ")
		if open != "" {
			text += "\n```"
		}
		if strings.TrimSpace(text) != "" {
			out = append(out, text)
		}
	}
	return out
}
