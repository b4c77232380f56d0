package script_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/nbots/nb/cartridge"
	"github.com/nbots/nb/script"
)

// Errors in the code of a cartridge name the line of the cartridge file
// where the error is, in YAML and in Markdown cartridges, at load time
// (Check, compile errors) and when the code runs (Call).

// lineOf returns the 1-based line of the first line of text containing
// marker.
func lineOf(t *testing.T, text, marker string) int {
	t.Helper()
	for i, l := range strings.Split(text, "\n") {
		if strings.Contains(l, marker) {
			return i + 1
		}
	}
	t.Fatalf("no %q in the cartridge", marker)
	return 0
}

// sources returns the cartridge's tools and output adapter by name.
func sources(t *testing.T, c *cartridge.Cartridge) map[string]script.Source {
	t.Helper()
	out := map[string]script.Source{}
	for _, d := range c.Tools() {
		s := d.Source
		out[d.Spec.Name] = script.Source{Lang: script.Lang(s.Lang), Code: s.Code, File: s.File, Line: s.Line}
	}
	if a, err := c.Adapter(cartridge.Eval, "output"); err == nil && a != nil {
		out["output adapter"] = script.Source{Lang: script.Lang(a.Lang), Code: a.Code, File: a.File, Line: a.Line}
	}
	return out
}

const padding = "# ...\n"

// yamlCartridge has its code far from the top of the file.
var yamlCartridge = "meta:\n  name: Lines\n" + strings.Repeat(padding, 30) + `provider:
  id: openai
interfaces:
  output:
    adapter:
      fennel: |
        (let [s content]
          (.. s
              (error "adapter error")))
tools:
  - name: lua-runtime
    description: d
    lua: |
      local x = parameters.x

      return x.missing.field -- lua runtime
  - name: lua-compile
    description: d
    lua: |
      local x = 1
      local y = = 2 -- lua compile
      return y
  - name: lua-eof
    description: d
    lua: |
      if parameters then
        return 1 -- lua eof
  - name: lua-inline
    description: d
    lua: return nil + 1 -- lua inline
  - name: fennel-runtime
    description: d
    fennel: |
      (local x 1)

      (error "fennel runtime")
  - name: fennel-compile
    description: d
    fennel: |
      (let [a 1]
        (+ a (undefined-macro-call)))
      (fn [] (local) 1) ; fennel compile
  - name: fennel-nested
    description: d
    fennel: |
      (let [a 1]
        (let [b 2]
          (+ a b (. nil :field)))) ; fennel nested
`

// markdownCartridge has blocks after prose, one right after a
// paragraph line (which the reference's pre-pass separates), and code in
// a yaml block too.
var markdownCartridge = "# Lines\n\nSome prose.\n\n```yaml\nprovider:\n  id: openai\n```\n" +
	strings.Repeat("More prose.\n\n", 30) + "```yaml\n" + `tools:
  - name: md-inline
    description: d
    lua: |
      local a = 1
      return a + nil -- md inline
` + "```\n\nText between.\n\n```yaml\ntools:\n  - name: md-lua\n    description: d\n```\n\n" +
	"```lua\nlocal a = 1\n\nreturn a.b.c -- md lua\n```\n\n" +
	"```yaml\ntools:\n  - name: md-fennel\n    description: d\n```\nThe code follows at once:\n```fennel\n(let [a 1]\n  (error \"md fennel\"))\n```\n\n" +
	"```yaml\ntools:\n  - name: md-compile\n    description: d\n```\n\n```lua\nlocal ok = 1\nlocal bad = = 2 -- md compile\n```\n"

func TestErrorLines(t *testing.T) {
	tests := []struct {
		file, text string
		format     cartridge.Format
		tool       string
		marker     string // on the line the error must name
		compile    bool   // a compile error (Check), else a run-time error
	}{
		{"fen.yml", yamlCartridge, cartridge.FormatYAML, "lua-runtime", "-- lua runtime", false},
		{"fen.yml", yamlCartridge, cartridge.FormatYAML, "lua-compile", "-- lua compile", true},
		{"fen.yml", yamlCartridge, cartridge.FormatYAML, "lua-eof", "-- lua eof", true},
		{"fen.yml", yamlCartridge, cartridge.FormatYAML, "lua-inline", "-- lua inline", false},
		{"fen.yml", yamlCartridge, cartridge.FormatYAML, "fennel-runtime", `(error "fennel runtime")`, false},
		{"fen.yml", yamlCartridge, cartridge.FormatYAML, "fennel-compile", "; fennel compile", true},
		{"fen.yml", yamlCartridge, cartridge.FormatYAML, "fennel-nested", "(+ a b (. nil :field))", false},
		{"fen.yml", yamlCartridge, cartridge.FormatYAML, "output adapter", "(.. s", false},
		{"tools.md", markdownCartridge, cartridge.FormatMarkdown, "md-inline", "-- md inline", false},
		{"tools.md", markdownCartridge, cartridge.FormatMarkdown, "md-lua", "-- md lua", false},
		{"tools.md", markdownCartridge, cartridge.FormatMarkdown, "md-fennel", `(error "md fennel")`, false},
		{"tools.md", markdownCartridge, cartridge.FormatMarkdown, "md-compile", "-- md compile", true},
		// Windows line ends count the same.
		{"crlf.md", strings.ReplaceAll(markdownCartridge, "\n", "\r\n"), cartridge.FormatMarkdown, "md-lua", "-- md lua", false},
	}
	for _, tt := range tests {
		t.Run(tt.file+"/"+tt.tool, func(t *testing.T) {
			c, err := cartridge.Parse([]byte(tt.text), tt.file, tt.format, nil)
			if err != nil {
				t.Fatal(err)
			}
			src, ok := sources(t, c)[tt.tool]
			if !ok {
				t.Fatalf("no %s in the cartridge", tt.tool)
			}
			want := fmt.Sprintf("%s:%d:", tt.file, lineOf(t, strings.ReplaceAll(tt.text, "\r\n", "\n"), tt.marker))
			r := script.New(script.Options{Sandboxed: true})
			names := []string{"parameters"}
			if tt.tool == "output adapter" {
				names = []string{"content"}
			}
			err = r.Check(src, names...)
			if tt.compile {
				var ce *script.CompileError
				if !errors.As(err, &ce) || !strings.HasPrefix(err.Error(), want) {
					t.Fatalf("Check: %v; want a compile error at %s", err, want)
				}
				return
			}
			if err != nil {
				t.Fatalf("Check: %v", err)
			}
			params := make([]script.Param, len(names))
			for i, n := range names {
				params[i] = script.Param{Name: n, Value: map[string]any{"x": map[string]any{}}}
			}
			if names[0] == "content" {
				params[0].Value = "text"
			}
			_, err = r.Call(context.Background(), src, params...)
			var re *script.RuntimeError
			if !errors.As(err, &re) || !strings.HasPrefix(err.Error(), want) {
				t.Errorf("Call: %v; want a run-time error at %s", err, want)
			}
		})
	}
}

// TestCheckCaches: Check compiles once; the calls use what it compiled,
// and a compile error is the same at load and at call time.
func TestCheckCaches(t *testing.T) {
	r := script.New(script.Options{Sandboxed: true})
	good := script.Source{Lang: script.Fennel, Code: `(.. "<" content ">")`, File: "bot.yml", Line: 3}
	if err := r.Check(good, "content"); err != nil {
		t.Fatal(err)
	}
	if v, err := r.Call(context.Background(), good, script.Param{Name: "content", Value: "x"}); err != nil || v != "<x>" {
		t.Fatalf("%v, %v", v, err)
	}
	bad := script.Source{Lang: script.Lua, Code: "return 1 +", File: "bot.yml", Line: 7}
	checkErr := r.Check(bad, "content")
	_, callErr := r.Call(context.Background(), bad, script.Param{Name: "content", Value: "x"})
	if checkErr == nil || callErr == nil || checkErr.Error() != callErr.Error() || !strings.HasPrefix(checkErr.Error(), "bot.yml:7: Lua compile error") {
		t.Errorf("Check: %v; Call: %v", checkErr, callErr)
	}
	// Clojure is read by Babashka when it runs.
	if err := r.Check(script.Source{Lang: script.Clojure, Code: "(+ 1"}); err != nil {
		t.Errorf("Clojure: %v", err)
	}
}
