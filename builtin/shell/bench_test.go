package shell

import (
	"context"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/nbots/nb/tool"
)

var trueCall = tool.Call{Arguments: map[string]any{"command": "true"}}

// BenchmarkForkExecTrue is the baseline: a bare fork and exec of true.
func BenchmarkForkExecTrue(b *testing.B) {
	defer reportCPU(b)()
	for b.Loop() {
		if err := exec.Command("/bin/true").Run(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBashTrue is bash -c true, what exec runs, without the tool.
func BenchmarkBashTrue(b *testing.B) {
	defer reportCPU(b)()
	for b.Loop() {
		if err := exec.Command("/bin/bash", "-c", "true").Run(); err != nil {
			b.Fatal(err)
		}
	}
}

// reportCPU reports the CPU time (nb's and its children's) per call: the
// machine's load inflates wall time, not what a call costs.
func reportCPU(b *testing.B) func() {
	start := cpuTime(syscall.RUSAGE_SELF) + cpuTime(syscall.RUSAGE_CHILDREN)
	return func() {
		used := cpuTime(syscall.RUSAGE_SELF) + cpuTime(syscall.RUSAGE_CHILDREN) - start
		b.ReportMetric(float64(used)/float64(b.N)/1e6, "cpu-ms/op")
	}
}

func cpuTime(who int) time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(who, &ru) //nolint:errcheck // a benchmark's metric
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkExecTrue is the exec tool running true without the sandbox.
// Goal: at most 2 ms above BenchmarkForkExecTrue.
func BenchmarkExecTrue(b *testing.B) {
	e := newBenchExec(b, SandboxOff)
	defer reportCPU(b)()
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
	defer reportCPU(b)()
	for b.Loop() {
		if _, err := e.Run(context.Background(), trueCall); err != nil {
			b.Fatal(err)
		}
	}
}

func newBenchExec(b *testing.B, mode string) *Exec {
	e, _, err := New(Options{Workspace: b.TempDir(), Sandbox: mode, Environ: []string{"PATH=/usr/bin:/bin", "HOME=/nonexistent"}})
	if err != nil {
		b.Fatal(err)
	}
	return e
}
