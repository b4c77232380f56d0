package bot

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nbots/nb/cartridge"
	"github.com/nbots/nb/provider/providertest"
)

// router is a fake model that answers each conversation by its own
// script, told apart by its first user message (the parent's input, or
// a sub-agent's task): sub-agents run at the same time as their parent.
type router struct {
	mu      sync.Mutex
	scripts map[string]func(n int, t providertest.Turn) providertest.Reply
	turns   map[string][]providertest.Turn
}

func firstUser(t providertest.Turn) string {
	for _, m := range t.Messages {
		if m.Role == "user" {
			return m.Content
		}
	}
	return ""
}

func (r *router) brain(t providertest.Turn) providertest.Reply {
	key := firstUser(t)
	r.mu.Lock()
	if r.turns == nil {
		r.turns = map[string][]providertest.Turn{}
	}
	n := len(r.turns[key])
	r.turns[key] = append(r.turns[key], t)
	script := r.scripts[key]
	r.mu.Unlock()
	if script == nil {
		return text("(no script for " + strconv.Quote(key) + ")")
	}
	return script(n, t)
}

func (r *router) of(key string) []providertest.Turn {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.turns[key])
}

// TestManagedSubAgents: two sub-agents run at once beside their parent:
// one in a folder of the workspace on a cheaper model, running a long
// command; the other steered with send_input while it works (the message
// is its next turn, never lost), waited for with a timeout (the other
// still running says so), closed (a message to it is then refused); and
// aborting the parent kills the command its child runs.
func TestManagedSubAgents(t *testing.T) {
	ws := t.TempDir()
	os.Mkdir(filepath.Join(ws, "a"), 0o755)
	pidFile := filepath.Join(ws, "a", "pid")
	bReached, releaseB := make(chan struct{}), make(chan struct{})
	ready, releaseParent := make(chan struct{}), make(chan struct{})
	defer close(releaseParent)
	r := &router{scripts: map[string]func(int, providertest.Turn) providertest.Reply{
		"go": func(n int, _ providertest.Turn) providertest.Reply {
			switch n {
			case 0:
				return call("spawn_agent", map[string]any{"task": "task A", "working_dir": "a", "model": "gpt-4o-mini", "tools": []string{"exec"}})
			case 1:
				return call("spawn_agent", map[string]any{"task": "task B"})
			case 2:
				<-bReached // B works: the message is steering, not its first input
				return call("send_input", map[string]any{"agent_id": "agent-2", "message": "Also say hi."})
			case 3:
				close(releaseB)
				return call("wait", map[string]any{"agent_ids": []string{"agent-2", "agent-1"}, "timeout": 3})
			case 4:
				return call("close_agent", map[string]any{"agent_id": "agent-2"})
			case 5:
				return call("send_input", map[string]any{"agent_id": "agent-2", "message": "More."})
			}
			for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
				if b, _ := os.ReadFile(pidFile); len(b) > 0 {
					break
				}
			}
			close(ready)
			<-releaseParent
			return text("never read")
		},
		"task A": func(n int, _ providertest.Turn) providertest.Reply {
			if n == 0 {
				return call("exec", map[string]any{"command": "echo $$ > pid; exec sleep 60"})
			}
			return text("A done")
		},
		"task B": func(n int, _ providertest.Turn) providertest.Reply {
			if n == 0 {
				close(bReached)
				<-releaseB
				return text("B first")
			}
			return text("B: hi")
		},
	}}
	url := fakeOpenAI(t, r.brain)
	c := spawnCartridge(t, url, "  files: {workspace: "+ws+"}\n  exec: {sandbox: off, timeout: 120}\n  spawn: {max-depth: 1, managed: true}\n")
	b, err := New(context.Background(), c, Host{Environ: []string{"PATH=/usr/bin:/bin"}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	conf := &recorder{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := b.Ask(ctx, Exchange{Mode: cartridge.Eval, Confirmer: conf}, "go")
		done <- err
	}()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("the exchange ended early: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("the parent never reached its last round")
	}
	raw, _ := os.ReadFile(pidFile)
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil {
		t.Fatalf("pid file: %q", raw)
	}
	if err := syscall.Kill(pid, 0); err != nil {
		t.Fatalf("the child's command is not running before the abort: %v", err)
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("the aborted exchange returned %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the aborted exchange did not end")
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("the child's command (pid %d) outlived its parent's abort: %v", pid, err)
	}

	parent := r.of("go")
	if len(parent) != 7 {
		t.Fatalf("the parent made %d requests, want 7", len(parent))
	}
	if !slices.Contains(parent[0].Tools, "spawn_agent") || slices.Contains(parent[0].Tools, "spawn") {
		t.Errorf("the parent is offered %v: want the managed tools, not spawn", parent[0].Tools)
	}
	result := func(i int) string {
		res := toolResults(parent[i])
		if len(res) == 0 {
			return ""
		}
		return res[len(res)-1]
	}
	if got := result(1); got != `{"agent_id":"agent-1","status":"running"}` {
		t.Errorf("spawn_agent answered %s", got)
	}
	if got := result(3); !strings.Contains(got, `"agent_id":"agent-2","status":"running"`) {
		t.Errorf("send_input to a working sub-agent answered %s", got)
	}
	waited := result(4)
	if !strings.Contains(waited, `{"agent_id":"agent-2","status":"completed","output":"B: hi","success":true,"turns_used":2`) ||
		!strings.Contains(waited, `{"agent_id":"agent-1","status":"running","success":false,"turns_used":0,"model":"gpt-4o-mini","working_dir":"a"}`) {
		t.Errorf("wait answered %s", waited)
	}
	if got := result(5); !strings.Contains(got, `"agent_id":"agent-2","status":"completed"`) {
		t.Errorf("close_agent answered %s", got)
	}
	if got := result(6); !strings.Contains(got, "the sub-agent agent-2 was closed") {
		t.Errorf("send_input to a closed sub-agent answered %s", got)
	}

	a, bTurns := r.of("task A"), r.of("task B")
	if len(a) != 1 || a[0].Model != "gpt-4o-mini" || !slices.Equal(a[0].Tools, []string{"exec"}) {
		t.Errorf("sub-agent A: %d requests, model %q, tools %v", len(a), a[0].Model, a[0].Tools)
	}
	if len(bTurns) != 2 || bTurns[0].Model != "gpt-4o" || bTurns[1].LastUser() != "Also say hi." {
		t.Errorf("sub-agent B: %d requests; the second's input %q", len(bTurns), bTurns[len(bTurns)-1].LastUser())
	}
	if slices.Contains(bTurns[0].Tools, "spawn_agent") {
		t.Errorf("a sub-agent at builtins.spawn.max-depth is offered %v", bTurns[0].Tools)
	}
	// The child's command was confirmed by the parent's confirmer.
	if !slices.Contains(conf.asked, "exec") || !slices.Contains(conf.asked, "spawn_agent") || slices.Contains(conf.asked, "wait") {
		t.Errorf("confirmations: %v", conf.asked)
	}
}

// TestManagedSubAgentDepth: a sub-agent may start its own below
// max-depth; the deepest level is offered none.
func TestManagedSubAgentDepth(t *testing.T) {
	r := &router{scripts: map[string]func(int, providertest.Turn) providertest.Reply{
		"go": func(n int, _ providertest.Turn) providertest.Reply {
			switch n {
			case 0:
				return call("spawn_agent", map[string]any{"task": "level 1"})
			case 1:
				return call("wait", map[string]any{"agent_id": "agent-1"})
			}
			return text("top done")
		},
		"level 1": func(n int, _ providertest.Turn) providertest.Reply {
			switch n {
			case 0:
				return call("spawn_agent", map[string]any{"task": "level 2"})
			case 1:
				return call("wait", map[string]any{"agent_id": "agent-1"})
			}
			return text("level 1 done")
		},
		"level 2": func(int, providertest.Turn) providertest.Reply { return text("level 2 done") },
	}}
	url := fakeOpenAI(t, r.brain)
	b, err := New(context.Background(), spawnCartridge(t, url, "  files: {write: false}\n  spawn: {max-depth: 2, managed: true}\n"), Host{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	res, err := b.Ask(context.Background(), Exchange{Mode: cartridge.Eval, Confirmer: &recorder{}}, "go")
	if err != nil {
		t.Fatal(err)
	}
	if res.Text != "top done" {
		t.Errorf("answer = %q", res.Text)
	}
	offered := func(key string) bool {
		turns := r.of(key)
		return len(turns) > 0 && slices.Contains(turns[0].Tools, "spawn_agent")
	}
	if !offered("go") || !offered("level 1") || offered("level 2") {
		t.Errorf("spawn_agent offered at depths 0, 1, 2: %v %v %v; want true true false", offered("go"), offered("level 1"), offered("level 2"))
	}
	if got := toolResults(r.of("level 1")[2]); len(got) != 2 || !strings.Contains(got[1], `"output":"level 2 done"`) {
		t.Errorf("level 1 waited and got %q", got)
	}
	if got := toolResults(r.of("go")[2]); len(got) != 2 || !strings.Contains(got[1], `"output":"level 1 done"`) {
		t.Errorf("the parent waited and got %q", got)
	}
}

// TestManagedSubAgentWorkspace: a sub-agent's working_dir is a folder
// inside its parent's workspace: a path that leaves it, by .. or by a
// link, is refused, and so is a model the cartridge does not list.
func TestManagedSubAgentWorkspace(t *testing.T) {
	ws, outside := t.TempDir(), t.TempDir()
	os.Mkdir(filepath.Join(ws, "sub"), 0o755)
	os.Symlink(outside, filepath.Join(ws, "out"))
	tries := []map[string]any{
		{"task": "x", "working_dir": "../"},
		{"task": "x", "working_dir": "out"},
		{"task": "x", "working_dir": outside},
		{"task": "x", "working_dir": "sub/../../"},
		{"task": "x", "working_dir": "missing"},
		{"task": "x", "model": "gpt-5"},
	}
	r := &router{scripts: map[string]func(int, providertest.Turn) providertest.Reply{
		"go": func(n int, _ providertest.Turn) providertest.Reply {
			if n < len(tries) {
				return call("spawn_agent", tries[n])
			}
			return text("done")
		},
	}}
	url := fakeOpenAI(t, r.brain)
	c := spawnCartridge(t, url, "  files: {workspace: "+ws+"}\n  spawn: {managed: true, models: [gpt-4o-mini]}\n")
	b, err := New(context.Background(), c, Host{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := b.Ask(context.Background(), Exchange{Mode: cartridge.Eval, Confirmer: &recorder{}}, "go"); err != nil {
		t.Fatal(err)
	}
	parent := r.of("go")
	want := []string{"is outside your workspace", "is outside your workspace", "is outside your workspace", "is outside your workspace",
		`working_dir "missing" does not exist in your workspace`, `field model: enum: gpt-5 does not equal any of: [gpt-4o-mini gpt-4o]`}
	for i, w := range want {
		got := toolResults(parent[i+1])
		if len(got) == 0 || !strings.Contains(got[len(got)-1], w) {
			t.Errorf("spawn_agent %v answered %q, want %q", tries[i], got, w)
		}
	}
	if len(r.turns) != 1 {
		t.Errorf("a refused sub-agent ran: %v", r.turns)
	}
}

// With the tools on another machine (builtins.environment: ssh://…) a
// working_dir cannot be resolved here: it is refused by name, and a
// sub-agent without one works in the parent's remote folder.
func TestManagedSubAgentWorkingDirRemote(t *testing.T) {
	ws := t.TempDir()
	os.Mkdir(filepath.Join(ws, "sub"), 0o755)
	r := &router{scripts: map[string]func(int, providertest.Turn) providertest.Reply{
		"go": func(n int, _ providertest.Turn) providertest.Reply {
			if n == 0 {
				return call("spawn_agent", map[string]any{"task": "x", "working_dir": "sub"})
			}
			return text("done")
		},
	}}
	url := fakeOpenAI(t, r.brain)
	c := spawnCartridge(t, url, "  files: {workspace: "+ws+"}\n  spawn: {managed: true}\n")
	b, err := New(context.Background(), c, Host{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	b.builtins.Remote = true // as builtins.environment sets it; sshd-backed runs are builtin's tests
	if _, err := b.Ask(context.Background(), Exchange{Mode: cartridge.Eval, Confirmer: &recorder{}}, "go"); err != nil {
		t.Fatal(err)
	}
	got := toolResults(r.of("go")[1])
	if len(got) == 0 || !strings.Contains(got[len(got)-1], "working_dir is for a local workspace") {
		t.Errorf("spawn_agent with working_dir answered %q", got)
	}
	if len(r.turns) != 1 {
		t.Errorf("a refused sub-agent ran: %v", r.turns)
	}
}
