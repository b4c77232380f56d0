package pipelinesrv

import (
	"strings"
	"testing"
	"time"

	"github.com/nbots/nb/internal/metric"
)

// pipelineErrors are the control page's last errors that tell a
// pipeline run's failure.
func pipelineErrors() []metric.Error {
	var out []metric.Error
	for _, e := range metric.LastErrors() {
		if strings.HasPrefix(e.Where, "run ") && strings.Contains(e.Message, "pipeline_") {
			out = append(out, e)
		}
	}
	return out
}

// TestRunFailureReachesControlPage: a pipeline run that ends in fail is
// one of the control page's last errors, by its kind only (a node's
// output, here the tool's stderr, stays out); a run that succeeds is not.
func TestRunFailureReachesControlPage(t *testing.T) {
	flows := map[string]string{
		"flows/ok.dot":   "digraph OK { start [shape=Mdiamond]; exit [shape=Msquare]; t [shape=parallelogram, tool_command=\"printf hi\"]; start -> t -> exit }\n",
		"flows/fail.dot": "digraph F { start [shape=Mdiamond]; exit [shape=Msquare]; t [shape=parallelogram, tool_command=\"echo secret-node-words >&2; exit 3\", goal_gate=true]; start -> t -> exit }\n",
	}
	f := newFixture(t, fixtureOpts{files: flows})
	before := len(pipelineErrors())
	if info := f.wait(f.start(map[string]any{"file": "flows/ok.dot", "cartridge": "coder"})); info.Status != StatusSuccess {
		t.Fatalf("the run that should succeed: %+v", info)
	}
	if got := pipelineErrors(); len(got) != before {
		t.Fatalf("a run that succeeded is an error: %+v", got)
	}
	if info := f.wait(f.start(map[string]any{"file": "flows/fail.dot", "cartridge": "coder"})); info.Status != StatusFail {
		t.Fatalf("the run that should fail: %+v", info)
	}
	// The admission ends just after the run: its end is told then.
	var got []metric.Error
	for range 100 {
		if got = pipelineErrors(); len(got) > before {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(got) != before+1 {
		t.Fatalf("the failed run is not among the last errors: %+v", metric.LastErrors())
	}
	if e := got[0]; e.Message != "error pipeline_failed" || strings.Contains(e.Message, "secret-node-words") {
		t.Errorf("the failed run's error: %+v", e)
	}
}
