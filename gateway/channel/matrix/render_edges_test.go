package matrix

import (
	"slices"
	"testing"
)

// TestRenderEdges: what render sends beyond the golden file's messages.
// The first cases are as mautrix's renderer gave them (spoilers with a
// reason, emphasis beside a spoiler, matrix: links); the last are where nb
// differs on purpose: an unclosed || is kept as text, which mautrix's
// renderer dropped ("a || b" became "a  b").
func TestRenderEdges(t *testing.T) {
	for _, c := range []struct {
		md, html string
		users    []string
	}{
		{"||r|**b**||", `<span data-mx-spoiler="r"><strong>b</strong></span>`, nil},
		{"||a <b>|c||", `<span data-mx-spoiler="a &lt;b&gt;">c</span>`, nil},
		{"|| x ||", "<span data-mx-spoiler> x </span>", nil},
		{"|||a|||", "<span data-mx-spoiler>|a</span>|", nil},
		{"||a||b||c||", "<span data-mx-spoiler>a</span>b<span data-mx-spoiler>c</span>", nil},
		{"*x*||s||", "<em>x</em><span data-mx-spoiler>s</span>", nil},
		{"_a ||s|| b_", "_a <span data-mx-spoiler>s</span> b_", nil},
		{"**a ||b** c||", "**a <span data-mx-spoiler>b** c</span>", nil},
		{"a\tb", "a\tb", nil},
		{" a", "", nil},
		{"[x](matrix:u/alice:example.org) [y](https://matrix.to/#/@bob:x.org/$ev?via=x.org) [z](https://example.org/#/@eve:x.org) [x](matrix:u/alice:example.org)",
			`<a href="matrix:u/alice:example.org">x</a> <a href="https://matrix.to/#/@bob:x.org/$ev?via=x.org">y</a> <a href="https://example.org/#/@eve:x.org">z</a> <a href="matrix:u/alice:example.org">x</a>`,
			[]string{"@alice:example.org", "@bob:x.org"}},
		{"![i](https://matrix.to/#/@img:x)", `<img src="https://matrix.to/#/@img:x" alt="i">`, nil},
		{"a || b", "", nil},
		{"x || y **z**", "x || y <strong>z</strong>", nil},
		{"||a\n\nb||", "<p>||a</p>\n<p>b||</p>", nil},
	} {
		got := render(c.md)
		if got.FormattedBody != c.html || got.Body != c.md || !slices.Equal(got.Mentions.UserIDs, c.users) || got.Mentions.Room {
			t.Errorf("render(%q) = %q %v, want %q %v", c.md, got.FormattedBody, got.Mentions.UserIDs, c.html, c.users)
		}
		if (got.Format == "") != (c.html == "") {
			t.Errorf("render(%q): format %q", c.md, got.Format)
		}
	}
}

func TestValidUserID(t *testing.T) {
	for id, want := range map[string]bool{
		"@alice:example.org": true, "@a.b_c=d/e:matrix.org:8448": true, "@x:[::1]": true, "@x:127.0.0.1:80": true,
		"alice:example.org": false, "@alice": false, "@:example.org": false, "@alice:": false,
		"@al ice:example.org": false, "@alice:exa mple.org": false, "@alice:example.org:": false, "@alice:[::1": false,
	} {
		if validUserID(id) != want {
			t.Errorf("validUserID(%q) = %v", id, !want)
		}
	}
}
