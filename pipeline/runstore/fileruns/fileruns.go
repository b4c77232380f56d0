// Package fileruns keeps pipeline runs in folders of one machine (a
// runstore.Store): ROOT/ID/ holds run.json (what the run was created
// with, the graph's text included), checkpoint.json (written atomically:
// a temporary file, fsync, rename), events.jsonl (one event a line) and
// lock, whose advisory lock (flock) is the run's lease: the kernel drops
// it when the process holding it dies, so another process may take the
// run over at once. The folder is also the engine's run folder: its stage
// folders and manifest go beside, and nb pipeline resume reads it.
//
// Answers left for a run (Store.Answer) are files of its answers folder.
// The holder's Run.Answered is told of those given in its own process at
// once, through any Store of that process on the same folder; of those
// another process wrote, it learns by looking in the folder every
// AnswerPoll.
package fileruns

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/nbots/nb/internal/atomicfile"
	"github.com/nbots/nb/internal/wakeup"
	"github.com/nbots/nb/pipeline/runstore"
)

// File names in a run's folder.
const (
	InfoFile       = "run.json"
	CheckpointFile = "checkpoint.json"
	EventsFile     = "events.jsonl"
	LockFile       = "lock"
	holderFile     = "holder"
	// QuestionsFile holds the questions the holder published
	// (Run.SetQuestions); AnswersDir the answers left for it, a file each.
	QuestionsFile = "questions.json"
	AnswersDir    = "answers"
)

// AnswerPoll is how often a held run whose Answered is received looks in
// its answers folder for answers another process left: those given in
// this process wake it at once.
const AnswerPoll = 2 * time.Second

// answered are the runs this process holds, by the absolute path of
// their folder: an answer given through any Store of the process wakes
// the run's Answered.
var answered wakeup.Set

// Store is the runs under one folder.
type Store struct {
	root   string
	holder string
}

var _ runstore.Store = (*Store)(nil)

// Open returns the store of the runs under root, creating it.
func Open(root string) (*Store, error) {
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, fmt.Errorf("pipeline runs folder: %w", err)
	}
	root, err := filepath.Abs(root) // the runs' key in answered
	if err != nil {
		return nil, fmt.Errorf("pipeline runs folder: %w", err)
	}
	host, _ := os.Hostname()
	return &Store{root: root, holder: fmt.Sprintf("%s:%d", host, os.Getpid())}, nil
}

// Dir is the folder of run id.
func (s *Store) Dir(id string) string { return filepath.Join(s.root, id) }

func (s *Store) dir(id string) (string, error) {
	if err := runstore.ValidID(id); err != nil {
		return "", err
	}
	return s.Dir(id), nil
}

// Create implements runstore.Store.
func (s *Store) Create(ctx context.Context, info runstore.Info) (runstore.Run, error) {
	dir, err := s.dir(info.ID)
	if err != nil {
		return nil, err
	}
	if err := os.Mkdir(dir, 0o755); errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("%s: %w", dir, runstore.ErrExists)
	} else if err != nil {
		return nil, fmt.Errorf("create the run folder: %w", err)
	}
	unlock, err := atomicfile.TryLock(filepath.Join(dir, LockFile))
	if err != nil {
		return nil, err
	}
	info.Created = time.Now().UTC()
	data, err := json.Marshal(info)
	if err == nil {
		err = atomicfile.WriteFile(filepath.Join(dir, InfoFile), data, 0o644)
	}
	if err != nil {
		unlock()
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, InfoFile), err)
	}
	return s.held(dir, info, nil, 0, unlock)
}

// Take implements runstore.Store.
func (s *Store) Take(ctx context.Context, id string) (runstore.Run, error) {
	dir, err := s.dir(id)
	if err != nil {
		return nil, err
	}
	info, err := s.readInfo(dir, id)
	if err != nil {
		return nil, err
	}
	unlock, err := atomicfile.TryLock(filepath.Join(dir, LockFile))
	if errors.Is(err, atomicfile.ErrLocked) {
		return nil, fmt.Errorf("run %s: %w", id, runstore.ErrBusy)
	}
	if err != nil {
		return nil, err
	}
	cp, err := s.readCheckpoint(dir, &info)
	if err == nil && info.Done {
		err = fmt.Errorf("run %s: %w", id, runstore.ErrDone)
	}
	var n int64
	if err == nil {
		n, err = countLines(filepath.Join(dir, EventsFile))
	}
	if err != nil {
		unlock()
		return nil, err
	}
	return s.held(dir, info, cp, n, unlock)
}

func (s *Store) held(dir string, info runstore.Info, cp []byte, events int64, unlock func()) (*run, error) {
	f, err := os.OpenFile(filepath.Join(dir, EventsFile), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		unlock()
		return nil, fmt.Errorf("the run's event log: %w", err)
	}
	_ = os.WriteFile(filepath.Join(dir, holderFile), []byte(s.holder), 0o644) // for people; the lock decides
	info.Holder, info.Events = s.holder, events
	r := &run{dir: dir, info: info, cp: cp, events: f, unlock: unlock, lost: make(chan struct{}), stopPoll: make(chan struct{})}
	r.answered, r.unregister = answered.Register(dir)
	return r, nil
}

// Get implements runstore.Store.
func (s *Store) Get(ctx context.Context, id string) (runstore.Info, error) {
	dir, err := s.dir(id)
	if err != nil {
		return runstore.Info{}, err
	}
	info, err := s.readInfo(dir, id)
	if err != nil {
		return info, err
	}
	if _, err := s.readCheckpoint(dir, &info); err != nil {
		return info, err
	}
	if info.Events, err = countLines(filepath.Join(dir, EventsFile)); err != nil {
		return info, err
	}
	if unlock, err := atomicfile.TryLock(filepath.Join(dir, LockFile)); err == nil {
		unlock()
	} else if errors.Is(err, atomicfile.ErrLocked) {
		h, _ := os.ReadFile(filepath.Join(dir, holderFile))
		info.Holder = string(h)
		if info.Holder == "" {
			info.Holder = "?"
		}
	}
	return info, nil
}

func (s *Store) readInfo(dir, id string) (runstore.Info, error) {
	var info runstore.Info
	data, err := os.ReadFile(filepath.Join(dir, InfoFile))
	if errors.Is(err, fs.ErrNotExist) {
		return info, fmt.Errorf("run %s (%s): %w", id, dir, runstore.ErrUnknown)
	}
	if err != nil {
		return info, err
	}
	if err := json.Unmarshal(data, &info); err != nil {
		return info, fmt.Errorf("%s: %w", filepath.Join(dir, InfoFile), err)
	}
	return info, nil
}

// readCheckpoint reads the checkpoint (nil when none) and sets info's
// Node, Done and Status from its keys current_node, done and status.
func (s *Store) readCheckpoint(dir string, info *runstore.Info) ([]byte, error) {
	path := filepath.Join(dir, CheckpointFile)
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var keys struct {
		Node   string `json:"current_node"`
		Done   bool   `json:"done"`
		Status string `json:"status"`
	}
	if err := json.Unmarshal(data, &keys); err != nil {
		return nil, fmt.Errorf("%s: the checkpoint does not parse: %w", path, err)
	}
	info.Node, info.Done, info.Status = keys.Node, keys.Done, keys.Status
	return data, nil
}

// Checkpoint implements runstore.Store.
func (s *Store) Checkpoint(ctx context.Context, id string) ([]byte, error) {
	dir, err := s.dir(id)
	if err != nil {
		return nil, err
	}
	info, err := s.readInfo(dir, id)
	if err != nil {
		return nil, err
	}
	return s.readCheckpoint(dir, &info)
}

// Events implements runstore.Store.
func (s *Store) Events(ctx context.Context, id string, after int64, limit int) ([]runstore.Record, error) {
	dir, err := s.dir(id)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(filepath.Join(dir, EventsFile))
	if errors.Is(err, fs.ErrNotExist) {
		if _, err := s.readInfo(dir, id); err != nil {
			return nil, err
		}
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []runstore.Record
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 64<<20)
	var seq int64
	for sc.Scan() {
		seq++
		if seq <= after {
			continue
		}
		out = append(out, runstore.Record{Seq: seq, Data: bytes.Clone(sc.Bytes())})
		if limit > 0 && len(out) == limit {
			break
		}
	}
	// A last line without its newline is being written: the next read
	// has it whole.
	return out, sc.Err()
}

// countLines counts the events of a log (0 when there is none).
func countLines(path string) (int64, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	return int64(bytes.Count(data, []byte{'\n'})), err
}

// Wait implements runstore.Store: it polls the log's size every 50 ms,
// for a second at most.
func (s *Store) Wait(ctx context.Context, id string, after int64) error {
	dir, err := s.dir(id)
	if err != nil {
		return err
	}
	path := filepath.Join(dir, EventsFile)
	n, err := countLines(path)
	if err != nil || n > after {
		return err
	}
	size := func() int64 {
		st, err := os.Stat(path)
		if err != nil {
			return -1
		}
		return st.Size()
	}
	was := size()
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for range 20 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		if size() != was {
			return nil
		}
	}
	return nil
}

// Orphans implements runstore.Store: the runs not ended whose lock is
// free.
func (s *Store) Orphans(ctx context.Context) ([]string, error) {
	entries, err := os.ReadDir(s.root)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if !e.IsDir() || runstore.ValidID(e.Name()) != nil {
			continue
		}
		dir := filepath.Join(s.root, e.Name())
		info, err := s.readInfo(dir, e.Name())
		if err != nil {
			continue
		}
		if _, err := s.readCheckpoint(dir, &info); err != nil || info.Done {
			continue
		}
		unlock, err := atomicfile.TryLock(filepath.Join(dir, LockFile))
		if err != nil {
			continue
		}
		unlock()
		out = append(out, e.Name())
	}
	sort.Strings(out)
	return out, nil
}

// run is a run whose lock this process holds.
type run struct {
	dir  string
	info runstore.Info
	cp   []byte

	mu       sync.Mutex
	events   *os.File
	unlock   func()
	lost     chan struct{}
	err      error
	released bool

	answered   chan struct{} // registered in answered
	unregister func()
	pollOnce   sync.Once
	stopPoll   chan struct{}
}

func (r *run) Info() runstore.Info   { return r.info }
func (r *run) Checkpoint() []byte    { return r.cp }
func (r *run) Lost() <-chan struct{} { return r.lost }

func (r *run) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

func (r *run) checkLocked() error {
	if r.err != nil {
		return r.err
	}
	if r.released {
		return fmt.Errorf("run %s was released: %w", r.info.ID, runstore.ErrLost)
	}
	return nil
}

// Save implements runstore.Run: the events were written as they came;
// the checkpoint is replaced atomically.
func (r *run) Save(cp runstore.Checkpoint) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.checkLocked(); err != nil {
		return err
	}
	return atomicfile.WriteFile(filepath.Join(r.dir, CheckpointFile), cp.Data, 0o644)
}

// Append implements runstore.Run: each event is a line of events.jsonl,
// written at once (not synced: the checkpoint is what a resume needs).
func (r *run) Append(events ...[]byte) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.checkLocked(); err != nil {
		return err
	}
	var buf bytes.Buffer
	for _, ev := range events {
		if bytes.ContainsAny(ev, "\n\r") {
			ev = bytes.ReplaceAll(bytes.ReplaceAll(ev, []byte("\r"), nil), []byte("\n"), nil)
		}
		buf.Write(ev)
		buf.WriteByte('\n')
	}
	if _, err := r.events.Write(buf.Bytes()); err != nil {
		return fmt.Errorf("%s: %w", filepath.Join(r.dir, EventsFile), err)
	}
	return nil
}

// Release implements runstore.Run.
func (r *run) Release() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.released {
		return nil
	}
	r.released = true
	r.stopAnswered()
	err := r.events.Close()
	r.unlock()
	return err
}

// crash drops the lock as a process that dies does, and marks the run
// lost (a process that died writes nothing more).
func (r *run) crash() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err == nil {
		r.err = runstore.ErrLost
		close(r.lost)
	}
	if !r.released {
		r.released = true
		r.stopAnswered()
		r.events.Close()
		r.unlock()
	}
}

// Questions implements runstore.Store: questions.json of the run's
// folder.
func (s *Store) Questions(ctx context.Context, id string) ([]byte, error) {
	dir, err := s.dir(id)
	if err != nil {
		return nil, err
	}
	if _, err := s.readInfo(dir, id); err != nil {
		return nil, err
	}
	data, err := os.ReadFile(filepath.Join(dir, QuestionsFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return data, err
}

// Answer implements runstore.Store: a file of the answers folder of the
// run's folder, named so that the names sort in the order they came.
func (s *Store) Answer(ctx context.Context, id string, data []byte) error {
	dir, err := s.dir(id)
	if err != nil {
		return err
	}
	info, err := s.readInfo(dir, id)
	if err != nil {
		return err
	}
	if _, err := s.readCheckpoint(dir, &info); err != nil {
		return err
	}
	if info.Done {
		return fmt.Errorf("run %s: %w", id, runstore.ErrDone)
	}
	answers := filepath.Join(dir, AnswersDir)
	if err := os.MkdirAll(answers, 0o755); err != nil {
		return err
	}
	var r [4]byte
	rand.Read(r[:]) //nolint:errcheck // never fails
	if err := atomicfile.WriteFile(filepath.Join(answers, fmt.Sprintf("%020d-%s.json", time.Now().UnixNano(), hex.EncodeToString(r[:]))), data, 0o644); err != nil {
		return err
	}
	answered.Wake(dir)
	return nil
}

// SetQuestions implements runstore.Run.
func (r *run) SetQuestions(data []byte) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.checkLocked(); err != nil {
		return err
	}
	return atomicfile.WriteFile(filepath.Join(r.dir, QuestionsFile), data, 0o644)
}

// Answers implements runstore.Run.
func (r *run) Answers(ctx context.Context) ([][]byte, error) {
	dir := filepath.Join(r.dir, AnswersDir)
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out [][]byte
	for _, e := range entries { // sorted by name: in the order they came
		if !strings.HasSuffix(e.Name(), ".json") {
			continue // a temporary file
		}
		p := filepath.Join(dir, e.Name())
		data, err := os.ReadFile(p)
		if err != nil {
			return out, err
		}
		if err := os.Remove(p); err != nil {
			return out, err
		}
		out = append(out, data)
	}
	return out, nil
}

// Answered implements runstore.Run: an answer given in this process
// wakes it at once; from the first call on, the answers folder is also
// looked at every AnswerPoll, for those another process wrote.
func (r *run) Answered() <-chan struct{} {
	r.pollOnce.Do(func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		if !r.released {
			go r.pollAnswers()
		}
	})
	return r.answered
}

// pollAnswers wakes Answered while answers wait in the folder, every
// AnswerPoll, until the run is released.
func (r *run) pollAnswers() {
	t := time.NewTicker(AnswerPoll)
	defer t.Stop()
	dir := filepath.Join(r.dir, AnswersDir)
	for {
		select {
		case <-r.stopPoll:
			return
		case <-t.C:
		}
		entries, _ := os.ReadDir(dir)
		if slices.ContainsFunc(entries, func(e fs.DirEntry) bool { return strings.HasSuffix(e.Name(), ".json") }) {
			select {
			case r.answered <- struct{}{}:
			default:
			}
		}
	}
}

// stopAnswered stops telling Answered (r.mu held).
func (r *run) stopAnswered() {
	r.unregister()
	close(r.stopPoll)
}
