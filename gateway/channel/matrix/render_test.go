package matrix

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/render.json from render")

// renderCases are Markdown messages covering what a model writes: every
// construct goldmark parses with the extensions the channel renders with
// (strikethrough, tables, spoilers), raw HTML (escaped), mentions, and
// text that needs no HTML at all.
var renderCases = []string{
	"",
	"hello",
	"hello\n",
	"  padded  ",
	"two\nlines",
	"first paragraph\n\nsecond paragraph",
	"a & b < c > d \"quoted\" 'single'",
	"**bold** and *italic* and _also italic_ and __bold too__",
	"***both*** and **nested *inside* bold**",
	"~~struck~~ and ~single~",
	"||spoiler|| text",
	"a ||spoiler with **bold**|| here",
	"`inline code` and ``code with ` tick``",
	"```\nplain fence\n```",
	"```go\nfunc main() {\n\tfmt.Println(\"<hi>\")\n}\n```",
	"~~~python\nprint('x')\n~~~",
	"    indented code\n    block",
	"# Heading 1\n## Heading 2\n### Heading 3\n#### H4\n##### H5\n###### H6",
	"Setext\n======\n\nSub\n---",
	"- one\n- two\n- three",
	"* star\n* list",
	"1. first\n2. second\n3. third",
	"3. starts at three\n4. four",
	"- outer\n  - inner\n    - innermost\n- back",
	"1. step\n   - detail\n2. step two",
	"- loose\n\n- list",
	"- [ ] task\n- [x] done",
	"> quoted\n> text",
	"> outer\n>> nested quote",
	"> quote with **bold**\n\nafter",
	"[link](https://example.org)",
	"[link with title](https://example.org \"Title\")",
	"<https://example.org/auto>",
	"https://example.org/bare",
	"![alt text](https://example.org/image.png)",
	"[nb](https://matrix.to/#/@nb:fake.test): hello",
	"hi [Alice](https://matrix.to/#/@alice:example.org) and [Bob](https://matrix.to/#/%40bob%3Aexample.org)",
	"[room](https://matrix.to/#/!room:example.org) and [alias](https://matrix.to/#/#alias:example.org)",
	"@room everyone",
	"@alice:example.org plain mxid",
	"| a | b |\n|---|---|\n| 1 | 2 |",
	"| left | center | right |\n|:---|:---:|---:|\n| l | c | r |\n| **b** | `c` | ~~s~~ |",
	"| only header |\n|---|",
	"---",
	"above\n\n***\n\nbelow",
	"<b>raw html</b> stays text",
	"<div>\nblock html\n</div>",
	"<!-- comment -->",
	"<script>alert(1)</script>",
	"line with trailing spaces  \nhard break",
	"line with backslash\\\nbreak",
	"\\*not emphasis\\* and \\# not heading",
	"&amp; &lt; &copy; &#169; entities",
	"emoji 🎉 and ünïcödé and 中文",
	"footnote[^1]\n\n[^1]: the note",
	"Term\n: definition",
	"*unclosed emphasis",
	"**",
	"a\n\n\n\nb",
	"text\n\n```\nunclosed fence",
	"1) paren list\n2) item",
	"+ plus\n+ list",
	"[ref link][r]\n\n[r]: https://example.org/ref",
	"mail <user@example.org>",
	"snake_case_word and 2*3*4",
	"http://example.org/path_with_underscores_",
	"under_score and a_b_c",
	"star * alone and 2 * 3 = 6",
	"\\_escaped\\_ and \\\\ backslash",
	"[brackets] alone (parens) and #hashtag",
	"a lone ` tick",
	"double  space and\ttab",
	"C:\\path\\file.txt",
	"path/to/file.go:12: error: x < y",
	"100% sure; cost $5 ~ish",
	"- ",
	"> ",
	"#",
	"# Title\n\nSome **bold** text.\n\n- a\n- b\n\n```sh\necho hi\n```\n\n| x | y |\n|---|---|\n| 1 | 2 |",
}

type renderGolden struct {
	Markdown string         `json:"markdown"`
	Content  map[string]any `json:"content"`
}

// TestRenderGolden holds what render sends for each of renderCases, as
// mautrix's format.RenderMarkdown gave it when the file was written
// (go test -run TestRenderGolden -update rewrites it): the HTML
// formatted_body byte for byte, and the rest of the event's content.
func TestRenderGolden(t *testing.T) {
	path := filepath.Join("testdata", "render.json")
	if *update {
		var out []renderGolden
		for _, md := range renderCases {
			b, err := json.Marshal(render(md))
			if err != nil {
				t.Fatal(err)
			}
			var content map[string]any
			if err := json.Unmarshal(b, &content); err != nil {
				t.Fatal(err)
			}
			out = append(out, renderGolden{md, content})
		}
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		if err := enc.Encode(out); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var golden []renderGolden
	if err := json.Unmarshal(data, &golden); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if len(golden) != len(renderCases) {
		t.Fatalf("%s has %d cases, renderCases %d: rerun with -update", path, len(golden), len(renderCases))
	}
	for i, g := range golden {
		if g.Markdown != renderCases[i] {
			t.Fatalf("%s case %d is %q, renderCases has %q: rerun with -update", path, i, g.Markdown, renderCases[i])
		}
		b, err := json.Marshal(render(g.Markdown))
		if err != nil {
			t.Fatal(err)
		}
		var got map[string]any
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, g.Content) {
			t.Errorf("render(%q):\n got %s\nwant %v", g.Markdown, b, g.Content)
		}
	}
}
