//go:build linux

package cartridge

import (
	"bufio"
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

// deepFlow is the cartridge of the report: a key holding n nested lists.
func deepFlow(n int) string {
	return "misc: " + strings.Repeat("[", n) + strings.Repeat("]", n) + "\n"
}

// guardCases are files that made the parsers run for minutes and take
// gigabytes, with where they must now be refused.
func guardCases() []struct{ name, file, src, want string } {
	return []struct{ name, file, src, want string }{
		{"100,000 levels", "deep.yml", deepFlow(100000), "deep.yml:1:106: the YAML nests deeper than 100 levels"},
		{"1,000,000 levels", "deeper.yml", deepFlow(1000000), "deeper.yml:1: the file is larger than 512 KiB"},
		{"Markdown, 100,000 levels", "deep.md", "# Deep\n\n```yaml\n" + deepFlow(100000) + "```\n", "deep.md:4:106: the YAML nests deeper than 100 levels"},
		{"Markdown, 10,000 levels", "deep10k.md", "```yaml\nmeta: {name: x}\n```\n\n```yaml\n" + deepFlow(10000) + "```\n", "deep10k.md:6:106: the YAML nests deeper than 100 levels"},
		{"Markdown, 100,000 block quotes", "quotes.md", strings.Repeat(">", 100000) + " a\n", "quotes.md:1: the Markdown nests deeper than 32 block quotes and lists"},
		{"Markdown, 100,000 lists", "lists.md", strings.Repeat("1. ", 100000) + "a\n", "lists.md:1: the Markdown nests deeper than 32 block quotes and lists"},
	}
}

// TestGuardChild loads the file named after the test flags and prints
// how long Load took; TestRefusedQuickly runs it in a child process to
// measure its peak memory.
func TestGuardChild(t *testing.T) {
	if flag.NArg() != 1 {
		t.Skip("run by TestRefusedQuickly")
	}
	start := time.Now()
	_, err := Load(flag.Arg(0), nil)
	fmt.Printf("ELAPSED %d\nERROR %v\n", time.Since(start), err)
}

// TestRefusedQuickly: each file is refused with its file and line in well
// under a second and 100 MB (the peak memory of the whole test process).
// The child is killed when it passes 10 s or 1 GB, so a regression does
// not take the machine down.
func TestRefusedQuickly(t *testing.T) {
	dir := t.TempDir()
	for _, tt := range guardCases() {
		path := filepath.Join(dir, tt.file)
		if err := os.WriteFile(path, []byte(tt.src), 0o600); err != nil {
			t.Fatal(err)
		}
		elapsed, peak, out := runChild(t, path)
		first, _, _ := strings.Cut(out, "\n")
		if !strings.HasPrefix(first, filepath.Join(dir, tt.want)) {
			t.Errorf("%s: got %q, want %s…", tt.name, first, tt.want)
		}
		if elapsed > time.Second || peak > 100<<20 {
			t.Errorf("%s: refused in %v with a peak of %d MB; want under 1 s and 100 MB", tt.name, elapsed, peak>>20)
		}
		t.Logf("%s (%d KB): refused in %v, peak RSS of the test process %.1f MB", tt.name, len(tt.src)>>10, elapsed.Round(10*time.Microsecond), float64(peak)/(1<<20))
	}
}

// runChild loads path in a child process and returns how long Load took,
// the child's peak resident memory and the error it printed.
func runChild(t *testing.T, path string) (time.Duration, int64, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestGuardChild$", "-test.count=1", path)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go watchMemory(cmd.Process.Pid, cancel, done)
	var elapsed time.Duration
	var msg strings.Builder
	sc := bufio.NewScanner(stdout)
	sc.Buffer(nil, 1<<20)
	inErr := false
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "ELAPSED "):
			n, _ := strconv.ParseInt(strings.TrimPrefix(line, "ELAPSED "), 10, 64)
			elapsed = time.Duration(n)
		case strings.HasPrefix(line, "ERROR "):
			inErr = true
			msg.WriteString(strings.TrimPrefix(line, "ERROR "))
		case inErr && !strings.HasPrefix(line, "PASS") && !strings.HasPrefix(line, "ok"):
			msg.WriteString("\n" + line)
		}
	}
	err = cmd.Wait()
	close(done)
	peak := cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss << 10
	if ctx.Err() != nil {
		t.Fatalf("%s: the child was killed (over 10 s or 1 GB; peak %d MB)", path, peak>>20)
	}
	if err != nil {
		t.Fatalf("%s: child: %v", path, err)
	}
	return elapsed, peak, msg.String()
}

// watchMemory kills the child when its resident memory passes 1 GB.
func watchMemory(pid int, kill func(), done <-chan struct{}) {
	for {
		select {
		case <-done:
			return
		case <-time.After(20 * time.Millisecond):
		}
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/statm", pid))
		if err != nil {
			continue
		}
		fields := strings.Fields(string(data))
		if len(fields) > 1 {
			if pages, _ := strconv.ParseInt(fields[1], 10, 64); pages*int64(os.Getpagesize()) > 1<<30 {
				kill()
				return
			}
		}
	}
}

// TestFindFIFO: a named pipe given as the cartridge is read once.
func TestFindFIFO(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "bot.yml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skip(err)
	}
	go func() {
		f, err := os.OpenFile(fifo, os.O_WRONLY, 0)
		if err != nil {
			return
		}
		f.WriteString("meta:\n  name: fifo\n") //nolint:errcheck // the test reads it
		f.Close()
	}()
	path, err := Find(fifo, Env{Home: dir})
	if err != nil {
		t.Fatal(err)
	}
	c, err := Load(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Meta().Name != "fifo" {
		t.Errorf("meta %+v", c.Meta())
	}
}
