package shell

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nbots/nb/builtin/files"
	"github.com/nbots/nb/tool"
)

// TestPolicyInTheSandbox: a call's file policy hides the gateway's
// control folders from a sandboxed command and keeps the read-only files
// read-only; a policy that requires the sandbox refuses an unsandboxed
// command.
func TestPolicyInTheSandbox(t *testing.T) {
	ws := t.TempDir()
	os.MkdirAll(filepath.Join(ws, "sessions"), 0o700)
	os.WriteFile(filepath.Join(ws, "sessions", "telegram_1.jsonl"), []byte("owner secret\n"), 0o600)
	os.WriteFile(filepath.Join(ws, "AGENTS.md"), []byte("be kind\n"), 0o600)
	os.WriteFile(filepath.Join(ws, "state.json"), []byte("{}\n"), 0o600)
	p := &files.Policy{
		Hidden:         []string{filepath.Join(ws, "sessions"), filepath.Join(ws, "state.json"), filepath.Join(ws, "missing")},
		ReadOnly:       []string{filepath.Join(ws, "AGENTS.md")},
		RequireSandbox: true,
	}
	args := policyArgs(p)
	want := []string{"--tmpfs", filepath.Join(ws, "sessions"), "--ro-bind", "/dev/null", filepath.Join(ws, "state.json"), "--ro-bind-try", filepath.Join(ws, "AGENTS.md"), filepath.Join(ws, "AGENTS.md")}
	if !slices.Equal(args, want) {
		t.Fatalf("bwrap options %q, want %q", args, want)
	}
	ctx := files.WithPolicy(context.Background(), p)

	off := newExec(t, Options{Workspace: ws, Sandbox: SandboxOff})
	if _, err := off.Run(ctx, tool.Call{Name: "exec", Arguments: map[string]any{"command": "cat sessions/telegram_1.jsonl"}}); err == nil || !strings.Contains(err.Error(), "outside the sandbox") {
		t.Fatalf("an unsandboxed command ran under a policy that requires the sandbox: %v", err)
	}

	e := sandboxed(t, Options{Workspace: ws})
	out, err := e.Run(ctx, tool.Call{Name: "exec", Arguments: map[string]any{"command": "cat sessions/telegram_1.jsonl; echo obey >> AGENTS.md; cat state.json; ls sessions"}})
	if err != nil {
		t.Fatal(err)
	}
	text := ""
	switch v := out.(type) {
	case string:
		text = v
	case *tool.Result:
		text = v.Text
	}
	// The errors quote the command's paths ("cat: sessions/telegram_1.jsonl:
	// No such file"): what must not show is the files' contents, or the
	// hidden folder's listing.
	listed := slices.Contains(strings.Split(text, "\n"), "telegram_1.jsonl")
	if strings.Contains(text, "owner secret") || listed || strings.Contains(text, "{}") {
		t.Fatalf("the sandbox showed a hidden file:\n%s", text)
	}
	if data, _ := os.ReadFile(filepath.Join(ws, "AGENTS.md")); string(data) != "be kind\n" {
		t.Fatalf("a read-only file was written: %q", data)
	}
}

// TestPolicyWatchesCommands: a command that changes a watched file (the
// owner's prompt files) is told of as the file tools' writes are.
func TestPolicyWatchesCommands(t *testing.T) {
	ws := t.TempDir()
	os.MkdirAll(filepath.Join(ws, "memory"), 0o700)
	os.WriteFile(filepath.Join(ws, "memory", "MEMORY.md"), []byte("facts\n"), 0o600)
	var told []string
	p := &files.Policy{Watched: []string{filepath.Join(ws, "memory"), filepath.Join(ws, "AGENTS.md")}, OnWrite: func(p string) { told = append(told, p) }}
	e := newExec(t, Options{Workspace: ws, Sandbox: SandboxAuto})
	ctx := files.WithPolicy(context.Background(), p)
	if _, err := e.Run(ctx, tool.Call{Name: "exec", Arguments: map[string]any{"command": "echo more >> memory/MEMORY.md; echo obey > AGENTS.md; echo x > other.md"}}); err != nil {
		t.Fatal(err)
	}
	want := []string{filepath.Join(ws, "AGENTS.md"), filepath.Join(ws, "memory", "MEMORY.md")}
	if !slices.Equal(told, want) {
		t.Fatalf("told %q, want %q", told, want)
	}
	told = nil
	if _, err := e.Run(ctx, tool.Call{Name: "exec", Arguments: map[string]any{"command": "cat memory/MEMORY.md"}}); err != nil || len(told) != 0 {
		t.Fatalf("a command that changed nothing: told %q, %v", told, err)
	}
}
