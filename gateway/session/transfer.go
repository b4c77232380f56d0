package session

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/nbots/nb/internal/atomicfile"
	"github.com/nbots/nb/state"
)

// Stats count what ImportFiles or ExportFiles moved.
type Stats struct {
	// Sessions were moved, Lines in all (markers of /new aside), Skipped
	// were left as they were (the target had them).
	Sessions, Lines, Skipped int
	// Earlier are the sessions before a /new written as .bak files.
	Earlier int
}

// ImportFiles stores the session files of dir (nanobot's *.jsonl) in the
// store of m, each as one append of its lines, byte for byte. A session
// the store holds already is left as it is (Skipped). A torn last line
// (a crash while writing) is left out with a warning, as loading the file
// would cut it off. The .bak files of earlier sessions stay where they
// are.
func (m *Manager) ImportFiles(ctx context.Context, dir string) (Stats, error) {
	var st Stats
	if m.st == nil {
		return st, errors.New("sessions import: the target is not a store")
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return st, fmt.Errorf("sessions folder: %w", err)
	}
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".jsonl") {
			continue
		}
		path := filepath.Join(dir, e.Name())
		data, err := os.ReadFile(path)
		if err != nil {
			return st, fmt.Errorf("session %s: %w", path, err)
		}
		lines := splitLines(data)
		if n := len(data) - totalLen(lines); n > 0 {
			m.warn(fmt.Sprintf("session %s: its last line was torn (%d bytes without a newline): left out", path, n))
		}
		key := strings.TrimSuffix(e.Name(), ".jsonl")
		if len(lines) > 0 {
			var meta Meta
			if json.Unmarshal(lines[0], &meta) == nil && meta.Type == "metadata" && meta.Key != "" {
				key = meta.Key
			}
		}
		stored, err := m.storeLines(ctx, key, lines)
		if err != nil {
			return st, fmt.Errorf("session %s: %w", path, err)
		}
		if !stored {
			st.Skipped++
			continue
		}
		st.Sessions++
		st.Lines += len(lines)
	}
	return st, nil
}

// splitLines cuts data into its newline-ended lines, each with its
// newline; a last line without one is not among them.
func splitLines(data []byte) [][]byte {
	var out [][]byte
	for len(data) > 0 {
		nl := bytes.IndexByte(data, '\n')
		if nl < 0 {
			break
		}
		out = append(out, data[:nl+1])
		data = data[nl+1:]
	}
	return out
}

func totalLen(lines [][]byte) int {
	n := 0
	for _, l := range lines {
		n += len(l)
	}
	return n
}

// storeLines stores lines as the session key in one exchange, unless the
// store has the session already.
func (m *Manager) storeLines(ctx context.Context, key string, lines [][]byte) (bool, error) {
	conv, err := m.st.store.Open(m.st.bot, EndUser, key)
	if err != nil {
		return false, err
	}
	t, err := conv.Begin(ctx, func() {})
	if err != nil {
		return false, err
	}
	defer t.End()
	if len(t.History()) > 0 {
		return false, nil
	}
	if len(lines) == 0 {
		return true, nil
	}
	at := state.Now()
	events := make([]state.Event, len(lines))
	for i, l := range lines {
		events[i] = state.Event{At: at, Who: Role, Message: string(l)}
	}
	return true, t.Append(events...)
}

// ExportFiles writes the sessions of m's store into dir as nanobot's
// files: the lines of each session since its last /new, byte for byte,
// as <dir>/<FileName(key)>, and those of each session before a /new as
// <file>.<time of the /new>.bak, as the files' /new keeps them. A
// session whose file exists is left out (Skipped): the file is never
// overwritten.
func (m *Manager) ExportFiles(ctx context.Context, dir string) (Stats, error) {
	var st Stats
	if m.st == nil {
		return st, errors.New("sessions export: the source is not a store")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return st, fmt.Errorf("sessions folder: %w", err)
	}
	l, err := m.st.store.List(ctx, m.st.bot)
	if err != nil {
		return st, fmt.Errorf("sessions: %w", err)
	}
	if l.Unreadable > 0 {
		m.warn(fmt.Sprintf("%d sessions cannot be read with this NANO_BOTS_ENCRYPTION_PASSWORD (another password, or none): left out", l.Unreadable))
	}
	keys := make([]string, 0, len(l.Keys))
	for _, k := range l.Keys {
		if k.EndUser == EndUser {
			keys = append(keys, k.Key)
		}
	}
	sort.Strings(keys)
	for _, key := range keys {
		path := filepath.Join(dir, FileName(key))
		if _, err := os.Lstat(path); err == nil {
			m.warn(fmt.Sprintf("session %s: %s exists: left as it is", key, path))
			st.Skipped++
			continue
		}
		conv, err := m.st.store.Open(m.st.bot, EndUser, key)
		if err != nil {
			return st, err
		}
		h, err := conv.History(ctx)
		if err != nil {
			return st, fmt.Errorf("session %s: %w", key, err)
		}
		segments, err := m.segments(conv.HistoryLocation(), h)
		if err != nil {
			return st, err
		}
		last := segments[len(segments)-1]
		for _, seg := range segments[:len(segments)-1] {
			if len(seg.lines) == 0 {
				continue
			}
			bak := fmt.Sprintf("%s.%s.bak", path, seg.until.UTC().Format("20060102T150405.000000000"))
			if err := atomicfile.WriteFile(bak, bytes.Join(seg.lines, nil), 0o600); err != nil {
				return st, fmt.Errorf("session %s: %w", key, err)
			}
			st.Earlier++
			st.Lines += len(seg.lines)
		}
		if err := atomicfile.WriteFile(path, bytes.Join(last.lines, nil), 0o600); err != nil {
			return st, fmt.Errorf("session %s: %w", key, err)
		}
		st.Sessions++
		st.Lines += len(last.lines)
	}
	return st, nil
}

// segment is the lines of one session between two /new, and when the
// /new that ended it came.
type segment struct {
	lines [][]byte
	until time.Time
}

// segments cuts a stored session at its /new markers.
func (m *Manager) segments(where string, h []state.Event) ([]segment, error) {
	out := []segment{{}}
	for i, ev := range h {
		l, ok := line(ev)
		if !ok {
			return nil, fmt.Errorf("%s: record %d is not a session line", where, i+1)
		}
		var mk marker
		if json.Unmarshal([]byte(l), &mk) == nil && mk.Type == newMarker {
			at, err := time.ParseInLocation(TimeLayout, mk.At, time.Local)
			if err != nil {
				at = time.Unix(int64(i), 0) // distinct names all the same
			}
			out[len(out)-1].until = at
			out = append(out, segment{})
			continue
		}
		if !strings.HasSuffix(l, "\n") {
			l += "\n"
		}
		out[len(out)-1].lines = append(out[len(out)-1].lines, []byte(l))
	}
	return out, nil
}
