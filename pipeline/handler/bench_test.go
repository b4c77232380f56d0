package handler

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/nbots/nb/pipeline/engine"
)

// instant is a model that answers at once: what is left is the engine's
// own cost (handler dispatch, stage folder, prompt.md, response.md,
// status.json, the fsynced checkpoint, events).
type instant struct{}

func (instant) Run(_ context.Context, s *engine.Stage, _ string) (Reply, error) {
	return Reply{Text: "done " + s.Node.ID, Tokens: engine.Tokens{Input: 10, Output: 2}}, nil
}

// benchDir is where benchmark runs write: NB_BENCH_DIR (a tmpfs such as
// /dev/shm separates the engine's cost from the disk's fsync), else a
// temporary folder.
func benchDir(b *testing.B) string {
	if d := os.Getenv("NB_BENCH_DIR"); d != "" {
		dir, err := os.MkdirTemp(d, "nb-bench-")
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { os.RemoveAll(dir) })
		return dir
	}
	return b.TempDir()
}

func linearFlow(n int) string {
	var b strings.Builder
	b.WriteString("digraph L {\n  graph [max_node_visits=0]\n  start [shape=Mdiamond]\n  exit [shape=Msquare]\n")
	prev := "start"
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("n%d", i)
		fmt.Fprintf(&b, "  %s [prompt=\"step %d of $goal\"]\n  %s -> %s\n", id, i, prev, id)
		prev = id
	}
	fmt.Fprintf(&b, "  %s -> exit\n}\n", prev)
	return b.String()
}

// BenchmarkLinear1000 is the engine's overhead per node beside an
// instant model, on a 1,000-node linear graph, every checkpoint fsynced.
func BenchmarkLinear1000(b *testing.B) {
	const n = 1000
	src := linearFlow(n)
	g := load(b, src)
	var perNode float64
	for i := 0; i < b.N; i++ {
		cfg := engine.Config{Graph: g, Source: []byte(src), File: "l.dot", LogsRoot: filepath.Join(benchDir(b), "run"),
			Handlers: NewRegistry(Options{Backend: instant{}}), Observer: engine.ObserverFunc(func(engine.Event) {})}
		res, err := engine.Run(context.Background(), cfg)
		if err != nil || res.Status != engine.Success {
			b.Fatalf("%v %+v", err, res)
		}
		perNode += float64(res.Duration.Nanoseconds()) / float64(n+2)
	}
	b.ReportMetric(perNode/float64(b.N)/1e6, "ms/node")
}

// BenchmarkFanOut100 is a 100-wide fan-out and fan-in of instant LLM
// branches: time and memory per branch.
func BenchmarkFanOut100(b *testing.B) {
	const n = 100
	var sb strings.Builder
	sb.WriteString("digraph F {\n  start [shape=Mdiamond]\n  exit [shape=Msquare]\n  fork [shape=component, max_parallel=100]\n  join [shape=tripleoctagon]\n  start -> fork\n  join -> exit\n")
	for i := 0; i < n; i++ {
		fmt.Fprintf(&sb, "  b%d [prompt=\"branch %d\"]\n  fork -> b%d\n  b%d -> join\n", i, i, i, i)
	}
	sb.WriteString("}\n")
	src := sb.String()
	g := load(b, src)
	var perBranch, bytesPerBranch float64
	for i := 0; i < b.N; i++ {
		cfg := engine.Config{Graph: g, Source: []byte(src), File: "f.dot", LogsRoot: filepath.Join(benchDir(b), "run"),
			Handlers: NewRegistry(Options{Backend: instant{}}), Observer: engine.ObserverFunc(func(engine.Event) {})}
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		res, err := engine.Run(context.Background(), cfg)
		runtime.ReadMemStats(&after)
		if err != nil || res.Status != engine.Success {
			b.Fatalf("%v %+v", err, res)
		}
		perBranch += float64(res.Duration.Nanoseconds()) / n
		bytesPerBranch += float64(after.TotalAlloc-before.TotalAlloc) / n
	}
	b.ReportMetric(perBranch/float64(b.N)/1e6, "ms/branch")
	b.ReportMetric(bytesPerBranch/float64(b.N)/1024, "KB-alloc/branch")
}
