// Package atomicfile writes whole files so that a crash leaves either the
// old content or the new, never a torn file: a synced temporary file in
// the same folder, renamed over the target, then the folder synced.
package atomicfile

import (
	"os"
	"path/filepath"
)

// WriteFile replaces path with data, atomically, with mode perm.
func WriteFile(path string, data []byte, perm os.FileMode) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp, perm)
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp) //nolint:errcheck // best effort
		return err
	}
	if d, err := os.Open(dir); err == nil {
		d.Sync() //nolint:errcheck // file systems without folder sync
		d.Close()
	}
	return nil
}
