// Package state stores conversations: where a cartridge's state lives
// (the specification's isolated path), how it is read and written
// (atomically, under a file lock, so concurrent runs lose nothing), and its
// optional at-rest encryption compatible with the reference implementation.
package state

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/nbots/nb/media"
)

// Implementation is nb's own component of the state path, which keeps its
// states apart from other implementations' (the specification asks for it).
const Implementation = "go-nano-bots"

// FileName is the name of the state file in a key's directory.
const FileName = "state.json"

// Event is one entry of a conversation's history. The keys follow the
// reference's state files (at, who, mode, input, message, output, meta).
type Event struct {
	At string `json:"at"`
	// Who is "user", "AI" or "tool".
	Who  string `json:"who"`
	Mode string `json:"mode,omitempty"`
	// Input is the user's raw input (user events).
	Input *string `json:"input,omitempty"`
	// Message is what was sent to or received from the model: text for
	// user and AI events (null for a tool-call event), the tool's output
	// (any JSON value) for tool events.
	Message any `json:"message"`
	// Output is what was displayed, affixes included (AI events).
	Output *string `json:"output,omitempty"`
	// Meta holds tool calls (AI events), the call id and name (tool
	// events), and reasoning or provider data to send back.
	Meta map[string]any `json:"meta,omitempty"`
	// Partial marks an answer cut short (a dropped stream, Ctrl-C): it is
	// kept for the record but never sent back as a complete answer.
	Partial bool `json:"partial,omitempty"`
	// Images are the pictures of a user message or a tool result.
	Images []media.Image `json:"images,omitempty"`
}

// Now formats the current time for Event.At.
func Now() string { return time.Now().Format(time.RFC3339) }

// Document is the content of a state file.
type Document struct {
	Key     string  `json:"key"`
	History []Event `json:"history"`
}

// Paths says where states live.
type Paths struct {
	// Root is the state root (see RootFrom).
	Root string
	// Cipher encrypts files and key components; nil stores plain JSON.
	Cipher *Cipher
}

// Env is the part of the environment the state root depends on.
type Env struct {
	StatePath, StateDirectory, StateHome, Home string
}

// RootFrom returns the state root: the cartridge's state.path (or the
// legacy state.directory), else NANO_BOTS_STATE_PATH (or the legacy
// NANO_BOTS_STATE_DIRECTORY), else $XDG_STATE_HOME/nano-bots, else
// ~/.local/state/nano-bots.
func RootFrom(cartridgePath, cartridgeDirectory string, env Env) string {
	for _, p := range []string{cartridgePath, cartridgeDirectory, env.StatePath, env.StateDirectory} {
		if p = strings.TrimSpace(p); p != "" {
			return expandHome(filepath.Clean(p), env.Home) // not TrimSuffix: "/" would become ""
		}
	}
	if env.StateHome != "" && filepath.IsAbs(env.StateHome) {
		return filepath.Join(env.StateHome, "nano-bots")
	}
	return filepath.Join(env.Home, ".local", "state", "nano-bots")
}

func expandHome(p, home string) string {
	if p == "~" {
		return home
	}
	if strings.HasPrefix(p, "~/") {
		return filepath.Join(home, p[2:])
	}
	return p
}

// Bot identifies a cartridge's states.
type Bot struct {
	Author, Name, Version string
}

// CartridgeDir is the directory holding every state of a cartridge.
func (p Paths) CartridgeDir(b Bot) (string, error) {
	if strings.TrimSpace(b.Author) == "" || strings.TrimSpace(b.Name) == "" {
		return "", errors.New("a state key needs the cartridge's meta.author and meta.name, which name its state folder; add them, or run without a key (-)")
	}
	return filepath.Join(p.Root, Implementation, Slug(b.Author), Slug(b.Name), Slug(strings.ReplaceAll(b.Version, ".", "-"))), nil
}

// Component turns an end user or a key into a path component: its soft
// encryption when encryption is on, else the text with unsafe characters
// percent-escaped (reversible, so keys can be listed).
func (p Paths) Component(s string) string {
	if p.Cipher != nil {
		return p.Cipher.Soft(s)
	}
	e := url.PathEscape(s)
	if e == "." || e == ".." {
		e = strings.ReplaceAll(e, ".", "%2E")
	}
	return e
}

// Uncomponent reverses Component.
func (p Paths) Uncomponent(c string) (string, error) {
	if p.Cipher != nil {
		b, err := p.Cipher.Decrypt(c)
		return string(b), err
	}
	return url.PathUnescape(c)
}

// Store is the state of one conversation (a cartridge, an end user and a key).
type Store struct {
	// Dir is the key's directory; the state is Dir/state.json.
	Dir    string
	Key    string
	Cipher *Cipher
}

// Open returns the store for a cartridge, end user and key.
func (p Paths) Open(b Bot, endUser, key string) (*Store, error) {
	dir, err := p.CartridgeDir(b)
	if err != nil {
		return nil, err
	}
	return &Store{Dir: filepath.Join(dir, p.Component(endUser), p.Component(key)), Key: key, Cipher: p.Cipher}, nil
}

// File is the state file's path.
func (s *Store) File() string { return filepath.Join(s.Dir, FileName) }

// Load reads the state; a state that does not exist yet is empty.
func (s *Store) Load() (*Document, error) {
	doc := &Document{Key: s.Key, History: []Event{}}
	data, err := os.ReadFile(s.File())
	if errors.Is(err, os.ErrNotExist) {
		return doc, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read state %s: %w", s.File(), err)
	}
	return s.decode(data)
}

func (s *Store) decode(data []byte) (*Document, error) {
	text := bytes.TrimSpace(data)
	if len(text) == 0 {
		return &Document{Key: s.Key, History: []Event{}}, nil
	}
	if text[0] != '{' {
		if s.Cipher == nil {
			return nil, fmt.Errorf("state %s is encrypted: set NANO_BOTS_ENCRYPTION_PASSWORD to read it", s.File())
		}
		plain, err := s.Cipher.Decrypt(string(text))
		if err != nil {
			return nil, fmt.Errorf("state %s: %w", s.File(), err)
		}
		text = plain
	}
	var doc Document
	if err := json.Unmarshal(text, &doc); err != nil {
		return nil, fmt.Errorf("state %s is damaged: %v (move it away to start afresh)", s.File(), err)
	}
	if doc.History == nil {
		doc.History = []Event{}
	}
	return &doc, nil
}

// ErrBusy is returned by Begin when another exchange holds the key and
// the caller does not want to wait.
var ErrBusy = errors.New("another exchange is running on this state key")

// lockName is the lock file in a key's directory.
const lockName = "state.lock"

// Turn is one exchange's hold on a key: while it is open no other
// exchange (in this process or another) reads or writes the key, so the
// events of two exchanges never interleave. History is read once, when
// the turn begins; Append writes it back atomically.
type Turn struct {
	s      *Store
	doc    *Document
	unlock func()
}

// Begin starts an exchange on the key. When another exchange holds the
// key, Begin calls onBusy once and waits for it (or for ctx); with onBusy
// nil it returns ErrBusy at once. Temporary files that a killed writer
// left behind are removed. The turn must be ended with End.
func (s *Store) Begin(ctx context.Context, onBusy func()) (*Turn, error) {
	if err := makeDir(s.Dir); err != nil {
		return nil, fmt.Errorf("create state folder: %w", err)
	}
	unlock, err := lockKey(ctx, s.Dir, onBusy, true)
	if err != nil {
		return nil, err
	}
	removeStaleTemps(s.Dir)
	doc, err := s.Load()
	if err != nil {
		unlock()
		return nil, err
	}
	return &Turn{s: s, doc: doc, unlock: unlock}, nil
}

// History is the conversation as stored, with the events this turn
// appended. The caller must not modify it.
func (t *Turn) History() []Event { return t.doc.History }

// Append adds events to the history and writes the state atomically.
func (t *Turn) Append(events ...Event) error {
	if len(events) == 0 {
		return nil
	}
	t.doc.Key = t.s.Key
	t.doc.History = append(t.doc.History, events...)
	return t.s.write(t.doc)
}

// End releases the key. It is safe to call more than once.
func (t *Turn) End() {
	if t.unlock != nil {
		t.unlock()
		t.unlock = nil
	}
}

// Append adds events to the stored history as one exchange of its own
// (Begin, Append, End), waiting for the key if another exchange holds it.
func (s *Store) Append(events ...Event) error {
	if len(events) == 0 {
		return nil
	}
	t, err := s.Begin(context.Background(), func() {})
	if err != nil {
		return err
	}
	defer t.End()
	return t.Append(events...)
}

// write encodes and, with a cipher, encrypts doc, then replaces the state
// file atomically.
func (s *Store) write(doc *Document) error {
	data, err := json.Marshal(doc)
	if err != nil {
		return fmt.Errorf("encode state: %w", err)
	}
	if s.Cipher != nil {
		enc, err := s.Cipher.Encrypt(data)
		if err != nil {
			return err
		}
		data = []byte(enc)
	}
	return writeAtomic(s.File(), data)
}

// Delete removes everything stored under the key: the state, its lock,
// any file a tool's output was kept in, and the key's directory. It waits
// for an exchange in progress on the key. Deleting a key that has nothing
// stored is not an error: existed tells whether there was anything.
func (s *Store) Delete(ctx context.Context) (existed bool, err error) {
	if _, err := os.Stat(s.Dir); errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	unlock, err := lockKey(ctx, s.Dir, func() {}, false)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return false, nil
		}
		return false, err
	}
	defer unlock()
	// An exchange waiting for the key gets it once the lock file is gone
	// (it makes a new one): the state goes first, the lock last, so
	// that exchange finds nothing of the deleted conversation and its
	// new files stop only the removal of the folder, which then stays.
	if err := os.Remove(s.File()); err != nil && !errors.Is(err, os.ErrNotExist) {
		return true, fmt.Errorf("delete state: %w", err)
	}
	entries, err := os.ReadDir(s.Dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return true, fmt.Errorf("delete state: %w", err)
	}
	for _, e := range entries {
		if e.Name() == lockName {
			continue
		}
		if err := os.RemoveAll(filepath.Join(s.Dir, e.Name())); err != nil {
			return true, fmt.Errorf("delete state: %w", err)
		}
	}
	if err := os.Remove(filepath.Join(s.Dir, lockName)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return true, fmt.Errorf("delete state: %w", err)
	}
	if err := os.Remove(s.Dir); err != nil && !errors.Is(err, os.ErrNotExist) && !errors.Is(err, syscall.ENOTEMPTY) && !errors.Is(err, syscall.EEXIST) {
		return true, fmt.Errorf("delete state: %w", err)
	}
	// The end user's folder goes too when this was its last key.
	os.Remove(filepath.Dir(s.Dir)) //nolint:errcheck // not empty: other keys remain
	return true, nil
}

// tempPrefix and tempSuffix name the temporary files of writeAtomic.
const (
	tempPrefix = ".state-"
	tempSuffix = ".tmp"
)

// removeStaleTemps removes the temporary files of writers that died
// before renaming them. It runs under the key's lock, when no writer can
// be in the middle of a write, so every such file is stale.
func removeStaleTemps(dir string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		if n := e.Name(); strings.HasPrefix(n, tempPrefix) && strings.HasSuffix(n, tempSuffix) {
			os.Remove(filepath.Join(dir, n)) //nolint:errcheck // best effort; the next turn tries again
		}
	}
}

// writeAtomic writes data to a temporary file in path's directory, syncs
// it, renames it over path, and syncs the directory: a crash leaves either
// the old file or the new one, never a torn one.
func writeAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, tempPrefix+"*"+tempSuffix)
	if err != nil {
		return fmt.Errorf("write state: %w", err)
	}
	tmp := f.Name()
	defer os.Remove(tmp) //nolint:errcheck // gone after a successful rename
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("write state: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("write state: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write state: %w", err)
	}
	if err := os.Chmod(tmp, 0o600); err != nil {
		return fmt.Errorf("write state: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write state: %w", err)
	}
	if d, err := os.Open(dir); err == nil {
		d.Sync() //nolint:errcheck // best effort on file systems without directory sync
		d.Close()
	}
	return nil
}

// lockKey takes the exclusive lock of a key's directory. It polls a
// non-blocking flock, so that waiting honours ctx and holds no thread;
// onBusy is called once when the lock is held by someone else (nil:
// return ErrBusy instead of waiting). A lock file that a concurrent
// Delete removed while we waited for it is not a lock: take the new one
// (with create, the directory is made again when Delete removed it).
func lockKey(ctx context.Context, dir string, onBusy func(), create bool) (func(), error) {
	path := filepath.Join(dir, lockName)
	told := false
	delay := 5 * time.Millisecond
	for {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
		if err != nil && create && errors.Is(err, os.ErrNotExist) {
			if err = makeDir(dir); err == nil {
				f, err = os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
			}
		}
		if err != nil {
			return nil, fmt.Errorf("lock state: %w", err)
		}
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			if sameFile(f, path) {
				return func() {
					syscall.Flock(int(f.Fd()), syscall.LOCK_UN) //nolint:errcheck // closing releases it anyway
					f.Close()
				}, nil
			}
			f.Close() // deleted under us: try the new file
			continue
		}
		f.Close()
		if err != syscall.EWOULDBLOCK && err != syscall.EINTR {
			return nil, fmt.Errorf("lock state: %w", err)
		}
		if onBusy == nil {
			return nil, ErrBusy
		}
		if !told {
			onBusy()
			told = true
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
		delay = min(delay*2, 100*time.Millisecond)
	}
}

// makeDir makes dir and its parents. A Delete of another key may remove
// the end user's folder between the two (when that key was its last):
// then it tries again.
func makeDir(dir string) error {
	var err error
	for range 10 {
		if err = os.MkdirAll(dir, 0o700); !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return err
}

// sameFile reports whether the open file f is still the one at path.
func sameFile(f *os.File, path string) bool {
	a, err := f.Stat()
	if err != nil {
		return false
	}
	b, err := os.Stat(path)
	if err != nil {
		return false
	}
	return os.SameFile(a, b)
}

// KeyInfo describes one stored conversation of a cartridge.
type KeyInfo struct {
	EndUser, Key string
	// LastActivity is the state file's modification time.
	LastActivity time.Time
	// Events is the number of history entries.
	Events int
}

// Listing is what List finds for a cartridge.
type Listing struct {
	// Keys are the conversations that can be read, most recent first.
	Keys []KeyInfo
	// Unreadable counts the conversations that cannot be read with the
	// current cipher: stored with another password, encrypted while no
	// password is set, or damaged.
	Unreadable int
}

// List returns the stored conversations of a cartridge.
func (p Paths) List(b Bot) (Listing, error) {
	var out Listing
	dir, err := p.CartridgeDir(b)
	if err != nil {
		return out, err
	}
	users, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return out, err
	}
	for _, u := range users {
		if !u.IsDir() {
			continue
		}
		keys, err := os.ReadDir(filepath.Join(dir, u.Name()))
		if err != nil {
			continue
		}
		endUser, userErr := p.Uncomponent(u.Name())
		for _, k := range keys {
			if !k.IsDir() {
				continue
			}
			st := &Store{Dir: filepath.Join(dir, u.Name(), k.Name()), Cipher: p.Cipher}
			fi, err := os.Stat(st.File())
			if err != nil {
				continue // a key whose state was never written
			}
			key, keyErr := p.Uncomponent(k.Name())
			if userErr != nil || keyErr != nil {
				out.Unreadable++ // another password's folders
				continue
			}
			st.Key = key
			doc, err := st.Load()
			if err != nil {
				out.Unreadable++
				continue
			}
			out.Keys = append(out.Keys, KeyInfo{EndUser: endUser, Key: key, LastActivity: fi.ModTime(), Events: len(doc.History)})
		}
	}
	sort.Slice(out.Keys, func(i, j int) bool { return out.Keys[i].LastActivity.After(out.Keys[j].LastActivity) })
	return out, nil
}
