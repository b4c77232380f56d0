package atomicfile

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestWriteFileAndLock(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f.json")
	if err := WriteFile(p, []byte("one"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(p, []byte("two"), 0o640); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(p)
	fi, _ := os.Stat(p)
	if string(b) != "two" || fi.Mode().Perm() != 0o640 {
		t.Errorf("content %q mode %v", b, fi.Mode())
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("temporary files left: %v", entries)
	}
	if err := WriteFile(filepath.Join(dir, "missing", "f"), nil, 0o600); err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("into a missing folder: %v", err)
	}

	lock := filepath.Join(dir, ".lock")
	unlock, err := Lock(context.Background(), lock)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := TryLock(lock); !errors.Is(err, ErrLocked) {
		t.Errorf("TryLock while held: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	if _, err := Lock(ctx, lock); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Lock while held: %v", err)
	}
	unlock()
	u2, err := TryLock(lock)
	if err != nil {
		t.Fatalf("after unlock: %v", err)
	}
	u2()
}
