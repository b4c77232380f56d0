// Package session keeps the gateway's conversations in nanobot's session
// files: sessions/<channel>_<chat_id>.jsonl under the workspace, a
// metadata record first, then one message per line in OpenAI's shape with
// a timestamp. Files are only ever appended to, so a crash can tear at
// most the last line: it is cut off on load and kept aside in a
// quarantine file. A Session is the agent's Conversation: the runtime
// reads its history and appends the turn's events to it.
//
// A Manager made by NewStoreManager keeps the same lines in a
// state.Store instead (PostgreSQL, shared by replicas on several
// machines): see store.go.
package session

import (
	"bufio"
	"bytes"
	"container/list"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unicode/utf8"

	sjson "github.com/segmentio/encoding/json"

	"github.com/nbots/nb/internal/atomicfile"
	"github.com/nbots/nb/state"
)

// TimeLayout is nanobot's timestamp format (Python's isoformat of a naive
// local datetime with microseconds).
const TimeLayout = "2006-01-02T15:04:05.000000"

// MaxToolResult is how much of a tool's result a session keeps (nanobot's
// maxToolResultChars); the model saw it cut to its own limits anyway.
const MaxToolResult = 16_000

// Meta is the metadata record, the first line of a session file.
type Meta struct {
	Type             string         `json:"_type"`
	Key              string         `json:"key"`
	CreatedAt        string         `json:"created_at"`
	UpdatedAt        string         `json:"updated_at"`
	Metadata         map[string]any `json:"metadata"`
	LastConsolidated int            `json:"last_consolidated"`
}

// Message is one message line, in the shape nanobot writes.
type Message struct {
	Role             string     `json:"role"`
	Content          any        `json:"content"`
	ToolCalls        []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID       string     `json:"tool_call_id,omitempty"`
	Name             string     `json:"name,omitempty"`
	ReasoningContent string     `json:"reasoning_content,omitempty"`
	Timestamp        string     `json:"timestamp,omitempty"`
	// Extra is what a provider needs sent back (thinking signatures):
	// an nb field that nanobot ignores.
	Extra map[string]any `json:"nb_extra,omitempty"`
	// IsError marks a failed tool call's result (an nb field).
	IsError bool `json:"nb_error,omitempty"`
}

// ToolCall is an assistant's tool call, OpenAI's shape.
type ToolCall struct {
	ID       string   `json:"id"`
	Type     string   `json:"type"`
	Function Function `json:"function"`
}

// Function is a tool call's name and JSON-text arguments.
type Function struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// FileName is the file of a session key. For the keys nanobot itself
// makes ("telegram:12345", "slack:C01:1700000000.000100",
// "email:john_doe@example.com", "cli:direct") it is nanobot's name:
// safe_filename of the key with ":" replaced by "_". That mapping sends
// several keys to one name ("web:alice?notes", "web:alice_notes" and
// "web:alice:notes" would all be web_alice_notes.jsonl, so one chat would
// read another's history); so a key is given nanobot's name only when it
// is the one key nanobot's name reads back as (see canonicalKey), and
// every other key gets nanobot's name followed by "~" and a hash of the
// key: different keys never share a file.
func FileName(key string) string {
	name := nanobotName(key)
	if len(name) <= maxNameBytes && canonicalKey(name) == key && !strings.ContainsRune(key, '~') {
		return name + ".jsonl"
	}
	// '~' is never in a name of the first kind, so the two kinds never
	// meet; the hash tells the keys of the second kind apart.
	sum := sha256.Sum256([]byte(key))
	return truncateUTF8(name, maxNameBytes) + "~" + hex.EncodeToString(sum[:8]) + ".jsonl"
}

// maxNameBytes bounds the readable part of a file name: file systems take
// 255 bytes, and the hash and ".jsonl" follow.
const maxNameBytes = 200

// nanobotName is nanobot's file name of key, without ".jsonl":
// safe_filename(key.replace(":", "_")), control characters replaced too.
func nanobotName(key string) string {
	var b strings.Builder
	for _, r := range key {
		switch r {
		case '<', '>', ':', '"', '/', '\\', '|', '?', '*':
			b.WriteByte('_')
		default:
			if r < 0x20 || r == 0x7f {
				b.WriteByte('_')
				continue
			}
			b.WriteRune(r)
		}
	}
	return strings.TrimSpace(b.String())
}

// canonicalKey is the key a nanobot file name stands for: the channel
// before the first "_", then the chat id with every "_" read back as ":"
// (Slack threads, Matrix rooms), except for email, whose addresses hold
// "_" and never ":".
func canonicalKey(name string) string {
	ch, chat, ok := strings.Cut(name, "_")
	if !ok {
		return name
	}
	if ch != "email" {
		chat = strings.ReplaceAll(chat, "_", ":")
	}
	return ch + ":" + chat
}

// truncateUTF8 cuts s to at most n bytes, on a character boundary.
func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// legacyName is the name the session of key had before FileName told
// keys apart: nanobot's, for every key.
func legacyName(key string) string { return nanobotName(key) + ".jsonl" }

// Manager opens the sessions of one workspace and keeps them open.
type Manager struct {
	// Dir is the sessions folder (<workspace>/sessions).
	Dir string
	// Warn receives what was repaired (a torn last line); nil drops it.
	Warn func(msg string)
	// Now is the clock (tests); nil is time.Now.
	Now func() time.Time
	// IdleAfter is how long a session not used is kept in memory
	// (DefaultIdleAfter if 0); MaxOpen how many are kept at most, the
	// least recently used idle ones forgotten first (DefaultMaxOpen if
	// 0). A forgotten session is read again from its file when its chat
	// comes back; one a turn holds is never forgotten.
	IdleAfter time.Duration
	MaxOpen   int
	// KeepBytes bounds the messages the sessions no turn holds keep in
	// memory, about, in bytes (DefaultKeepBytes if 0, none if
	// negative): past it, the least recently used leave memory and are
	// read back from their files when needed (see warm.go).
	KeepBytes int64
	// Legacy is the folder nanobot up to v0.1.3 kept every workspace's
	// sessions in (~/.nanobot/sessions); "" when there is none to look
	// in. A session found there and not under Dir is moved under Dir
	// when its chat is first used, as nanobot's SessionManager moves it.
	Legacy string

	mu    sync.Mutex
	open  map[string]*Session
	swept time.Time
	// st keeps the sessions in a state.Store; nil keeps them in files
	// under Dir.
	st *storeSessions

	// warmMu guards the sessions whose messages are in memory though
	// no turn holds them, most recently used first, and their bytes
	// (Session.warm and warmBytes too). Taken after mu, before a
	// Session's mu.
	warmMu    sync.Mutex
	warm      *list.List
	warmBytes int64
	// readBack counts the bytes of session files read back (tests).
	readBack atomic.Int64
}

// NewManager returns the manager of the sessions under dir, creating it.
func NewManager(dir string) (*Manager, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("sessions folder: %w", err)
	}
	return &Manager{Dir: dir, open: map[string]*Session{}}, nil
}

func (m *Manager) now() time.Time {
	if m.Now != nil {
		return m.Now()
	}
	return time.Now()
}

// DefaultIdleAfter and DefaultMaxOpen are the Manager's defaults: ten
// thousand chats cost neither ten thousand sessions in memory nor a
// descriptor each (no session holds one when no turn runs on it).
const (
	DefaultIdleAfter = 15 * time.Minute
	DefaultMaxOpen   = 1000
)

// Get returns the session of key, loading it from its file or creating
// it. Callers of one key get the same *Session while it is in use; a
// session idle for IdleAfter may be forgotten and read again (a caller
// that kept the old one still works with it, as another process would:
// its writes take the file's lock and reread what changed). ctx bounds
// the read of a session in a store; one already ended fails Get.
func (m *Manager) Get(ctx context.Context, key string) (*Session, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("session %s: %w", key, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	if s, ok := m.open[key]; ok {
		s.touch(now)
		return s, nil
	}
	m.sweepLocked(now)
	var (
		s   *Session
		err error
	)
	if m.st != nil {
		s, err = m.loadStored(ctx, key)
	} else {
		s, err = m.load(key)
	}
	if err != nil {
		return nil, err
	}
	s.used = now
	m.open[key] = s
	s.release() // warm: its turn comes next
	return s, nil
}

// touch marks the session used at now.
func (s *Session) touch(now time.Time) {
	s.mu.Lock()
	s.used = now
	s.mu.Unlock()
}

// sweepLocked forgets the sessions idle for IdleAfter (checked at most
// every IdleAfter/4), and the least recently used idle ones past
// MaxOpen.
func (m *Manager) sweepLocked(now time.Time) {
	idle, most := m.IdleAfter, m.MaxOpen
	if idle <= 0 {
		idle = DefaultIdleAfter
	}
	if most <= 0 {
		most = DefaultMaxOpen
	}
	if len(m.open) < most && now.Sub(m.swept) < idle/4 {
		return
	}
	m.swept = now
	type entry struct {
		key  string
		used time.Time
	}
	var idleOnes []entry
	for k, s := range m.open {
		s.mu.Lock()
		held, used := s.holds, s.used
		s.mu.Unlock()
		if !held {
			idleOnes = append(idleOnes, entry{k, used})
		}
	}
	sort.Slice(idleOnes, func(i, j int) bool { return idleOnes[i].used.Before(idleOnes[j].used) })
	for _, e := range idleOnes {
		if now.Sub(e.used) < idle && len(m.open) < most {
			break
		}
		s := m.open[e.key]
		if err := s.close(); err != nil {
			m.warn(err.Error())
		}
		m.forgetWarm(s)
		delete(m.open, e.key)
	}
}

// Close closes every open session's file.
func (m *Manager) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	var errs []error
	for k, s := range m.open {
		errs = append(errs, s.close())
		m.forgetWarm(s)
		delete(m.open, k)
	}
	return errors.Join(errs...)
}

// Info describes a session file for listings.
type Info struct {
	Key       string    `json:"key"`
	UpdatedAt time.Time `json:"updated_at"`
	Messages  int       `json:"messages"`
}

// List describes the sessions on disk, most recently written first. It
// reads only each file's first line (and its size), as nanobot does.
// ctx bounds the listing of a store; one already ended fails List.
func (m *Manager) List(ctx context.Context) ([]Info, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("sessions: %w", err)
	}
	if m.st != nil {
		return m.listStored(ctx)
	}
	entries, err := os.ReadDir(m.Dir)
	if err != nil {
		return nil, fmt.Errorf("sessions folder: %w", err)
	}
	var out []Info
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".jsonl") {
			continue
		}
		fi, err := e.Info()
		if err != nil {
			continue
		}
		info := Info{Key: strings.TrimSuffix(e.Name(), ".jsonl"), UpdatedAt: fi.ModTime()}
		if f, err := os.Open(filepath.Join(m.Dir, e.Name())); err == nil {
			line, _ := bufio.NewReader(f).ReadBytes('\n')
			f.Close()
			var meta Meta
			if json.Unmarshal(line, &meta) == nil && meta.Type == "metadata" && meta.Key != "" {
				info.Key = meta.Key
			}
		}
		out = append(out, info)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].UpdatedAt.After(out[j].UpdatedAt) })
	return out, nil
}

// Session is one conversation: its metadata, its messages, and the file
// they are appended to. Its methods are safe for concurrent use; the
// gateway runs one turn at a time on a session.
type Session struct {
	Key  string
	Path string

	m  *Manager
	mu sync.Mutex
	// fd is the file opened to append (when open), only while the
	// session is held (or written outside a turn): an idle session keeps
	// no descriptor. A bare descriptor, not an *os.File: an os.File of a
	// regular file costs four fcntl and an epoll_ctl more at each open,
	// at each turn.
	fd   int
	open bool
	// fi identifies the file as last read (another process's /new
	// replaces it): its device and inode, not an os.FileInfo (144
	// bytes more for each of the up to MaxOpen sessions kept open).
	fi   fileID
	meta Meta
	// events are every message, as the agent's events, when loaded (a
	// session no turn holds may leave them to its file: see warm.go).
	events []state.Event
	loaded bool
	// evBytes is what events take in memory, about (eventBytes summed),
	// and count the number of messages while they are not loaded
	// (consolidated ones included): both kept up to date by every
	// change, so that releasing a session or counting its messages
	// costs neither a pass over its messages nor a read of its file.
	evBytes int64
	count   int
	// offs are the file offsets of the events' lines; skip is how many
	// messages before events[0] are not read (a session read back for a
	// turn starts at winOff, the line of message winIdx, the start of
	// the last window a turn read; or at resumeOff, the line of message
	// resumeIdx, its first message not consolidated, when a turn reads
	// them all). window is the message window the session's last turn
	// read (see Conversation), 0 for all of them.
	offs      []int64
	skip      int
	resumeIdx int
	resumeOff int64
	winIdx    int
	winOff    int64
	window    int
	// gen changes whenever messages are removed or replaced (/new, a
	// stopped turn, a file another process replaced): a tally (see
	// Tally) of an older gen is made again. tally is the sum of the
	// tally's function over the messages from tallyFrom to tallyTo.
	gen                          int
	tallyGen, tallyFrom, tallyTo int
	tally                        int
	tallied                      bool
	dirty                        bool // written since the last Sync
	// quiet keeps a reread from warning again of the lines it skips.
	quiet bool
	// rec is the record lines are decoded into (see decodeLine).
	rec *record
	// warm is the session's place among the Manager's warm sessions,
	// and warmBytes what it counts there (both guarded by the
	// Manager's warmMu).
	warm      *list.Element
	warmBytes int64
	size      int64

	// head is the updated_at of the file's first line, the one
	// nanobot's list_sessions() reads; headAt is when this process last
	// rewrote that line (see refreshHead).
	head   string
	headAt time.Time

	// holds tells that a turn of this process holds the session (Lock):
	// writes of other goroutines go through it instead of waiting.
	holds bool
	// used is when the session was last asked for or released.
	used time.Time

	// A session in a state.Store (nil f): its conversation, the turn
	// that holds it, how many of its records were read, the first of them (to
	// tell a conversation deleted and written again), and the lines to
	// write before the first message (its metadata record).
	conv    state.Conversation
	turn    state.Turn
	seen    int
	first   string
	pending [][]byte
}

// load reads the file of key, repairing a torn last line. The file is
// read line by line, never whole: a session of hundreds of megabytes
// costs its messages, not its bytes twice over. No descriptor stays open:
// the file is opened again to append (see writeLocked).
func (m *Manager) load(key string) (*Session, error) {
	path := filepath.Join(m.Dir, FileName(key))
	if err := m.adoptOld(key, path); err != nil {
		return nil, err
	}
	if err := m.adoptLegacy(key, path); err != nil {
		return nil, err
	}
	if err := m.evictStranger(key, path); err != nil {
		return nil, err
	}
	s := &Session{Key: key, Path: path, m: m, loaded: true}
	good, torn, err := s.readFile()
	if err != nil {
		return nil, err
	}
	if torn != nil {
		if err := m.quarantine(path, torn); err != nil {
			return nil, err
		}
		if err := os.Truncate(path, good); err != nil {
			return nil, fmt.Errorf("session %s: cut its torn last line: %w", path, err)
		}
	}
	s.size = good
	if s.meta.Type == "" {
		now := m.now().Format(TimeLayout)
		s.meta = Meta{Type: "metadata", Key: key, CreatedAt: now, UpdatedAt: now, Metadata: map[string]any{}}
		b, err := s.marshal(s.meta)
		if err != nil {
			return nil, err
		}
		if s.size == 0 {
			s.head = now
		}
		if err := s.writeLocked(b); err != nil {
			return nil, err
		}
		if err := s.syncLocked(); err != nil {
			return nil, err
		}
		s.closeFileLocked()
	}
	fi, _, err := statID(path)
	if err != nil {
		return nil, fmt.Errorf("session %s: %w", path, err)
	}
	s.fi = fi
	if s.meta.LastConsolidated > len(s.events) {
		s.meta.LastConsolidated = len(s.events)
	}
	return s, nil
}

// readFile decodes the session's file, streamed: it returns the length
// of its complete lines and, when its last line is torn, that line.
func (s *Session) readFile() (good int64, torn []byte, err error) {
	return s.readFileFrom(0)
}

// readFileFrom is readFile from the line at offset from on (what was
// before it is not read).
func (s *Session) readFileFrom(from int64) (good int64, torn []byte, err error) {
	f, err := os.Open(s.Path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil, nil
	}
	if err != nil {
		return 0, nil, fmt.Errorf("session %s: %w", s.Path, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, nil, fmt.Errorf("session %s: %w", s.Path, err)
	}
	size := fi.Size()
	if from > 0 {
		if _, err := f.Seek(from, io.SeekStart); err != nil {
			return 0, nil, fmt.Errorf("session %s: %w", s.Path, err)
		}
		good = from
	}
	r := readers.Get().(*bufio.Reader)
	r.Reset(f)
	defer func() { r.Reset(nil); readers.Put(r); s.rec = nil }()
	lineNo := 0
	var long []byte // a line longer than r's buffer
	for {
		line, err := r.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			long = append(long, line...)
			continue
		}
		if long != nil {
			line, long = append(long, line...), nil
		}
		if errors.Is(err, io.EOF) {
			if len(line) > 0 {
				return good, bytes.Clone(line), nil // a last line without its newline: torn
			}
			return good, nil, nil
		}
		if err != nil {
			return 0, nil, fmt.Errorf("session %s: %w", s.Path, err)
		}
		lineNo++
		next := good + int64(len(line))
		body := line[:len(line)-1]
		if len(bytes.TrimSpace(body)) == 0 {
			good = next
			continue
		}
		held := len(s.events)
		err = s.decodeLine(body)
		switch n := len(s.events); {
		case n == held+1:
			s.offs = append(s.offs, good)
		case n < held:
			s.offs = nil // a new start (a store's /new)
		}
		if lineNo == 1 && from == 0 && err == nil {
			s.head = s.meta.UpdatedAt
		}
		if err != nil {
			if next >= size {
				// The last line is torn though newline-ended (a
				// partial write of a multi-byte sequence).
				return good, bytes.Clone(line), nil
			}
			if !s.quiet {
				s.m.warn(fmt.Sprintf("session %s:%d: skipped a line that is not a message (%v)", s.Path, lineNo, err))
			}
		}
		good = next
	}
}

// readers are the buffers session files are read through: a session
// read back at each turn costs no new buffer.
var readers = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 64<<10) }}

// metaKey is the key the metadata record of the session file at path
// names ("" when there is none).
func metaKey(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	line, _ := bufio.NewReader(f).ReadBytes('\n')
	var meta Meta
	if json.Unmarshal(line, &meta) != nil || meta.Type != "metadata" {
		return ""
	}
	return meta.Key
}

// evictStranger moves away a file at path that another key's session
// wrote under nanobot's name (web_alice_notes.jsonl of "web:alice_notes"
// is also the name of "web:alice:notes"): to that key's own name, so
// that neither chat reads the other's history.
func (m *Manager) evictStranger(key, path string) error {
	owner := metaKey(path)
	if owner == "" || owner == key || FileName(owner) == FileName(key) || legacyName(owner) != filepath.Base(path) {
		return nil // its own, or a file put there by hand: read as it is
	}
	to := filepath.Join(m.Dir, FileName(owner))
	if _, err := os.Lstat(to); !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("session %s: %s holds the session of %q, and %s exists too: move one of them aside", key, path, owner, to)
	}
	if err := os.Rename(path, to); err != nil {
		return fmt.Errorf("session %s: move %s (the session of %q) to its name: %w", key, path, owner, err)
	}
	m.warn(fmt.Sprintf("session %s: %s held the session of %q: renamed to %s", key, filepath.Base(path), owner, filepath.Base(to)))
	return nil
}

// adoptLegacy renames the file a session had under nanobot's name (before
// FileName told keys apart) to path, when path does not exist yet and
// that file's metadata record names key: a file there for another key
// (one that nanobot's name mapped to the same file) is left to it.
func (m *Manager) adoptLegacy(key, path string) error {
	old := filepath.Join(m.Dir, legacyName(key))
	if old == path {
		return nil
	}
	if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if metaKey(old) != key {
		return nil // none, unreadable, or another key's
	}
	if err := os.Rename(old, path); err != nil {
		return fmt.Errorf("session %s: rename %s to its name: %w", key, old, err)
	}
	m.warn(fmt.Sprintf("session %s: renamed %s to %s (a name no other chat shares)", key, filepath.Base(old), filepath.Base(path)))
	return nil
}

// adoptOld moves the session of key from the Legacy folder (nanobot's
// name of it there) to path, when neither path nor the name nanobot
// gives it under Dir exists: nanobot's SessionManager._load. A file
// there whose metadata record names another key is left alone.
func (m *Manager) adoptOld(key, path string) error {
	if m.Legacy == "" {
		return nil
	}
	old := filepath.Join(m.Legacy, legacyName(key))
	if filepath.Clean(old) == filepath.Clean(path) {
		return nil
	}
	for _, p := range []string{path, filepath.Join(m.Dir, legacyName(key))} {
		if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
			return nil
		}
	}
	fi, err := os.Lstat(old)
	if err != nil || !fi.Mode().IsRegular() {
		return nil
	}
	if owner := metaKey(old); owner != "" && owner != key {
		return nil
	}
	if err := atomicfile.MoveNoReplace(old, path); err != nil {
		return fmt.Errorf("session %s: move it from %s: %w", key, old, err)
	}
	m.warn(fmt.Sprintf("session %s: moved from nanobot's old sessions folder %s to %s", key, old, path))
	return nil
}

func (m *Manager) warn(msg string) {
	if m.Warn != nil {
		m.Warn(msg)
	}
}

// quarantine keeps a torn tail beside the session, never losing bytes.
func (m *Manager) quarantine(path string, tail []byte) error {
	q := fmt.Sprintf("%s.torn-%s", path, m.now().UTC().Format("20060102T150405.000000000"))
	if err := os.WriteFile(q, tail, 0o600); err != nil {
		return fmt.Errorf("session %s: keep its torn last line aside in %s: %w", path, q, err)
	}
	m.warn(fmt.Sprintf("session %s: its last line was torn (%d bytes, a crash while writing?): cut off and kept in %s", path, len(tail), q))
	return nil
}

// record is any line of a session file: a metadata record or a message.
type record struct {
	Type             string          `json:"_type"`
	Key              string          `json:"key"`
	CreatedAt        string          `json:"created_at"`
	UpdatedAt        string          `json:"updated_at"`
	Metadata         map[string]any  `json:"metadata"`
	LastConsolidated int             `json:"last_consolidated"`
	Role             string          `json:"role"`
	Content          json.RawMessage `json:"content"`
	ToolCalls        []ToolCall      `json:"tool_calls"`
	ToolCallID       string          `json:"tool_call_id"`
	Name             string          `json:"name"`
	ReasoningContent string          `json:"reasoning_content"`
	Timestamp        string          `json:"timestamp"`
	Extra            map[string]any  `json:"nb_extra"`
	IsError          bool            `json:"nb_error"`
}

// decodeLine reads one line: a metadata record (the last one read wins,
// so a cursor is advanced by appending a record) or a message. One
// decoding per line: a 10 MB session loads in tens of milliseconds.
func (s *Session) decodeLine(line []byte) error {
	// One record for all the lines a session reads (a decoded record
	// escapes): what it held is in the message made of it.
	if s.rec == nil {
		s.rec = new(record)
	}
	r := s.rec
	*r = record{}
	// segmentio's decoder reads encoding/json's format 3-4 times faster.
	if err := sjson.Unmarshal(line, r); err != nil {
		return err
	}
	if r.Type == newMarker {
		// /new in a store: the session starts afresh (the file is
		// replaced instead).
		s.events, s.evBytes, s.meta, s.size = nil, 0, Meta{}, 0
		s.gen++
		return nil
	}
	if r.Type == "metadata" {
		meta := Meta{Type: r.Type, Key: r.Key, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt, Metadata: r.Metadata, LastConsolidated: r.LastConsolidated}
		if meta.Metadata == nil {
			meta.Metadata = map[string]any{}
		}
		if meta.CreatedAt == "" {
			meta.CreatedAt = s.meta.CreatedAt
		}
		s.meta = meta
		return nil
	}
	if r.Role == "" {
		return errors.New("no role")
	}
	msg := Message{Role: r.Role, ToolCalls: r.ToolCalls, ToolCallID: r.ToolCallID, Name: r.Name,
		ReasoningContent: r.ReasoningContent, Timestamp: r.Timestamp, Extra: r.Extra, IsError: r.IsError}
	if c := r.Content; len(c) > 0 && c[0] == '"' {
		if str, ok := plainString(c); ok {
			msg.Content = str
		} else {
			var str string
			if err := sjson.Unmarshal(c, &str); err != nil {
				return err
			}
			msg.Content = str
		}
	} else if len(c) > 0 && string(c) != "null" {
		var v any
		if err := json.Unmarshal(c, &v); err != nil {
			return err
		}
		msg.Content = v
	}
	ev := toEvent(msg)
	s.events = append(s.events, ev)
	s.evBytes += eventBytes(ev)
	return nil
}

// plainString is the JSON string c (quotes included) when it holds no
// escape, no control character and only valid UTF-8: its bytes between
// the quotes, what a decoder would return, without a decoder's pass.
func plainString(c []byte) (string, bool) {
	if len(c) < 2 || c[len(c)-1] != '"' {
		return "", false
	}
	in := c[1 : len(c)-1]
	for _, b := range in {
		if b == '\\' || b == '"' || b < 0x20 {
			return "", false
		}
	}
	if !utf8.Valid(in) {
		return "", false
	}
	return string(in), true
}

// History is the messages after the consolidated ones (those live in
// MEMORY.md and HISTORY.md).
func (s *Session) History() []state.Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.eventsFromLocked(s.meta.LastConsolidated)
}

// EventsFrom returns the messages from the index i on (consolidated ones
// included in the count): from memory when they are there, so that what
// runs after each turn (memory consolidation's estimate, a guest's
// window) does not read the whole file back.
func (s *Session) EventsFrom(i int) []state.Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.eventsFromLocked(i)
}

func (s *Session) eventsFromLocked(i int) []state.Event {
	ev, skip := s.events, s.skip
	if !s.loaded || i < skip {
		ev, skip = s.readBackLocked(i)
	}
	ev = ev[min(max(i-skip, 0), len(ev)):]
	return ev[:len(ev):len(ev)]
}

// Tally is the sum of fn over the messages from the index from on,
// kept up to date as messages are appended: fn is called only with the
// messages appended since the last call (all of them again when from
// changed or messages were removed), so that what runs after each turn
// (memory consolidation's token estimate of the messages not
// consolidated) does not read the whole tail, nor back from the file
// (issue 36). fn must be the same function at every call, and additive
// (fn(a+b) = fn(a)+fn(b)).
func (s *Session) Tally(from int, fn func([]state.Event) int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.countLocked()
	if !s.tallied || s.tallyGen != s.gen || s.tallyFrom != from || s.tallyTo > n || s.tallyTo < from {
		s.tallied, s.tallyGen, s.tallyFrom, s.tallyTo, s.tally = true, s.gen, from, from, 0
	}
	if s.tallyTo < n {
		s.tally += fn(s.eventsFromLocked(s.tallyTo))
		s.tallyTo = n
	}
	return s.tally
}

// Append makes each event a message line, written (not yet synced: see
// Sync) before Append returns. Partial answers are not kept, as nanobot
// keeps no failed answer. Outside a turn of this process, ctx bounds
// the wait for the session and the reread of what others appended (see
// held); a write, once started, is finished.
func (s *Session) Append(ctx context.Context, events ...state.Event) error {
	return s.held(ctx, func() error {
		now := s.m.now().Format(TimeLayout)
		var (
			lines [][]byte
			kept  []state.Event
		)
		for _, ev := range events {
			if ev.Partial {
				continue
			}
			msg, ok := fromEvent(ev, now)
			if !ok {
				continue
			}
			b, err := s.marshal(msg)
			if err != nil {
				return err
			}
			lines = append(lines, b)
			ev.At = msg.Timestamp
			kept = append(kept, ev)
		}
		off := s.size
		if err := s.writeLocked(lines...); err != nil {
			return err
		}
		if s.loaded {
			s.events = append(s.events, kept...)
			for i, l := range lines {
				s.offs = append(s.offs, off)
				off += int64(len(l))
				s.evBytes += eventBytes(kept[i])
			}
		} else {
			s.count += len(kept)
		}
		s.meta.UpdatedAt = now
		return nil
	})
}

// Conversation is the session as the agent's conversation
// (agent.Conversation) for the turn that runs with ctx: it reads the
// session's history and appends with ctx. With window > 0, the history
// it reads starts no earlier than the last window messages not
// consolidated when it is made, at the first user's message among them
// (all of them when there is none), as nanobot up to v0.1.4.post4 sends
// get_history(max_messages=memoryWindow): when consolidation falls
// behind, a turn still sends and reads back a bounded window, not the
// whole tail. What the turn appends is always read.
func (s *Session) Conversation(ctx context.Context, window int) *Conversation {
	c := &Conversation{s: s, ctx: ctx}
	s.mu.Lock()
	defer s.mu.Unlock()
	// Remembered for the session's next read back: only the window's
	// messages are read when it leaves memory and comes back (warm.go).
	s.window = max(window, 0)
	if window <= 0 {
		return c
	}
	n, from := s.countLocked(), s.meta.LastConsolidated
	if n-from <= window {
		return c
	}
	start := n - window
	for i, ev := range s.eventsFromLocked(start) {
		if ev.Who == state.RoleUser {
			start += i
			break
		}
	}
	c.from = start
	return c
}

// Conversation is a session seen by one turn's agent (see
// Session.Conversation). A turn holds its session (Lock), so its appends
// do not wait: the context matters only to an append made outside one.
type Conversation struct {
	s    *Session
	ctx  context.Context //nolint:containedctx // the agent's Conversation takes none: the turn's, for its appends
	from int             // the first message read (see Session.Conversation); 0: from the consolidated ones
}

// History implements agent.Conversation.
func (c *Conversation) History() []state.Event {
	if c.from == 0 {
		return c.s.History()
	}
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	return c.s.eventsFromLocked(max(c.from, c.s.meta.LastConsolidated))
}

// Append implements agent.Conversation.
func (c *Conversation) Append(events ...state.Event) error { return c.s.Append(c.ctx, events...) }

// Sync makes what was appended durable (fsync): the gateway calls it
// before it sends a reply.
func (s *Session) Sync() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.syncLocked()
}

func (s *Session) syncLocked() error {
	if !s.dirty || s.conv != nil {
		return nil
	}
	fd := s.fd
	if !s.open {
		// Written, then closed before this Sync: the file's data is
		// flushed through any descriptor of it.
		var err error
		if fd, err = openFD(s.Path, syscall.O_WRONLY|syscall.O_APPEND, 0); err != nil {
			return fmt.Errorf("session %s: sync: %w", s.Path, err)
		}
		defer syscall.Close(fd)
	}
	if err := ignoringEINTR(func() error { return syscall.Fsync(fd) }); err != nil {
		return fmt.Errorf("session %s: sync: %w", s.Path, &os.PathError{Op: "sync", Path: s.Path, Err: err})
	}
	s.dirty = false
	return nil
}

// fileID identifies a file (os.SameFile's device and inode); ok is
// false for none.
type fileID struct {
	dev, ino uint64
	ok       bool
}

// statID is os.Stat's identity and size of the file at path, without
// an os.FileInfo to allocate, its errors those of os.Stat.
func statID(path string) (fileID, int64, error) {
	var st syscall.Stat_t
	if err := ignoringEINTR(func() error { return syscall.Stat(path, &st) }); err != nil {
		return fileID{}, 0, &os.PathError{Op: "stat", Path: path, Err: err}
	}
	return fileID{dev: uint64(st.Dev), ino: uint64(st.Ino), ok: true}, st.Size, nil //nolint:unconvert // Dev is not a uint64 everywhere
}

// openFD opens path with flags (and O_CLOEXEC) as a bare descriptor,
// its errors those of os.OpenFile.
func openFD(path string, flags int, perm uint32) (int, error) {
	var fd int
	err := ignoringEINTR(func() error {
		var err error
		fd, err = syscall.Open(path, flags|syscall.O_CLOEXEC, perm)
		return err
	})
	if err != nil {
		return -1, &os.PathError{Op: "open", Path: path, Err: err}
	}
	return fd, nil
}

// ignoringEINTR runs fn again while it is interrupted by a signal.
func ignoringEINTR(fn func() error) error {
	for {
		if err := fn(); !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}

// writeFD writes b whole to fd (as os.File.Write does): the bytes
// written and the error that stopped it.
func writeFD(fd int, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		m, err := syscall.Write(fd, b[n:])
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if m > 0 {
			n += m
		}
		if err != nil {
			return n, err
		}
		if m == 0 {
			return n, io.ErrUnexpectedEOF
		}
	}
	return n, nil
}

// closeFileLocked closes the descriptor that appends, if open: done when
// the session is released, so that idle sessions hold none.
func (s *Session) closeFileLocked() error {
	if !s.open {
		return nil
	}
	err := syscall.Close(s.fd)
	s.fd, s.open = -1, false
	if err != nil {
		err = &os.PathError{Op: "close", Path: s.Path, Err: err}
		return fmt.Errorf("session %s: close: %w", s.Path, err)
	}
	return nil
}

// marshal is v as a line, with its newline.
func (s *Session) marshal(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("session %s: %w", s.Path, err)
	}
	return append(b, '\n'), nil
}

// writeLocked appends lines (each with its newline): to the file, or to
// the store as one append of the turn that holds the session.
func (s *Session) writeLocked(lines ...[]byte) error {
	if len(lines) == 0 {
		return nil
	}
	if s.conv != nil {
		return s.storeLocked(lines)
	}
	if !s.open {
		fd, err := openFD(s.Path, syscall.O_CREAT|syscall.O_WRONLY|syscall.O_APPEND, 0o600)
		if err != nil {
			return fmt.Errorf("session %s: %w", s.Path, err)
		}
		s.fd, s.open = fd, true
	}
	for _, b := range lines {
		// One write call per line: O_APPEND puts it whole at the end; a
		// crash in the middle leaves a torn last line that the next load
		// repairs.
		n, err := writeFD(s.fd, b)
		s.size += int64(n)
		s.dirty = true
		if err != nil {
			return fmt.Errorf("session %s: write: %w", s.Path, &os.PathError{Op: "write", Path: s.Path, Err: err})
		}
	}
	return nil
}

// Meta returns a copy of the session's metadata record.
func (s *Session) Meta() Meta {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.meta
}

// Messages returns every message, consolidated ones included, as lines.
func (s *Session) Messages() []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	events := s.allEventsLocked()
	out := make([]Message, 0, len(events))
	for _, ev := range events {
		if m, ok := fromEvent(ev, ev.At); ok {
			out = append(out, m)
		}
	}
	return out
}

// Len is the number of messages, consolidated ones included.
func (s *Session) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.countLocked()
}

// Events returns every message, consolidated ones included, as the
// agent's events (memory consolidation reads them).
func (s *Session) Events() []state.Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	events := s.allEventsLocked()
	return events[:len(events):len(events)]
}

// Size is the file's size in bytes.
func (s *Session) Size() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.size
}

// SetConsolidated advances last_consolidated (memory consolidation moved
// the messages before n into MEMORY.md and HISTORY.md) by appending a
// metadata record, synced: the last record read wins, in nb and in
// nanobot. n never goes back nor past the messages. ctx is as Append's.
func (s *Session) SetConsolidated(ctx context.Context, n int) error {
	return s.held(ctx, func() error { return s.consolidateLocked(n) })
}

// consolidateLocked appends the metadata record of last_consolidated n.
func (s *Session) consolidateLocked(n int) error {
	if n <= s.meta.LastConsolidated {
		return nil
	}
	n = min(n, s.countLocked())
	meta := s.meta
	meta.LastConsolidated = n
	meta.UpdatedAt = s.m.now().Format(TimeLayout)
	b, err := s.marshal(meta)
	if err != nil {
		return err
	}
	if err := s.writeLocked(b); err != nil {
		return err
	}
	s.meta = meta
	return s.syncLocked()
}

// ConsolidateAll marks every message consolidated, those another
// process or replica appended included (the heartbeat's isolated
// session replays none of its past beats). ctx is as Append's.
func (s *Session) ConsolidateAll(ctx context.Context) error {
	return s.held(ctx, func() error { return s.consolidateLocked(s.countLocked()) })
}

// Clear starts the session afresh (/new): the file is replaced, atomically,
// by one holding only a new metadata record; the old one is kept beside
// it as <file>.<time>.bak, never lost. In a store, a marker and the new
// metadata record are appended, in one append: the old messages stay
// before the marker. ctx is as Append's.
func (s *Session) Clear(ctx context.Context) error {
	return s.held(ctx, s.clearLocked)
}

func (s *Session) clearLocked() error {
	if s.conv != nil {
		return s.clearStoredLocked()
	}
	now := s.m.now()
	if err := s.syncLocked(); err != nil {
		return err
	}
	bak := fmt.Sprintf("%s.%s.bak", s.Path, now.UTC().Format("20060102T150405.000000000"))
	if err := os.Link(s.Path, bak); err != nil {
		return fmt.Errorf("session %s: keep the old session: %w", s.Path, err)
	}
	meta := Meta{Type: "metadata", Key: s.Key, CreatedAt: now.Format(TimeLayout), UpdatedAt: now.Format(TimeLayout), Metadata: s.meta.Metadata}
	b, _ := json.Marshal(meta)
	if err := atomicfile.WriteFile(s.Path, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("session %s: %w", s.Path, err)
	}
	fi, _, err := statID(s.Path)
	if err != nil {
		return fmt.Errorf("session %s: %w", s.Path, err)
	}
	s.closeFileLocked() //nolint:errcheck // the old file, synced above
	s.fi, s.meta, s.events, s.loaded, s.size, s.dirty = fi, meta, nil, true, int64(len(b)+1), false
	s.offs, s.skip, s.resumeIdx, s.resumeOff, s.evBytes, s.count = nil, 0, 0, 0, 0, 0
	s.winIdx, s.winOff = 0, 0
	s.gen++
	s.head = meta.UpdatedAt
	return nil
}

// Lock takes the session's lock shared with other processes (nb gateway
// chat beside the running gateway) for one turn, and rereads what another
// process appended meanwhile. It waits for the lock until ctx ends; the
// returned function releases it.
func (s *Session) Lock(ctx context.Context) (func(), error) {
	if s.conv != nil {
		return s.lockStored(ctx)
	}
	return s.lockFile(ctx, true)
}

// lockFile is Lock on a session file; load reads its messages back if
// they left memory (a turn needs them; rewriting the first line does
// not).
func (s *Session) lockFile(ctx context.Context, load bool) (func(), error) {
	// A bare descriptor: see Session.fd.
	lf, err := openFD(s.Path+".lock", syscall.O_CREAT|syscall.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("session %s: lock: %w", s.Path, err)
	}
	for wait := time.Millisecond; ; wait = min(wait*2, 50*time.Millisecond) {
		err := ignoringEINTR(func() error { return syscall.Flock(lf, syscall.LOCK_EX|syscall.LOCK_NB) })
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			syscall.Close(lf)
			return nil, fmt.Errorf("session %s: lock: %w", s.Path, err)
		}
		select {
		case <-ctx.Done():
			syscall.Close(lf)
			return nil, ctx.Err()
		case <-time.After(wait):
		}
	}
	if err := s.refresh(load); err != nil {
		syscall.Close(lf)
		return nil, err
	}
	s.mu.Lock()
	s.holds = true
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		s.holds = false
		s.used = s.m.now()
		// What was written stays dirty until a Sync: the data is the
		// file's, not the descriptor's.
		if err := s.closeFileLocked(); err != nil {
			s.m.warn(err.Error())
		}
		s.mu.Unlock()
		syscall.Close(lf) // closing releases the lock
		s.release()
	}, nil
}

// refresh rereads the file when another process changed it: the lines it
// appended, or the whole file when it was replaced (/new); and, with
// load, the messages that left memory.
func (s *Session) refresh(load bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	fi, size, err := statID(s.Path)
	if err != nil {
		return fmt.Errorf("session %s: %w", s.Path, err)
	}
	if s.fi.ok && fi == s.fi && size == s.size {
		if s.loaded || !load {
			return nil
		}
		// Its messages left memory: read back, for the turn.
		if err := s.loadForTurnLocked(); err == nil {
			return nil
		}
		// Changed meanwhile after all: read as another process's.
	}
	fresh, err := s.m.load(s.Key)
	if err != nil {
		return err
	}
	if err := s.syncLocked(); err != nil {
		return err
	}
	s.closeFileLocked() //nolint:errcheck // synced above
	s.fi, s.meta, s.events, s.loaded, s.size, s.dirty = fresh.fi, fresh.meta, fresh.events, true, fresh.size, false
	s.offs, s.skip, s.resumeIdx, s.resumeOff, s.evBytes, s.count = fresh.offs, 0, 0, 0, fresh.evBytes, 0
	s.winIdx, s.winOff = 0, 0
	s.gen++
	s.head = fresh.head
	return nil
}

func (s *Session) close() error {
	// Not for long: the manager's lock may be held (an idle session
	// forgotten), and another process may hold the session's.
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	herr := s.RefreshHead(ctx, 0)
	cancel()
	s.mu.Lock()
	defer s.mu.Unlock()
	err := s.syncLocked()
	return errors.Join(herr, err, s.closeFileLocked())
}

// Mark is what a session held when a turn began: Rollback goes back to
// it.
type Mark struct {
	size   int64
	events int
	meta   Meta
	fi     fileID
}

// Mark notes where the session is (taken by a turn that holds it).
func (s *Session) Mark() Mark {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Mark{size: s.size, events: s.countLocked(), meta: s.meta, fi: s.fi}
}

// Rollback forgets what was written since m, in the turn that holds
// the session: the file is cut back to its length then, so that a
// stopped turn (/stop) leaves nothing of itself, as nanobot saves
// nothing of a cancelled turn. A session in a store (appended to only)
// and a file replaced meanwhile are left as they are.
func (s *Session) Rollback(m Mark) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conv != nil || !s.holds || s.size == m.size || !m.fi.ok || !s.fi.ok || m.fi != s.fi {
		return nil
	}
	if err := s.syncLocked(); err != nil {
		return err
	}
	s.closeFileLocked() //nolint:errcheck // synced above
	if err := os.Truncate(s.Path, m.size); err != nil {
		return fmt.Errorf("session %s: forget the stopped turn: %w", s.Path, err)
	}
	if f, err := os.OpenFile(s.Path, os.O_WRONLY, 0); err == nil {
		f.Sync() //nolint:errcheck // best effort: the cut is durable
		f.Close()
	}
	s.size, s.meta = m.size, m.meta
	s.gen++
	if keep := m.events - s.skip; s.loaded && keep >= 0 {
		for _, ev := range s.events[min(keep, len(s.events)):] {
			s.evBytes -= eventBytes(ev)
		}
		s.events, s.offs = s.events[:min(keep, len(s.events))], s.offs[:min(keep, len(s.offs))]
	} else {
		s.events, s.offs, s.loaded, s.evBytes, s.count = nil, nil, false, 0, m.events
	}
	if s.resumeOff > m.size {
		s.resumeIdx, s.resumeOff = 0, 0
	}
	if s.winOff > m.size {
		s.winIdx, s.winOff = 0, 0
	}
	return nil
}

// HeadInterval is how often at most the first line of an active
// session's file is rewritten (see RefreshHead).
const HeadInterval = time.Minute

// RefreshHead makes the updated_at of the file's first line, the only
// line nanobot's list_sessions() reads (and by which it picks the
// heartbeat's chat), that of the session's last write, when it is not
// and the line was not rewritten in the last every: the file is written
// anew, beside it, and renamed over it (a crash leaves the old file or
// the new one, never half of one), under the session's lock. A session
// a turn of this process holds is left to its next chance; so is one in
// a store.
func (s *Session) RefreshHead(ctx context.Context, every time.Duration) error {
	s.mu.Lock()
	stale := s.conv == nil && s.meta.Type != "" && s.meta.UpdatedAt != s.head &&
		(every <= 0 || s.m.now().Sub(s.headAt) >= every) && !s.holds
	s.mu.Unlock()
	if !stale {
		return nil
	}
	unlock, err := s.lockFile(ctx, false)
	if err != nil {
		if ctx.Err() != nil {
			return nil // busy: the next chance will do
		}
		return err
	}
	defer unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.meta.UpdatedAt == s.head {
		return nil // rewritten by another process meanwhile
	}
	return s.rewriteHeadLocked()
}

// rewriteHeadLocked writes the file again with the current metadata
// record as its first line, every other line as it is.
func (s *Session) rewriteHeadLocked() error {
	if err := s.syncLocked(); err != nil {
		return err
	}
	s.closeFileLocked() //nolint:errcheck // synced above
	meta, err := s.marshal(s.meta)
	if err != nil {
		return err
	}
	in, err := os.Open(s.Path)
	if err != nil {
		return fmt.Errorf("session %s: %w", s.Path, err)
	}
	defer in.Close()
	// Through a pooled buffer: the open sessions' heads are rewritten
	// one after another, and a buffer each (it was 256 KiB) was most of
	// the garbage of a busy gateway's minute.
	r := readers.Get().(*bufio.Reader)
	r.Reset(in)
	defer func() { r.Reset(nil); readers.Put(r) }()
	if _, err := r.ReadBytes('\n'); err != nil {
		return fmt.Errorf("session %s: its first line: %w", s.Path, err)
	}
	var n1 int
	var n2 int64
	err = atomicfile.WriteFunc(s.Path, 0o600, func(w io.Writer) error {
		var err error
		if n1, err = w.Write(meta); err != nil {
			return err
		}
		n2, err = io.Copy(w, r)
		return err
	})
	if err != nil {
		return fmt.Errorf("session %s: rewrite its first line: %w", s.Path, err)
	}
	fi, _, err := statID(s.Path)
	if err != nil {
		return fmt.Errorf("session %s: %w", s.Path, err)
	}
	// The first line's length changed: every later line moved by as much.
	shift := int64(n1) + n2 - s.size
	for i := range s.offs {
		s.offs[i] += shift
	}
	if s.resumeOff > 0 {
		s.resumeOff += shift
	}
	if s.winOff > 0 {
		s.winOff += shift
	}
	s.fi, s.size, s.head, s.headAt = fi, int64(n1)+n2, s.meta.UpdatedAt, s.m.now()
	return nil
}

// RefreshHeads refreshes the first line of every open session (see
// RefreshHead) not rewritten in the last every.
func (m *Manager) RefreshHeads(ctx context.Context, every time.Duration) error {
	m.mu.Lock()
	open := make([]*Session, 0, len(m.open))
	for _, s := range m.open {
		open = append(open, s)
	}
	m.mu.Unlock()
	var errs []error
	for _, s := range open {
		errs = append(errs, s.RefreshHead(ctx, every))
	}
	return errors.Join(errs...)
}

// KeepHeads refreshes the first lines of the open sessions every
// HeadInterval until ctx ends (Close does it a last time).
func (m *Manager) KeepHeads(ctx context.Context) error {
	if m.st != nil {
		return nil
	}
	t := time.NewTicker(HeadInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			if err := m.RefreshHeads(ctx, HeadInterval); err != nil {
				m.warn(err.Error())
			}
		}
	}
}

// fromEvent converts an agent event into a message line.
func fromEvent(ev state.Event, ts string) (Message, bool) {
	switch ev.Who {
	case state.RoleUser:
		return Message{Role: "user", Content: text(ev.Message), Timestamp: ts}, true
	case state.RoleAI:
		m := Message{Role: "assistant", Timestamp: ts, ReasoningContent: ev.Reasoning, Extra: ev.Extra}
		if t := text(ev.Message); t != "" || ev.Message != nil {
			m.Content = t
		}
		for _, c := range ev.ToolCalls {
			tc := ToolCall{Type: "function", ID: c.ID}
			tc.Function.Name, tc.Function.Arguments = c.Name, c.Arguments
			if tc.Function.Arguments == "" {
				tc.Function.Arguments = "{}"
			}
			m.ToolCalls = append(m.ToolCalls, tc)
		}
		if m.Content == nil && len(m.ToolCalls) == 0 {
			return m, false // nanobot keeps no empty assistant message
		}
		return m, true
	case state.RoleTool:
		c := text(ev.Message)
		if len(c) > MaxToolResult {
			c = c[:MaxToolResult] + "\n... (truncated)"
		}
		return Message{Role: "tool", Content: c, Timestamp: ts, ToolCallID: ev.Result.ID, Name: ev.Result.Name, IsError: ev.Result.IsError}, true
	}
	return Message{}, false
}

// toEvent converts a message line into the agent's event.
func toEvent(m Message) state.Event {
	ev := state.Event{At: m.Timestamp}
	switch m.Role {
	case "user":
		ev.Who = state.RoleUser
		t := text(m.Content)
		ev.Message, ev.Input = t, &t
	case "assistant":
		ev.Who = state.RoleAI
		if m.Content != nil {
			ev.Message = text(m.Content)
		}
		for _, c := range m.ToolCalls {
			ev.ToolCalls = append(ev.ToolCalls, state.ToolCall{ID: c.ID, Name: c.Function.Name, Arguments: c.Function.Arguments})
		}
		ev.Reasoning, ev.Extra = m.ReasoningContent, m.Extra
	case "tool":
		ev.Who = state.RoleTool
		ev.Message = text(m.Content)
		ev.Result = state.ToolResult{ID: m.ToolCallID, Name: m.Name, IsError: m.IsError}
	default:
		ev.Who = state.Role(m.Role) // system and others: the agent leaves them out
		ev.Message = text(m.Content)
	}
	return ev
}

// text is a message content as text: a string as it is, content blocks
// (nanobot's multimodal user messages) as their text parts, anything else
// as JSON.
func text(v any) string {
	switch t := v.(type) {
	case nil:
		return ""
	case string:
		return t
	case []any:
		var parts []string
		for _, b := range t {
			if m, ok := b.(map[string]any); ok {
				if s, ok := m["text"].(string); ok {
					parts = append(parts, s)
				} else if m["type"] == "image_url" {
					parts = append(parts, "[image]")
				}
			}
		}
		return strings.Join(parts, "\n")
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

var _ io.Closer = (*Manager)(nil)
