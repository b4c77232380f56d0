package shell

import (
	"context"
	"os/exec"
	"testing"

	"github.com/nbots/nb/tool"
)

var trueCall = tool.Call{Arguments: map[string]any{"command": "true"}}

// BenchmarkForkExecTrue is the baseline: a bare fork and exec of true.
func BenchmarkForkExecTrue(b *testing.B) {
	for b.Loop() {
		if err := exec.Command("/bin/true").Run(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBashTrue is bash -c true, what exec runs, without the tool.
func BenchmarkBashTrue(b *testing.B) {
	for b.Loop() {
		if err := exec.Command("/bin/bash", "-c", "true").Run(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkExecTrue is the exec tool running true without the sandbox.
// Goal: at most 2 ms above BenchmarkForkExecTrue.
func BenchmarkExecTrue(b *testing.B) {
	e := newBenchExec(b, SandboxOff)
	for b.Loop() {
		if _, err := e.Run(context.Background(), trueCall); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkExecTrueBubblewrap is the same under bubblewrap (reported).
func BenchmarkExecTrueBubblewrap(b *testing.B) {
	e := newBenchExec(b, SandboxOn)
	if !e.Status().Sandboxed {
		b.Skipf("SKIPPING: bubblewrap cannot run here: %s", e.Status().Reason)
	}
	for b.Loop() {
		if _, err := e.Run(context.Background(), trueCall); err != nil {
			b.Fatal(err)
		}
	}
}

func newBenchExec(b *testing.B, mode string) *Exec {
	e, _, err := New(Config{Workspace: b.TempDir(), Sandbox: mode, Environ: []string{"PATH=/usr/bin:/bin", "HOME=/nonexistent"}})
	if err != nil {
		b.Fatal(err)
	}
	return e
}
