package cartridge

import (
	"os"
	"strings"
	"testing"
)

// FuzzParseYAML: no input makes the YAML cartridge parser, the validation
// or the defaults cascade panic; an error always names the file.
func FuzzParseYAML(f *testing.F) {
	for _, seed := range []string{
		"meta: {name: x}\nprovider: {id: openai}\n",
		"interfaces:\n  repl:\n    prompt: [{text: a, color: red}]\n  output: {stream: false, prefix: null}\n",
		"tools:\n  - name: t\n    lua: return 1\n    parameters: {type: object}\n",
		"- a\n- b\n",
		"a: &x 1\nb: *x\n",
		"0: 1\ntrue: 2\n",
		"provider: {id: [1]}\n",
		"robopages: [{path: p, filter: f}, x]\n",
		"behaviors: {interaction: {instruction: [a]}}\n",
		"state: {budget: 10, path: ~/x}\n",
		// The files of the reports: nested brackets (115 s and 14.7 GB at
		// 100,000 levels before yamlguard), a byte-order mark, binary data,
		// misspelt keys, an address that is not a URL.
		"misc: " + strings.Repeat("[", 100000) + strings.Repeat("]", 100000) + "\n",
		"misc: " + strings.Repeat("{a: [", 60) + "\n",
		strings.Repeat("- ", 200) + "a\n",
		"\ufeffmeta:\n  name: x\n",
		"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR",
		"meta: {name: Ol\xe1}\n",
		"behaviors:\n  interaction:\n    directiv: x\nprovider:\n  setings: {}\ntools:\n  - name: t\n    descripton: d\n    lua: x\n",
		"provider:\n  id: openai\n  credentials:\n    address: not a url\n",
		"a: |\n  [[[[\n  \"\nb: 'x''[['\n",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, src string) {
		c, err := Parse([]byte(src), "fuzz.yml", FormatYAML, os.LookupEnv)
		if err != nil {
			if e, ok := err.(*Error); !ok || e.File != "fuzz.yml" {
				t.Fatalf("error without the file: %#v", err)
			}
			if strings.ContainsRune(err.Error(), 0) || strings.ContainsRune(err.Error(), 0x1b) {
				t.Fatalf("the error holds control characters: %q", err)
			}
			return
		}
		for _, w := range c.Warnings {
			if !strings.HasPrefix(w, "fuzz.yml:") {
				t.Fatalf("warning without the file: %q", w)
			}
		}
		for _, mode := range []Mode{REPL, Eval} {
			c.Affix(mode, "input", "prefix")
			c.Affix(mode, "output", "suffix")
			c.Stream(mode)
			c.OutputColor(mode)
			c.Adapter(mode, "input")
			c.Adapter(mode, "output")
			for _, a := range []ToolAction{Confirming, Executing, Responding} {
				c.Feedback(mode, a)
				c.FeedbackAdapter(mode, a)
				c.ToolSetting(mode, a, "prefix")
			}
			c.Yeses(mode)
		}
		c.Prompt()
		c.Tools()
		c.Robopages()
		c.Meta()
		c.Provider()
		c.RequireProvider()
		if _, err := c.Marshal(); err != nil {
			t.Fatalf("a parsed cartridge does not print: %v", err)
		}
	})
}
