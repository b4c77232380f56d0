package atomicfile

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
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

// Across file systems (a tmpfs /dev/shm beside the test's folder), the
// move copies: the file arrives whole, the source goes, and an existing
// target is still never replaced.
func TestMoveNoReplaceAcrossFileSystems(t *testing.T) {
	var a, b syscall.Statfs_t
	dir := t.TempDir()
	if syscall.Statfs(dir, &a) != nil || syscall.Statfs("/dev/shm", &b) != nil || a.Fsid == b.Fsid {
		t.Skip("no second file system at /dev/shm")
	}
	src, err := os.MkdirTemp("/dev/shm", "atomicfile-")
	if err != nil {
		t.Skip(err)
	}
	t.Cleanup(func() { os.RemoveAll(src) })
	from, to := filepath.Join(src, "from"), filepath.Join(dir, "to")
	if err := os.WriteFile(from, []byte("sessions"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(from, filepath.Join(dir, "probe")); err == nil {
		t.Skip("/dev/shm links into the test's folder: one file system")
	}
	if err := MoveNoReplace(from, to); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(to); err != nil || string(b) != "sessions" {
		t.Fatalf("moved: %q, %v", b, err)
	}
	if _, err := os.Stat(from); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the source is still there: %v", err)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "to*")); len(left) != 1 {
		t.Errorf("files beside the target: %v", left)
	}
	if err := os.WriteFile(from, []byte("other"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := MoveNoReplace(from, to); !errors.Is(err, fs.ErrExist) {
		t.Errorf("moving over an existing file: %v, want fs.ErrExist", err)
	}
	if b, _ := os.ReadFile(to); string(b) != "sessions" {
		t.Errorf("the existing file was replaced: %q", b)
	}
}
