package memory

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nbots/nb/gateway/modelcall"
	"github.com/nbots/nb/provider"
)

// memSession is a session held in memory.
type memSession struct {
	mu     sync.Mutex
	msgs   []Message
	cursor int
}

func (s *memSession) Load(context.Context) ([]Message, int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Message(nil), s.msgs[min(s.cursor, len(s.msgs)):]...), s.cursor, nil
}

func (s *memSession) SetCursor(_ context.Context, n int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cursor = n
	return nil
}

func session(n int) *memSession {
	s := &memSession{}
	for i := range n {
		m := Message{Role: "user", Content: fmt.Sprintf("question %d", i), Timestamp: "2026-03-15T14:30:00.123456"}
		if i%2 == 1 {
			m = Message{Role: "assistant", Content: fmt.Sprintf("answer %d", i), Tools: []string{"web_search", "exec"}, Timestamp: "2026-03-15T14:31:00.123456"}
		}
		s.msgs = append(s.msgs, m)
	}
	s.msgs = append(s.msgs, Message{Role: "assistant", Content: "", Timestamp: "2026-03-15T14:32:00"})
	return s
}

func saveMemory(entry, update string) modelcall.Reply {
	b, _ := json.Marshal(map[string]string{"history_entry": entry, "memory_update": update})
	return modelcall.Reply{ToolCalls: []provider.ToolCall{{ID: "1", Name: "save_memory", Arguments: string(b)}}}
}

// TestConsolidationAsNanobot: the request is nanobot's, word for word; the
// entry is appended to HISTORY.md with a blank line, MEMORY.md replaced,
// the cursor moved to len - Window/2.
func TestConsolidationAsNanobot(t *testing.T) {
	dir := t.TempDir()
	s := session(10) // 11 messages with the empty one
	var got modelcall.Request
	c := &Consolidator{Workspace: dir, Window: 10, Open: func(context.Context, string) (Session, error) { return s, nil },
		Model: modelcall.Func(func(_ context.Context, r modelcall.Request) (modelcall.Reply, error) {
			got = r
			return saveMemory("[2026-03-15 14:30] Asked ten questions.", "# Memory\n- likes questions\n"), nil
		})}
	if err := c.Consolidate(context.Background(), "telegram:42", false); err != nil {
		t.Fatal(err)
	}
	wantUser := "Process this conversation and call the save_memory tool with your consolidation.\n\n## Current Long-term Memory\n(empty)\n\n## Conversation to Process\n" +
		"[2026-03-15 14:30] USER: question 0\n[2026-03-15 14:31] ASSISTANT [tools: web_search, exec]: answer 1\n" +
		"[2026-03-15 14:30] USER: question 2\n[2026-03-15 14:31] ASSISTANT [tools: web_search, exec]: answer 3\n" +
		"[2026-03-15 14:30] USER: question 4\n[2026-03-15 14:31] ASSISTANT [tools: web_search, exec]: answer 5"
	if got.System != "You are a memory consolidation agent. Call the save_memory tool with your consolidation of the conversation." ||
		got.User != wantUser || got.ToolChoice != "save_memory" || got.Source != "consolidation" || got.Session != "telegram:42" ||
		len(got.Tools) != 1 || got.Tools[0].Name != "save_memory" {
		t.Errorf("request:\n%+v\nuser want\n%q", got, wantUser)
	}
	if s.cursor != 6 {
		t.Errorf("cursor %d, want 6 (11 - 10/2)", s.cursor)
	}
	h, _ := os.ReadFile(c.HistoryPath())
	m, _ := os.ReadFile(c.MemoryPath())
	if string(h) != "[2026-03-15 14:30] Asked ten questions.\n\n" || string(m) != "# Memory\n- likes questions\n" {
		t.Errorf("HISTORY.md %q, MEMORY.md %q", h, m)
	}
	// Below the window: no call.
	got = modelcall.Request{}
	c.Consolidate(context.Background(), "telegram:42", false)
	if got.User != "" {
		t.Error("consolidated below the window")
	}
	// /new: everything left, with the current memory in the prompt.
	if err := c.Consolidate(context.Background(), "telegram:42", true); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(got.User, "## Current Long-term Memory\n# Memory\n- likes questions\n\n\n## Conversation to Process\n[2026-03-15 14:30] USER: question 6") || s.cursor != 11 {
		t.Errorf("all: cursor %d, user %q", s.cursor, got.User)
	}
}

// TestRawArchiveAfterThreeFailures: three failed calls in a row archive
// the chunk as nanobot's "[RAW] N messages" entry; MEMORY.md is kept.
func TestRawArchiveAfterThreeFailures(t *testing.T) {
	dir := t.TempDir()
	s := session(4)
	os.MkdirAll(dir+"/memory", 0o700)
	os.WriteFile(dir+"/memory/MEMORY.md", []byte("keep me"), 0o600)
	c := &Consolidator{Workspace: dir, Window: 4, Open: func(context.Context, string) (Session, error) { return s, nil },
		Now: func() time.Time { return time.Date(2026, 3, 15, 14, 40, 0, 0, time.UTC) },
		Model: modelcall.Func(func(context.Context, modelcall.Request) (modelcall.Reply, error) {
			return modelcall.Reply{Content: "sure!"}, nil
		})}
	for i := range 2 {
		if err := c.Consolidate(context.Background(), "k", false); err == nil || err.Error() != "the model did not call save_memory" {
			t.Fatalf("failure %d: %v", i, err)
		}
	}
	if err := c.Consolidate(context.Background(), "k", false); err != nil {
		t.Fatal(err)
	}
	h, _ := os.ReadFile(c.HistoryPath())
	want := "[2026-03-15 14:40] [RAW] 3 messages\n[2026-03-15 14:30] USER: question 0\n[2026-03-15 14:31] ASSISTANT [tools: web_search, exec]: answer 1\n[2026-03-15 14:30] USER: question 2\n\n"
	if string(h) != want || s.cursor != 3 {
		t.Errorf("HISTORY.md %q (cursor %d), want %q", h, s.cursor, want)
	}
	if m, _ := os.ReadFile(c.MemoryPath()); string(m) != "keep me" {
		t.Errorf("MEMORY.md %q", m)
	}
}

// TestMaybeNeverWaits: Maybe returns at once while a slow consolidation
// of the same session runs, and starts no second one.
func TestMaybeNeverWaits(t *testing.T) {
	s := session(20)
	release := make(chan struct{})
	calls := 0
	c := &Consolidator{Workspace: t.TempDir(), Window: 10, Open: func(context.Context, string) (Session, error) { return s, nil },
		Model: modelcall.Func(func(context.Context, modelcall.Request) (modelcall.Reply, error) {
			calls++
			<-release
			return saveMemory("[2026-03-15 14:30] x", "m"), nil
		})}
	start := time.Now()
	if !c.Maybe("k", 21, 0) {
		t.Fatal("not started")
	}
	if c.Maybe("k", 21, 0) {
		t.Error("a second consolidation of the same session started")
	}
	if c.Maybe("other", 3, 0) {
		t.Error("started below the window")
	}
	if d := time.Since(start); d > 100*time.Millisecond {
		t.Errorf("Maybe took %s", d)
	}
	close(release)
	c.Wait()
	if calls != 1 || s.cursor != 16 {
		t.Errorf("calls %d, cursor %d", calls, s.cursor)
	}
}

// TestForgetIsExplicit: consolidation never shrinks MEMORY.md by more than
// half; Forget does.
func TestForgetIsExplicit(t *testing.T) {
	dir := t.TempDir()
	s := session(4)
	os.MkdirAll(dir+"/memory", 0o700)
	long := strings.Repeat("- a fact\n", 20)
	os.WriteFile(dir+"/memory/MEMORY.md", []byte(long), 0o600)
	c := &Consolidator{Workspace: dir, Window: 4, Open: func(context.Context, string) (Session, error) { return s, nil },
		Model: modelcall.Func(func(context.Context, modelcall.Request) (modelcall.Reply, error) {
			return saveMemory("[2026-03-15 14:30] x", "- one fact\n"), nil
		})}
	if err := c.Consolidate(context.Background(), "k", false); err != nil {
		t.Fatal(err)
	}
	if m, _ := c.ReadMemory(); m != long {
		t.Errorf("MEMORY.md shrunk to %q", m)
	}
	if err := c.Forget(context.Background(), "- one fact\n"); err != nil {
		t.Fatal(err)
	}
	if m, _ := c.ReadMemory(); m != "- one fact\n" {
		t.Errorf("after Forget: %q", m)
	}
}

// TestTokenTrigger is nanobot's check: 120 tokens per message over
// u1,a1,u2,a2,u3 with a budget below the total archives [u1,a1,u2,a2]
// (up to the user message from which the rest fits half the budget).
func TestTokenTrigger(t *testing.T) {
	s := &memSession{}
	for _, role := range []string{"user", "assistant", "user", "assistant", "user"} {
		// 120 tokens: (len+role+2)/3 + 4
		content := strings.Repeat("x", 348-len(role)-2)
		s.msgs = append(s.msgs, Message{Role: role, Content: content})
	}
	if n := EstimateTokens(s.msgs[:1]); n != 120 {
		t.Fatalf("estimate %d", n)
	}
	var chunk string
	c := &Consolidator{Workspace: t.TempDir(), Window: 100, ContextTokens: 500, Open: func(context.Context, string) (Session, error) { return s, nil },
		Model: modelcall.Func(func(_ context.Context, r modelcall.Request) (modelcall.Reply, error) {
			chunk = r.User
			return saveMemory("[2026-03-15 14:30] x", "m"), nil
		})}
	if c.Maybe("k", 5, 400) {
		t.Error("due below the budget")
	}
	if err := c.Consolidate(context.Background(), "k", false); err != nil {
		t.Fatal(err)
	}
	if s.cursor != 4 || strings.Count(chunk, "USER:")+strings.Count(chunk, "ASSISTANT:") != 4 {
		t.Errorf("cursor %d, chunk of %d messages", s.cursor, strings.Count(chunk, "\n["))
	}
}

// TestNewArchivesRawWhenTheModelFails: /new does not wait for three
// failures: the tail goes to HISTORY.md raw at once.
func TestNewArchivesRawWhenTheModelFails(t *testing.T) {
	s := session(2)
	c := &Consolidator{Workspace: t.TempDir(), Open: func(context.Context, string) (Session, error) { return s, nil },
		Now: func() time.Time { return time.Date(2026, 3, 15, 14, 40, 0, 0, time.UTC) },
		Model: modelcall.Func(func(context.Context, modelcall.Request) (modelcall.Reply, error) {
			return modelcall.Reply{Content: "echo"}, nil
		})}
	if err := c.Consolidate(context.Background(), "k", true); err != nil {
		t.Fatal(err)
	}
	h, _ := os.ReadFile(c.HistoryPath())
	if !strings.HasPrefix(string(h), "[2026-03-15 14:40] [RAW] 3 messages\n[2026-03-15 14:30] USER: question 0\n") || s.cursor != 3 {
		t.Errorf("HISTORY.md %q, cursor %d", h, s.cursor)
	}
}

// TestRunStopsItsConsolidations: a consolidation Maybe started while Run
// serves takes Run's context, so ending it ends the model call and Run
// returns (it waited on context.Background's call before).
func TestRunStopsItsConsolidations(t *testing.T) {
	s := session(20)
	called := make(chan struct{})
	c := &Consolidator{Workspace: t.TempDir(), Window: 10, Open: func(context.Context, string) (Session, error) { return s, nil },
		Model: modelcall.Func(func(ctx context.Context, _ modelcall.Request) (modelcall.Reply, error) {
			close(called)
			<-ctx.Done()
			return modelcall.Reply{}, ctx.Err()
		})}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	for !c.started() {
		time.Sleep(time.Millisecond)
	}
	if !c.Maybe("k", 21, 0) {
		t.Fatal("not started")
	}
	<-called
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return: the consolidation's model call outlived the run")
	}
}

// started reports whether Run has begun serving (in tests).
func (c *Consolidator) started() bool {
	c.runMu.Lock()
	defer c.runMu.Unlock()
	return c.base != nil
}

// TestWindowIgnored: with Window below 0 (nanobot from v0.1.4.post5 on
// ignores memoryWindow) messages are not counted: only tokens start a
// consolidation.
func TestWindowIgnored(t *testing.T) {
	c := &Consolidator{Workspace: t.TempDir(), Window: -1, ContextTokens: 500}
	if c.due(1000, 10) {
		t.Error("a thousand messages of few tokens started a consolidation")
	}
	if !c.due(3, 600) {
		t.Error("past the tokens: not due")
	}
	msgs := make([]Message, 300)
	for i := range msgs {
		msgs[i] = Message{Role: []string{"user", "assistant"}[i%2], Content: "hi"}
	}
	c.ContextTokens = 100_000
	if end := c.chunkEnd(msgs, 0); end != 0 {
		t.Errorf("chunk ends at %d, want nothing due", end)
	}
}
