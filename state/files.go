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
)

// FileName is the name of the state file in a key's directory.
const FileName = "state.json"

// Document is the content of a state file.
type Document struct {
	Key     string      `json:"key"`
	History []JSONEvent `json:"history"`
}

// Files is the default Store: one folder per conversation under the
// specification's isolated path, the history in its state.json, written
// atomically under a file lock, encrypted as the reference does when a
// cipher is set, large tool outputs in its outputs folder.
type Files struct {
	// Root is the state root (see RootFrom).
	Root string
	// Cipher encrypts files and key components; nil stores plain JSON.
	Cipher *Cipher
}

var _ Store = Files{}

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

// LineHistoryFile is where a REPL keeps its line history for a cartridge
// (beside the states of the default root): named after the cartridge's
// author and name, else after its path ("" for the default cartridge).
func LineHistoryFile(env Env, author, name, path string) string {
	file := "default"
	if path != "" {
		if author != "" && name != "" {
			file = Slug(author) + "_" + Slug(name)
		} else {
			file = Slug(strings.ReplaceAll(path, "/", " "))
		}
	}
	return filepath.Join(RootFrom("", "", env), Implementation, "repl-history", file+".history")
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

// CartridgeDir is the directory holding every state of a cartridge.
func (p Files) CartridgeDir(b Bot) (string, error) {
	path, err := BotPath(b)
	if err != nil {
		return "", err
	}
	return filepath.Join(p.Root, Implementation, filepath.FromSlash(path)), nil
}

// BotPath names a bot's conversations in every store: the slugs of its
// author, name and version (dots as dashes), joined by "/". Two bots
// whose names give the same slugs share their conversations, in the
// files as in a database.
func BotPath(b Bot) (string, error) {
	if strings.TrimSpace(b.Author) == "" || strings.TrimSpace(b.Name) == "" {
		return "", errors.New("a state key needs the cartridge's meta.author and meta.name, which name its state folder; add them, or run without a key (-)")
	}
	return Slug(b.Author) + "/" + Slug(b.Name) + "/" + Slug(strings.ReplaceAll(b.Version, ".", "-")), nil
}

// Component turns an end user or a key into a path component: its soft
// encryption when encryption is on, else the text with unsafe characters
// percent-escaped (reversible, so keys can be listed).
func (p Files) Component(s string) string {
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
func (p Files) Uncomponent(c string) (string, error) {
	if p.Cipher != nil {
		b, err := p.Cipher.Decrypt(c)
		return string(b), err
	}
	return url.PathUnescape(c)
}

// Location is the folder holding a bot's conversations.
func (p Files) Location(b Bot) (string, error) { return p.CartridgeDir(b) }

// fileConversation is one conversation of Files.
type fileConversation struct {
	// dir is the key's folder; the history is dir/state.json.
	dir    string
	key    string
	cipher *Cipher
}

// Open returns the conversation of a cartridge's end user under key.
func (p Files) Open(b Bot, endUser, key string) (Conversation, error) {
	dir, err := p.CartridgeDir(b)
	if err != nil {
		return nil, err
	}
	return &fileConversation{dir: filepath.Join(dir, p.Component(endUser), p.Component(key)), key: key, cipher: p.Cipher}, nil
}

// Location is the key's folder.
func (s *fileConversation) Location() string { return s.dir }

// HistoryLocation is the state file.
func (s *fileConversation) HistoryLocation() string { return s.file() }

func (s *fileConversation) file() string { return filepath.Join(s.dir, FileName) }

// outputsName is the folder of a key's kept tool outputs.
const outputsName = "outputs"

// History reads the state; a state that does not exist yet is empty.
func (s *fileConversation) History(context.Context) ([]Event, error) {
	doc, err := s.load()
	if err != nil {
		return nil, err
	}
	return FromJSON(doc.History), nil
}

func (s *fileConversation) load() (*Document, error) {
	doc := &Document{Key: s.key, History: []JSONEvent{}}
	data, err := os.ReadFile(s.file())
	if errors.Is(err, os.ErrNotExist) {
		return doc, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read state %s: %w", s.file(), err)
	}
	return s.decode(data)
}

func (s *fileConversation) decode(data []byte) (*Document, error) {
	text := bytes.TrimSpace(data)
	if len(text) == 0 {
		return &Document{Key: s.key, History: []JSONEvent{}}, nil
	}
	if text[0] != '{' {
		if s.cipher == nil {
			return nil, fmt.Errorf("state %s is encrypted: set NANO_BOTS_ENCRYPTION_PASSWORD to read it", s.file())
		}
		plain, err := s.cipher.Decrypt(string(text))
		if err != nil {
			return nil, fmt.Errorf("state %s: %w", s.file(), err)
		}
		text = plain
	}
	var doc Document
	if err := json.Unmarshal(text, &doc); err != nil {
		return nil, fmt.Errorf("state %s is damaged: %v (move it away to start afresh)", s.file(), err)
	}
	if doc.History == nil {
		doc.History = []JSONEvent{}
	}
	return &doc, nil
}

// lockName is the lock file in a key's directory.
const lockName = "state.lock"

// fileTurn holds a key's lock file. records are the history as written
// (the events read, as they were read, and those appended), so a write
// converts only the new events.
type fileTurn struct {
	s       *fileConversation
	key     string
	events  []Event
	records []JSONEvent
	unlock  func()
}

// Begin takes the key's lock (a flock, released by the kernel when the
// process dies). Temporary files that a killed writer left behind are
// removed.
func (s *fileConversation) Begin(ctx context.Context, onBusy func()) (Turn, error) {
	if err := makeDir(s.dir); err != nil {
		return nil, fmt.Errorf("create state folder: %w", err)
	}
	unlock, err := lockKey(ctx, s.dir, onBusy, true)
	if err != nil {
		return nil, err
	}
	removeStaleTemps(s.dir)
	doc, err := s.load()
	if err != nil {
		unlock()
		return nil, err
	}
	// Room for an exchange's events, so that its appends do not copy the
	// history.
	events := make([]Event, len(doc.History), len(doc.History)+16)
	for i, r := range doc.History {
		events[i] = r.Event()
	}
	return &fileTurn{s: s, key: doc.Key, records: doc.History, events: events, unlock: unlock}, nil
}

func (t *fileTurn) History() []Event { return t.events }

// Append adds events to the history and writes the state atomically.
func (t *fileTurn) Append(events ...Event) error {
	if len(events) == 0 {
		return nil
	}
	t.key = t.s.key
	records := append(t.records, JSON(events)...)
	if err := t.s.write(&Document{Key: t.key, History: records}); err != nil {
		return err
	}
	t.records = records
	t.events = append(t.events, events...)
	return nil
}

// KeepOutput writes text to outputs/<id>.txt in the key's folder (the id
// with path separators, dots and NULs replaced by '_'); where is the
// file's path.
func (t *fileTurn) KeepOutput(id, text string) (string, error) {
	// The errors name the file already; they go into a note to the model
	// as they are.
	dir := filepath.Join(t.s.dir, outputsName)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	path := outputFile(dir, id)
	return path, os.WriteFile(path, []byte(text), 0o600)
}

func outputFile(dir, id string) string {
	return filepath.Join(dir, OutputName(id)+".txt")
}

// OutputName is the name a tool output kept under a call's id has in
// every store: the id with path separators, dots and NULs replaced by
// '_' ("output" for none). Ids with the same name share it.
func OutputName(id string) string {
	name := strings.Map(func(r rune) rune {
		if r == '/' || r == '\\' || r == 0 || r == '.' {
			return '_'
		}
		return r
	}, id)
	if name == "" {
		name = "output"
	}
	return name
}

// Output reads a kept output.
func (s *fileConversation) Output(_ context.Context, id string) (string, error) {
	b, err := os.ReadFile(outputFile(filepath.Join(s.dir, outputsName), id))
	if err != nil {
		return "", fmt.Errorf("read kept output: %w", err)
	}
	return string(b), nil
}

// End releases the key. It is safe to call more than once.
func (t *fileTurn) End() {
	if t.unlock != nil {
		t.unlock()
		t.unlock = nil
	}
}

// write encodes and, with a cipher, encrypts doc, then replaces the state
// file atomically.
func (s *fileConversation) write(doc *Document) error {
	data, err := json.Marshal(doc)
	if err != nil {
		return fmt.Errorf("encode state: %w", err)
	}
	if s.cipher != nil {
		enc, err := s.cipher.Encrypt(data)
		if err != nil {
			return err
		}
		data = []byte(enc)
	}
	return writeAtomic(s.file(), data)
}

// Delete removes everything stored under the key: the state, its lock,
// any file a tool's output was kept in, and the key's directory. It waits
// for an exchange in progress on the key.
func (s *fileConversation) Delete(ctx context.Context) (existed bool, err error) {
	if _, err := os.Stat(s.dir); errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	unlock, err := lockKey(ctx, s.dir, func() {}, false)
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
	if err := os.Remove(s.file()); err != nil && !errors.Is(err, os.ErrNotExist) {
		return true, fmt.Errorf("delete state: %w", err)
	}
	entries, err := os.ReadDir(s.dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return true, fmt.Errorf("delete state: %w", err)
	}
	for _, e := range entries {
		if e.Name() == lockName {
			continue
		}
		if err := os.RemoveAll(filepath.Join(s.dir, e.Name())); err != nil {
			return true, fmt.Errorf("delete state: %w", err)
		}
	}
	if err := os.Remove(filepath.Join(s.dir, lockName)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return true, fmt.Errorf("delete state: %w", err)
	}
	if err := os.Remove(s.dir); err != nil && !errors.Is(err, os.ErrNotExist) && !errors.Is(err, syscall.ENOTEMPTY) && !errors.Is(err, syscall.EEXIST) {
		return true, fmt.Errorf("delete state: %w", err)
	}
	// The end user's folder goes too when this was its last key.
	os.Remove(filepath.Dir(s.dir)) //nolint:errcheck // not empty: other keys remain
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
	wait := BusyWait{First: 5 * time.Millisecond, Max: 100 * time.Millisecond}
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
		if err := wait.Wait(ctx, onBusy, nil); err != nil {
			return nil, err
		}
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

// List returns the stored conversations of a cartridge.
func (p Files) List(_ context.Context, b Bot) (Listing, error) {
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
			st := &fileConversation{dir: filepath.Join(dir, u.Name(), k.Name()), cipher: p.Cipher}
			fi, err := os.Stat(st.file())
			if err != nil {
				continue // a key whose state was never written
			}
			key, keyErr := p.Uncomponent(k.Name())
			if userErr != nil || keyErr != nil {
				out.Unreadable++ // another password's folders
				continue
			}
			st.key = key
			doc, err := st.load()
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
