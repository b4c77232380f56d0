package channel

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestMediaQuota: the media folder, every channel's files together,
// stays within its quota: each stored file removes the oldest ones
// (whichever channel stored them), never itself. Before, what strangers
// sent piled up until the disk was full.
func TestMediaQuota(t *testing.T) {
	env := Env{Workspace: t.TempDir(), MediaQuota: 2500}
	tg, err := env.MediaDir("telegram")
	if err != nil {
		t.Fatal(err)
	}
	mail, err := env.MediaDir("email")
	if err != nil {
		t.Fatal(err)
	}
	store := func(dir, name string, age time.Duration) string {
		t.Helper()
		p, err := StoreMedia(strings.NewReader(strings.Repeat("x", 1000)), dir, name, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		if age > 0 {
			at := time.Now().Add(-age)
			os.Chtimes(p, at, at)
		}
		return p
	}
	oldest := store(tg, "a.bin", 3*time.Hour)
	older := store(mail, "b.bin", 2*time.Hour)
	if _, err := os.Stat(oldest); err != nil {
		t.Fatalf("removed within the quota: %v", err)
	}
	newest := store(tg, "c.bin", 0)
	for p, want := range map[string]bool{oldest: false, older: true, newest: true} {
		if _, err := os.Stat(p); (err == nil) != want {
			t.Errorf("%s kept %v, want %v", filepath.Base(p), err == nil, want)
		}
	}
	// A file bigger than the whole quota is kept; everything older goes.
	big, err := StoreMedia(strings.NewReader(strings.Repeat("y", 3000)), mail, "big.bin", 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	left, _ := os.ReadDir(tg)
	if _, err := os.Stat(big); err != nil || len(left) != 0 {
		t.Errorf("big kept: %v; telegram's left: %d", err, len(left))
	}
}
