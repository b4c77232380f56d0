package engine

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestArtifactStore is §5.5's store: small artifacts in memory, those
// over the threshold in {base_dir}/artifacts/{id}.json, and its
// retrieve, has, list, remove and clear.
func TestArtifactStore(t *testing.T) {
	dir := t.TempDir()
	a := NewArtifacts(dir)
	small, err := a.Store("plan", "the plan", map[string]any{"steps": []string{"a", "b"}})
	if err != nil || small.FileBacked || small.SizeBytes != len(`{"steps":["a","b"]}`) || small.Name != "the plan" || small.StoredAt.IsZero() {
		t.Fatalf("%+v %v", small, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "artifacts", "plan.json")); !os.IsNotExist(err) {
		t.Errorf("a small artifact has a file: %v", err)
	}
	big := strings.Repeat("x", ArtifactThreshold) // its JSON has two quotes more: over the threshold
	info, err := a.Store("log.full", "the whole log", big)
	if err != nil || !info.FileBacked || info.SizeBytes != ArtifactThreshold+2 {
		t.Fatalf("%+v %v", info, err)
	}
	file := filepath.Join(dir, "artifacts", "log.full.json")
	if data, err := os.ReadFile(file); err != nil || len(data) != ArtifactThreshold+2 {
		t.Fatalf("file: %v", err)
	}
	edge, _ := a.Store("edge", "", strings.Repeat("y", ArtifactThreshold-2)) // exactly the threshold: in memory
	if edge.FileBacked {
		t.Error("an artifact of exactly the threshold is file-backed; §5.5 backs only larger ones")
	}
	var got string
	if err := a.Decode("log.full", &got); err != nil || got != big {
		t.Fatalf("retrieve the file-backed one: %v", err)
	}
	var plan struct{ Steps []string }
	if err := a.Decode("plan", &plan); err != nil || len(plan.Steps) != 2 {
		t.Fatalf("retrieve the small one: %v %v", plan, err)
	}
	if _, err := a.Retrieve("nosuch"); !errors.Is(err, ErrNoArtifact) {
		t.Errorf("missing: %v", err)
	}
	if !a.Has("plan") || a.Has("nosuch") {
		t.Error("Has")
	}
	if l := a.List(); len(l) != 3 || l[0].ID != "plan" || l[1].ID != "log.full" || l[2].ID != "edge" {
		t.Errorf("List %+v", l)
	}
	// Replaced by a small one, the file goes.
	if _, err := a.Store("log.full", "short now", "x"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Errorf("the replaced file stays: %v", err)
	}
	a.Store("log.full", "big again", big) //nolint:errcheck // checked below
	a.Remove("log.full")
	if _, err := os.Stat(file); !os.IsNotExist(err) || a.Has("log.full") {
		t.Errorf("Remove left the file or the entry: %v", err)
	}
	a.Clear()
	if a.Len() != 0 || len(a.List()) != 0 {
		t.Error("Clear")
	}
	for _, id := range []string{"", "../x", "a/b", ".hidden", "-x", "..", strings.Repeat("a", 129), "a b"} {
		if _, err := a.Store(id, "", 1); err == nil {
			t.Errorf("id %q accepted", id)
		}
	}
	if _, err := a.Store("f", "", func() {}); err == nil {
		t.Error("data JSON cannot write was accepted")
	}
	// Without a base folder everything stays in memory.
	mem := NewArtifacts("")
	if info, err := mem.Store("big", "", big); err != nil || info.FileBacked {
		t.Errorf("base_dir NONE: %+v %v", info, err)
	}
}

// TestArtifactsInRun: handlers reach the store through their stage; the
// run counts its artifacts in PipelineCompleted, and a resumed run still
// has them (the small ones through the checkpoint).
func TestArtifactsInRun(t *testing.T) {
	g, src := graphOf(t, "node start shape=Mdiamond", "node exit shape=Msquare", "edge start->a->b->c->exit")
	block := make(chan struct{})
	var seen string
	h := HandlerFunc(func(ctx context.Context, s *Stage) (Outcome, error) {
		switch s.Node.ID {
		case "a":
			if _, err := s.Artifacts().Store("a.small", "small", "kept in memory"); err != nil {
				return Outcome{}, err
			}
			if _, err := s.Artifacts().Store("a.big", "big", strings.Repeat("z", ArtifactThreshold+1)); err != nil {
				return Outcome{}, err
			}
			return Outcome{Status: Success, ContextUpdates: map[string]any{"a.report": "a.big"}}, nil
		case "b":
			if block != nil {
				<-ctx.Done()
				return Outcome{}, ctx.Err()
			}
		case "c":
			if err := s.Artifacts().Decode("a.small", &seen); err != nil {
				return Outcome{}, err
			}
			var big string
			if err := s.Artifacts().Decode(s.Context.GetString("a.report"), &big); err != nil || len(big) != ArtifactThreshold+1 {
				return Failf("big: %v", err), nil
			}
		}
		return Outcome{Status: Success}, nil
	})
	reg := NewRegistry()
	reg.Default = h
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	rec := &recorder{}
	cfg := Config{Graph: g, Source: src, File: "f.dot", LogsRoot: dir, Handlers: reg, Observer: rec}
	go func() {
		for len(rec.kinds(CheckpointSaved)) < 2 { // a's checkpoint is saved; b blocks until cancelled
			time.Sleep(time.Millisecond)
		}
		cancel()
	}()
	res, err := Run(ctx, cfg)
	if err != nil || !res.Interrupted {
		t.Fatalf("%+v %v", res, err)
	}
	cp, err := LoadCheckpoint(dir)
	if err != nil || len(cp.Artifacts) != 2 || string(cp.Artifacts[0].Data) != `"kept in memory"` || cp.Artifacts[1].Data != nil || !cp.Artifacts[1].Info.FileBacked {
		t.Fatalf("checkpoint artifacts %+v %v", cp.Artifacts, err)
	}
	block = nil
	rec = &recorder{}
	cfg.Observer = rec
	res, err = Resume(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	must(t, res, Success, "start,a,b,c,exit")
	if seen != "kept in memory" {
		t.Errorf("c saw %q", seen)
	}
	if done := rec.kinds(PipelineCompleted); len(done) != 1 || done[0].ArtifactCount != 2 {
		t.Errorf("PipelineCompleted %+v", done)
	}
}
