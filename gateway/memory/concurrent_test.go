package memory

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nbots/nb/gateway/modelcall"
)

// TestConcurrentConsolidationsBothLand: consolidations of two sessions
// run at once, their model calls outside the workspace's lock (as
// nanobot locks per session; before, one global lock held across the
// call made a gateway consolidate one session at a time, whatever the
// number of busy chats); MEMORY.md is shared, so the one that writes
// second finds it rewritten and asks the model again with it: both
// sessions' facts land, each entry is in HISTORY.md once, both cursors
// move.
func TestConcurrentConsolidationsBothLand(t *testing.T) {
	dir := t.TempDir()
	sessions := map[string]*memSession{"telegram:a": session(20), "telegram:b": session(20)}
	var (
		arrived atomic.Int32
		both    = make(chan struct{})
		calls   atomic.Int32
	)
	c := &Consolidator{Workspace: dir, Window: 10,
		Open: func(_ context.Context, key string) (Session, error) { return sessions[key], nil },
		Model: modelcall.Func(func(ctx context.Context, r modelcall.Request) (modelcall.Reply, error) {
			calls.Add(1)
			if arrived.Add(1) == 2 {
				close(both)
			}
			select {
			case <-both: // the other session's call is in flight too
			case <-time.After(10 * time.Second):
				return modelcall.Reply{}, fmt.Errorf("%s: the other session's consolidation did not call the model while this one's call ran", r.Session)
			}
			mem := r.User[strings.Index(r.User, "## Current Long-term Memory\n")+len("## Current Long-term Memory\n") : strings.Index(r.User, "\n\n## Conversation to Process")]
			if mem == "(empty)" {
				mem = "# Memory\n"
			}
			return saveMemory("[2026-03-15 14:30] Talked in "+r.Session+".", mem+"- fact from "+r.Session+"\n"), nil
		})}
	var wg sync.WaitGroup
	for key := range sessions {
		wg.Go(func() {
			if err := c.Consolidate(t.Context(), key, false); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	m, _ := os.ReadFile(c.MemoryPath())
	for key, s := range sessions {
		if !strings.Contains(string(m), "- fact from "+key+"\n") {
			t.Errorf("MEMORY.md lost %s's update: %q", key, m)
		}
		if s.cursor != 21-5 {
			t.Errorf("%s: cursor %d, want 16", key, s.cursor)
		}
	}
	h, _ := os.ReadFile(c.HistoryPath())
	for key := range sessions {
		if n := strings.Count(string(h), "Talked in "+key+"."); n != 1 {
			t.Errorf("HISTORY.md has %s's entry %d times, want 1: %q", key, n, h)
		}
	}
	if n := calls.Load(); n != 3 {
		t.Errorf("%d model calls, want 3 (the second writer asks again with the first's memory)", n)
	}
}

// TestConsolidationConflictsSerialised: when MEMORY.md keeps changing
// during a consolidation's calls (another writer each time), the
// consolidation asks again conflictTries times, then makes its call
// under the workspace's lock, and its update, made from the memory as
// it is, lands.
func TestConsolidationConflictsSerialised(t *testing.T) {
	dir := t.TempDir()
	s := session(20)
	var calls int
	var c *Consolidator
	c = &Consolidator{Workspace: dir, Window: 10,
		Open: func(context.Context, string) (Session, error) { return s, nil },
		Model: modelcall.Func(func(ctx context.Context, r modelcall.Request) (modelcall.Reply, error) {
			calls++
			mem := r.User[strings.Index(r.User, "## Current Long-term Memory\n")+len("## Current Long-term Memory\n") : strings.Index(r.User, "\n\n## Conversation to Process")]
			// Another writer, during the call (not under the lock: a
			// forget made while the call runs would wait for it).
			if calls <= conflictTries {
				os.MkdirAll(dir+"/memory", 0o700)
				os.WriteFile(c.MemoryPath(), fmt.Appendf(nil, "# Memory\n- other %d\n", calls), 0o600)
			}
			return saveMemory("[2026-03-15 14:30] Talked.", mem+"- mine\n"), nil
		})}
	if err := c.Consolidate(t.Context(), "k", false); err != nil {
		t.Fatal(err)
	}
	m, _ := os.ReadFile(c.MemoryPath())
	if want := fmt.Sprintf("# Memory\n- other %d\n- mine\n", conflictTries); string(m) != want || calls != conflictTries+1 {
		t.Errorf("after %d calls MEMORY.md is %q, want %q after %d", calls, m, want, conflictTries+1)
	}
}
