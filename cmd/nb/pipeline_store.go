package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/nbots/nb/pipeline/engine"
	"github.com/nbots/nb/pipeline/runstore"
	"github.com/nbots/nb/pipeline/runstore/runsurl"
)

// openRunStore opens the run store of --store.
func (a *App) openRunStore(raw string) (*runsurl.Store, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return runsurl.Open(ctx, raw, 0)
}

// createStoredRun stores a new run (its id: the run folder's name) and
// sets cfg.Stored; release frees its lease and the store.
func (a *App) createStoredRun(raw string, cfg *engine.Config) (release func(), err error) {
	st, err := a.openRunStore(raw)
	if err != nil {
		return nil, err
	}
	file := cfg.File
	if abs, err := filepath.Abs(file); err == nil {
		file = abs
	}
	id := filepath.Base(cfg.LogsRoot)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := st.Create(ctx, runstore.Info{ID: id, Name: cfg.Graph.Name, File: file, Source: cfg.Source, Vars: cfg.Vars, Cartridge: cfg.Cartridge})
	if err != nil {
		st.Close()
		return nil, fmt.Errorf("%s: %w", st.Name, err)
	}
	cfg.Stored = r
	if dir := st.Dir(id); dir != "" {
		cfg.LogsRoot = dir // the stage folders beside the checkpoint
	}
	fmt.Fprintf(a.Stdout, "run %s in %s\n", id, st.Name)
	return func() { a.releaseRun(r); st.Close() }, nil
}

func (a *App) releaseRun(r runstore.Run) {
	if err := r.Release(); err != nil {
		fmt.Fprintf(a.Stderr, "nb: warning: run %s: %v\n", r.Info().ID, err)
	}
}

// takeStoredRun takes over run id of a store: the flow is the one
// stored with it (or flow, which must be the same text).
func (a *App) takeStoredRun(raw, id, logs, flow string) (engine.Config, func(), error) {
	st, err := a.openRunStore(raw)
	if err != nil {
		return engine.Config{}, nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := st.Take(ctx, id)
	if err != nil {
		st.Close()
		if errors.Is(err, runstore.ErrBusy) {
			return engine.Config{}, nil, fmt.Errorf("%s: %w: a process runs it (or died less than its lease's time ago: try again in a few seconds)", st.Name, err)
		}
		return engine.Config{}, nil, fmt.Errorf("%s: %w", st.Name, err)
	}
	release := func() { a.releaseRun(r); st.Close() }
	info := r.Info()
	file, src := info.File, info.Source
	if flow != "" {
		if src, err = os.ReadFile(flow); err != nil {
			release()
			return engine.Config{}, nil, fmt.Errorf("read the flow: %w", err)
		}
		file = flow
	}
	g, src, err := a.loadPipelineSource(file, src, info.Vars)
	if err != nil {
		release()
		return engine.Config{}, nil, err
	}
	if logs == "" {
		logs = st.Dir(id)
	}
	if logs == "" {
		logs = filepath.Join("pipeline-runs", id)
	}
	return engine.Config{Graph: g, Source: src, File: file, LogsRoot: logs, Vars: info.Vars, Cartridge: info.Cartridge, Stored: r}, release, nil
}

// pipelineEvents is `nb pipeline events --store URL ID`: the run's
// events as JSON lines, as they come, until the run ends.
func (a *App) pipelineEvents(args []string) error {
	fs := a.flags("nb pipeline events", "nb pipeline events --store URL [--after N] ID", `Prints the events of the pipeline run ID of a run store as JSON lines (the
form of nb pipeline run --events), from any machine that reaches the store,
whichever process runs it, and follows them until the run ends.`)
	storeURL := fs.String("store", "", "the run store (`URL`: postgres://… or file:///folder)")
	after := fs.Int64("after", 0, "skip the first `N` events")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 || *storeURL == "" {
		return &usageError{"nb pipeline events needs a store and a run id: nb pipeline events --store URL ID"}
	}
	st, err := a.openRunStore(*storeURL)
	if err != nil {
		return err
	}
	defer st.Close()
	ctx := a.context()
	id := fs.Arg(0)
	var werr error
	err = runstore.Follow(ctx, st, id, *after, func(r runstore.Record) bool {
		if _, werr = fmt.Fprintf(a.Stdout, "%s\n", r.Data); werr != nil {
			return false
		}
		var ev engine.Event
		if json.Unmarshal(r.Data, &ev) != nil || (ev.Kind != engine.PipelineCompleted && ev.Kind != engine.PipelineFailed) {
			return true
		}
		// A run that failed because its process stopped may go on
		// elsewhere: the end is the last event of a run that ended.
		info, err := st.Get(ctx, id)
		return err == nil && (!info.Done || info.Events > r.Seq)
	})
	if werr != nil {
		return werr
	}
	if err != nil && ctx.Err() == nil {
		return fmt.Errorf("%s: %w", st.Name, err)
	}
	return nil
}
