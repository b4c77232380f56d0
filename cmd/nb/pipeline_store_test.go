package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nbots/nb/pipeline/engine"
)

// TestPipelineStore: nb pipeline run --store keeps the run in
// PostgreSQL; a run stopped by a signal is resumed by its id alone
// (the flow comes from the database, the stage folders go elsewhere),
// with no finished node run again; nb pipeline events prints its events
// from the database until it ends.
func TestPipelineStore(t *testing.T) {
	c := cluster(t)
	dbURL, err := c.NewDatabase(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	flow := filepath.Join(dir, "stop.dot")
	// step1 counts its runs; stop interrupts nb once (as Ctrl-C does).
	os.WriteFile(flow, []byte(`digraph Stop {
	start [shape=Mdiamond]
	exit  [shape=Msquare]
	step1 [shape=parallelogram, tool_command="echo x >> `+dir+`/step1.count"]
	stop  [shape=parallelogram, tool_command="test -f `+dir+`/stopped || { touch `+dir+`/stopped; kill -INT $PPID; sleep 5; }"]
	step2 [shape=parallelogram, tool_command="echo x >> `+dir+`/step2.count"]
	start -> step1 -> stop -> step2 -> exit
}`), 0o644)
	env := []string{"HOME=" + dir, "NB_DOTENV=0", "PATH=" + os.Getenv("PATH")}
	// The tool's kill -INT $PPID reaches this process: main's handler
	// must be installed, as in nb, or the signal ends the tests.
	sigs := watchSignals()
	code, out, errOut := runApp(t, &App{signals: sigs}, env, "", "pipeline", "run", "--simulate", "--store", dbURL, "--logs", filepath.Join(dir, "first", "stop-1"), flow)
	sigs.stop()
	if code == 0 || !strings.Contains(out, "run stop-1 in postgres://") {
		t.Fatalf("the interrupted run: exit %d\n%s\n%s", code, out, errOut)
	}
	if _, err := os.Stat(filepath.Join(dir, "first", "stop-1", engine.CheckpointFile)); err == nil {
		t.Error("with --store, the checkpoint went to the run folder")
	}
	os.Remove(flow) // the resume reads the flow from the database
	code, out, errOut = runNB(t, env, "pipeline", "resume", "--store", dbURL, "--logs", filepath.Join(dir, "second"), "stop-1")
	if code != 0 {
		t.Fatalf("resume: exit %d\n%s\n%s", code, out, errOut)
	}
	for _, f := range []string{"step1.count", "step2.count"} {
		data, _ := os.ReadFile(filepath.Join(dir, f))
		if string(data) != "x\n" {
			t.Errorf("%s = %q, want one run", f, data)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "second", "step2", "status.json")); err != nil {
		t.Errorf("the resumed stages' folders: %v", err)
	}
	code, out, errOut = runNB(t, env, "pipeline", "events", "--store", dbURL, "stop-1")
	if code != 0 {
		t.Fatalf("events: exit %d\n%s\n%s", code, out, errOut)
	}
	var kinds []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var ev engine.Event
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		kinds = append(kinds, string(ev.Kind))
	}
	all := strings.Join(kinds, " ")
	if strings.Count(all, "PipelineStarted") != 2 || !strings.HasSuffix(all, "PipelineCompleted") || strings.Count(all, "PipelineFailed") != 1 {
		t.Errorf("events: %s; want two starts, the interruption, and the completion last", all)
	}
	code, _, errOut = runNB(t, env, "pipeline", "resume", "--store", dbURL, "stop-1")
	if code == 0 || !strings.Contains(errOut, "has ended") {
		t.Errorf("resume of an ended run: exit %d, %s", code, errOut)
	}
}
