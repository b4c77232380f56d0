package handler

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nbots/nb/pipeline/engine"
)

// §4.11: the manager runs the child pipeline and ends with it; a stop
// condition ends it early; cycles run out.
func TestManagerLoop(t *testing.T) {
	dir := t.TempDir()
	child := func(name, cmd string) {
		src := `digraph Child {
  start [shape=Mdiamond]
  exit [shape=Msquare]
  work [shape=parallelogram, tool_command="` + cmd + `"]
  start -> work
  work -> exit [condition="outcome=success"]
}`
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	child("ok.dot", "printf done")
	child("bad.dot", "exit 4")
	child("slow.dot", "sleep 5")
	parent := func(file, attrs string) string {
		return `digraph P {
  graph [stack.child_dotfile="` + filepath.Join(dir, file) + `"]
  start [shape=Mdiamond]
  exit [shape=Msquare]
  boss [shape=house, manager.poll_interval="10ms"` + attrs + `]
  start -> boss
  boss -> exit [condition="outcome=success"]
}`
	}
	r := runFlow(t, parent("ok.dot", ""), Options{})
	r.want(t, engine.Success, "start,boss,exit")
	if cp := r.checkpoint(t); cp.Context["stack.child.status"] != "completed" || cp.Context["stack.child.outcome"] != "success" {
		t.Errorf("context %v", cp.Context)
	}
	if _, err := os.Stat(filepath.Join(r.dir, "boss", "child", "work", engine.StatusFile)); err != nil {
		t.Error(err)
	}
	r = runFlow(t, parent("bad.dot", ""), Options{})
	r.want(t, engine.Fail, "start,boss")
	if !strings.Contains(r.res.FailureReason, "Child failed") {
		t.Error(r.res.FailureReason)
	}
	r = runFlow(t, parent("slow.dot", `, manager.stop_condition="context.stack.child.current_node=start"`), Options{})
	r.want(t, engine.Success, "start,boss,exit")
	r = runFlow(t, parent("slow.dot", `, manager.max_cycles=3`), Options{})
	if !strings.Contains(r.res.FailureReason, "Max cycles exceeded") {
		t.Error(r.res.FailureReason)
	}
}
