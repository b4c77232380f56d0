package cron

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/nbots/nb/internal/atomicfile"
)

// Store is a cron/jobs.json file shared by the processes of a workspace:
// every change is made under the file's lock and written atomically, so
// the scheduler and `nb gateway cron` never lose each other's edits.
type Store struct {
	// Path is the jobs.json file (<workspace>/cron/jobs.json).
	Path string
}

// NewStore is the store of a workspace: <workspace>/cron/jobs.json.
func NewStore(workspace string) *Store {
	return &Store{Path: filepath.Join(workspace, "cron", "jobs.json")}
}

func (s *Store) lockPath() string {
	return filepath.Join(filepath.Dir(s.Path), ".jobs.json.lock")
}

// Load reads the jobs; a missing file is no jobs.
func (s *Store) Load() (*File, error) {
	data, err := os.ReadFile(s.Path)
	if errors.Is(err, fs.ErrNotExist) {
		return &File{Version: 1, Jobs: []Job{}}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read cron jobs: %w", err)
	}
	return decode(s.Path, data)
}

func decode(path string, data []byte) (*File, error) {
	f := &File{}
	if len(bytes.TrimSpace(data)) == 0 {
		return &File{Version: 1, Jobs: []Job{}}, nil
	}
	if err := json.Unmarshal(data, f); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			line := bytes.Count(data[:min(int(se.Offset), len(data))], []byte("\n")) + 1
			return nil, fmt.Errorf("%s:%d: %v", path, line, se)
		}
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return nil, fmt.Errorf("%s: key %s: %s is not a %s", path, te.Field, te.Value, jsonKind(te.Type.Kind().String()))
		}
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if f.Version == 0 {
		f.Version = 1
	}
	if f.Jobs == nil {
		f.Jobs = []Job{}
	}
	return f, nil
}

// jsonKind names a Go kind the way a JSON author knows it.
func jsonKind(k string) string {
	switch k {
	case "string":
		return "string"
	case "bool":
		return "boolean"
	case "slice", "array":
		return "list"
	case "struct", "map", "ptr":
		return "object"
	}
	return "number"
}

// Edit runs fn on the current jobs under the store's lock and saves what
// it leaves, unless it returns an error.
func (s *Store) Edit(ctx context.Context, fn func(*File) error) error {
	if err := os.MkdirAll(filepath.Dir(s.Path), 0o700); err != nil {
		return fmt.Errorf("cron store: %w", err)
	}
	unlock, err := atomicfile.Lock(ctx, s.lockPath())
	if err != nil {
		return err
	}
	defer unlock()
	f, err := s.Load()
	if err != nil {
		return err
	}
	if err := fn(f); err != nil {
		return err
	}
	return s.save(f)
}

func (s *Store) save(f *File) error {
	data, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return fmt.Errorf("cron store: %w", err)
	}
	return atomicfile.WriteFile(s.Path, append(data, '\n'), 0o600)
}

// Find is the index of the job with id, -1 when there is none.
func (f *File) Find(id string) int {
	for i := range f.Jobs {
		if f.Jobs[i].ID == id {
			return i
		}
	}
	return -1
}
