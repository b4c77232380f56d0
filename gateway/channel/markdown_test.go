package channel

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestParseMarkdown(t *testing.T) {
	cases := []struct {
		md   string
		want Rich
	}{
		{"plain text", Rich{Text: "plain text"}},
		{"**b** *i* ~~s~~ `c`", Rich{Text: "b i s c", Spans: []Span{{Kind: Bold, Start: 0, End: 1}, {Kind: Italic, Start: 2, End: 3}, {Kind: Strike, Start: 4, End: 5}, {Kind: Code, Start: 6, End: 7}}}},
		{"# Title\n\nbody", Rich{Text: "Title\n\nbody", Spans: []Span{{Kind: Bold, Start: 0, End: 5}}}},
		{"- one\n- two\n\n1. a\n2. b", Rich{Text: "• one\n• two\n\n1. a\n2. b"}},
		{"- outer\n  - inner", Rich{Text: "• outer\n  • inner"}},
		{"[nb](https://nbots.io)", Rich{Text: "nb", Spans: []Span{{Kind: Link, Start: 0, End: 2, URL: "https://nbots.io"}}}},
		{"```sh\nls -l\n```", Rich{Text: "ls -l", Spans: []Span{{Kind: Pre, Start: 0, End: 5, Lang: "sh"}}}},
		{"> quoted", Rich{Text: "quoted", Spans: []Span{{Kind: Quote, Start: 0, End: 6}}}},
		{"line one\nline two", Rich{Text: "line one\nline two"}},
		{"a < b & c", Rich{Text: "a < b & c"}},
		{"**unclosed", Rich{Text: "**unclosed"}},
	}
	for _, c := range cases {
		got := ParseMarkdown(c.md)
		if diff := cmp.Diff(c.want, got, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("%q: (-want +got)\n%s", c.md, diff)
		}
	}
}

func FuzzParseMarkdown(f *testing.F) {
	f.Add("**a** _b_ [c](d) ```\ne\n```")
	f.Fuzz(func(t *testing.T, md string) {
		r := ParseMarkdown(md)
		for _, s := range r.Spans {
			if s.Start < 0 || s.End > len(r.Text) || s.Start >= s.End {
				t.Fatalf("span %+v outside %q", s, r.Text)
			}
		}
	})
}
