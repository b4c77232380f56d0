package bot

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/nbots/nb/cartridge"
	_ "github.com/nbots/nb/provider/anthropic"
	"github.com/nbots/nb/provider/anthropic/anthropictest"
	"github.com/nbots/nb/provider/google/googletest"
	"github.com/nbots/nb/provider/openai/openaitest"
	"github.com/nbots/nb/provider/providertest"
)

// TestCodingAgentFamilies runs the example coding agent against a
// scripted fake of each model family's own API, and each fixes the bug
// with its family's editing tool: apply_patch for OpenAI's models,
// edit_file with old_string for Claude, replace for Gemini.
func TestCodingAgentFamilies(t *testing.T) {
	const fixed = "return sum / float64(len(xs)), nil"
	patch := "*** Begin Patch\n*** Update File: stats.go\n@@ func Mean(xs []float64) (float64, error) {\n-\treturn sum / float64(len(xs)-1), nil\n+\t" + fixed + "\n*** End Patch\n"
	for _, fam := range []struct {
		name, provider, edit string
		args                 map[string]any
	}{
		{"openai", "id: openai\n  credentials: {address: URL, access-token: k}\n  settings: {model: gpt-5.1}", "apply_patch",
			map[string]any{"input": patch}},
		{"anthropic", "id: anthropic\n  credentials: {address: URL, api-key: k}\n  settings: {model: claude-sonnet-4-5}", "edit_file",
			map[string]any{"path": "stats.go", "old_string": "return sum / float64(len(xs)-1), nil", "new_string": fixed}},
		{"gemini", "id: google\n  credentials: {service: generative-language-api, api-key: k, address: URL}\n  options: {model: gemini-2.5-pro}", "replace",
			map[string]any{"path": "stats.go", "old_string": "return sum / float64(len(xs)-1), nil", "new_string": fixed, "expected_replacements": 1}},
	} {
		t.Run(fam.name, func(t *testing.T) {
			dir := t.TempDir()
			copyTree(t, "../examples/coding-agent", filepath.Join(dir, "coding-agent"))
			s := &scripted{replies: []providertest.Reply{
				call("read_file", map[string]any{"path": "stats.go"}),
				call(fam.edit, fam.args),
				text("Fixed: Mean divided by one value too few."),
			}}
			var fake http.Handler
			switch fam.name {
			case "openai":
				fake = openaitest.New(s.brain)
			case "anthropic":
				fake = anthropictest.New(s.brain)
			default:
				fake = googletest.New(s.brain)
			}
			srv := httptest.NewServer(fake)
			defer srv.Close()
			url := srv.URL
			src, _ := os.ReadFile("../examples/coding-agent.yml")
			cart := regexp.MustCompile(`(?s)provider:\n.*?\n\n`).ReplaceAllString(string(src), "provider:\n  "+strings.Replace(fam.provider, "URL", url, 1)+"\n\n")
			cart = strings.Replace(cart, "exec:\n", "exec-off:\n", 1)
			cart = regexp.MustCompile(`(?m)^  exec-off:\n(    .*\n)*`).ReplaceAllString(cart, "")
			os.WriteFile(filepath.Join(dir, "coding-agent.yml"), []byte(cart), 0o644)
			h := Host{Environ: []string{"HOME=" + dir}}
			c, err := h.Load(filepath.Join(dir, "coding-agent.yml"))
			if err != nil {
				t.Fatal(err)
			}
			b, err := New(context.Background(), c, h)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			var tools []string
			x := Exchange{Mode: cartridge.Eval, Confirmer: &recorder{}}
			res, err := b.Ask(context.Background(), x, "The tests fail: fix the bug.")
			if err != nil {
				t.Fatal(err)
			}
			for _, tl := range b.Tools().Tools() {
				tools = append(tools, tl.Spec().Name)
			}
			if !strings.Contains(strings.Join(tools, ","), fam.edit) {
				t.Errorf("tools %v lack %s", tools, fam.edit)
			}
			if !strings.HasPrefix(res.Text, "Fixed:") {
				t.Errorf("answer %q; tool results %q", res.Text, toolResults(s.turns[len(s.turns)-1]))
			}
			got, _ := os.ReadFile(filepath.Join(dir, "coding-agent", "stats.go"))
			if !strings.Contains(string(got), fixed) {
				results, _ := json.Marshal(toolResults(s.turns[len(s.turns)-1]))
				t.Errorf("stats.go not fixed; tool results %s", results)
			}
		})
	}
}
