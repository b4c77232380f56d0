package session

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nbots/nb/agent"
	"github.com/nbots/nb/state"
)

// nanobotSession is a session file as nanobot v0.1.4 writes it.
const nanobotSession = `{"_type": "metadata", "key": "telegram:12345", "created_at": "2026-03-01T10:00:00", "updated_at": "2026-03-15T14:30:00", "metadata": {}, "last_consolidated": 2}
{"role": "user", "content": "old question", "timestamp": "2026-03-01T10:00:00.000001"}
{"role": "assistant", "content": "old answer", "timestamp": "2026-03-01T10:00:01.000001"}
{"role": "user", "content": "What is the weather today?", "timestamp": "2026-03-15T14:30:00.123456"}
{"role": "assistant", "content": null, "tool_calls": [{"id": "call_abc", "type": "function", "function": {"name": "web_search", "arguments": "{\"query\": \"weather today\"}"}}], "timestamp": "2026-03-15T14:30:01.234567"}
{"role": "tool", "content": "Sunny, 22°C", "tool_call_id": "call_abc", "name": "web_search", "timestamp": "2026-03-15T14:30:02.345678"}
{"role": "assistant", "content": "It is sunny, 22°C.", "timestamp": "2026-03-15T14:30:03.000000"}
`

func newManager(t *testing.T) *Manager {
	t.Helper()
	m, err := NewManager(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func TestNanobotSessionContinues(t *testing.T) {
	m := newManager(t)
	path := filepath.Join(m.Dir, "telegram_12345.jsonl")
	if err := os.WriteFile(path, []byte(nanobotSession), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := m.Get(t.Context(), "telegram:12345")
	if err != nil {
		t.Fatal(err)
	}
	h := s.History()
	if len(h) != 4 || h[0].Who != "user" || agent.Text(h[0].Message) != "What is the weather today?" {
		t.Fatalf("history after last_consolidated: %+v", h)
	}
	// The agent's view of it: a call and its result, in order.
	msgs := agent.Messages(h, nil)
	if len(msgs) != 4 || len(msgs[1].ToolCalls) != 1 || msgs[1].ToolCalls[0].Name != "web_search" || msgs[2].ToolCallID != "call_abc" || msgs[2].Content != "Sunny, 22°C" {
		t.Fatalf("messages: %+v", msgs)
	}
	q := "and tomorrow?"
	err = s.Append(t.Context(), state.Event{Who: "user", Message: q, Input: &q},
		state.Event{Who: "AI", Message: nil, ToolCalls: []state.ToolCall{{ID: "c2", Name: "exec", Arguments: `{"command":"date"}`}}},
		state.Event{Who: "tool", Message: "Mon", Result: state.ToolResult{ID: "c2", Name: "exec"}},
		state.Event{Who: "AI", Message: "Rain.", Partial: true},
		state.Event{Who: "AI", Message: "Rain."})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := s.SetConsolidated(t.Context(), 4); err != nil {
		t.Fatal(err)
	}
	// Every line is what nanobot reads: JSON objects, the first the
	// metadata record; the last metadata record read wins.
	lines := readLines(t, path)
	if !strings.HasPrefix(lines[0], `{"_type": "metadata"`) {
		t.Fatalf("first line changed: %s", lines[0])
	}
	var meta Meta
	var msgs2 []map[string]any
	for _, l := range lines {
		var v map[string]any
		if err := json.Unmarshal([]byte(l), &v); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		if v["_type"] == "metadata" {
			json.Unmarshal([]byte(l), &meta)
			continue
		}
		if _, ok := v["timestamp"].(string); !ok {
			t.Fatalf("no timestamp: %s", l)
		}
		msgs2 = append(msgs2, v)
	}
	if meta.LastConsolidated != 4 || meta.Key != "telegram:12345" {
		t.Fatalf("meta %+v", meta)
	}
	if len(msgs2) != 10 {
		t.Fatalf("%d messages (the partial answer is not kept): %v", len(msgs2), msgs2)
	}
	call := msgs2[7]["tool_calls"].([]any)[0].(map[string]any)
	if call["type"] != "function" || call["function"].(map[string]any)["arguments"] != `{"command":"date"}` || msgs2[7]["content"] != nil {
		t.Fatalf("assistant call line: %v", msgs2[7])
	}
	if msgs2[8]["tool_call_id"] != "c2" || msgs2[8]["name"] != "exec" || msgs2[8]["role"] != "tool" {
		t.Fatalf("tool line: %v", msgs2[8])
	}
	// Reopened, the session is the same.
	m.Close()
	m2 := &Manager{Dir: m.Dir, open: map[string]*Session{}}
	s2, err := m2.Get(t.Context(), "telegram:12345")
	if err != nil {
		t.Fatal(err)
	}
	defer m2.Close()
	if got := s2.History(); len(got) != 6 || agent.Text(got[5].Message) != "Rain." {
		t.Fatalf("reopened history: %+v", got)
	}
}

func readLines(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		out = append(out, sc.Text())
	}
	return out
}

func TestTornLineQuarantined(t *testing.T) {
	for name, tail := range map[string]string{
		"no newline":     `{"role": "user", "content": "half`,
		"broken newline": "{\"role\": \"user\", \"conte\n",
	} {
		t.Run(name, func(t *testing.T) {
			var warned []string
			m := newManager(t)
			m.Warn = func(s string) { warned = append(warned, s) }
			path := filepath.Join(m.Dir, "web_a.jsonl")
			os.WriteFile(path, []byte(nanobotSession+tail), 0o600)
			s, err := m.Get(t.Context(), "web:a")
			if err != nil {
				t.Fatal(err)
			}
			if len(s.Messages()) != 6 {
				t.Fatalf("%d messages", len(s.Messages()))
			}
			data, _ := os.ReadFile(path)
			if string(data) != nanobotSession {
				t.Fatalf("file not cut back to its good lines:\n%s", data)
			}
			q, _ := filepath.Glob(path + ".torn-*")
			if len(q) != 1 {
				t.Fatalf("quarantine files: %v", q)
			}
			if kept, _ := os.ReadFile(q[0]); string(kept) != tail {
				t.Fatalf("quarantined %q", kept)
			}
			if len(warned) != 1 || !strings.Contains(warned[0], "torn") || !strings.Contains(warned[0], q[0]) {
				t.Fatalf("warnings %q", warned)
			}
			// The session goes on.
			in := "next"
			if err := s.Append(t.Context(), state.Event{Who: "user", Message: in, Input: &in}); err != nil {
				t.Fatal(err)
			}
			s.Sync()
			if l := readLines(t, path); !strings.Contains(l[len(l)-1], `"next"`) {
				t.Fatalf("last line %s", l[len(l)-1])
			}
		})
	}
}

func TestNewSessionFile(t *testing.T) {
	m := newManager(t)
	s, err := m.Get(t.Context(), "cli:direct")
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(s.Path) != "cli_direct.jsonl" {
		t.Fatal(s.Path)
	}
	l := readLines(t, s.Path)
	var meta Meta
	if len(l) != 1 || json.Unmarshal([]byte(l[0]), &meta) != nil || meta.Type != "metadata" || meta.Key != "cli:direct" || meta.Metadata == nil {
		t.Fatalf("%v", l)
	}
	if _, err := time.Parse(TimeLayout, meta.CreatedAt); err != nil {
		t.Fatal(err)
	}
	in := "hi"
	s.Append(t.Context(), state.Event{Who: "user", Message: in, Input: &in})
	if err := s.Clear(t.Context()); err != nil {
		t.Fatal(err)
	}
	if len(s.History()) != 0 || len(readLines(t, s.Path)) != 1 {
		t.Fatal("not cleared")
	}
	if b, _ := filepath.Glob(s.Path + ".*.bak"); len(b) != 1 {
		t.Fatalf("backup %v", b)
	}
	infos, err := m.List(t.Context())
	if err != nil || len(infos) != 1 || infos[0].Key != "cli:direct" {
		t.Fatalf("%v %v", infos, err)
	}
}

// writeBig writes a session of about size bytes.
func writeBig(t testing.TB, dir string, size int) string {
	path := filepath.Join(dir, "web_big.jsonl")
	var b strings.Builder
	b.WriteString(`{"_type": "metadata", "key": "web:big", "created_at": "2026-03-01T10:00:00", "updated_at": "2026-03-01T10:00:00", "metadata": {}, "last_consolidated": 0}` + "\n")
	pad := strings.Repeat("lorem ipsum ", 40)
	for i := 0; b.Len() < size; i++ {
		fmt.Fprintf(&b, `{"role": "user", "content": "question %d %s", "timestamp": "2026-03-01T10:00:00.000001"}`+"\n", i, pad)
		fmt.Fprintf(&b, `{"role": "assistant", "content": "answer %d %s", "timestamp": "2026-03-01T10:00:01.000001"}`+"\n", i, pad)
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// BenchmarkLoad10MB measures the load of a 10 MB session (goal ≤ 50 ms).
func BenchmarkLoad10MB(b *testing.B) {
	dir := b.TempDir()
	writeBig(b, dir, 10<<20)
	b.SetBytes(10 << 20)
	for b.Loop() {
		m := &Manager{Dir: dir, open: map[string]*Session{}}
		if _, err := m.Get(b.Context(), "web:big"); err != nil {
			b.Fatal(err)
		}
		m.Close()
	}
}

// cpuTime is the process's CPU time: on a shared machine it says what a
// load costs better than the wall clock.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func TestLoad10MB(t *testing.T) {
	dir := t.TempDir()
	writeBig(t, dir, 10<<20)
	best, bestCPU := time.Hour, time.Hour
	for range 3 {
		m := &Manager{Dir: dir, open: map[string]*Session{}}
		start, cpu := time.Now(), cpuTime()
		s, err := m.Get(t.Context(), "web:big")
		if d := time.Since(start); d < best {
			best = d
		}
		if d := cpuTime() - cpu; d < bestCPU {
			bestCPU = d
		}
		if err != nil || s.Len() < 1000 {
			t.Fatal(err)
		}
		m.Close()
	}
	t.Logf("10 MB session loaded in %v wall, %v CPU (goal 50 ms)", best, bestCPU)
	if !raceEnabled && bestCPU > 500*time.Millisecond { // a shared machine: only a gross regression fails
		t.Fatalf("10 MB session took %v of CPU", bestCPU)
	}
}

// TestTwoProcesses: a second manager (nb gateway chat) appends under the
// lock; the first sees its lines at its next turn.
func TestTwoProcesses(t *testing.T) {
	m1 := newManager(t)
	m2 := &Manager{Dir: m1.Dir, open: map[string]*Session{}}
	defer m2.Close()
	s1, _ := m1.Get(t.Context(), "cli:direct")
	s2, _ := m2.Get(t.Context(), "cli:direct")
	unlock, err := s2.Lock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	if _, err := s1.Lock(ctx); err == nil {
		t.Fatal("the lock was taken twice")
	}
	cancel()
	in := "from the terminal"
	s2.Append(t.Context(), state.Event{Who: "user", Message: in, Input: &in}, state.Event{Who: "AI", Message: "ok"})
	s2.Sync()
	unlock()
	unlock1, err := s1.Lock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer unlock1()
	if h := s1.History(); len(h) != 2 || agent.Text(h[0].Message) != in {
		t.Fatalf("%+v", h)
	}
}

// TestFileReplacedSameSize: another process replaces the session's file
// with one of the same length (its /new, a restore): the next turn reads
// the new file, told from the old by its identity, not its size.
func TestFileReplacedSameSize(t *testing.T) {
	m := newManager(t)
	s, _ := m.Get(t.Context(), "cli:direct")
	unlock, err := s.Lock(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	in := "first question"
	s.Append(t.Context(), state.Event{Who: "user", Message: in, Input: &in}, state.Event{Who: "AI", Message: "first answer"})
	unlock()
	old, err := os.ReadFile(s.Path)
	if err != nil {
		t.Fatal(err)
	}
	repl := bytes.ReplaceAll(old, []byte("first"), []byte("other"))
	tmp := s.Path + ".new"
	if err := os.WriteFile(tmp, repl, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, s.Path); err != nil {
		t.Fatal(err)
	}
	unlock, err = s.Lock(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	if h := s.History(); len(h) != 2 || agent.Text(h[0].Message) != "other question" {
		t.Fatalf("after the file was replaced: %+v, want the new file's messages", h)
	}
}
