package bot

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nbots/nb/cartridge"
	"github.com/nbots/nb/provider/providertest"
)

// TestProjectContext: a cartridge with file built-ins tells the model,
// first in the system prompt, where it works and what the project's
// AGENTS.md says, before the cartridge's directive; context: false turns
// it off, and a cartridge without built-ins has none unless it asks.
func TestProjectContext(t *testing.T) {
	ws := t.TempDir()
	os.MkdirAll(filepath.Join(ws, ".git"), 0o755)
	os.WriteFile(filepath.Join(ws, ".git", "HEAD"), []byte("ref: refs/heads/main\n"), 0o644)
	os.WriteFile(filepath.Join(ws, "AGENTS.md"), []byte("Run go test before you answer.\n"), 0o644)
	for _, tc := range []struct {
		name, extra string
		want, base  bool
	}{
		{"builtins", "builtins: {files: {workspace: " + ws + "}}\n", true, true},
		{"no base", "builtins: {files: {workspace: " + ws + "}}\ncontext: {base: false, git: false}\n", true, false},
		{"off", "builtins: {files: {workspace: " + ws + "}}\ncontext: false\n", false, false},
		{"no builtins", "", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cap := &providertest.Capture{Brain: providertest.Echo}
			url := fakeOpenAI(t, cap.Think)
			c := cartridgeFor(t, url, tc.extra+"behaviors: {interaction: {directive: You are terse.}}\n")
			b, err := New(context.Background(), c, Host{})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			if _, err := b.Ask(context.Background(), Exchange{Mode: cartridge.Eval}, "hi"); err != nil {
				t.Fatal(err)
			}
			sys := cap.Last().Messages[0].Content
			// nb's base prompt for the family (gpt-4o: apply_patch) comes
			// first, then the environment.
			env := "<environment>\nWorking directory: " + ws + "\nGit repository: yes, root " + ws + ", branch main\n"
			base := strings.HasPrefix(sys, "You are a coding agent run by nb.") && strings.Contains(sys, "`apply_patch`") && strings.Contains(sys, ".\n\n"+env)
			has := strings.HasPrefix(sys, env) || base
			if has != tc.want || base != tc.base || !strings.HasSuffix(sys, "You are terse.") {
				t.Fatalf("system prompt:\n%s", sys)
			}
			if tc.want && (!strings.Contains(sys, "Model: gpt-4o") || !strings.Contains(sys, "Run go test before you answer.") ||
				strings.Index(sys, "Run go test") > strings.Index(sys, "You are terse.")) {
				t.Errorf("system prompt:\n%s", sys)
			}
		})
	}
}
