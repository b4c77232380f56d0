//go:build unix

package files

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A hard link made inside the workspace to a file outside it is the file
// itself: os.Root cannot tell. read_file, edit_file and grep refuse (or
// skip) regular files with more than one link, unless the cartridge
// allows them.
func TestHardLinkOutside(t *testing.T) {
	outside := filepath.Join(t.TempDir(), "secret.txt")
	if err := os.WriteFile(outside, []byte("the server's secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	w := workspace(t, map[string]string{"plain.txt": "plain text\n"})
	if err := os.Link(outside, filepath.Join(w.Dir(), "link.txt")); err != nil {
		t.Skipf("SKIPPED LOUDLY: cannot make a hard link here (%v)", err)
	}
	_, err := run(t, ReadFile(w), map[string]any{"path": "link.txt"})
	if err == nil || err.Error() != "link.txt has 2 hard links: another of its names may be outside the workspace, so the file tools do not read it (the cartridge may allow it with builtins.files.hard-links: true)" {
		t.Errorf("read_file: %v", err)
	}
	if _, err := run(t, EditFile(w), map[string]any{"path": "link.txt", "old_text": "secret", "new_text": "x"}); err == nil || !strings.Contains(err.Error(), "hard links") {
		t.Errorf("edit_file: %v", err)
	}
	out, err := run(t, Grep(w), map[string]any{"pattern": "secret|plain"})
	if err != nil || strings.Contains(out, "secret") || !strings.Contains(out, "plain.txt") {
		t.Errorf("grep: %q %v", out, err)
	}
	if out, err := run(t, ReadFile(w), map[string]any{"path": "plain.txt"}); err != nil || !strings.Contains(out, "plain text") {
		t.Errorf("a file with one link: %q %v", out, err)
	}

	w.AllowHardLinks(true)
	if out, err := run(t, ReadFile(w), map[string]any{"path": "link.txt"}); err != nil || !strings.Contains(out, "the server's secret") {
		t.Errorf("allowed: %q %v", out, err)
	}
}
