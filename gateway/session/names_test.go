package session

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nbots/nb/agent"
	"github.com/nbots/nb/state"
)

// Chat ids that differ only in characters a file name cannot hold each
// get their own file: after a restart, each chat reads its own history.
func TestSessionNamesInjective(t *testing.T) {
	dir := t.TempDir()
	keys := []string{"web:alice?notes", "web:alice_notes", "web:alice:notes", "web:a:b", "web:a|b", "web:a_b",
		"web:a\nb", "web:a b ", "web:a*b", "web:a~b", "web:a_b~" + strings.Repeat("0", 16), "email:a:b", "email:a_b",
		"web:" + strings.Repeat("x", 300), "web:" + strings.Repeat("x", 301)}
	m, err := NewManager(dir)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]string{}
	for _, k := range keys {
		name := FileName(k)
		if other, ok := names[name]; ok {
			t.Errorf("%q and %q share %s", k, other, name)
		}
		names[name] = k
		if len(name) > 255 || strings.ContainsAny(name, "/\\\n<>:\"|?*") {
			t.Errorf("%q: unsafe name %q", k, name)
		}
		s, err := m.Get(t.Context(), k)
		if err != nil {
			t.Fatal(err)
		}
		in := "I am " + k
		if err := s.Append(t.Context(), state.Event{Who: state.RoleUser, Message: in, Input: &in}); err != nil {
			t.Fatal(err)
		}
	}
	m.Close()
	m2, _ := NewManager(dir) // a restart
	defer m2.Close()
	for _, k := range keys {
		s, err := m2.Get(t.Context(), k)
		if err != nil {
			t.Fatal(err)
		}
		if h := s.History(); len(h) != 1 || agent.Text(h[0].Message) != "I am "+k {
			t.Errorf("%q reads %d messages: %+v", k, len(h), h)
		}
	}
}

// The keys nanobot makes keep nanobot's file names, so that nanobot and
// nb read each other's sessions.
func TestSessionNamesNanobot(t *testing.T) {
	for key, want := range map[string]string{
		"telegram:12345":                "telegram_12345.jsonl",
		"telegram:-1001234567890":       "telegram_-1001234567890.jsonl",
		"slack:C0123ABCD:1700000000.01": "slack_C0123ABCD_1700000000.01.jsonl",
		"matrix:!room:example.org":      "matrix_!room_example.org.jsonl",
		"email:john_doe@example.com":    "email_john_doe@example.com.jsonl",
		"discord:987654321":             "discord_987654321.jsonl",
		"cli:direct":                    "cli_direct.jsonl",
		"heartbeat":                     "heartbeat.jsonl",
		"cron:ab12cd34":                 "cron_ab12cd34.jsonl",
	} {
		if got := FileName(key); got != want {
			t.Errorf("%q: %q, want nanobot's %q", key, got, want)
		}
	}
}

// A session written under nanobot's name for a key that now has a name
// of its own is found and renamed, but only by the key its metadata
// record names.
func TestSessionLegacyNameAdopted(t *testing.T) {
	dir := t.TempDir()
	legacy := filepath.Join(dir, "web_alice_notes.jsonl")
	os.WriteFile(legacy, []byte(`{"_type": "metadata", "key": "web:alice?notes", "created_at": "2026-03-01T10:00:00", "updated_at": "2026-03-01T10:00:00", "metadata": {}, "last_consolidated": 0}
{"role": "user", "content": "alice's secret", "timestamp": "2026-03-01T10:00:00.000001"}
`), 0o600)
	m, _ := NewManager(dir)
	defer m.Close()
	other, err := m.Get(t.Context(), "web:alice_notes") // not the key of that file
	if err != nil {
		t.Fatal(err)
	}
	if len(other.History()) != 0 {
		t.Fatalf("another chat read alice's history: %+v", other.History())
	}
	s, err := m.Get(t.Context(), "web:alice?notes")
	if err != nil {
		t.Fatal(err)
	}
	if h := s.History(); len(h) != 1 || agent.Text(h[0].Message) != "alice's secret" {
		t.Fatalf("the old file was not found: %+v", h)
	}
	if _, err := os.Stat(legacy); err == nil || filepath.Base(s.Path) == "web_alice_notes.jsonl" {
		t.Errorf("not renamed: %s", s.Path)
	}
}

// openFDs counts the process's open descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	e, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd")
	}
	return len(e)
}

// After N chats the process's descriptors do not grow with N, and the
// sessions kept in memory are bounded.
func TestIdleSessionsClosed(t *testing.T) {
	m := newManager(t)
	m.MaxOpen = 50
	turn := func(key string) {
		s, err := m.Get(t.Context(), key)
		if err != nil {
			t.Fatal(err)
		}
		unlock, err := s.Lock(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		in := "hi"
		if err := s.Append(t.Context(), state.Event{Who: state.RoleUser, Message: in, Input: &in}, state.Event{Who: state.RoleAI, Message: "hello"}); err != nil {
			t.Fatal(err)
		}
		if err := s.Sync(); err != nil {
			t.Fatal(err)
		}
		unlock()
	}
	turn("web:warm-up")
	before := openFDs(t)
	const n = 1000
	for i := range n {
		turn(fmt.Sprintf("web:%d", i))
	}
	if after := openFDs(t); after-before > 5 {
		t.Errorf("%d descriptors after %d chats, %d before", after, n, before)
	}
	m.mu.Lock()
	kept := len(m.open)
	m.mu.Unlock()
	if kept > m.MaxOpen {
		t.Errorf("%d sessions kept in memory, at most %d wanted", kept, m.MaxOpen)
	}
	// A forgotten chat comes back with its history.
	s, err := m.Get(t.Context(), "web:3")
	if err != nil || len(s.History()) != 2 {
		t.Fatalf("%v %+v", err, s.History())
	}
	// Idle ones go after IdleAfter even under MaxOpen.
	now := time.Now().Add(time.Hour)
	m.Now = func() time.Time { return now }
	m.Get(t.Context(), "web:new")
	m.mu.Lock()
	kept = len(m.open)
	m.mu.Unlock()
	if kept != 1 {
		t.Errorf("%d sessions kept an hour later", kept)
	}
}

// A file that another key wrote under nanobot's name, which is now the
// name of this key ("web:alice:notes" is web_alice_notes.jsonl, where
// "web:alice_notes" used to write), is moved to its owner's name before
// this key reads it.
func TestSessionStrangerFileMoved(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "web_alice_notes.jsonl"), []byte(`{"_type": "metadata", "key": "web:alice_notes", "created_at": "2026-03-01T10:00:00", "updated_at": "2026-03-01T10:00:00", "metadata": {}, "last_consolidated": 0}
{"role": "user", "content": "alice_notes' secret", "timestamp": "2026-03-01T10:00:00.000001"}
`), 0o600)
	m, _ := NewManager(dir)
	defer m.Close()
	s, err := m.Get(t.Context(), "web:alice:notes")
	if err != nil {
		t.Fatal(err)
	}
	if len(s.History()) != 0 || filepath.Base(s.Path) != "web_alice_notes.jsonl" {
		t.Fatalf("%s reads %+v", s.Path, s.History())
	}
	owner, err := m.Get(t.Context(), "web:alice_notes")
	if err != nil {
		t.Fatal(err)
	}
	if h := owner.History(); len(h) != 1 || agent.Text(h[0].Message) != "alice_notes' secret" {
		t.Fatalf("the owner lost its history: %+v", h)
	}
}
