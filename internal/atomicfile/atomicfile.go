// Package atomicfile writes files so that a crash (kill -9, power loss)
// leaves the old content or the new one, never a torn mix, and takes the
// advisory file locks by which processes sharing a workspace (the gateway
// and `nb gateway cron`) take turns at a file.
package atomicfile

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// WriteFile writes data to a temporary file beside path, syncs it, renames
// it over path and syncs the directory.
func WriteFile(path string, data []byte, perm fs.FileMode) error {
	return WriteFunc(path, perm, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// WriteFunc is WriteFile for content that write streams (a file too
// large to hold in memory, copied with a change): a failed write leaves
// path as it was.
func WriteFunc(path string, perm fs.FileMode, write func(io.Writer) error) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp := f.Name()
	defer os.Remove(tmp) //nolint:errcheck // gone after a successful rename
	if err := write(f); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Chmod(perm); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	SyncDir(dir)
	return nil
}

// SyncDir syncs a directory so that a rename or a new file in it survives
// a crash; file systems that cannot sync directories are ignored.
func SyncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		d.Sync() //nolint:errcheck // best effort on file systems without directory sync
		d.Close()
	}
}

// ErrLocked is returned by TryLock when another process holds the lock.
var ErrLocked = errors.New("locked by another process")

// Lock takes the exclusive advisory lock of the file at path (created when
// missing), waiting until it is free or ctx ends. The returned function
// releases it. A process that dies releases its locks with it.
func Lock(ctx context.Context, path string) (func(), error) {
	delay := 2 * time.Millisecond
	for {
		unlock, err := TryLock(path)
		if !errors.Is(err, ErrLocked) {
			return unlock, err
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("lock %s: %w", path, ctx.Err())
		case <-t.C:
		}
		delay = min(delay*2, 50*time.Millisecond)
	}
}

// TryLock takes the lock of Lock without waiting: ErrLocked when another
// holder has it.
func TryLock(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		f.Close()
		if err == syscall.EWOULDBLOCK {
			return nil, ErrLocked
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return func() {
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN) //nolint:errcheck // closing releases it anyway
		f.Close()
	}, nil
}

// MoveNoReplace moves the file from to to, failing (fs.ErrExist) when to
// exists: a link then an unlink on one file system, a copy written
// beside to and then linked across file systems, so to is never torn and
// never replaced.
func MoveNoReplace(from, to string) error {
	if err := os.Link(from, to); err == nil {
		return os.Remove(from)
	} else if errors.Is(err, fs.ErrExist) {
		return err
	}
	src, err := os.Open(from)
	if err != nil {
		return err
	}
	tmp := to + ".moving"
	err = WriteFunc(tmp, 0o600, func(w io.Writer) error {
		_, err := io.Copy(w, src)
		return err
	})
	src.Close()
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	if err := os.Link(tmp, to); err != nil {
		return err
	}
	return os.Remove(from)
}
