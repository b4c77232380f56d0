package files

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nbots/nb/tool"
)

// OpenAnywhere (nanobot's restrictToWorkspace false): relative paths
// start in the workspace, absolute ones, .. and ~ reach the rest of the
// file system; names are shown relative to the workspace inside it,
// absolute outside; a call's policy still hides what it hides.
func TestOpenAnywhere(t *testing.T) {
	base := t.TempDir()
	ws, home, other := filepath.Join(base, "ws"), filepath.Join(base, "home"), filepath.Join(base, "other")
	for _, d := range []string{ws, home, other, filepath.Join(base, "state")} {
		os.MkdirAll(d, 0o755)
	}
	os.WriteFile(filepath.Join(ws, "notes.md"), []byte("in the workspace\n"), 0o644)
	os.WriteFile(filepath.Join(other, "plan.md"), []byte("outside, needle\n"), 0o644)
	os.WriteFile(filepath.Join(home, "todo.md"), []byte("at home\n"), 0o644)
	os.WriteFile(filepath.Join(base, "state", "secret"), []byte("hidden\n"), 0o644)
	w, err := OpenAnywhere(ws, home)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if w.Dir() != ws {
		t.Fatalf("Dir %q", w.Dir())
	}
	read, write, glob, grep := ReadFile(w), WriteFile(w), Glob(w), Grep(w)
	for path, want := range map[string]string{"notes.md": "in the workspace", filepath.Join(other, "plan.md"): "outside", "../other/plan.md": "outside", "~/todo.md": "at home"} {
		if got := mustRun(t, read, map[string]any{"path": path}); !strings.Contains(got, want) {
			t.Errorf("read %s: %q", path, got)
		}
	}
	mustRun(t, write, map[string]any{"path": filepath.Join(other, "new.md"), "content": "written outside"})
	if b, _ := os.ReadFile(filepath.Join(other, "new.md")); string(b) != "written outside" {
		t.Fatalf("not written outside: %q", b)
	}
	if got := mustRun(t, glob, map[string]any{"pattern": "*.md"}); strings.TrimSpace(got) != "notes.md" {
		t.Errorf("glob in the workspace shows %q", got)
	}
	if got := mustRun(t, grep, map[string]any{"pattern": "needle", "path": other}); !strings.Contains(got, filepath.Join(other, "plan.md")+":1:") {
		t.Errorf("grep outside shows %q", got)
	}
	ctx := WithPolicy(context.Background(), &Policy{Hidden: []string{filepath.Join(base, "state")}})
	if _, err := read.Run(ctx, tool.Call{Name: "read_file", Arguments: map[string]any{"path": filepath.Join(base, "state", "secret")}}); err == nil {
		t.Error("the policy's hidden folder was read")
	}
}
