package state

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/encoding/charmap"
	"golang.org/x/text/unicode/norm"
)

// Slug turns a cartridge's author, name or version into a path component
// the way the reference's slug library (babosa 2.0.0 normalize) does:
// repair invalid UTF-8 as Windows-1252, NFC, transliterate Latin letters,
// keep only letters, ASCII digits, spaces, '_' and '-', collapse runs of
// spaces and dashes, lower-case, cut to 255 bytes, spaces to dashes.
func Slug(s string) string {
	if !utf8.ValidString(s) {
		s = repairCP1252(s)
	}
	s = norm.NFC.String(s)
	var b strings.Builder
	for _, r := range s {
		if t, ok := latin[r]; ok {
			b.WriteString(t)
			continue
		}
		if r > 0x7f && r < 0x250 {
			// Latin-1 Supplement and Latin Extended-A/B: drop the diacritics.
			d := norm.NFD.String(string(r))
			base, _ := utf8.DecodeRuneInString(d)
			if base < 0x80 {
				b.WriteRune(base)
				continue
			}
		}
		b.WriteRune(r)
	}
	var kept strings.Builder
	for _, r := range b.String() {
		if unicode.IsLetter(r) || (r >= '0' && r <= '9') || r == ' ' || r == '_' || r == '-' || r == '\n' || r == '\r' {
			kept.WriteRune(r)
		}
	}
	// Collapse runs of spaces and dashes into one space, and trim.
	var collapsed strings.Builder
	pending := false
	for _, r := range kept.String() {
		if r == ' ' || r == '-' {
			pending = true
			continue
		}
		if pending && collapsed.Len() > 0 {
			collapsed.WriteByte(' ')
		}
		pending = false
		collapsed.WriteRune(r)
	}
	out := strings.ToLower(strings.TrimSpace(collapsed.String()))
	if len(out) > 255 {
		cut := 255
		for cut > 0 && !utf8.RuneStart(out[cut]) {
			cut--
		}
		out = out[:cut]
	}
	return strings.Join(strings.FieldsFunc(out, unicode.IsSpace), "-")
}

// latin holds the transliterations that are not a matter of dropping a
// diacritic.
var latin = map[rune]string{
	'ß': "ss", 'Æ': "AE", 'æ': "ae", 'Ø': "O", 'ø': "o", 'Œ': "OE", 'œ': "oe",
	'Þ': "Th", 'þ': "th", 'Ð': "D", 'ð': "d", 'Đ': "D", 'đ': "d", 'Ł': "L", 'ł': "l",
	'ı': "i", 'Ħ': "H", 'ħ': "h", 'ĸ': "k", 'Ŋ': "NG", 'ŋ': "ng", 'ſ': "s",
}

func repairCP1252(s string) string {
	var b strings.Builder
	dec := charmap.Windows1252.NewDecoder()
	for len(s) > 0 {
		r, size := utf8.DecodeRuneInString(s)
		if r == utf8.RuneError && size == 1 {
			if t, err := dec.String(s[:1]); err == nil {
				b.WriteString(t)
			}
		} else {
			b.WriteRune(r)
		}
		s = s[size:]
	}
	return b.String()
}
