package atomicfile

import (
	"context"
	"errors"
	"io/fs"
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

func TestMoveNoReplace(t *testing.T) {
	dir := t.TempDir()
	from, to := filepath.Join(dir, "from"), filepath.Join(dir, "to")
	if err := os.WriteFile(from, []byte("jobs"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := MoveNoReplace(from, to); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(to); err != nil || string(b) != "jobs" {
		t.Fatalf("moved: %q, %v", b, err)
	}
	if _, err := os.Stat(from); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the source is still there: %v", err)
	}
	if err := os.WriteFile(from, []byte("other"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := MoveNoReplace(from, to); !errors.Is(err, fs.ErrExist) {
		t.Errorf("moving over an existing file: %v, want fs.ErrExist", err)
	}
	if b, _ := os.ReadFile(to); string(b) != "jobs" {
		t.Errorf("the existing file was replaced: %q", b)
	}
}
