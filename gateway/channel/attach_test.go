package channel

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestAttachments(t *testing.T) {
	ws := t.TempDir()
	outside := t.TempDir()
	os.WriteFile(filepath.Join(ws, "report.pdf"), []byte("%PDF-1.4"), 0o600)
	os.WriteFile(filepath.Join(ws, "big.bin"), make([]byte, 101), 0o600)
	os.WriteFile(filepath.Join(outside, "secret.txt"), []byte("key"), 0o600)
	os.Symlink(filepath.Join(outside, "secret.txt"), filepath.Join(ws, "link.txt"))
	os.Mkdir(filepath.Join(ws, "dir"), 0o700)
	env := Env{Workspace: ws}
	files, notes := env.Attachments([]string{
		filepath.Join(ws, "report.pdf"), "report.pdf", filepath.Join(outside, "secret.txt"),
		"link.txt", "../" + filepath.Base(outside) + "/secret.txt", "big.bin", "dir", "missing.png",
	}, 100)
	if len(files) != 2 || files[0].Name != "report.pdf" || files[0].Type != "application/pdf" || string(files[1].Data) != "%PDF-1.4" {
		t.Errorf("files %+v", files)
	}
	for _, want := range []string{
		"(secret.txt not attached: outside the workspace)", "(link.txt not attached: outside the workspace)",
		"(big.bin not attached: 101 bytes, over the platform's 100)", "(dir not attached: not a regular file)",
		"(missing.png not attached: no such file)",
	} {
		if !strings.Contains(notes, want) {
			t.Errorf("notes lack %q:\n%s", want, notes)
		}
	}
	if strings.Count(notes, "secret.txt not attached") != 2 {
		t.Errorf("the relative escape is not refused:\n%s", notes)
	}
}
