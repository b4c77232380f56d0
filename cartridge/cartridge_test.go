package cartridge

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const fixtures = "../../shared/corpus/cartridges/icebaker__ruby-nano-bots/spec/data/cartridges"

func parse(t *testing.T, src string) *Cartridge {
	t.Helper()
	c, err := Parse([]byte(src), "test.yml", FormatYAML, os.LookupEnv)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// needFixtures skips a test that reads the reference's fixtures when the
// shared corpus is not beside the repository (it is in CI).
func needFixtures(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(fixtures); err != nil {
		t.Skipf("SKIPPING: the reference's cartridge fixtures are not at %s (the shared corpus sits beside the repository in CI)", fixtures)
	}
}

func load(t *testing.T, name string) *Cartridge {
	t.Helper()
	needFixtures(t)
	c, err := Load(filepath.Join(fixtures, name), os.LookupEnv)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// del removes a key path from a cartridge's data, as the reference's tests do.
func del(c *Cartridge, path ...string) {
	m := c.Data
	for _, k := range path[:len(path)-1] {
		m = m[k].(map[string]any)
	}
	delete(m, path[len(path)-1])
}

func set(c *Cartridge, v any, path ...string) {
	m := c.Data
	for _, k := range path[:len(path)-1] {
		m = m[k].(map[string]any)
	}
	m[path[len(path)-1]] = v
}

// TestAffixes reproduces the reference's affixes_spec.rb.
func TestAffixes(t *testing.T) {
	c := load(t, "affixes.yml")
	check := func(label string, want map[string]string) {
		t.Helper()
		for key, w := range want {
			parts := strings.Split(key, ".")
			if got := c.Affix(Mode(parts[0]), parts[1], parts[2]); got != w {
				t.Errorf("%s: %s = %q, want %q", label, key, got, w)
			}
		}
	}
	check("as is", map[string]string{"repl.input.prefix": "E", "repl.input.suffix": "F", "repl.output.prefix": "G", "repl.output.suffix": "H",
		"eval.input.prefix": "I", "eval.input.suffix": "J", "eval.output.prefix": "K", "eval.output.suffix": "L"})
	for _, mode := range []string{"repl", "eval"} {
		for _, dir := range []string{"input", "output"} {
			for _, kind := range []string{"prefix", "suffix"} {
				set(c, nil, "interfaces", mode, dir, kind)
			}
		}
	}
	check("explicit nulls", map[string]string{"repl.input.prefix": "", "repl.output.prefix": "", "repl.output.suffix": "", "eval.output.suffix": ""})
	for _, mode := range []string{"repl", "eval"} {
		for _, dir := range []string{"input", "output"} {
			for _, kind := range []string{"prefix", "suffix"} {
				del(c, "interfaces", mode, dir, kind)
			}
		}
	}
	check("deleted", map[string]string{"repl.input.prefix": "A", "repl.input.suffix": "B", "repl.output.prefix": "C", "repl.output.suffix": "D",
		"eval.input.prefix": "A", "eval.output.suffix": "D"})
	empty := parse(t, "meta: {}\n")
	for key, w := range map[string]string{"repl.input.prefix": "", "repl.input.suffix": "", "repl.output.prefix": "\n", "repl.output.suffix": "\n",
		"eval.input.prefix": "", "eval.output.prefix": "", "eval.output.suffix": "\n"} {
		p := strings.Split(key, ".")
		if got := empty.Affix(Mode(p[0]), p[1], p[2]); got != w {
			t.Errorf("empty: %s = %q, want %q", key, got, w)
		}
	}
}

// TestStreaming reproduces the reference's streaming_spec.rb.
func TestStreaming(t *testing.T) {
	for _, tt := range []struct {
		src        string
		repl, eval bool
	}{
		{"provider: {id: openai}", true, true},
		{"provider: {id: google}", true, true},
		{"interfaces: {output: {stream: false}}", false, false},
	} {
		c := parse(t, tt.src)
		if c.Stream(REPL) != tt.repl || c.Stream(Eval) != tt.eval {
			t.Errorf("%s: repl %v eval %v", tt.src, c.Stream(REPL), c.Stream(Eval))
		}
	}
	steps := []struct {
		change func(c *Cartridge)
		want   bool
	}{
		{func(c *Cartridge) { set(c, false, "provider", "settings", "stream") }, false},
		{func(c *Cartridge) { set(c, false, "interfaces", "repl", "output", "stream") }, false},
		{func(c *Cartridge) {
			set(c, false, "interfaces", "output", "stream")
			set(c, true, "interfaces", "repl", "output", "stream")
		}, true},
		{func(c *Cartridge) {
			set(c, false, "interfaces", "output", "stream")
			del(c, "interfaces", "repl", "output", "stream")
		}, false},
		{func(c *Cartridge) { del(c, "interfaces", "repl", "output", "stream") }, true},
		{func(c *Cartridge) {
			del(c, "interfaces", "output", "stream")
			del(c, "interfaces", "repl", "output", "stream")
		}, true},
		{func(c *Cartridge) {
			del(c, "provider", "settings", "stream")
			del(c, "interfaces", "output", "stream")
			del(c, "interfaces", "repl", "output", "stream")
		}, true},
	}
	for i, s := range steps {
		c := load(t, "streaming.yml")
		s.change(c)
		if got := c.Stream(REPL); got != s.want {
			t.Errorf("step %d: %v, want %v", i, got, s.want)
		}
	}
}

// TestFeedback reproduces the reference's tools_spec.rb feedback table.
func TestFeedback(t *testing.T) {
	for _, tt := range []struct {
		src                                string
		replExec, evalExec, replRe, evalRe bool
	}{
		{"meta: {}", false, false, true, true},
		{"interfaces: {tools: {feedback: false}}", false, false, false, false},
		{"interfaces: {tools: {feedback: true}}", true, true, true, true},
		{"interfaces: {tools: {executing: {feedback: false}, responding: {feedback: true}}}", false, false, true, true},
		{"interfaces: {tools: {executing: {feedback: false}, responding: {feedback: true}}, repl: {tools: {executing: {feedback: true}, responding: {feedback: false}}}}", true, false, false, true},
		{"interfaces: {tools: {executing: {feedback: false}, responding: {feedback: true}}, eval: {tools: {executing: {feedback: true}, responding: {feedback: false}}}}", false, true, true, false},
	} {
		c := parse(t, tt.src)
		got := []bool{c.Feedback(REPL, Executing), c.Feedback(Eval, Executing), c.Feedback(REPL, Responding), c.Feedback(Eval, Responding)}
		want := []bool{tt.replExec, tt.evalExec, tt.replRe, tt.evalRe}
		if !cmp.Equal(got, want) {
			t.Errorf("%s: %v, want %v", tt.src, got, want)
		}
	}
}

func TestEnvSubstitution(t *testing.T) {
	t.Setenv("X", "1")
	t.Setenv("NB_TEST_EMPTY", "")
	os.Unsetenv("NB_TEST_UNSET")
	c := parse(t, "a: ENV/X\nb: [ENV-X, xENV/X]\nENV/K: 1\nd: ENVIRONMENT is hostile\ne: ENV/NB_TEST_UNSET\nf: ENV\ng: ENV/NB_TEST_EMPTY\n")
	want := map[string]any{"a": "1", "b": []any{"1", "xENV/X"}, "ENV/K": int64(1), "d": "ENVIRONMENT is hostile", "e": nil, "f": "ENV", "g": ""}
	if diff := cmp.Diff(want, c.Data); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if v, ok := c.MissingFor("e"); !ok || v != "NB_TEST_UNSET" {
		t.Errorf("missing: %v", c.Missing)
	}
	if c.RawString("a") != "ENV/X" {
		t.Error("raw value lost")
	}
}

func TestCandidates(t *testing.T) {
	got := Candidates("assistant", Env{CartridgesPath: "/a:/b", Home: "/h"})
	want := strings.Fields(`assistant assistant.yml assistant.yaml assistant.markdown assistant.mdown assistant.mkdn assistant.md
/a/assistant /a/assistant.yml /a/assistant.yaml /a/assistant.markdown /a/assistant.mdown /a/assistant.mkdn /a/assistant.md
/b/assistant /b/assistant.yml /b/assistant.yaml /b/assistant.markdown /b/assistant.mdown /b/assistant.mkdn /b/assistant.md
/h/.local/share/nano-bots/cartridges/assistant /h/.local/share/nano-bots/cartridges/assistant.yml /h/.local/share/nano-bots/cartridges/assistant.yaml
/h/.local/share/nano-bots/cartridges/assistant.markdown /h/.local/share/nano-bots/cartridges/assistant.mdown /h/.local/share/nano-bots/cartridges/assistant.mkdn
/h/.local/share/nano-bots/cartridges/assistant.md`)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	// The reference stripped one more extension in every directory; nb strips once.
	got = Candidates("my.bot.yml", Env{CartridgesPath: "/a:/b", Home: "/h", DataHome: "/xdg"})
	for _, p := range []string{"/a/my.bot.yml", "/b/my.bot.yml", "/b/my.bot.yaml", "/xdg/nano-bots/cartridges/my.bot.yml"} {
		if !contains(got, p) {
			t.Errorf("%s not tried: %v", p, got)
		}
	}
	if contains(got, "/b/my.yml") {
		t.Error("extension stripped twice")
	}
	// The legacy variable comes after the new one.
	dirs := Env{CartridgesPath: "/p", CartridgesDirectory: "/d/", Home: "/h"}.Directories()
	if diff := cmp.Diff([]string{"/p", "/d", "/h/.local/share/nano-bots/cartridges"}, dirs); diff != "" {
		t.Error(diff)
	}
}

func TestErrors(t *testing.T) {
	for _, tt := range []struct{ src, want string }{
		{"meta:\n  name: x\n   bad: indent\n", "test.yml:2:9: mapping value is not allowed in this context\n"},
		{"provider:\n  id: acme\n", "test.yml:2: provider.id: unsupported provider \"acme\""},
		{"- a\n- b\n", "test.yml:1: a cartridge must be a YAML mapping"},
		{"", "test.yml: the file is empty"},
		{"tools: {tools: null}\n", "test.yml:1: tools: must be a list of tools"},
		{"tools:\n  - name: a\n    lua: return 1\n    fennel: 1\n", "test.yml:2: tools[0] (a): conflicting tools"},
		{"tools:\n  - name: a\n    description: b\n", "test.yml:2: tools[0] (a): missing source code"},
		{"interfaces:\n  output:\n    stream: maybe\n", "test.yml:3: interfaces.output.stream: must be true or false, not text"},
		{"interfaces:\n  repl:\n    prompt:\n      - text: x\n        color: mauve\n", "test.yml:5: interfaces.repl.prompt[0].color: unknown colour \"mauve\""},
		{"behaviors:\n  interaction:\n    instruction: [a, b]\n", "test.yml:3: behaviors.interaction.instruction: must be text, not a list"},
		{"behaviors: 1\nbehaviors: 2\n", "test.yml:2:1: mapping key \"behaviors\" already defined"},
	} {
		_, err := Parse([]byte(tt.src), "test.yml", FormatYAML, os.LookupEnv)
		if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
			t.Errorf("%q:\n got %v\nwant prefix %q", tt.src, err, tt.want)
		}
	}
}

func TestWarnings(t *testing.T) {
	c := parse(t, "meta: {}\nfoo: 1\nmiscellaneous: {a: 1}\n")
	if len(c.Warnings) != 1 || !strings.Contains(c.Warnings[0], `test.yml:2: unknown key "foo"`) {
		t.Errorf("%q", c.Warnings)
	}
}

func TestDefaultCartridge(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "k")
	c := Default(os.LookupEnv)
	if c.Provider().ID != "openai" || c.String("provider", "settings", "model") != "gpt-4o" || c.Meta().Name != "Unknown" {
		t.Errorf("%+v", c.Data)
	}
}

func TestAdapters(t *testing.T) {
	c := parse(t, "interfaces:\n  input:\n    adapter:\n      fennel: (.. a)\n  repl:\n    input:\n      adapter:\n        lua: |\n          return content\n")
	if _, err := c.Adapter(REPL, "input"); err == nil || !strings.Contains(err.Error(), "conflicting adapters") {
		t.Errorf("repl: %v", err)
	}
	src, err := c.Adapter(Eval, "input")
	if err != nil || src == nil || src.Lang != "fennel" {
		t.Errorf("eval: %+v %v", src, err)
	}
	c = parse(t, "interfaces:\n  eval:\n    output:\n      adapter:\n        lua: |\n          return content\n")
	src, _ = c.Adapter(Eval, "output")
	if src == nil || src.Line != 6 {
		t.Errorf("line of the code: %+v", src)
	}
}

func TestYesesCaseInsensitive(t *testing.T) {
	c := parse(t, "interfaces:\n  tools:\n    confirming:\n      yeses: ['Y', 'Sim']\n  repl:\n    tools:\n      confirming:\n        yeses: [ok]\n")
	if diff := cmp.Diff([]string{"y", "sim"}, c.Yeses(Eval)); diff != "" {
		t.Error(diff)
	}
	if diff := cmp.Diff([]string{"ok"}, c.Yeses(REPL)); diff != "" {
		t.Error(diff)
	}
	if diff := cmp.Diff([]string{"y", "yes"}, parse(t, "meta: {}").Yeses(REPL)); diff != "" {
		t.Error(diff)
	}
}

func TestEmptyToolSource(t *testing.T) {
	_, err := Parse([]byte("tools:\n  - name: a\n    lua: ''\n"), "test.yml", FormatYAML, os.LookupEnv)
	if err == nil || !strings.Contains(err.Error(), "missing source code") {
		t.Fatalf("got %v", err)
	}
}

func TestAliasesRefused(t *testing.T) {
	for _, src := range []string{"a: &x 1\nb: *x\n", "a: &x [1, 2]\n", "provider:\n  id: openai\n  settings: *s\n"} {
		_, err := Parse([]byte(src), "test.yml", FormatYAML, os.LookupEnv)
		if err == nil || !strings.Contains(err.Error(), "anchors and aliases") {
			t.Errorf("%q: %v", src, err)
		}
	}
}

func TestPositiveSettings(t *testing.T) {
	for src, want := range map[string]string{
		"safety: {tools: {rounds: 0}}":  "safety.tools.rounds: must be a whole number above 0, not 0",
		"safety: {tools: {rounds: -1}}": "safety.tools.rounds: must be a whole number above 0, not -1",
		"state: {budget: '5'}":          "state.budget: must be a whole number above 0, not 5",
		"state: {budget: 1.5}":          "state.budget: must be a whole number above 0, not 1.5",
		"safety: {tokens: 0}":           "safety.tokens: must be a whole number above 0, not 0",
		"safety: {loops: 1}":            "safety.loops: must be the loop detector's window, a whole number of tool calls from 2 to 1000, not 1",
		"safety: {loops: ten}":          "safety.loops: must be the loop detector's window",
	} {
		_, err := Parse([]byte(src+"\n"), "test.yml", FormatYAML, os.LookupEnv)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v", src, err)
		}
	}
	if c, err := Parse([]byte("safety: {tools: {rounds: 3}, tokens: 500000, loops: 6}\nstate: {budget: 4000}\n"), "test.yml", FormatYAML, os.LookupEnv); err != nil || len(c.Warnings) > 0 {
		t.Error(err, c.Warnings)
	}
	if _, err := Parse([]byte("meta: {name: x}\nsafety:\n  loops: 0\n"), "test.yml", FormatYAML, os.LookupEnv); err == nil || !strings.HasPrefix(err.Error(), "test.yml:3: safety.loops: ") {
		t.Errorf("no file, line and key: %v", err)
	}
}

// TestEnvLookup: ENV references are resolved by the lookup the caller
// passes, never by the process environment, and every reference is
// recorded so a server can refuse a client's cartridge that names any.
func TestEnvLookup(t *testing.T) {
	t.Setenv("NB_TEST_PROCESS_ONLY", "from-process")
	src := "provider:\n  id: openai\n  credentials:\n    access-token: ENV/NB_TEST_PROCESS_ONLY\n    address: ENV/NB_TEST_ADDRESS\n"
	c, err := Parse([]byte(src), "test.yml", FormatYAML, nil)
	if err != nil {
		t.Fatal(err)
	}
	if v := c.String("provider", "credentials", "access-token"); v != "" {
		t.Errorf("a nil lookup read the process environment: %q", v)
	}
	if len(c.EnvRefs) != 2 || len(c.Missing) != 2 {
		t.Errorf("EnvRefs = %v, Missing = %v; want both references in each", c.EnvRefs, c.Missing)
	}
	lookup := func(name string) (string, bool) {
		if name == "NB_TEST_ADDRESS" {
			return "http://127.0.0.1:1", true
		}
		return "", false
	}
	c, err = Parse([]byte(src), "test.yml", FormatYAML, lookup)
	if err != nil {
		t.Fatal(err)
	}
	if v := c.String("provider", "credentials", "address"); v != "http://127.0.0.1:1" {
		t.Errorf("address = %q, want the lookup's value", v)
	}
	if len(c.EnvRefs) != 2 || len(c.Missing) != 1 || c.Missing[0].Var != "NB_TEST_PROCESS_ONLY" {
		t.Errorf("EnvRefs = %v, Missing = %v", c.EnvRefs, c.Missing)
	}
}
