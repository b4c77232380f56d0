// Package state stores conversations: where a cartridge's state lives
// (the specification's isolated path), how it is read and written
// (atomically, under a file lock, so concurrent runs lose nothing), and its
// optional at-rest encryption compatible with the reference implementation.
package state

import (
	"bytes"
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

// EnvFromOS reads Env from the process environment.
func EnvFromOS() Env {
	return Env{
		StatePath:      os.Getenv("NANO_BOTS_STATE_PATH"),
		StateDirectory: os.Getenv("NANO_BOTS_STATE_DIRECTORY"),
		StateHome:      os.Getenv("XDG_STATE_HOME"),
		Home:           os.Getenv("HOME"),
	}
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

// Append adds events to the stored history. It holds an exclusive lock
// while it re-reads the file, appends and rewrites it atomically, so two
// processes appending at the same moment both land.
func (s *Store) Append(events ...Event) error {
	if len(events) == 0 {
		return nil
	}
	if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		return fmt.Errorf("create state folder: %w", err)
	}
	unlock, err := lock(filepath.Join(s.Dir, "state.lock"))
	if err != nil {
		return err
	}
	defer unlock()
	doc, err := s.Load()
	if err != nil {
		return err
	}
	doc.Key = s.Key
	doc.History = append(doc.History, events...)
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

// Delete removes the state and its directory.
func (s *Store) Delete() error {
	if _, err := os.Stat(s.Dir); errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("no state for key %q", s.Key)
	}
	unlock, err := lock(filepath.Join(s.Dir, "state.lock"))
	if err != nil {
		return err
	}
	defer unlock()
	if err := os.Remove(s.File()); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	os.Remove(filepath.Join(s.Dir, "state.lock")) //nolint:errcheck // best effort; the directory goes next
	return os.Remove(s.Dir)
}

// writeAtomic writes data to a temporary file in path's directory, syncs
// it, renames it over path, and syncs the directory: a crash leaves either
// the old file or the new one, never a torn one.
func writeAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, ".state-*.tmp")
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

// lock takes an exclusive advisory lock on path, waiting for it.
func lock(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock state: %w", err)
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("lock state: %w", err)
	}
	return func() {
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN) //nolint:errcheck // closing releases it anyway
		f.Close()
	}, nil
}

// KeyInfo describes one stored conversation of a cartridge.
type KeyInfo struct {
	EndUser, Key string
	// LastActivity is the state file's modification time.
	LastActivity time.Time
	// Events is the number of history entries; -1 when unreadable.
	Events int
}

// List returns the stored conversations of a cartridge, most recent first.
func (p Paths) List(b Bot) ([]KeyInfo, error) {
	dir, err := p.CartridgeDir(b)
	if err != nil {
		return nil, err
	}
	users, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []KeyInfo
	for _, u := range users {
		if !u.IsDir() {
			continue
		}
		endUser, err := p.Uncomponent(u.Name())
		if err != nil {
			continue // another password's states
		}
		keys, err := os.ReadDir(filepath.Join(dir, u.Name()))
		if err != nil {
			continue
		}
		for _, k := range keys {
			key, err := p.Uncomponent(k.Name())
			if err != nil || !k.IsDir() {
				continue
			}
			st := &Store{Dir: filepath.Join(dir, u.Name(), k.Name()), Key: key, Cipher: p.Cipher}
			fi, err := os.Stat(st.File())
			if err != nil {
				continue
			}
			info := KeyInfo{EndUser: endUser, Key: key, LastActivity: fi.ModTime(), Events: -1}
			if doc, err := st.Load(); err == nil {
				info.Events = len(doc.History)
			}
			out = append(out, info)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].LastActivity.After(out[j].LastActivity) })
	return out, nil
}
