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
//
// How a run went (lastStatus, lastError) is not written into jobs.json
// at once: rewriting every job for each run made 100,000 jobs run at
// half a job a second. It is appended to cron/runs.jsonl, which Load
// applies over jobs.json and the next Edit folds into it (the scheduler
// edits at each tick that finds jobs due), so jobs.json stays nanobot's
// file, a tick behind at most on how the last runs went.
type Store struct {
	// Path is the jobs.json file (<workspace>/cron/jobs.json).
	Path string
	// MaxJobs bounds the jobs Add accepts (0: DefaultMaxJobs).
	MaxJobs int
	// Legacy is the jobs file of nanobot up to v0.1.4.post5, beside its
	// configuration (~/.nanobot/cron/jobs.json); "" when there is none
	// to look for. While Path does not exist, the first Load or Edit
	// moves Legacy there, as nanobot from v0.1.4.post6 on does at its
	// start; a Path that exists is never replaced, and none is created
	// over a Legacy file that could not be moved.
	Legacy string
	// Log receives the line that says the file was moved; nil drops it.
	Log func(msg string)
}

// DefaultMaxJobs is how many jobs a store holds at most when MaxJobs is
// 0 (gateway.limits.cronJobs).
const DefaultMaxJobs = 1000

// TooManyJobs is Add's refusal past the store's MaxJobs.
type TooManyJobs struct {
	Max int
}

func (e *TooManyJobs) Error() string {
	return fmt.Sprintf("there are already %d cron jobs, the most this workspace may have (gateway.limits.cronJobs): remove some first (nb gateway cron remove ID, or the cron tool's remove)", e.Max)
}

func (s *Store) maxJobs() int {
	if s.MaxJobs <= 0 {
		return DefaultMaxJobs
	}
	return s.MaxJobs
}

// Add saves a new job, refused with *TooManyJobs when the store already
// holds MaxJobs.
func (s *Store) Add(ctx context.Context, j Job) error {
	return s.Edit(ctx, func(f *File) error {
		if len(f.Jobs) >= s.maxJobs() {
			return &TooManyJobs{Max: s.maxJobs()}
		}
		f.Jobs = append(f.Jobs, j)
		return nil
	})
}

// NewStore is the store of a workspace: <workspace>/cron/jobs.json.
func NewStore(workspace string) *Store {
	return &Store{Path: filepath.Join(workspace, "cron", "jobs.json")}
}

func (s *Store) lockPath() string {
	return filepath.Join(filepath.Dir(s.Path), ".jobs.json.lock")
}

func (s *Store) runsPath() string {
	return filepath.Join(filepath.Dir(s.Path), "runs.jsonl")
}

// Load reads the jobs, with how their runs went since jobs.json was last
// written; a missing file is no jobs.
func (s *Store) Load() (*File, error) {
	if err := s.adoptLegacy(); err != nil {
		return nil, err
	}
	data, err := os.ReadFile(s.Path)
	if errors.Is(err, fs.ErrNotExist) {
		data, err = nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read cron jobs: %w", err)
	}
	f, err := decode(s.Path, data)
	if err != nil {
		return nil, err
	}
	return f, s.applyRuns(f)
}

// runRecord is one line of runs.jsonl: how a run of job ID went.
type runRecord struct {
	ID     string  `json:"id"`
	Status string  `json:"status"`
	Error  *string `json:"error"`
}

// applyRuns sets the run results of runs.jsonl on f's jobs, in the order
// they were recorded. A line cut short by a crash is skipped.
func (s *Store) applyRuns(f *File) error {
	data, err := os.ReadFile(s.runsPath())
	if errors.Is(err, fs.ErrNotExist) || len(data) == 0 {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read cron runs: %w", err)
	}
	index := make(map[string]int, len(f.Jobs))
	for i := range f.Jobs {
		index[f.Jobs[i].ID] = i
	}
	for line := range bytes.SplitSeq(data, []byte("\n")) {
		var r runRecord
		if len(line) == 0 || json.Unmarshal(line, &r) != nil {
			continue
		}
		if i, ok := index[r.ID]; ok {
			f.Jobs[i].State.LastStatus = ptr(r.Status)
			f.Jobs[i].State.LastError = r.Error
		}
	}
	return nil
}

// RecordRun records how a run of job id went (status "ok" or "error",
// and the error's text) by appending one line to runs.jsonl, under the
// store's lock: jobs.json is not rewritten.
func (s *Store) RecordRun(ctx context.Context, id, status string, msg *string) error {
	line, err := json.Marshal(runRecord{ID: id, Status: status, Error: msg})
	if err != nil {
		return fmt.Errorf("cron runs: %w", err)
	}
	unlock, err := atomicfile.Lock(ctx, s.lockPath())
	if err != nil {
		return err
	}
	defer unlock()
	f, err := os.OpenFile(s.runsPath(), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("cron runs: %w", err)
	}
	_, err = f.Write(append(line, '\n'))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("cron runs: %w", err)
	}
	return nil
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
	if err := s.save(f); err != nil {
		return err
	}
	// The runs are in jobs.json now (applied by Load): the log starts
	// again. Left behind by a crash, it is applied again, to the same
	// effect.
	if err := os.Remove(s.runsPath()); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("cron runs: %w", err)
	}
	return nil
}

func (s *Store) save(f *File) error {
	data, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return fmt.Errorf("cron store: %w", err)
	}
	return atomicfile.WriteFile(s.Path, append(data, '\n'), 0o600)
}

// adoptLegacy moves the Legacy file to Path when Path does not exist
// (nanobot's _migrate_cron_store). A process that finds it moved by
// another meanwhile has nothing to do.
func (s *Store) adoptLegacy() error {
	if s.Legacy == "" || s.Legacy == s.Path {
		return nil
	}
	if _, err := os.Lstat(s.Path); !errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	fi, err := os.Stat(s.Legacy)
	if err != nil || !fi.Mode().IsRegular() {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(s.Path), 0o700); err != nil {
		return fmt.Errorf("cron store: %w", err)
	}
	if err := atomicfile.MoveNoReplace(s.Legacy, s.Path); err != nil {
		if _, serr := os.Lstat(s.Path); serr == nil {
			return nil // moved by another process
		}
		return fmt.Errorf("cron: move nanobot's jobs file %s to %s: %w", s.Legacy, s.Path, err)
	}
	if s.Log != nil {
		s.Log(fmt.Sprintf("cron: moved nanobot's jobs file %s to %s, where nanobot from v0.1.4.post6 on and nb keep it", s.Legacy, s.Path))
	}
	return nil
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
