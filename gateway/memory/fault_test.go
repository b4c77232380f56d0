package memory

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nbots/nb/gateway/modelcall"
	"github.com/nbots/nb/internal/atomicfile"
	"github.com/nbots/nb/provider"
)

// diskSession is a session whose messages the test appends and whose
// cursor is a file written atomically, as the gateway's session file's
// metadata line is. A "crash" forgets nothing on disk.
type diskSession struct {
	t    *testing.T
	mu   *sync.Mutex
	msgs *[]Message
	path string
}

func (s *diskSession) Load(context.Context) ([]Message, int, error) {
	s.mu.Lock()
	msgs := (*s.msgs)[:len(*s.msgs):len(*s.msgs)] // append-only: a view is a snapshot
	s.mu.Unlock()
	n := readCursor(s.t, s.path)
	return msgs[min(n, len(msgs)):], n, nil
}

func (s *diskSession) SetCursor(_ context.Context, n int) error {
	if old := readCursor(s.t, s.path); n <= old {
		s.t.Errorf("cursor moved back or stood still: %d -> %d", old, n)
	}
	return atomicfile.WriteFile(s.path, []byte(strconv.Itoa(n)), 0o600)
}

func readCursor(t *testing.T, path string) int {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0
	}
	n, err := strconv.Atoi(string(b))
	if err != nil {
		t.Fatalf("cursor file torn: %q", b)
	}
	return n
}

var marker = regexp.MustCompile(`m\d{6}`)

// faultyModel answers save_memory calls, 30% of them badly.
type faultyModel struct {
	rng    *rand.Rand
	counts map[string]int
}

func (m *faultyModel) Call(ctx context.Context, req modelcall.Request) (modelcall.Reply, error) {
	if req.ToolChoice != "save_memory" || req.Source != "consolidation" {
		return modelcall.Reply{}, fmt.Errorf("unexpected request %+v", req)
	}
	conv := req.User[strings.Index(req.User, "## Conversation to Process\n"):]
	ids := marker.FindAllString(conv, -1)
	entry := "[2026-11-26 04:00] Talked about " + strings.Join(ids, " ")
	mem := req.User[strings.Index(req.User, "## Current Long-term Memory\n")+len("## Current Long-term Memory\n") : strings.Index(req.User, "\n\n## Conversation to Process")]
	if mem == "(empty)" {
		mem = "# Memory\n"
	}
	update := mem + "- fact " + ids[0] + "\n"
	good := func(args string) (modelcall.Reply, error) {
		return modelcall.Reply{ToolCalls: []provider.ToolCall{{ID: "c1", Name: "save_memory", Arguments: args}}}, nil
	}
	enc := func(v any) string { b, _ := json.Marshal(v); return string(b) }
	r := m.rng.IntN(100)
	kind := "ok"
	defer func() { m.counts[kind]++ }()
	switch {
	case r < 6:
		kind = "malformed"
		switch m.rng.IntN(3) {
		case 0:
			return good(enc(map[string]any{"memory_update": update}))
		case 1:
			return good(`"not an object"`)
		default:
			return good(enc(map[string]any{"history_entry": "", "memory_update": update}))
		}
	case r < 12:
		kind = "no tool call"
		return modelcall.Reply{Content: "I have consolidated the memory.", FinishReason: provider.FinishStop}, nil
	case r < 18:
		kind = "5xx"
		return modelcall.Reply{}, errors.New("openai: 503 Service Unavailable: upstream overloaded")
	case r < 24:
		kind = "timeout"
		<-ctx.Done()
		return modelcall.Reply{}, ctx.Err()
	case r < 30:
		kind = "truncated"
		full := enc(map[string]any{"history_entry": entry, "memory_update": update})
		return good(full[:m.rng.IntN(len(full)-1)])
	case r < 34:
		kind = "shrinking memory"
		return good(enc(map[string]any{"history_entry": entry, "memory_update": []string{"", "x"}[m.rng.IntN(2)]}))
	case r < 40:
		kind = "JSON in a string"
		return good(enc(enc(map[string]any{"history_entry": entry, "memory_update": update})))
	case r < 44:
		kind = "object values"
		return good(enc([]any{map[string]any{"history_entry": map[string]any{"text": entry}, "memory_update": update}}))
	}
	return good(enc(map[string]any{"history_entry": entry, "memory_update": update}))
}

// TestFaultInjection runs 10,000 rounds of a growing session against a
// model that answers 30% of consolidation calls with malformed arguments,
// no tool call, a 5xx, a timeout or truncated JSON, and kills the process
// (in effect) at random points of 5% of the consolidations. Throughout:
// every message is in the unconsolidated tail or in HISTORY.md exactly
// once, the cursor only moves forward and is always readable, MEMORY.md is
// never emptied nor shrunk by more than half.
func TestFaultInjection(t *testing.T) {
	rounds := 10_000
	if testing.Short() {
		rounds = 1_000
	}
	dir := memTempDir(t)
	var mu sync.Mutex
	var msgs []Message
	sess := &diskSession{t: t, mu: &mu, msgs: &msgs, path: filepath.Join(dir, "cursor")}
	rng := rand.New(rand.NewPCG(1, 2))
	model := &faultyModel{rng: rng, counts: map[string]int{}}
	open := func(context.Context, string) (Session, error) { return sess, nil }
	newC := func() *Consolidator {
		return &Consolidator{Workspace: dir, Model: model, Open: open, Window: 8, Timeout: time.Millisecond}
	}
	c := newC()
	crashes, raw := 0, 0
	lastCursor, lastMem := 0, 0
	points := []string{"journal", "history-torn", "history", "memory", "cursor"}
	n := 0
	for round := range rounds {
		for range 1 + rng.IntN(3) {
			msgs = append(msgs, Message{Role: []string{"user", "assistant"}[n%2], Content: fmt.Sprintf("m%06d", n), Timestamp: "2026-11-26T04:00:00.000000"})
			n++
		}
		if rng.IntN(100) < 5 {
			point := points[rng.IntN(len(points))]
			c.crash = func(p string) bool { return p == point }
		}
		err := c.Consolidate(context.Background(), "telegram:1", rng.IntN(100) == 0)
		if errors.Is(err, errCrashed) {
			crashes++
			c = newC() // a new process: nothing in memory survives
			if err := c.Recover(context.Background()); err != nil {
				t.Fatalf("round %d: recover: %v", round, err)
			}
		}
		c.crash = nil
		cur := readCursor(t, sess.path)
		if cur < lastCursor {
			t.Fatalf("round %d: cursor %d < %d", round, cur, lastCursor)
		}
		lastCursor = cur
		fi, err := os.Stat(c.MemoryPath())
		if err == nil {
			if size := int(fi.Size()); size == 0 || size*2 < lastMem {
				t.Fatalf("round %d: MEMORY.md went from %d to %d bytes", round, lastMem, size)
			} else {
				lastMem = size
			}
		}
		if round%500 == 0 || round == rounds-1 {
			checkExactlyOnce(t, c, msgs, cur)
		}
	}
	hist, _ := os.ReadFile(c.HistoryPath())
	raw = strings.Count(string(hist), "] [RAW] ")
	t.Logf("%d rounds, %d messages, cursor %d, %d crashes, %d raw archives, answers %v", rounds, len(msgs), lastCursor, crashes, raw, model.counts)
	if crashes == 0 || lastCursor < len(msgs)/2 {
		t.Errorf("the suite exercised too little: %d crashes, cursor %d of %d", crashes, lastCursor, len(msgs))
	}
}

// checkExactlyOnce: each message before the cursor is in HISTORY.md once,
// each after it not at all.
func checkExactlyOnce(t *testing.T, c *Consolidator, msgs []Message, cursor int) {
	t.Helper()
	hist, err := os.ReadFile(c.HistoryPath())
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, id := range marker.FindAllString(string(hist), -1) {
		seen[id]++
	}
	for i, m := range msgs {
		want := 0
		if i < cursor {
			want = 1
		}
		if seen[m.Content] != want {
			t.Fatalf("message %d (%s) is %d times in HISTORY.md, want %d (cursor %d)", i, m.Content, seen[m.Content], want, cursor)
		}
	}
}

// memTempDir is a temporary directory in memory (/dev/shm) when there is
// one: a process killed with -9 loses nothing the page cache holds, so
// what these tests simulate does not need fsync, whose cost on a busy disk
// (~10 ms) would make 10,000 rounds take minutes.
func memTempDir(t *testing.T) string {
	dir, err := os.MkdirTemp("/dev/shm", "nb-memory-test-")
	if err != nil {
		t.Logf("no /dev/shm (%v): on disk, slower", err)
		return t.TempDir()
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}
