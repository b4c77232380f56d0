package cartridge

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestByteOrderMark: a UTF-8 byte-order mark, as some editors write one,
// neither breaks the first key nor loses it (YAML and Markdown).
func TestByteOrderMark(t *testing.T) {
	for _, tt := range []struct {
		name, src string
		format    Format
	}{
		{"bom.yml", "\ufeffmeta:\n  name: Bommy\nprovider:\n  id: openai\n", FormatYAML},
		{"bom-flow.yml", "\ufeff{meta: {name: Bommy}}\n", FormatYAML},
		{"bom.md", "\ufeff```yaml\nmeta:\n  name: Bommy\n```\n", FormatMarkdown},
		{"bom-text.md", "\ufeff# Bommy\n\n```yaml\nmeta:\n  name: Bommy\n```\n", FormatMarkdown},
	} {
		c, err := Parse([]byte(tt.src), tt.name, tt.format, nil)
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		if c.Meta().Name != "Bommy" || len(c.Warnings) > 0 {
			t.Errorf("%s: meta %+v, warnings %q", tt.name, c.Meta(), c.Warnings)
		}
	}
}

// TestUnknownKeys: a typo in a key the specification fixes is reported
// once, with the nearest known key and the line; keys that pass through
// to the provider, and nb's extensions, are not.
func TestUnknownKeys(t *testing.T) {
	src := `meta:
  name: typos
behaviors:
  interaction:
    directiv: You are helpful.
provider:
  id: openai
  setings:
    model: gpt-4o
  settings:
    any_api_parameter: 1
    nested: {whatever: true}
  options: {anything: 1}
  credentials: {address-v2: x}
interfaces:
  eval:
    ouput:
      color: red
  repl:
    prompt:
      - text: '> '
        colour: blue
tools:
  - name: t
    descripton: a tool
    paramters: {type: object}
    lua: return 1
safety:
  tool:
    confirmable: false
  functions:
    limits: {cpu-seconds: 1, memory: 64, timeout: 5}
  tools:
    rounds: 3
state:
  budget: 4000
  pth: /tmp
Provider: {}
mcp:
  files: {command: x, args: [a], env: {A: b}, tools: [t], timeout: 5, url: u, headers: {H: v}}
builtins:
  files: {workspace: .}
agent:
  type: worker
  input: {type: object}
robopages:
  - path: pages
    filter: x
miscellaneous:
  anything: {goes: here}
`
	c, err := Parse([]byte(src), "typos.yml", FormatYAML, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		`typos.yml:5: unknown key "behaviors.interaction.directiv" is ignored: did you mean "directive"?`,
		`typos.yml:8: unknown key "provider.setings" is ignored: did you mean "settings"?`,
		`typos.yml:17: unknown key "interfaces.eval.ouput" is ignored: did you mean "output"?`,
		`typos.yml:22: unknown key "interfaces.repl.prompt[0].colour" is ignored: did you mean "color"?`,
		`typos.yml:25: unknown key "tools[0].descripton" is ignored: did you mean "description"?`,
		`typos.yml:26: unknown key "tools[0].paramters" is ignored: did you mean "parameters"?`,
		`typos.yml:29: unknown key "safety.tool" is ignored: did you mean "tools"?`,
		`typos.yml:37: unknown key "state.pth" is ignored: did you mean "path"?`,
		`typos.yml:38: unknown key "Provider" is ignored: did you mean "provider"?`,
	}
	if diff := cmp.Diff(want, c.Warnings); diff != "" {
		t.Errorf("warnings (-want +got):\n%s", diff)
	}
	if c.Behavior("interaction").Directive != "" {
		t.Error("the misspelt directive was read")
	}

	// Markdown: the lines are the file's.
	md := "# Bot\n\n```yaml\nbehaviors:\n  interaction:\n    directiv: x\n```\n"
	c, err = Parse([]byte(md), "typos.md", FormatMarkdown, nil)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{`typos.md:6: unknown key "behaviors.interaction.directiv" is ignored: did you mean "directive"?`}, c.Warnings); diff != "" {
		t.Errorf("Markdown warnings (-want +got):\n%s", diff)
	}

	// No suggestion when nothing is near.
	c = parse(t, "safety:\n  quux: 1\n")
	if diff := cmp.Diff([]string{`test.yml:2: unknown key "safety.quux" is ignored (known keys here: functions, tools, tokens, loops)`}, c.Warnings); diff != "" {
		t.Error(diff)
	}
}

// TestBinary: a binary file is named as such; its bytes never reach the
// message. Control characters of a text file are escaped in excerpts.
func TestBinary(t *testing.T) {
	png := "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x01\x00"
	for _, format := range []Format{FormatYAML, FormatMarkdown} {
		_, err := Parse([]byte(png), "photo.png", format, nil)
		if err == nil || !strings.HasPrefix(err.Error(), "photo.png:3: this is not a text cartridge") {
			t.Errorf("%v: got %v", format, err)
		}
		if err != nil && strings.ContainsAny(err.Error(), "\x00\x1a\x89") {
			t.Errorf("the message holds the file's bytes: %q", err)
		}
	}
	_, err := Parse([]byte("meta:\n  name: Ol\xe1\n"), "latin1.yml", FormatYAML, nil)
	if err == nil || !strings.HasPrefix(err.Error(), "latin1.yml:2:11: the file is not UTF-8 text (byte 0xE1): save it as UTF-8") {
		t.Errorf("Latin-1: %v", err)
	}
	_, err = Parse([]byte("meta:\n  name: \x1b]0;owned\x07\n   bad: indent\n"), "esc.yml", FormatYAML, nil)
	if err == nil || strings.ContainsAny(err.Error(), "\x1b\x07") {
		t.Errorf("control characters reach the terminal: %q", err)
	}
}

// TestAddress: a provider address that is not an http(s) URL with a host
// is refused when the cartridge loads, with its line and key, not after
// two retries of the first request.
func TestAddress(t *testing.T) {
	cart := func(addr string) string {
		return "provider:\n  id: openai\n  credentials:\n    address: " + addr + "\n"
	}
	for addr, want := range map[string]string{
		`"not a url"`:                `test.yml:4: provider.credentials.address: "not a url" is not an address (it has no scheme)`,
		`localhost:11434`:            `test.yml:4: provider.credentials.address: "localhost:11434" is not an address (it has no scheme)`,
		`ftp://example.com`:          `test.yml:4: provider.credentials.address: "ftp://example.com" is not an address (its scheme is ftp)`,
		`http://`:                    `test.yml:4: provider.credentials.address: "http://" is not an address (it has no host)`,
		`"http://bad host:1"`:        `test.yml:4: provider.credentials.address: "http://bad host:1" is not an address (it is not a URL)`,
		`[1]`:                        `test.yml:4: provider.credentials.address: must be the provider's URL as text, not a list`,
		`http://localhost:1234`:      "",
		`https://api.openai.com/v1/`: "",
		`HTTPS://[::1]:8080`:         "",
		`null`:                       "",
		`"  "`:                       "",
		`ENV/NB_TEST_UNSET_ADDRESS`:  "",
	} {
		_, err := Parse([]byte(cart(addr)), "test.yml", FormatYAML, nil)
		switch {
		case want == "" && err != nil:
			t.Errorf("%s: %v", addr, err)
		case want != "" && (err == nil || !strings.HasPrefix(err.Error(), want)):
			t.Errorf("%s:\n got %v\nwant %s…", addr, err, want)
		}
	}
	env := func(name string) (string, bool) { return "127.0.0.1:11434", name == "OLLAMA_API_ADDRESS" }
	_, err := Parse([]byte(cart("ENV/OLLAMA_API_ADDRESS")), "test.yml", FormatYAML, env)
	want := `test.yml:4: provider.credentials.address: "127.0.0.1:11434" (from the environment variable OLLAMA_API_ADDRESS) is not an address`
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("from ENV:\n got %v\nwant %s…", err, want)
	}
}

// TestCandidatesAbsolute: an absolute path is not looked up again under
// every cartridge folder.
func TestCandidatesAbsolute(t *testing.T) {
	got := Candidates("/tmp/x.yml", Env{CartridgesPath: "/a", Home: "/h"})
	want := []string{"/tmp/x.yml", "/tmp/x.yaml", "/tmp/x.markdown", "/tmp/x.mdown", "/tmp/x.mkdn", "/tmp/x.md"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// TestFindNotRegular: a path given exactly is taken when it is readable,
// even when it is not a regular file; a folder is not.
func TestFindNotRegular(t *testing.T) {
	dir := t.TempDir()
	if _, err := Find(dir, Env{Home: dir}); err == nil {
		t.Error("a folder was taken for a cartridge")
	}
	if _, err := Load(dir, nil); err == nil || !strings.Contains(err.Error(), "this is a folder") {
		t.Errorf("Load of a folder: %v", err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	go func() {
		w.WriteString("meta:\n  name: piped\n") //nolint:errcheck // the test reads it
		w.Close()
	}()
	name := fmt.Sprintf("/dev/fd/%d", r.Fd()) // as the shell's <(…) gives it
	if _, err := os.Stat(name); err != nil {
		t.Skipf("no %s here: %v", name, err)
	}
	path, err := Find(name, Env{Home: dir})
	if err != nil {
		t.Fatal(err)
	}
	c, err := Load(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Meta().Name != "piped" {
		t.Errorf("meta %+v", c.Meta())
	}
}

// A misspelt model (modle) is warned about, with the right name; a model
// left out altogether is not (some servers have a default one).
func TestMisspeltModel(t *testing.T) {
	c, err := Parse([]byte("provider:\n  id: openai\n  settings:\n    modle: gpt-4o\n"), "bot.yml", FormatYAML, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := `bot.yml:4: provider.settings.modle: provider.settings has no model, which openai needs: did you mean "model"?`
	if len(c.Warnings) != 1 || c.Warnings[0] != want {
		t.Errorf("warnings %q, want %q", c.Warnings, want)
	}
	c, err = Parse([]byte("provider:\n  id: openai\n  settings:\n    temperature: 0\n"), "bot.yml", FormatYAML, nil)
	if err != nil || len(c.Warnings) != 0 {
		t.Errorf("no model at all: %q, %v", c.Warnings, err)
	}
}
