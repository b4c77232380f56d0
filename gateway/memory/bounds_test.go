package memory

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/nbots/nb/gateway/modelcall"
)

// hugeSession is a session of n messages of size bytes each, all sharing
// one string: a 200 MB-class session that costs the test kilobytes.
func hugeSession(n, size int) *memSession {
	body := strings.Repeat("lorem ipsum ", size/12+1)[:size]
	s := &memSession{}
	for i := range n {
		role := "user"
		if i%2 == 1 {
			role = "assistant"
		}
		s.msgs = append(s.msgs, Message{Role: role, Content: body, Timestamp: "2026-03-15T14:30:00.123456"})
	}
	return s
}

// requestBytes is the size of what a call sends.
func requestBytes(r modelcall.Request) int { return len(r.System) + len(r.User) }

// A 200 MB session made one 205 MB consolidation request: each call is
// now bounded by the chunk's and the memory's limits, whatever the
// session's size.
func TestConsolidationRequestBounded(t *testing.T) {
	dir := t.TempDir()
	s := hugeSession(2000, 100_000) // 200 MB of messages
	var mu sync.Mutex
	var sizes []int
	c := &Consolidator{Workspace: dir, Window: 100, Open: func(context.Context, string) (Session, error) { return s, nil },
		Model: modelcall.Func(func(_ context.Context, r modelcall.Request) (modelcall.Reply, error) {
			mu.Lock()
			sizes = append(sizes, requestBytes(r))
			mu.Unlock()
			return saveMemory("[2026-03-15 14:30] Read a lot.", "# Memory\n- reads a lot\n"), nil
		})}
	os.MkdirAll(filepath.Join(dir, "memory"), 0o700)
	// A MEMORY.md of 1 MB (written by an exec, say) goes in cut too.
	os.WriteFile(c.MemoryPath(), bytes.Repeat([]byte("fact\n"), 200_000), 0o600)
	if err := c.Consolidate(context.Background(), "web:big", false); err != nil {
		t.Fatal(err)
	}
	bound := DefaultMaxChunkBytes + DefaultMaxMemoryBytes + 4096
	if len(sizes) != 1 || sizes[0] > bound {
		t.Fatalf("requests of %v bytes, want one of at most %d", sizes, bound)
	}
	if s.cursor == 0 || s.cursor > 2000-50 {
		t.Errorf("cursor %d", s.cursor)
	}
	t.Logf("a 200 MB session: one request of %d bytes, %d messages consolidated", sizes[0], s.cursor)
	// The 1 MB memory was not rewritten from the part the model saw.
	if fi, _ := os.Stat(c.MemoryPath()); fi.Size() != 1_000_000 {
		t.Errorf("MEMORY.md is %d bytes now", fi.Size())
	}
}

// /new on a huge session: the last MaxModelChunks chunks go to the
// model, bounded, the older messages to HISTORY.md raw; every message is
// consolidated once.
func TestNewOnHugeSessionBounded(t *testing.T) {
	dir := t.TempDir()
	s := hugeSession(300, 100_000) // 30 MB
	calls := 0
	c := &Consolidator{Workspace: dir, MaxChunkBytes: 8_000, MaxMessageBytes: 1_000, MaxModelChunks: 2,
		Open: func(context.Context, string) (Session, error) { return s, nil },
		Model: modelcall.Func(func(_ context.Context, r modelcall.Request) (modelcall.Reply, error) {
			calls++
			if n := requestBytes(r); n > 8_000+2_000+1_000 {
				t.Errorf("a request of %d bytes", n)
			}
			return saveMemory("[2026-03-15 14:30] Summary.", ""), nil
		})}
	if err := c.Consolidate(context.Background(), "web:big", true); err != nil {
		t.Fatal(err)
	}
	if calls != 2 || s.cursor != 300 {
		t.Errorf("%d model calls, cursor %d; want 2 and 300", calls, s.cursor)
	}
	h, _ := os.ReadFile(c.HistoryPath())
	if raw := strings.Count(string(h), "[RAW]"); raw == 0 || strings.Count(string(h), "Summary.") != 2 {
		t.Errorf("%d raw entries, history of %d bytes", raw, len(h))
	}
	if len(h) > 300*1_100 {
		t.Errorf("HISTORY.md grew by %d bytes: the messages were not cut", len(h))
	}
}

// A huge MEMORY.md gives the prompt its beginning only, with a note, and
// a warning in the log that names the file and its size, once.
func TestLongTermBounded(t *testing.T) {
	dir := t.TempDir()
	var logs bytes.Buffer
	c := &Consolidator{Workspace: dir, Log: slog.New(slog.NewTextHandler(&logs, nil))}
	os.MkdirAll(filepath.Join(dir, "memory"), 0o700)
	os.WriteFile(c.MemoryPath(), bytes.Repeat([]byte("x"), 3<<20), 0o600)
	m := c.LongTerm()
	if len(m) > DefaultMaxMemoryBytes+200 || !strings.Contains(m, "MEMORY.md is 3145728 bytes") {
		t.Fatalf("%d bytes in the prompt: %q", len(m), m[len(m)-100:])
	}
	c.LongTerm()
	l := logs.String()
	if strings.Count(l, "level=WARN") != 1 || !strings.Contains(l, c.MemoryPath()) || !strings.Contains(l, "3145728") {
		t.Errorf("log:\n%s", l)
	}
}
