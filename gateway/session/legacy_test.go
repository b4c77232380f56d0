package session

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLegacySessionMoved: a session nanobot ≤ v0.1.3 left in
// ~/.nanobot/sessions moves under the workspace when its chat is first
// used, as nanobot's SessionManager._load moves it, and its history is
// the chat's; a session the workspace has already is never replaced.
func TestLegacySessionMoved(t *testing.T) {
	legacy := t.TempDir()
	old := filepath.Join(legacy, "telegram_12345.jsonl")
	os.WriteFile(old, []byte(nanobotSession), 0o600)
	other := filepath.Join(legacy, "slack_C01.jsonl")
	os.WriteFile(other, []byte(strings.Replace(nanobotSession, "telegram:12345", "slack:C01", 1)), 0o600)
	m := newManager(t)
	m.Legacy = legacy
	var said []string
	m.Warn = func(s string) { said = append(said, s) }
	os.WriteFile(filepath.Join(m.Dir, "slack_C01.jsonl"), []byte(`{"_type": "metadata", "key": "slack:C01", "created_at": "2026-04-01T10:00:00", "updated_at": "2026-04-01T10:00:00", "metadata": {}, "last_consolidated": 0}`+"\n"), 0o600)

	s, err := m.Get(t.Context(), "telegram:12345")
	if err != nil {
		t.Fatal(err)
	}
	if h := s.History(); len(h) != 4 {
		t.Fatalf("history of the moved session: %d messages, want 4", len(h))
	}
	if data, err := os.ReadFile(filepath.Join(m.Dir, "telegram_12345.jsonl")); err != nil || string(data) != nanobotSession {
		t.Fatalf("the session under the workspace: %q, %v; want nanobot's file byte for byte", data, err)
	}
	if _, err := os.Stat(old); !os.IsNotExist(err) {
		t.Errorf("still in the legacy folder: %v", err)
	}
	if len(said) != 1 || !strings.Contains(said[0], "moved from nanobot's old sessions folder") {
		t.Errorf("said %q", said)
	}

	s, err = m.Get(t.Context(), "slack:C01")
	if err != nil {
		t.Fatal(err)
	}
	if s.Len() != 0 {
		t.Errorf("the workspace's own session was replaced by the legacy one")
	}
	if _, err := os.Stat(other); err != nil {
		t.Errorf("the legacy file of a session the workspace has was touched: %v", err)
	}
}
