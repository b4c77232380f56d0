//go:build linux

package robopage

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestGuardChild parses the page named after the test flags and prints
// how long it took and the problems; TestDeepPageRefused runs it in a
// child process to measure its peak memory.
func TestGuardChild(t *testing.T) {
	if flag.NArg() != 1 {
		t.Skip("run by TestDeepPageRefused")
	}
	data, err := os.ReadFile(flag.Arg(0))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	page, problems := Parse(data, flag.Arg(0), "")
	fmt.Printf("ELAPSED %d\nPAGE %v\n", time.Since(start), page != nil)
	for _, p := range problems {
		fmt.Printf("PROBLEM %s\n", p)
	}
}

// TestDeepPageRefused: a page of nested brackets (1 GB at 10,000 levels in
// the YAML parser) is refused with its file and line in well under a
// second and 100 MB (the whole test process's peak). The child is killed
// past 10 s or 1 GB.
func TestDeepPageRefused(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []int{10000, 100000} {
		path := filepath.Join(dir, fmt.Sprintf("deep%d.yml", n))
		src := "description: deep\nfunctions:\n  f:\n    description: x\n    cmdline: " + strings.Repeat("[", n) + strings.Repeat("]", n) + "\n"
		if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestGuardChild$", "-test.count=1", path)
		var stdout strings.Builder
		cmd.Stdout = &stdout
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func(pid int) {
			for {
				select {
				case <-done:
					return
				case <-time.After(20 * time.Millisecond):
				}
				data, _ := os.ReadFile(fmt.Sprintf("/proc/%d/statm", pid))
				if f := strings.Fields(string(data)); len(f) > 1 {
					if pages, _ := strconv.ParseInt(f[1], 10, 64); pages*int64(os.Getpagesize()) > 1<<30 {
						cancel()
						return
					}
				}
			}
		}(cmd.Process.Pid)
		err := cmd.Wait()
		close(done)
		killed := ctx.Err() != nil
		cancel()
		out := stdout.String()
		peak := cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss << 10
		if killed {
			t.Fatalf("%d levels: the child was killed (over 10 s or 1 GB; peak %d MB)", n, peak>>20)
		}
		if err != nil {
			t.Fatalf("%d levels: %v\n%s", n, err, out)
		}
		var elapsed time.Duration
		var problems []string
		for _, line := range strings.Split(out, "\n") {
			if v, ok := strings.CutPrefix(line, "ELAPSED "); ok {
				ns, _ := strconv.ParseInt(v, 10, 64)
				elapsed = time.Duration(ns)
			}
			if v, ok := strings.CutPrefix(line, "PROBLEM "); ok {
				problems = append(problems, v)
			}
		}
		want := path + ":5: the YAML nests deeper than 100 levels"
		if len(problems) != 1 || !strings.HasPrefix(problems[0], want) {
			t.Errorf("%d levels: problems %q, want %s…", n, problems, want)
		}
		if elapsed > time.Second || peak > 100<<20 {
			t.Errorf("%d levels: refused in %v with a peak of %d MB; want under 1 s and 100 MB", n, elapsed, peak>>20)
		}
		t.Logf("%d levels (%d KB): refused in %v, peak RSS of the test process %.1f MB", n, len(src)>>10, elapsed.Round(10*time.Microsecond), float64(peak)/(1<<20))
	}
}
