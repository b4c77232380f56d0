package session

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nbots/nb/state"
)

// headOf reads a session file as nanobot's list_sessions() does: its
// first line only.
func headOf(t *testing.T, path string) Meta {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	line, _ := bufio.NewReader(f).ReadBytes('\n')
	var m Meta
	if err := json.Unmarshal(line, &m); err != nil {
		t.Fatalf("first line %q: %v", line, err)
	}
	return m
}

// TestHeadStaysTrue: the updated_at of a session file's first line, by
// which nanobot's list_sessions() orders sessions and picks the
// heartbeat's chat, follows the session's writes: rewritten at most once
// a minute while the session is active, and when it is closed; every
// other line is kept byte for byte.
func TestHeadStaysTrue(t *testing.T) {
	m := newManager(t)
	clock := time.Date(2026, 6, 1, 9, 0, 0, 0, time.Local)
	m.Now = func() time.Time { return clock }
	path := filepath.Join(m.Dir, "telegram_12345.jsonl")
	os.WriteFile(path, []byte(nanobotSession), 0o600)
	s, err := m.Get(t.Context(), "telegram:12345")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	say := func(text string) {
		t.Helper()
		if err := s.Append(t.Context(), state.Event{Who: state.RoleUser, Message: text, Input: &text}); err != nil {
			t.Fatal(err)
		}
		if err := s.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	say("hello")
	if err := m.RefreshHeads(ctx, HeadInterval); err != nil {
		t.Fatal(err)
	}
	if got := headOf(t, path); got.UpdatedAt != "2026-06-01T09:00:00.000000" || got.Key != "telegram:12345" || got.CreatedAt != "2026-03-01T10:00:00" || got.LastConsolidated != 2 {
		t.Fatalf("first line %+v", got)
	}
	data, _ := os.ReadFile(path)
	_, rest, _ := strings.Cut(string(data), "\n")
	_, want, _ := strings.Cut(nanobotSession, "\n")
	if !strings.HasPrefix(rest, want) || strings.Count(rest, "\n") != strings.Count(want, "\n")+1 {
		t.Fatalf("the other lines changed:\n%s", rest)
	}

	clock = clock.Add(10 * time.Second)
	say("again")
	m.RefreshHeads(ctx, HeadInterval)
	if got := headOf(t, path); got.UpdatedAt != "2026-06-01T09:00:00.000000" {
		t.Errorf("rewritten twice within a minute: %s", got.UpdatedAt)
	}
	clock = clock.Add(time.Minute)
	m.RefreshHeads(ctx, HeadInterval)
	if got := headOf(t, path); got.UpdatedAt != "2026-06-01T09:00:10.000000" {
		t.Errorf("a minute on: %s, want 09:00:10", got.UpdatedAt)
	}
	clock = clock.Add(time.Second)
	say("last")
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if got := headOf(t, path); got.UpdatedAt != "2026-06-01T09:01:11.000000" {
		t.Errorf("after Close: %s, want 09:01:11", got.UpdatedAt)
	}
	// The file reads back whole, in nb as in nanobot.
	m2 := newManager(t)
	m2.Dir = m.Dir
	s2, err := m2.Get(t.Context(), "telegram:12345")
	if err != nil {
		t.Fatal(err)
	}
	if n := s2.Len(); n != 9 {
		t.Errorf("%d messages read back, want 9", n)
	}
}
