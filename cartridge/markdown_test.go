package cartridge

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"
	"github.com/google/go-cmp/cmp"
	"github.com/yuin/goldmark/ast"
	mdtext "github.com/yuin/goldmark/text"
)

func parseMD(t *testing.T, src string) *Cartridge {
	t.Helper()
	c, err := Parse([]byte(src), "test.md", FormatMarkdown, os.LookupEnv)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// keyOrder lists the key paths of a raw cartridge in order.
func keyOrder(v any, prefix string) []string {
	var out []string
	switch t := v.(type) {
	case yaml.MapSlice:
		for _, item := range t {
			p := fmt.Sprint(item.Key)
			if prefix != "" {
				p = prefix + "." + p
			}
			out = append(out, p)
			out = append(out, keyOrder(item.Value, p)...)
		}
	case []any:
		for i, x := range t {
			out = append(out, keyOrder(x, fmt.Sprintf("%s[%d]", prefix, i))...)
		}
	}
	return out
}

var (
	openaiProvider = map[string]any{
		"id":          "openai",
		"credentials": map[string]any{"access-token": "ENV/OPENAI_API_KEY"},
		"settings":    map[string]any{"user": "ENV/NANO_BOTS_END_USER", "model": "gpt-4o"},
	}
	helpful = map[string]any{"interaction": map[string]any{"directive": "You are a helpful assistant."}}
)

// TestMarkdownFixtures checks the reference's four Markdown fixtures
// against the expected cartridges of its parser_spec.rb.
func TestMarkdownFixtures(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-test")
	t.Setenv("NANO_BOTS_END_USER", "user-1")
	tools := []any{
		map[string]any{
			"name":        "random-number",
			"description": "Generates a random number within a given range.",
			"parameters": map[string]any{
				"type": "object",
				"properties": map[string]any{
					"from": map[string]any{"type": "integer", "description": "The minimum expected number for random generation."},
					"to":   map[string]any{"type": "integer", "description": "The maximum expected number for random generation."},
				},
				"required": []any{"from", "to"},
			},
			"clojure": "(let [{:strs [from to]} parameters]\n  (+ from (rand-int (+ 1 (- to from)))))\n",
		},
		map[string]any{"name": "date-and-time", "description": "Returns the current date and time.", "fennel": "(os.date)\n"},
	}
	for _, tt := range []struct {
		file  string
		raw   map[string]any
		roots []string // root keys in order
	}{
		{"markdown.md", map[string]any{
			"meta":      map[string]any{"symbol": "🤖", "name": "ChatGPT 4o", "author": "icebaker", "version": "0.0.1", "license": "CC0-1.0", "description": "A helpful assistant."},
			"behaviors": helpful,
			"provider":  openaiProvider,
		}, []string{"meta", "behaviors", "provider"}},
		{"meta.md", map[string]any{
			"meta":      map[string]any{"symbol": "🤖", "name": "Nano Bot Name", "author": "Your Name", "description": "A helpful assistant.", "version": "1.0.0", "license": "CC0-1.0"},
			"behaviors": helpful,
		}, []string{"meta", "behaviors"}},
		{"tools.md", map[string]any{
			"meta":      map[string]any{"symbol": "🕛", "name": "Date and Time", "author": "icebaker", "version": "0.0.1", "license": "CC0-1.0", "description": "A helpful assistant."},
			"behaviors": helpful,
			"provider":  openaiProvider,
			"tools":     tools,
		}, []string{"meta", "behaviors", "provider", "tools"}},
		{"block.md", map[string]any{
			"safety": map[string]any{"functions": map[string]any{"sandboxed": false}},
		}, []string{"safety"}},
	} {
		t.Run(tt.file, func(t *testing.T) {
			c := load(t, tt.file)
			if diff := cmp.Diff(tt.raw, toPlain(c.Raw)); diff != "" {
				t.Errorf("Raw (-want +got):\n%s", diff)
			}
			var roots []string
			for _, item := range c.Raw {
				roots = append(roots, fmt.Sprint(item.Key))
			}
			if diff := cmp.Diff(tt.roots, roots); diff != "" {
				t.Errorf("root keys (-want +got):\n%s", diff)
			}
			// Data is Raw after ENV substitution.
			want := toPlain(tt.raw).(map[string]any)
			if p, ok := want["provider"].(map[string]any); ok {
				p["credentials"].(map[string]any)["access-token"] = "sk-test"
				p["settings"].(map[string]any)["user"] = "user-1"
			}
			if diff := cmp.Diff(want, c.Data); diff != "" {
				t.Errorf("Data (-want +got):\n%s", diff)
			}
			if len(c.Warnings) > 0 {
				t.Errorf("warnings: %q", c.Warnings)
			}
		})
	}

	// Nested keys keep the order of the file, the second meta block's
	// keys after the first's.
	c := load(t, "meta.md")
	want := []string{"meta", "meta.symbol", "meta.name", "meta.author", "meta.description", "meta.version", "meta.license",
		"behaviors", "behaviors.interaction", "behaviors.interaction.directive"}
	if diff := cmp.Diff(want, keyOrder(c.Raw, "")); diff != "" {
		t.Errorf("meta.md key order (-want +got):\n%s", diff)
	}
	c = load(t, "tools.md")
	var names []string
	for _, k := range keyOrder(c.Raw, "") {
		if strings.HasPrefix(k, "tools[1]") {
			names = append(names, k)
		}
	}
	if diff := cmp.Diff([]string{"tools[1].name", "tools[1].description", "tools[1].fennel"}, names); diff != "" {
		t.Errorf("tools.md key order (-want +got):\n%s", diff)
	}
}

// TestMarkdownLines checks that positions name lines of the .md file.
func TestMarkdownLines(t *testing.T) {
	c := load(t, "tools.md")
	for _, tt := range []struct {
		path       string
		line, code int
	}{
		{"meta", 6, 0},
		{"meta.version", 10, 0},
		{"provider.id", 29, 0},
		{"tools", 44, 0},
		{"tools[0].name", 45, 0},
		{"tools[0].parameters.required", 56, 0},
		{"tools[0].clojure", 61, 62}, // the ```clj fence, then the code
		{"tools[1]", 70, 0},
		{"tools[1].fennel", 74, 75},
	} {
		if got := c.Line(tt.path); got != tt.line {
			t.Errorf("Line(%s) = %d, want %d", tt.path, got, tt.line)
		}
		if got := c.SourceLine(tt.path); tt.code != 0 && got != tt.code {
			t.Errorf("SourceLine(%s) = %d, want %d", tt.path, got, tt.code)
		}
	}
	defs := c.Tools()
	if len(defs) != 2 {
		t.Fatalf("%d tools", len(defs))
	}
	for i, want := range []Source{
		{Lang: "clojure", Code: "(let [{:strs [from to]} parameters]\n  (+ from (rand-int (+ 1 (- to from)))))\n", Path: "tools[0].clojure", File: c.Path, Line: 62},
		{Lang: "fennel", Code: "(os.date)\n", Path: "tools[1].fennel", File: c.Path, Line: 75},
	} {
		if diff := cmp.Diff(want, defs[i].Source); diff != "" {
			t.Errorf("tool %d source (-want +got):\n%s", i, diff)
		}
	}

	// An adapter's code in a yaml block starts on the .md line after "|".
	c = parseMD(t, "# Bot\n\nSome text.\n\n```yaml\ninterfaces:\n  eval:\n    output:\n      adapter:\n        lua: |\n          return content\n```\n")
	src, err := c.Adapter(Eval, "output")
	if err != nil || src == nil || src.Line != 11 {
		t.Errorf("adapter: %+v %v", src, err)
	}

}

// TestMarkdownBlockText: the pre-pass finds the blocks the reference
// finds, but leaves their text as written (the reference also inserts its
// newlines inside blocks, which breaks indented YAML and changes code).
func TestMarkdownBlockText(t *testing.T) {
	c := parseMD(t, "Intro:\n```yaml\nbehaviors:\n  interaction:\n    directive: |\n      Answer in a block: ```text\n      ```text\n      x\n      ```\n    backdrop: b\n```\n"+
		"```yaml\ntools:\n- name: t\n```\n```fnl\n(.. \"```text\n\" content \"```\")\n```\n")
	if got, want := c.String("behaviors", "interaction", "directive"), "Answer in a block: ```text\n```text\nx\n```\n"; got != want {
		t.Errorf("directive %q, want %q", got, want)
	}
	for path, want := range map[string]int{"behaviors.interaction.backdrop": 10, "tools[0].name": 14, "tools[0].fennel": 16} {
		if got := c.Line(path); got != want {
			t.Errorf("Line(%s) = %d, want %d", path, got, want)
		}
	}
	if got, want := c.Tools()[0].Source, (Source{Lang: "fennel", Code: "(.. \"```text\n\" content \"```\")\n", Path: "tools[0].fennel", File: "test.md", Line: 17}); got != want {
		t.Errorf("source %+v, want %+v", got, want)
	}

	// A block in a list item. (The pre-pass moves a fence out of its list
	// item or quote, as the reference's does: a quoted block keeps its
	// "> " markers and is rarely YAML.)
	c = parseMD(t, "- item\n\n  ```yaml\n  meta:\n    name: a\n  ```\n\n~~~yml\nstate: {path: p}\n~~~\n")
	if c.String("meta", "name") != "a" || c.String("state", "path") != "p" {
		t.Errorf("%v", c.Data)
	}
}

// TestMarkdownErrors checks that problems name the .md file and line.
func TestMarkdownErrors(t *testing.T) {
	for _, tt := range []struct{ src, want string }{
		{"a\n```yaml\nmeta:\n  name: x\n   bad: indent\n```\n", "test.md:4:9: mapping value is not allowed in this context"},
		{"# t\n\n```yaml\nmeta: {}\n```\n\n```yaml\nmeta: 1\nmeta: 2\n```\n", `test.md:9:1: mapping key "meta" already defined at [8:1]`},
		{"x\n\n```yaml\n- a\n```\n", "test.md:4: a cartridge must be a YAML mapping of keys (meta:, provider:, ...), but this yaml block holds a list"},
		{"```yaml\na: 1\n---\nb: 2\n```\n", "test.md:4: a cartridge is one YAML document, but this yaml block has several (separated by ---)"},
		{"intro\n\n```yaml\nmeta: {}\n```\n\n```yml\nprovider:\n  id: acme\n```\n", `test.md:9: provider.id: unsupported provider "acme"`},
		{"```yaml\nbehaviors:\n  boot:\n    instruction: [a, b]\n```\n", "test.md:4: behaviors.boot.instruction: must be text, not a list"},
		{"hello\n\n```json\n{}\n```\n\n    indented: code\n", "test.md: no yaml code block found: a Markdown cartridge keeps its settings in fenced blocks marked ```yaml (or ```yml); the rest of the text is ignored"},
		{"", "test.md: no yaml code block found"},
		{"```yaml\n# only a comment\n```\n\n```yml\n```\n", "test.md: the yaml code blocks are empty: a cartridge needs at least a provider section"},
		// Tools.
		{"```yaml\ntools:\n- name: a\n  lua: x\n```\n```fnl\n(y)\n```\n", "test.md:3: tools[0] (a): conflicting tools: the tool has more than one source (lua, fennel); keep one"},
		{"```yaml\ntools:\n- name: a\n```\n\n```yaml\nmeta: {}\n```\n\n```lua\nreturn 1\n```\n", "test.md:3: tools[0] (a): missing source code"},
		{"```yaml\ntools:\n- name: a\n  lua: x\n```\n\n```yaml\ntools:\n- name: A\n```\n```lua\nreturn 1\n```\n", `test.md:9: tools[1] (A): a tool named "A" is already defined (a)`},
		{"```yaml\ntools:\n- just text\n```\n```lua\nreturn 1\n```\n", "test.md:3: tools[0]: a tool must be a mapping"},
		{"```yaml\ntools: {tools}\n```\n", "test.md:2: tools: must be a list of tools (- name: …), not a mapping"},
	} {
		_, err := Parse([]byte(tt.src), "test.md", FormatMarkdown, os.LookupEnv)
		if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
			t.Errorf("%q:\n got %v\nwant prefix %q", tt.src, err, tt.want)
		}
	}
}

// TestMarkdownTemplateGenerator: b08x/flowbots' template_generator.md is a
// prompt whose yaml block, reached only through the pre-pass (it follows
// an HTML line), holds behaviors with list-valued instructions.
func TestMarkdownTemplateGenerator(t *testing.T) {
	path := filepath.Join(corpusRoot, "b08x__flowbots/lib/cartridges/template_generator.md")
	src, err := os.ReadFile(path)
	if err != nil {
		t.Skipf("SKIPPING: the corpus is not here (%v)", err)
	}
	_, err = Load(path, os.LookupEnv)
	if want := path + ":45: behaviors.interaction.instruction: must be text, not a list"; err == nil || err.Error() != want {
		t.Errorf("got %v\nwant %s", err, want)
	}
	// Without the pre-pass the fence is part of the <template> HTML block.
	fences := 0
	_ = ast.Walk(markdown().Parse(mdtext.NewReader(src)), func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if _, ok := n.(*ast.FencedCodeBlock); ok && entering {
			fences++
		}
		return ast.WalkContinue, nil
	})
	if fences != 0 {
		t.Errorf("%d fenced blocks without the pre-pass", fences)
	}
	if blocks := extractBlocks(src); len(blocks) != 1 || blocks[0].lang != "yaml" || blocks[0].fenceLine != 38 {
		t.Errorf("blocks: %+v", blocks)
	}
	// With valid instructions it would be a partial cartridge (no provider).
	fixed := bytes.ReplaceAll(src, []byte("instruction: ["), []byte("instruction: ("))
	c, err := Parse(fixed, path, FormatMarkdown, os.LookupEnv)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"behaviors"}, sortedKeys(c.Data)); diff != "" {
		t.Error(diff)
	}
	if err := c.RequireProvider(); err == nil {
		t.Error("no provider, but RequireProvider passed")
	}
}

// TestMarkdownRules covers the extraction rules one by one.
func TestMarkdownRules(t *testing.T) {
	for _, tt := range []struct {
		name, src string
		want      map[string]any
	}{
		{"fence after a paragraph line", "Text:\n```yaml\nmeta: {name: a}\n```\n", map[string]any{"meta": map[string]any{"name": "a"}}},
		{"fence after an HTML line", "<div>\n```yaml\nmeta: {name: a}\n```\n</div>\n", map[string]any{"meta": map[string]any{"name": "a"}}},
		{"fence in the middle of a line", "Here ```yaml\nmeta: {name: a}\n```\n", map[string]any{"meta": map[string]any{"name": "a"}}},
		{"info string: case, spaces and extra words", "```  YAML title=x\nmeta: {name: a}\n```\n\n``` Yml\nstate: {path: p}\n```\n",
			map[string]any{"meta": map[string]any{"name": "a"}, "state": map[string]any{"path": "p"}}},
		{"tilde fences", "~~~yaml\nmeta: {name: a}\n~~~\n", map[string]any{"meta": map[string]any{"name": "a"}}},
		{"blocks in a list item", "- item\n\n  ```yaml\n  meta: {name: a}\n  ```\n", map[string]any{"meta": map[string]any{"name": "a"}}},
		{"other blocks are invisible", "```json\n{\"a\": 1}\n```\n\n```\nmeta: {name: x}\n```\n\n    meta: {name: y}\n\n```yaml\nmeta: {name: a}\n```\n",
			map[string]any{"meta": map[string]any{"name": "a"}}},
		{"later scalars win, mappings merge", "```yaml\nmeta: {name: a, author: b}\nprovider: {id: openai}\n```\n```yaml\nmeta: {name: c}\nprovider: {id: cohere, settings: {model: m}}\n```\n",
			map[string]any{"meta": map[string]any{"name": "c", "author": "b"}, "provider": map[string]any{"id": "cohere", "settings": map[string]any{"model": "m"}}}},
		{"a scalar replaces a mapping and back", "```yaml\nstate: {path: p}\nsafety: 1\n```\n```yaml\nstate: null\nsafety: {tools: {confirmable: false}}\n```\n",
			map[string]any{"state": nil, "safety": map[string]any{"tools": map[string]any{"confirmable": false}}}},
		{"nested lists are replaced", "```yaml\ninterfaces: {repl: {prompt: [{text: a}, {text: b}]}}\n```\n```yaml\ninterfaces: {repl: {prompt: [{text: c}]}}\n```\n",
			map[string]any{"interfaces": map[string]any{"repl": map[string]any{"prompt": []any{map[string]any{"text": "c"}}}}}},
		{"root lists are concatenated", "```yaml\nrobopages: [a.yml]\n```\n```yaml\nrobopages: [{path: b}]\n```\n",
			map[string]any{"robopages": []any{"a.yml", map[string]any{"path": "b"}}}},
		{"a root list replaces a non-list", "```yaml\nrobopages: x\n```\n```yaml\nrobopages: [a]\n```\n", map[string]any{"robopages": []any{"a"}}},
		{"code after a tools block", "```yaml\ntools:\n- name: a\n```\n\nSome prose.\n\n```bash\nignored\n```\n\n```lua\nreturn 1\n```\n",
			map[string]any{"tools": []any{map[string]any{"name": "a", "lua": "return 1\n"}}}},
		{"code goes to the last tool of the block, replacing an inline value", "```yaml\ntools:\n- name: a\n  lua: one\n- name: b\n  lua: two\n```\n```lua\nthree\n```\n",
			map[string]any{"tools": []any{map[string]any{"name": "a", "lua": "one"}, map[string]any{"name": "b", "lua": "three\n"}}}},
		{"only the first code block counts", "```yaml\ntools:\n- name: a\n```\n```clojure\n(a)\n```\n```fennel\n(b)\n```\n",
			map[string]any{"tools": []any{map[string]any{"name": "a", "clojure": "(a)\n"}}}},
		{"code without a tools block is ignored", "```lua\nreturn 0\n```\n```yaml\ntools:\n- name: a\n  fennel: (a)\n```\n```yaml\nmeta: {}\n```\n```lua\nreturn 1\n```\n",
			map[string]any{"tools": []any{map[string]any{"name": "a", "fennel": "(a)"}}, "meta": map[string]any{}}},
		{"an empty tools list does not take code", "```yaml\ntools: []\n```\n```lua\nreturn 1\n```\n", map[string]any{"tools": []any{}}},
		{"tools accumulate; the rest of their block is kept", "```yaml\nmeta: {name: n}\ntools:\n- name: a\n  lua: x\n```\n```yaml\ntools: []\n```\n```yaml\ntools:\n- name: b\n  lua: y\nmeta: {author: z}\n```\n",
			map[string]any{"meta": map[string]any{"name": "n", "author": "z"}, "tools": []any{map[string]any{"name": "a", "lua": "x"}, map[string]any{"name": "b", "lua": "y"}}}},
		{"an empty block clears the flag", "```yaml\ntools:\n- name: a\n  lua: x\n```\n```yaml\n```\n```lua\ny\n```\n",
			map[string]any{"tools": []any{map[string]any{"name": "a", "lua": "x"}}}},
		{"CRLF line ends", "Text\r\n\r\n```yaml\r\nmeta:\r\n  name: a\r\n```\r\n", map[string]any{"meta": map[string]any{"name": "a"}}},
		{"CR line ends", "Text\r\r```yaml\rmeta:\r  name: |\r    a\r    b\r```\r", map[string]any{"meta": map[string]any{"name": "a\nb\n"}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := parseMD(t, tt.src)
			if diff := cmp.Diff(tt.want, c.Data); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestMarkdownMergeOrder: keys keep their first appearance; the tools go
// last, as the reference adds them as the last source; lines follow the
// values that won.
func TestMarkdownMergeOrder(t *testing.T) {
	c := parseMD(t, "```yaml\nmeta:\n  name: a\n```\n\n```yaml\ntools:\n- name: t\n  lua: x\n```\n\n```yaml\nprovider:\n  id: openai\nmeta:\n  author: b\n  name: c\nrobopages: [p]\n```\n\n```yaml\nrobopages:\n- q\n- r\n```\n")
	var roots []string
	for _, item := range c.Raw {
		roots = append(roots, fmt.Sprint(item.Key))
	}
	if diff := cmp.Diff([]string{"meta", "provider", "robopages", "tools"}, roots); diff != "" {
		t.Errorf("root order (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"meta", "meta.name", "meta.author"}, keyOrder(c.Raw, "")[:3]); diff != "" {
		t.Errorf("meta order (-want +got):\n%s", diff)
	}
	for path, want := range map[string]int{"meta": 2, "meta.name": 17, "meta.author": 16, "provider.id": 14, "tools[0].name": 8,
		"robopages": 18, "robopages[0]": 18, "robopages[1]": 23, "robopages[2]": 24} {
		if got := c.Line(path); got != want {
			t.Errorf("Line(%s) = %d, want %d", path, got, want)
		}
	}
	refs := c.Robopages()
	if len(refs) != 3 || refs[2].Path != "r" || refs[2].Line != 24 {
		t.Errorf("robopages: %+v", refs)
	}
}

// TestMarkdownEnv: ENV references are substituted after the merge, as for
// YAML, and Raw keeps them.
func TestMarkdownEnv(t *testing.T) {
	t.Setenv("NB_MD_KEY", "k")
	c := parseMD(t, "```yaml\nprovider:\n  id: openai\n  credentials:\n    access-token: ENV/NB_MD_KEY\n    address: ENV/NB_MD_UNSET_VAR\n```\n")
	if c.Provider().Credentials["access-token"] != "k" || c.RawString("provider", "credentials", "access-token") != "ENV/NB_MD_KEY" {
		t.Errorf("%v", c.Data)
	}
	if v, ok := c.MissingFor("provider.credentials.address"); !ok || v != "NB_MD_UNSET_VAR" {
		t.Errorf("missing: %v", c.Missing)
	}
}

// TestMarkdownSameAsYAML: the spec's example Markdown cartridge gives the
// same cartridge as its YAML extraction.
func TestMarkdownSameAsYAML(t *testing.T) {
	md := parseMD(t, "This is the first tool:\n\n```yaml\ntools:\n- name: date-and-time\n  description: Returns the current date and time.\n```\n\nThat has this source code:\n\n```fnl\n(os.date)\n```\n\nThis is the second tool:\n\n```yaml\ntools:\n- name: random-number\n  description: Generates a random number.\n```\n\nWith this source code:\n\n```lua\nreturn math.random()\n```\n")
	y := parse(t, "---\ntools:\n- name: date-and-time\n  description: Returns the current date and time.\n  fennel: |\n    (os.date)\n- name: random-number\n  description: Generates a random number.\n  lua: |\n    return math.random()\n")
	if diff := cmp.Diff(toPlain(y.Raw), toPlain(md.Raw)); diff != "" {
		t.Errorf("(-yaml +markdown):\n%s", diff)
	}
	mdOut, _ := md.Marshal()
	yOut, _ := y.Marshal()
	if string(mdOut) != string(yOut) {
		t.Errorf("marshal:\n%s\nvs\n%s", mdOut, yOut)
	}
}

// FuzzMarkdown: no input makes the Markdown parser panic, and every
// position it reports is in the file.
func FuzzMarkdown(f *testing.F) {
	for _, name := range []string{"block.md", "markdown.md", "meta.md", "tools.md"} {
		if src, err := os.ReadFile(filepath.Join(fixtures, name)); err == nil {
			f.Add(src)
		}
	}
	f.Add([]byte("<template>\n```yaml\nbehaviors: {boot: {instruction: x}}\n```\n</template>\n"))
	f.Add([]byte("```yaml\ntools:\n- name: a\n```\n````lua\nreturn 1\n````\n"))
	f.Add([]byte("- a\n  ```yml\n  robopages: [x]\n  ```\n> ```yaml\n> meta: {}\n"))
	// The files of the reports: nested brackets in a yaml block, nested
	// quotes and lists (minutes in the Markdown parser), a byte-order mark.
	f.Add([]byte("```yaml\nmisc: " + strings.Repeat("[", 100000) + strings.Repeat("]", 100000) + "\n```\n"))
	f.Add([]byte(strings.Repeat(">", 10000) + " a\n" + strings.Repeat("1. ", 10000) + "\n" + strings.Repeat("- ", 40) + "\n"))
	f.Add([]byte("\ufeff```yaml\nmeta:\n  name: x\n```\n"))
	f.Add([]byte("```yaml\nbehaviors:\n  interaction:\n    directiv: x\n```\n```yaml\ntools:\n- name: t\n  paramters: {}\n```\n```lua\nreturn 1\n```\n"))
	f.Fuzz(func(t *testing.T, src []byte) {
		maxLine := bytes.Count(normalizeNewlines(src), []byte("\n")) + 2
		c, err := Parse(src, "fuzz.md", FormatMarkdown, os.LookupEnv)
		if err != nil {
			e, ok := err.(*Error)
			if !ok || e.Msg == "" {
				t.Fatalf("error %T %v", err, err)
			}
			if e.Line < 0 || e.Line > maxLine {
				t.Fatalf("error line %d of %d: %v", e.Line, maxLine, err)
			}
			return
		}
		if c.Data == nil {
			t.Fatal("no data")
		}
		for k, l := range c.lines {
			if l < 1 || l > maxLine {
				t.Fatalf("Line(%s) = %d of %d", k, l, maxLine)
			}
		}
		c.Tools()
		for _, m := range []Mode{REPL, Eval} {
			_, _ = c.Adapter(m, "input")
			_, _ = c.FeedbackAdapter(m, Executing)
		}
		if _, err := c.Marshal(); err != nil {
			t.Fatalf("marshal: %v", err)
		}
	})
}

// TestMarshalNonStringKeys: keys YAML reads as numbers or booleans are
// printed as text (the encoder used to panic on them).
func TestMarshalNonStringKeys(t *testing.T) {
	for _, c := range []*Cartridge{parse(t, "0: 1\ntrue: {2: x}\nl: [{3: y}]\n"), parseMD(t, "1```yaml\n  0:\n  00000000000000000000")} {
		out, err := c.Marshal()
		if err != nil || !bytes.Contains(out, []byte("0")) {
			t.Errorf("%q %v", out, err)
		}
	}
}

// TestMarkdownConcurrent: the shared Markdown parser is safe to use from
// several goroutines (run with -race).
func TestMarkdownConcurrent(t *testing.T) {
	src, err := os.ReadFile(filepath.Join(fixtures, "tools.md"))
	if err != nil {
		t.Skip(err)
	}
	done := make(chan error)
	for range 4 {
		go func() {
			var err error
			for range 20 {
				if _, e := Parse(src, "tools.md", FormatMarkdown, os.LookupEnv); e != nil {
					err = e
				}
			}
			done <- err
		}()
	}
	for range 4 {
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
}
