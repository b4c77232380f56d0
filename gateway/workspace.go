package gateway

import (
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

//go:embed templates
var templates embed.FS

// Layout are the workspace's folders, nanobot's.
var Layout = []string{"sessions", "memory", "skills", "cron"}

// InitWorkspace creates the workspace's folders and the template files
// that are missing (never overwriting one); it returns the files written.
func InitWorkspace(dir string) ([]string, error) {
	for _, d := range Layout {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			return nil, fmt.Errorf("workspace %s: %w", dir, err)
		}
	}
	var written []string
	err := fs.WalkDir(templates, "templates", func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		rel, _ := filepath.Rel("templates", p)
		target := filepath.Join(dir, rel)
		data, err := templates.ReadFile(p)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(target), 0o700); err != nil {
			return err
		}
		f, err := os.OpenFile(target, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, fs.ErrExist) {
			return nil
		}
		if err != nil {
			return err
		}
		_, err = f.Write(data)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			written = append(written, target)
		}
		return err
	})
	if err != nil {
		return written, fmt.Errorf("workspace %s: %w", dir, err)
	}
	return written, nil
}
