package files

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nbots/nb/tool"
)

// BenchmarkReadFile10MB reads a 10 MB file: the answer is capped (2,000
// lines, 48,000 characters), the rest is only counted. Goal: at most 20 ms.
func BenchmarkReadFile10MB(b *testing.B) {
	for _, tc := range []struct{ name, line string }{
		{"lines", strings.Repeat("x", 99) + "\n"},          // 100,000 lines of 100 bytes
		{"one-line", strings.Repeat("y", 10<<20-1) + "\n"}, // minified: one 10 MB line
		{"long-lines", strings.Repeat("z", 9_999) + "\n"},  // 1,000 lines of 10 kB
	} {
		b.Run(tc.name, func(b *testing.B) {
			dir := b.TempDir()
			data := strings.Repeat(tc.line, (10<<20)/len(tc.line))
			if err := os.WriteFile(filepath.Join(dir, "big.txt"), []byte(data), 0o644); err != nil {
				b.Fatal(err)
			}
			w, err := Open(dir)
			if err != nil {
				b.Fatal(err)
			}
			defer w.Close()
			rf := ReadFile(w)
			call := tool.Call{Arguments: map[string]any{"path": "big.txt"}}
			b.SetBytes(int64(len(data)))
			b.ResetTimer()
			cpu := cpuTime(syscall.RUSAGE_SELF)
			for b.Loop() {
				out, err := rf.Run(context.Background(), call)
				if err != nil || len(out.(string)) > 50_000 {
					b.Fatalf("read_file: %v (%d bytes)", err, len(out.(string)))
				}
			}
			// The machine's load inflates wall time; CPU time says what
			// the call itself costs.
			b.ReportMetric(float64(cpuTime(syscall.RUSAGE_SELF)-cpu)/float64(b.N)/1e6, "cpu-ms/op")
		})
	}
}

// cpuTime is the user and system time of who (RUSAGE_SELF, RUSAGE_CHILDREN).
func cpuTime(who int) time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(who, &ru) //nolint:errcheck // a benchmark's metric
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkGlobPolicy globs a workspace of 10,000 files with and without
// a policy (the gateway's: a few hidden folders and files): the policy's
// cost is a few string comparisons per entry, its links resolved once.
func BenchmarkGlobPolicy(b *testing.B) {
	dir := b.TempDir()
	for i := range 100 {
		sub := filepath.Join(dir, "d"+strconv.Itoa(i))
		os.MkdirAll(sub, 0o755)
		for j := range 100 {
			os.WriteFile(filepath.Join(sub, strconv.Itoa(j)+".txt"), nil, 0o644)
		}
	}
	w, err := Open(dir)
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	p := &Policy{Hidden: []string{filepath.Join(dir, "sessions"), filepath.Join(dir, "cron"), filepath.Join(dir, "memory", ".lock")}, ReadOnly: []string{filepath.Join(dir, "AGENTS.md")}}
	for _, tc := range []struct {
		name string
		ctx  context.Context
	}{{"none", context.Background()}, {"policy", WithPolicy(context.Background(), p)}} {
		b.Run(tc.name, func(b *testing.B) {
			g := Glob(w)
			call := tool.Call{Arguments: map[string]any{"pattern": "**/*.txt"}}
			cpu := cpuTime(syscall.RUSAGE_SELF)
			for b.Loop() {
				if _, err := g.Run(tc.ctx, call); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(cpuTime(syscall.RUSAGE_SELF)-cpu)/float64(b.N)/1e6, "cpu-ms/op")
		})
	}
}
