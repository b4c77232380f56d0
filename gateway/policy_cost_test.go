package gateway

import (
	"context"
	"path/filepath"
	"slices"
	"testing"

	"github.com/nbots/nb/gateway/access"
)

// TestPolicyPathsOnce: a turn's file policy takes the workspace's
// absolute paths made once (not joined at every turn), a guest's
// additions never reach the owner's lists, and a new workspace or new
// protected paths are taken at the next turn.
func TestPolicyPathsOnce(t *testing.T) {
	ws, other := t.TempDir(), t.TempDir()
	g := &Gateway{Prompt: &Prompt{Workspace: ws}, ProtectedPaths: []string{"/state"}}
	ctx := context.Background()
	owner := Direct{Role: access.Owner, SessionKey: "web:o"}
	guest := Direct{Role: access.Guest, SessionKey: "web:g"}
	for range 3 {
		g.policy(ctx, guest, "t")
	}
	p := g.policy(ctx, owner, "t")
	if slices.Contains(p.Hidden, filepath.Join(ws, "memory")) || !slices.Contains(p.Hidden, filepath.Join(ws, "sessions")) || !slices.Contains(p.Hidden, "/state") {
		t.Errorf("an owner's turn hides %q", p.Hidden)
	}
	if !slices.Contains(p.Watched, filepath.Join(ws, "AGENTS.md")) {
		t.Errorf("an owner's turn watches %q", p.Watched)
	}
	if gp := g.policy(ctx, guest, "t"); !slices.Contains(gp.Hidden, filepath.Join(ws, "memory")) {
		t.Errorf("a guest's turn hides %q", gp.Hidden)
	}
	if n := testing.AllocsPerRun(100, func() { g.policy(ctx, owner, "t") }); n > 6 {
		t.Errorf("an owner's turn's policy: %.0f allocations, want at most 6", n)
	}
	g.Prompt.Workspace, g.ProtectedPaths = other, []string{"/elsewhere"}
	p = g.policy(ctx, owner, "t")
	if !slices.Contains(p.Hidden, filepath.Join(other, "sessions")) || !slices.Contains(p.Hidden, "/elsewhere") || slices.Contains(p.Hidden, "/state") {
		t.Errorf("after a change, an owner's turn hides %q", p.Hidden)
	}
}
