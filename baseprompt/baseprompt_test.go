package baseprompt

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/nbots/nb/builtin"
	"github.com/nbots/nb/builtin/files"
	"github.com/nbots/nb/cartridge"
	"github.com/nbots/nb/tool"
)

// backquoted are the names a prompt gives as tools or arguments.
var backquoted = regexp.MustCompile("`([^`]+)`")

// Every name the base prompt gives (in backquotes) is a tool the agent
// has in its family's shape, or an argument of one of them; the family's
// edit tool is named when it can edit; nothing is said without file or
// exec built-ins. The tools are the ones nb builds for the cartridge.
func TestEveryNamedToolExists(t *testing.T) {
	dir := t.TempDir()
	for _, profile := range []files.Profile{files.ProfileOpenAI, files.ProfileAnthropic, files.ProfileGemini, files.ProfileNanobot} {
		for _, groups := range []string{
			"files: {profile: %s}",
			"files: {profile: %s, write: false}",
			"files: {profile: %s}\n  exec: {sandbox: off}",
			"files: {profile: %s, write: false}\n  exec: {sandbox: off}",
			"exec: {sandbox: off}",
		} {
			src := "meta: {name: t}\nprovider: {id: openai, settings: {model: gpt-4o}}\nbuiltins:\n  " + groups + "\n"
			if strings.Contains(groups, "%s") {
				src = fmt.Sprintf(src, string(profile))
			}
			c, err := cartridge.Parse([]byte(src), "t.yml", cartridge.FormatYAML, os.LookupEnv)
			if err != nil {
				t.Fatal(err)
			}
			tools, st, err := builtin.FromCartridge(c, builtin.Options{CartridgeDir: dir, Environ: []string{"PATH=" + os.Getenv("PATH")}})
			if err != nil {
				t.Fatal(err)
			}
			set := &tool.Set{}
			args := map[string]bool{}
			for _, x := range tools {
				set.Add(x)
				props, _ := x.Spec().Parameters["properties"].(map[string]any)
				for name := range props {
					args[name] = true
				}
			}
			has := func(name string) bool { _, ok := set.Lookup(name); return ok }
			p := st.Profile
			if p == "" {
				p = profile
			}
			text := Text(p, has)
			name := fmt.Sprintf("%s %q", profile, groups)
			if text == "" {
				t.Errorf("%s: no base prompt", name)
				continue
			}
			for _, m := range backquoted.FindAllStringSubmatch(text, -1) {
				if !has(m[1]) && !args[m[1]] {
					t.Errorf("%s: the prompt names %q, which is neither a tool it has (%s) nor an argument of one:\n%s", name, m[1], strings.Join(st.Tools, ", "), text)
				}
			}
			edit := editTool(profile)
			if has(edit) != strings.Contains(text, "`"+edit+"`") {
				t.Errorf("%s: has %s %v, named %v:\n%s", name, edit, has(edit), !has(edit), text)
			}
			if strings.Contains(groups, "exec") != strings.Contains(text, "tests") {
				t.Errorf("%s: running the tests said only with exec:\n%s", name, text)
			}
		}
	}
	if s := Text(files.ProfileOpenAI, func(string) bool { return false }); s != "" {
		t.Errorf("without file or exec tools: %q", s)
	}
}
