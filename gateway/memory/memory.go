// Package memory is the gateway's long-term memory as nanobot keeps it:
// memory/MEMORY.md (facts, always in the prompt, rewritten by the model)
// and memory/HISTORY.md (an append-only log). A Consolidator moves the old
// part of a session into them with the model's save_memory call, in the
// background, so that every message ends up either in the session's
// unconsolidated tail or in HISTORY.md exactly once, whatever the model
// answers and wherever the process dies.
package memory

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/nbots/nb/gateway/modelcall"
	"github.com/nbots/nb/internal/atomicfile"
	"github.com/nbots/nb/internal/keylock"
	"github.com/nbots/nb/tool"
)

// Message is what consolidation reads of a session message.
type Message struct {
	Role    string
	Content string
	// Tools are the names of the tools the message called.
	Tools []string
	// Timestamp is the message's ISO time as the session file has it.
	Timestamp string
}

// Session is a conversation whose old messages are consolidated. The
// gateway's session store implements it.
type Session interface {
	// Load returns the persisted last_consolidated cursor and the
	// messages from it on (those not consolidated: consolidation reads
	// no other).
	Load(ctx context.Context) (tail []Message, cursor int, err error)
	// SetCursor persists last_consolidated (atomically: a crash leaves the
	// old value or the new one).
	SetCursor(ctx context.Context, cursor int) error
}

// Consolidator consolidates the sessions of one workspace. Its zero value
// is not usable: set Workspace, Model and Open.
type Consolidator struct {
	// Workspace is the gateway's workspace (memory/ is under it).
	Workspace string
	// Model makes the save_memory call.
	Model modelcall.Caller
	// Open returns a session by key (to finish, after a crash, a
	// consolidation of a session nobody has opened yet).
	Open func(ctx context.Context, key string) (Session, error)
	// Window is nanobot's memoryWindow: a session is consolidated when its
	// unconsolidated tail reaches Window messages, keeping Window/2 (default 100).
	// Below 0, messages are not counted: only ContextTokens starts one
	// (nanobot from v0.1.4.post5 on).
	Window int
	// ContextTokens, when set, also makes a session due when the estimated
	// tokens of its tail reach it (nanobot's token-based trigger: the
	// gateway sets contextWindowTokens - maxTokens - 1024); the oldest
	// messages are then consolidated, up to a user message, until the tail
	// is about half of it.
	ContextTokens int
	// Timeout bounds one model call (default 2 minutes).
	Timeout time.Duration
	// MaxChunkBytes bounds the conversation one model call is sent
	// (DefaultMaxChunkBytes if 0): a longer tail is consolidated in
	// several chunks, one per consolidation. MaxMessageBytes bounds each
	// message's content in it (DefaultMaxMessageBytes if 0), cut with a
	// note; the session keeps it whole. MaxMemoryBytes bounds what is
	// read of MEMORY.md, for the prompt and for the call
	// (DefaultMaxMemoryBytes if 0).
	MaxChunkBytes, MaxMessageBytes, MaxMemoryBytes int
	// MaxModelChunks is how many chunks /new (Consolidate with all)
	// sends to the model at most (DefaultMaxModelChunks if 0): older
	// ones are archived raw, so that a huge session is cleared in
	// bounded time and cost.
	MaxModelChunks int
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Log receives warnings; nil discards them.
	Log *slog.Logger

	// mu is the workspace's consolidation lock within the process (the
	// file memory/.lock across processes), held to read the journal,
	// MEMORY.md and HISTORY.md and write them, never across a model
	// call but for a call made again after conflictTries conflicts (see
	// consolidateChunk).
	mu sync.Mutex
	// sessions are the per-session locks: one consolidation of a
	// session at a time (a background one and /new's), model call
	// included, as nanobot locks per session; those of different
	// sessions run at once.
	sessions keylock.Map[string]
	// runMu guards running, failures and warnedSize; never
	// held long, so Maybe never waits.
	runMu    sync.Mutex
	running  map[string]bool
	failures map[string]int
	// warnedSize is the size of MEMORY.md last warned about.
	warnedSize int64
	wg         sync.WaitGroup
	// base is the context of Run, which the consolidations Maybe starts
	// take, so that the gateway's stop stops their model calls.
	base context.Context

	// crash, in tests, stops a consolidation at a named point as kill -9 would.
	crash func(point string) bool
}

// The defaults of the Consolidator's bounds: a 200 MB session or a 50 MB
// MEMORY.md (written by a prompt-injected exec, say) costs a request of
// at most a few hundred kilobytes.
const (
	DefaultMaxChunkBytes   = 128 << 10
	DefaultMaxMessageBytes = 16_000
	DefaultMaxMemoryBytes  = 64 << 10
	DefaultMaxModelChunks  = 4
)

// RawAfter is how many consecutive failed calls make a consolidation
// archive the messages unsummarised, as nanobot does.
const RawAfter = 3

const (
	systemPrompt = "You are a memory consolidation agent. Call the save_memory tool with your consolidation of the conversation."
	userPrompt   = "Process this conversation and call the save_memory tool with your consolidation.\n\n## Current Long-term Memory\n%s\n\n## Conversation to Process\n%s"
)

// SaveMemory is the tool the model is asked to call.
var SaveMemory = tool.Spec{
	Name:        "save_memory",
	Description: "Save the memory consolidation result to persistent storage.",
	Parameters: map[string]any{
		"type": "object",
		"properties": map[string]any{
			"history_entry": map[string]any{
				"type":        "string",
				"description": "A paragraph (2-5 sentences) summarizing key events/decisions/topics. Start with [YYYY-MM-DD HH:MM]. Include detail useful for grep search.",
			},
			"memory_update": map[string]any{
				"type":        "string",
				"description": "Full updated long-term memory as markdown. Include all existing facts plus new ones. Return unchanged if nothing new.",
			},
		},
		"required": []any{"history_entry", "memory_update"},
	},
}

// MemoryPath is memory/MEMORY.md of the workspace.
func (c *Consolidator) MemoryPath() string { return filepath.Join(c.Workspace, "memory", "MEMORY.md") }

// HistoryPath is memory/HISTORY.md of the workspace.
func (c *Consolidator) HistoryPath() string {
	return filepath.Join(c.Workspace, "memory", "HISTORY.md")
}

func (c *Consolidator) journalPath() string {
	return filepath.Join(c.Workspace, "memory", ".consolidating.json")
}

func (c *Consolidator) lockPath() string {
	return filepath.Join(c.Workspace, "memory", ".lock")
}

// ReadMemory is MEMORY.md's content ("" when absent), whole: what
// consolidation compares and rewrites.
func (c *Consolidator) ReadMemory() (string, error) {
	b, err := os.ReadFile(c.MemoryPath())
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read memory: %w", err)
	}
	return string(b), nil
}

// readMemoryHead is the first MaxMemoryBytes of MEMORY.md, a note saying
// it was cut, and the file's size; only that much is read.
func (c *Consolidator) readMemoryHead() (text string, size int64, err error) {
	f, err := os.Open(c.MemoryPath())
	if errors.Is(err, fs.ErrNotExist) {
		return "", 0, nil
	}
	if err != nil {
		return "", 0, fmt.Errorf("read memory: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", 0, fmt.Errorf("read memory: %w", err)
	}
	limit := c.maxMemory()
	b, err := io.ReadAll(io.LimitReader(f, int64(limit)+1))
	if err != nil {
		return "", 0, fmt.Errorf("read memory: %w", err)
	}
	if len(b) <= limit {
		return string(b), fi.Size(), nil
	}
	return Truncate(string(b), limit) + fmt.Sprintf("\n\n[MEMORY.md is %d bytes: only its first %d are shown]", fi.Size(), limit), fi.Size(), nil
}

// LongTerm is MEMORY.md for the system prompt ("" when absent or
// unreadable: a prompt is still made), its first MaxMemoryBytes only,
// with a warning in the log when it is longer.
func (c *Consolidator) LongTerm() string {
	m, size, err := c.readMemoryHead()
	if err != nil {
		c.logger().Warn("memory: " + err.Error())
	}
	c.warnLarge(size)
	return m
}

// warnLarge warns, once per size, that MEMORY.md is cut.
func (c *Consolidator) warnLarge(size int64) {
	if size <= int64(c.maxMemory()) {
		return
	}
	c.runMu.Lock()
	warned := c.warnedSize == size
	c.warnedSize = size
	c.runMu.Unlock()
	if !warned {
		c.logger().Warn(fmt.Sprintf("memory: %s is %d bytes, over the %d the prompt and consolidation take: only its beginning is sent; shorten it", c.MemoryPath(), size, c.maxMemory()),
			"file", c.MemoryPath(), "bytes", size)
	}
}

// Truncate cuts s to at most n bytes, on a character boundary.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// Maybe starts consolidating the session in the background when its tail
// (tail messages, tailTokens estimated by EstimateTokens) has reached
// Window messages or ContextTokens, and no consolidation of it runs; it
// never waits. It reports whether it started one.
func (c *Consolidator) Maybe(key string, tail, tailTokens int) bool {
	if !c.due(tail, tailTokens) {
		return false
	}
	c.runMu.Lock()
	if c.running == nil {
		c.running = map[string]bool{}
	}
	if c.running[key] {
		c.runMu.Unlock()
		return false
	}
	c.running[key] = true
	ctx := c.base
	c.runMu.Unlock()
	if ctx == nil {
		ctx = context.Background()
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		defer func() {
			c.runMu.Lock()
			delete(c.running, key)
			c.runMu.Unlock()
		}()
		if err := c.Consolidate(ctx, key, false); err != nil {
			c.logger().Warn("memory consolidation of " + key + ": " + err.Error())
		}
	}()
	return true
}

// Wait waits for the background consolidations.
func (c *Consolidator) Wait() { c.wg.Wait() }

// Run finishes a consolidation a crash interrupted (a failure is logged:
// the next one retries), then serves until ctx ends: the consolidations
// Maybe starts meanwhile take ctx, and Run returns once they have ended.
func (c *Consolidator) Run(ctx context.Context) error {
	c.runMu.Lock()
	c.base = ctx
	c.runMu.Unlock()
	if err := c.Recover(ctx); err != nil && ctx.Err() == nil {
		c.logger().Warn("memory: " + err.Error())
	}
	<-ctx.Done()
	c.Wait()
	return nil
}

// Consolidate consolidates one chunk of the session now: the tail but the
// last Window/2 messages when the tail has reached Window, or, with all
// (nanobot's /new), the whole tail. A failed model call changes nothing
// (after RawAfter failures in a row the chunk is archived raw; with all,
// at once, so that /new never fails for the model and loses nothing).
// Consolidations of one session run one at a time; those of different
// sessions at once, each model call outside the workspace's lock (see
// consolidateChunk).
func (c *Consolidator) Consolidate(ctx context.Context, key string, all bool) error {
	unlock, err := c.sessions.Lock(ctx, key)
	if err != nil {
		return err
	}
	defer unlock()
	if err := c.Recover(ctx); err != nil {
		return err
	}
	s, err := c.Open(ctx, key)
	if err != nil {
		return fmt.Errorf("open session %s: %w", key, err)
	}
	msgs, base, err := s.Load(ctx)
	if err != nil {
		return fmt.Errorf("load session %s: %w", key, err)
	}
	// msgs[0] is message base: the indices below count from it.
	base = max(base, 0)
	if !all {
		end := c.boundEnd(msgs, 0, c.chunkEnd(msgs, 0))
		if end <= 0 {
			return nil
		}
		return c.consolidateChunk(ctx, key, s, msgs, base, 0, end, false, false)
	}
	// /new: the whole tail, chunk by chunk, the last MaxModelChunks
	// through the model and any older ones archived raw.
	var ends []int
	for from := 0; from < len(msgs); from = ends[len(ends)-1] {
		ends = append(ends, c.boundEnd(msgs, from, len(msgs)))
	}
	cursor := 0
	for i, end := range ends {
		raw := i < len(ends)-c.maxModelChunks()
		if err := c.consolidateChunk(ctx, key, s, msgs, base, cursor, end, true, raw); err != nil {
			return err
		}
		cursor = end
	}
	return nil
}

// conflictTries is how many times a consolidation asks the model again
// because another one rewrote MEMORY.md during its call, before it
// makes the call under the workspace's lock (which then waits for it).
const conflictTries = 2

// consolidateChunk consolidates msgs[cursor:end] (messages base+cursor
// to base+end of the session): through the model, or raw (after
// RawAfter failures, or at once with raw), and moves the session's
// cursor to base+end. The model is shown MEMORY.md as it was read before
// the call, without the workspace's lock; under it, MEMORY.md is read
// again before anything is written: when another consolidation rewrote
// it meanwhile and this one's memory_update changes it too, the model is
// asked again with the new memory (after conflictTries, with the lock
// held across the call), so that no update is lost.
func (c *Consolidator) consolidateChunk(ctx context.Context, key string, s Session, msgs []Message, base, cursor, end int, all, raw bool) error {
	lines := c.formatLines(msgs[cursor:end])
	for tries := 0; ; tries++ {
		serial := tries >= conflictTries
		var unlock func()
		if serial {
			var err error
			if unlock, err = c.lock(ctx); err != nil {
				return err
			}
		}
		var current, entry, update string
		var err error
		keep := false // MEMORY.md stays as it is
		if raw {
			err = errors.New("older than what /new sends to the model")
		} else {
			if current, err = c.ReadMemory(); err != nil {
				if serial {
					unlock()
				}
				return err
			}
			entry, update, err = c.ask(ctx, key, current, lines)
		}
		if err != nil {
			n := c.failed(key)
			if n < RawAfter && !all {
				if serial {
					unlock()
				}
				return err
			}
			if !raw {
				c.logger().Warn(fmt.Sprintf("memory consolidation of %s failed %d times (%v): archiving %d messages raw", key, n, err, end-cursor))
			}
			entry = fmt.Sprintf("[%s] [RAW] %d messages\n%s", c.now().Format("2006-01-02 15:04"), end-cursor, lines)
			keep = true
		}
		if !serial {
			if unlock, err = c.lock(ctx); err != nil {
				return err
			}
		}
		now, err := c.ReadMemory()
		if err != nil {
			unlock()
			return err
		}
		if keep || update == current {
			update = now // MEMORY.md stays as it is now
		} else if now != current {
			// Another consolidation (or a forget) rewrote MEMORY.md
			// during the call: the model's update would undo it.
			unlock()
			continue
		}
		err = c.writeLocked(ctx, key, s, base+cursor, base+end, entry, update, now)
		unlock()
		return err
	}
}

// writeLocked writes a consolidation of the session's messages from to
// to (the entry for HISTORY.md, update for MEMORY.md, which holds now:
// update == now leaves it), under the workspace's lock, through the
// journal.
func (c *Consolidator) writeLocked(ctx context.Context, key string, s Session, from, to int, entry, update, now string) error {
	if err := c.recoverLocked(ctx); err != nil {
		return err
	}
	c.resetFailures(key)
	if update != now && !c.keepable(now, update) {
		c.logger().Warn(fmt.Sprintf("memory consolidation of %s: the model's memory_update (%d bytes) would empty MEMORY.md or shrink it by more than half (%d bytes): kept", key, len(update), len(now)))
		update = now
	}
	hsize, err := fileSize(c.HistoryPath())
	if err != nil {
		return err
	}
	j := journal{Key: key, From: from, To: to, HistorySize: hsize, Entry: entry + "\n\n", Memory: update}
	if update == now {
		// MEMORY.md stays: the journal need not hold a copy of it.
		j.Memory, j.KeepMemory = "", true
	}
	data, _ := json.Marshal(j)
	if err := atomicfile.WriteFile(c.journalPath(), data, 0o600); err != nil {
		return err
	}
	if c.crashAt("journal") {
		return errCrashed
	}
	return c.finish(ctx, j, s)
}

// lineBytes is the size of a message in the request: its content, cut
// to MaxMessageBytes, and its line's framing.
func (c *Consolidator) lineBytes(m Message) int {
	if m.Content == "" {
		return 0
	}
	return min(len(m.Content), c.maxMessage()) + 64
}

// boundEnd is end, or earlier, so that msgs[cursor:end] formats to at
// most MaxChunkBytes (one message at least).
func (c *Consolidator) boundEnd(msgs []Message, cursor, end int) int {
	n := 0
	for i := cursor; i < end; i++ {
		n += c.lineBytes(msgs[i])
		if n > c.maxChunk() && i > cursor {
			return i
		}
	}
	return end
}

func (c *Consolidator) due(tail, tailTokens int) bool {
	return (c.Window >= 0 && tail >= c.window()) || (c.ContextTokens > 0 && tailTokens >= c.ContextTokens)
}

// chunkEnd is where the chunk to consolidate ends: before the last
// Window/2 messages when the tail has Window; when its tokens reach
// ContextTokens, at the first user message from which the rest is at most
// half of them, if that is further. cursor when nothing is due.
func (c *Consolidator) chunkEnd(msgs []Message, cursor int) int {
	tail := msgs[cursor:]
	tokens := EstimateTokens(tail)
	if !c.due(len(tail), tokens) {
		return cursor
	}
	end := cursor
	if c.Window >= 0 && len(tail) >= c.window() {
		end = len(msgs) - c.window()/2
	}
	if c.ContextTokens > 0 && tokens >= c.ContextTokens {
		removed, need := 0, tokens-c.ContextTokens/2
		for i := cursor; i < len(msgs); i++ {
			if i > cursor && msgs[i].Role == "user" {
				if i > end {
					end = i
				}
				if removed >= need {
					break
				}
			}
			removed += EstimateTokens(msgs[i : i+1])
		}
	}
	return end
}

// EstimateTokens is a generous estimate of the tokens of messages: one per
// 3 bytes of content, and 4 for each message's framing.
func EstimateTokens(msgs []Message) int {
	n := 0
	for _, m := range msgs {
		n += (len(m.Content)+len(m.Role)+2)/3 + 4
	}
	return n
}

// keepable says whether update may replace current: never emptied, never
// shrunk by more than half (Forget does that, on the user's word).
func (c *Consolidator) keepable(current, update string) bool {
	if strings.TrimSpace(update) == "" {
		return strings.TrimSpace(current) == ""
	}
	return len(update)*2 >= len(current)
}

// Forget replaces MEMORY.md with content, however much shorter: the
// explicit forget that consolidation never does on its own.
func (c *Consolidator) Forget(ctx context.Context, content string) error {
	unlock, err := c.lock(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	return atomicfile.WriteFile(c.MemoryPath(), []byte(content), 0o600)
}

// Recover finishes a consolidation that a crash interrupted. The gateway
// calls it on start; Consolidate calls it too.
func (c *Consolidator) Recover(ctx context.Context) error {
	unlock, err := c.lock(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	return c.recoverLocked(ctx)
}

// journal is a consolidation decided but perhaps not fully written: enough
// to finish it, idempotently, after a crash.
type journal struct {
	Key         string `json:"key"`
	From        int    `json:"from"`
	To          int    `json:"to"`
	HistorySize int64  `json:"history_size"`
	Entry       string `json:"entry"`
	Memory      string `json:"memory"`
	// KeepMemory leaves MEMORY.md as it is (Memory is then empty).
	KeepMemory bool `json:"keep_memory,omitempty"`
}

func (c *Consolidator) recoverLocked(ctx context.Context) error {
	data, err := os.ReadFile(c.journalPath())
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", c.journalPath(), err)
	}
	var j journal
	if err := json.Unmarshal(data, &j); err != nil {
		// Written atomically, so never torn; unreadable means edited by hand.
		c.logger().Warn(fmt.Sprintf("memory: %s is not readable (%v): removed", c.journalPath(), err))
		return c.removeJournal()
	}
	s, err := c.Open(ctx, j.Key)
	if err != nil {
		return fmt.Errorf("open session %s: %w", j.Key, err)
	}
	return c.finish(ctx, j, s)
}

// finish writes what the journal says, skipping what is already written:
// the HISTORY.md entry, MEMORY.md, the cursor; then removes the journal.
func (c *Consolidator) finish(ctx context.Context, j journal, s Session) error {
	_, cursor, err := s.Load(ctx)
	if err != nil {
		return fmt.Errorf("load session %s: %w", j.Key, err)
	}
	if cursor != j.From {
		if cursor != j.To {
			c.logger().Warn(fmt.Sprintf("memory: session %s moved (cursor %d, expected %d): the interrupted consolidation is dropped", j.Key, cursor, j.From))
		}
		return c.removeJournal()
	}
	if err := c.appendHistory(j); err != nil {
		return err
	}
	if c.crashAt("history") {
		return errCrashed
	}
	if j.KeepMemory {
		// nothing to write
	} else if current, err := c.ReadMemory(); err != nil {
		return err
	} else if current != j.Memory {
		if err := atomicfile.WriteFile(c.MemoryPath(), []byte(j.Memory), 0o600); err != nil {
			return err
		}
	}
	if c.crashAt("memory") {
		return errCrashed
	}
	if err := s.SetCursor(ctx, j.To); err != nil {
		return fmt.Errorf("save session %s: %w", j.Key, err)
	}
	if c.crashAt("cursor") {
		return errCrashed
	}
	return c.removeJournal()
}

// appendHistory appends the entry at the journal's offset unless it is
// there already; a torn append (a crash mid-write) is cut off first.
func (c *Consolidator) appendHistory(j journal) error {
	path := c.HistoryPath()
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("append history: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("append history: %w", err)
	}
	size, at := fi.Size(), j.HistorySize
	if size >= at+int64(len(j.Entry)) {
		buf := make([]byte, len(j.Entry))
		if _, err := f.ReadAt(buf, at); err == nil && string(buf) == j.Entry {
			return nil // written before the crash
		}
	}
	if size < at || size > at+int64(len(j.Entry)) {
		// Changed by someone else since: append at the end.
		c.logger().Warn("memory: HISTORY.md changed during a consolidation; appending at its end")
		at = size
	}
	if err := f.Truncate(at); err != nil {
		return fmt.Errorf("append history: %w", err)
	}
	data := []byte(j.Entry)
	if c.crashAt("history-torn") {
		f.WriteAt(data[:len(data)/2], at) //nolint:errcheck // simulating a torn write
		return errCrashed
	}
	if _, err := f.WriteAt(data, at); err != nil {
		return fmt.Errorf("append history: %w", err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("append history: %w", err)
	}
	if size == 0 {
		atomicfile.SyncDir(filepath.Dir(path))
	}
	return nil
}

func (c *Consolidator) removeJournal() error {
	if err := os.Remove(c.journalPath()); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("memory: %w", err)
	}
	atomicfile.SyncDir(filepath.Dir(c.journalPath()))
	return nil
}

// ask makes the save_memory call and reads its arguments leniently: a
// JSON text inside a string, a list of one object, values that are not
// strings (nanobot issue #1042) are all accepted; a missing call, a
// missing or empty history_entry, arguments that are not JSON are errors.
func (c *Consolidator) ask(ctx context.Context, key, current, lines string) (entry, update string, err error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout())
	defer cancel()
	mem := current
	if strings.TrimSpace(mem) == "" {
		mem = "(empty)"
	}
	if len(mem) > c.maxMemory() {
		// The model rewrites what it is shown: a memory_update made from
		// the first part only is refused (see keepable).
		c.warnLarge(int64(len(mem)))
		mem = Truncate(mem, c.maxMemory()) + fmt.Sprintf("\n\n[MEMORY.md is %d bytes: only its first %d are shown]", len(current), c.maxMemory())
	}
	reply, err := c.Model.Call(ctx, modelcall.Request{
		Source:     "consolidation",
		Session:    key,
		System:     systemPrompt,
		User:       fmt.Sprintf(userPrompt, mem, lines),
		Tools:      []tool.Spec{SaveMemory},
		ToolChoice: SaveMemory.Name,
	})
	if err != nil {
		return "", "", fmt.Errorf("model call: %w", err)
	}
	var args map[string]any
	if err := reply.Args(SaveMemory.Name, &args); err != nil {
		if errors.Is(err, modelcall.ErrNoCall) {
			return "", "", errors.New("the model did not call save_memory")
		}
		return "", "", err
	}
	entry = strings.TrimSpace(asText(args["history_entry"]))
	if entry == "" {
		return "", "", errors.New("save_memory without a history_entry")
	}
	update = current
	if v, ok := args["memory_update"]; ok && v != nil {
		update = asText(v)
	}
	return entry, update, nil
}

// asText is a value as text: strings as they are, anything else as JSON.
func asText(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// formatLines writes messages as nanobot's consolidation prompt lists them:
// "[2026-03-15 14:30] USER [tools: a, b]: content", empty contents
// skipped, each content cut to MaxMessageBytes with a note.
func (c *Consolidator) formatLines(msgs []Message) string {
	limit := c.maxMessage()
	cut := make([]Message, len(msgs))
	for i, m := range msgs {
		if len(m.Content) > limit {
			m.Content = Truncate(m.Content, limit) + fmt.Sprintf(" … [%d bytes cut]", len(m.Content)-len(Truncate(m.Content, limit)))
		}
		cut[i] = m
	}
	return formatLines(cut)
}

func formatLines(msgs []Message) string {
	var b strings.Builder
	for _, m := range msgs {
		if m.Content == "" {
			continue
		}
		ts := m.Timestamp
		if len(ts) > 16 {
			ts = ts[:16]
		}
		ts = strings.Replace(ts, "T", " ", 1)
		tools := ""
		if len(m.Tools) > 0 {
			tools = " [tools: " + strings.Join(m.Tools, ", ") + "]"
		}
		fmt.Fprintf(&b, "[%s] %s%s: %s\n", ts, strings.ToUpper(m.Role), tools, m.Content)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

func (c *Consolidator) lock(ctx context.Context) (func(), error) {
	if err := os.MkdirAll(filepath.Join(c.Workspace, "memory"), 0o700); err != nil {
		return nil, fmt.Errorf("memory: %w", err)
	}
	c.mu.Lock()
	unlock, err := atomicfile.Lock(ctx, c.lockPath())
	if err != nil {
		c.mu.Unlock()
		return nil, err
	}
	return func() { unlock(); c.mu.Unlock() }, nil
}

var errCrashed = errors.New("crashed (test)")

func (c *Consolidator) crashAt(point string) bool { return c.crash != nil && c.crash(point) }

func (c *Consolidator) failed(key string) int {
	c.runMu.Lock()
	defer c.runMu.Unlock()
	if c.failures == nil {
		c.failures = map[string]int{}
	}
	c.failures[key]++
	return c.failures[key]
}

func (c *Consolidator) resetFailures(key string) {
	c.runMu.Lock()
	delete(c.failures, key)
	c.runMu.Unlock()
}

// MessageWindow is the count of messages not consolidated at which a
// session is due (Window, default 100), 0 when messages are not counted
// (Window below 0): the most a prompt's history holds.
func (c *Consolidator) MessageWindow() int {
	if c.Window < 0 {
		return 0
	}
	return c.window()
}

func (c *Consolidator) window() int {
	if c.Window <= 0 {
		return 100
	}
	return c.Window
}

func (c *Consolidator) maxChunk() int   { return orDefault(c.MaxChunkBytes, DefaultMaxChunkBytes) }
func (c *Consolidator) maxMessage() int { return orDefault(c.MaxMessageBytes, DefaultMaxMessageBytes) }
func (c *Consolidator) maxMemory() int  { return orDefault(c.MaxMemoryBytes, DefaultMaxMemoryBytes) }
func (c *Consolidator) maxModelChunks() int {
	return orDefault(c.MaxModelChunks, DefaultMaxModelChunks)
}

func orDefault(v, def int) int {
	if v > 0 {
		return v
	}
	return def
}

func (c *Consolidator) timeout() time.Duration {
	if c.Timeout <= 0 {
		return 2 * time.Minute
	}
	return c.Timeout
}

func (c *Consolidator) now() time.Time {
	if c.Now == nil {
		return time.Now()
	}
	return c.Now()
}

func (c *Consolidator) logger() *slog.Logger {
	if c.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return c.Log
}

func fileSize(path string) (int64, error) {
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("memory: %w", err)
	}
	return fi.Size(), nil
}
