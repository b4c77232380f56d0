package channel

import (
	"strings"
	"testing"
)

func TestSplit(t *testing.T) {
	cases := []struct {
		name string
		text string
		max  int
		want []string
	}{
		{"fits", "short", 10, []string{"short"}},
		{"unlimited", "any length", 0, []string{"any length"}},
		{"on lines", "aaa\nbbb\nccc", 8, []string{"aaa\nbbb\n", "ccc"}},
		{"the last line break that fits", "a\nbb\ncccccc", 6, []string{"a\nbb\n", "cccccc"}},
		{"a long line on spaces", "one two three", 8, []string{"one two ", "three"}},
		{"a word longer than max", "abcdefghij", 4, []string{"abcd", "efgh", "ij"}},
		{"characters, not bytes", "ééééé", 2, []string{"éé", "éé", "é"}},
	}
	for _, c := range cases {
		got := Split(c.text, c.max, nil)
		if strings.Join(got, "|") != strings.Join(c.want, "|") {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

func TestSplitUTF16(t *testing.T) {
	// An emoji is two UTF-16 units: four fit in 8, never half of one.
	got := Split(strings.Repeat("🙂", 5), 8, UTF16Len)
	if len(got) != 2 || got[0] != strings.Repeat("🙂", 4) {
		t.Errorf("%q", got)
	}
	if n := UTF16Len("a🙂é"); n != 4 {
		t.Errorf("UTF16Len = %d", n)
	}
}

func FuzzSplit(f *testing.F) {
	f.Add("line one\nline two\n\nthree", 5)
	f.Add("🙂🙂 a b", 3)
	f.Fuzz(func(t *testing.T, text string, max int) {
		max = max%50 + 1
		if max < 2 {
			max = 2 // one emoji needs two units
		}
		got := Split(text, max, UTF16Len)
		if strings.Join(got, "") != text {
			t.Fatalf("pieces %q do not make %q", got, text)
		}
		for _, p := range got {
			if UTF16Len(p) > max && len([]rune(p)) > 1 {
				t.Fatalf("piece %q longer than %d", p, max)
			}
		}
	})
}

func TestSplitRich(t *testing.T) {
	r := ParseMarkdown("**bold line**\n\n`code` and **more bold**")
	got := SplitRich(r, 12, nil)
	if len(got) != 3 || got[0].Text != "bold line" || got[1].Text != "code and" || got[2].Text != "more bold" {
		t.Fatalf("%+v", got)
	}
	if len(got[0].Spans) != 1 || got[0].Spans[0] != (Span{Kind: Bold, Start: 0, End: 9}) {
		t.Errorf("first piece's spans %+v", got[0].Spans)
	}
	// Each piece keeps the spans that fall in it, at its own offsets.
	if len(got[1].Spans) != 1 || got[1].Spans[0] != (Span{Kind: Code, Start: 0, End: 4}) {
		t.Errorf("second piece's spans %+v", got[1].Spans)
	}
	if len(got[2].Spans) != 1 || got[2].Spans[0] != (Span{Kind: Bold, Start: 0, End: 9}) {
		t.Errorf("third piece's spans %+v", got[2].Spans)
	}
}
