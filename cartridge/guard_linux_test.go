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
		{"Markdown, 100,000 block quotes", "quotes.md", strings.Repeat(">", 100000) + " a\n", "quotes.md:1: the Markdown nests deeper than 16 block quotes and lists"},
		{"Markdown, 100,000 lists", "lists.md", strings.Repeat("1. ", 100000) + "a\n", "lists.md:1: the Markdown nests deeper than 16 block quotes and lists"},
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
// The child is killed when it passes 90 s or 1 GB, so a regression does
// not take the machine down.
func TestRefusedQuickly(t *testing.T) {
	dir := t.TempDir()
	for _, tt := range guardCases() {
		path := filepath.Join(dir, tt.file)
		if err := os.WriteFile(path, []byte(tt.src), 0o600); err != nil {
			t.Fatal(err)
		}
		elapsed, peak, out, cpu := runChild(t, path)
		first, _, _ := strings.Cut(out, "\n")
		if !strings.HasPrefix(first, filepath.Join(dir, tt.want)) {
			t.Errorf("%s: got %q, want %s…", tt.name, first, tt.want)
		}
		if elapsed > time.Second || peak > 100<<20 {
			t.Errorf("%s: refused in %v with a peak of %d MB; want under 1 s and 100 MB", tt.name, elapsed, peak>>20)
		}
		t.Logf("%s (%d KB): refused in %v, peak RSS of the test process %.1f MB (its CPU time %v)", tt.name, len(tt.src)>>10, elapsed.Round(10*time.Microsecond), float64(peak)/(1<<20), cpu.Round(time.Millisecond))
	}
}

// runChild loads path in a child process and returns how long Load took,
// the child's peak resident memory, the error it printed and the CPU
// time of the whole child (user and system, start-up included).
func runChild(t *testing.T, path string) (time.Duration, int64, string, time.Duration) {
	t.Helper()
	// The wall-clock bound only catches a hang: on a loaded machine a
	// child well within its CPU bound took over 10 s (CI under a load
	// of 24). The callers bound the child's CPU time.
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
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
		t.Fatalf("%s: the child was killed (over 90 s or 1 GB; peak %d MB)", path, peak>>20)
	}
	if err != nil {
		t.Fatalf("%s: child: %v", path, err)
	}
	return elapsed, peak, msg.String(), cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
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

// worstAccepted are files just inside Limits, each shaped to cost the
// parsers the most: what a cartridge that passes the guard can cost.
func worstAccepted() []struct{ name, file, src string } {
	const size = 512<<10 - 64
	rep := strings.Repeat
	var nestedLines strings.Builder
	for nestedLines.Len() < size-100 {
		nestedLines.WriteString(strings.Repeat("> ", 8) + strings.Repeat("- ", 7) + "a\n")
	}
	var indented strings.Builder
	for i := 0; indented.Len() < size-2000; i++ {
		indented.WriteString(strings.Repeat(" ", i%99) + "- a\n")
	}
	var blocks strings.Builder
	for blocks.Len() < size-40 && strings.Count(blocks.String(), "```yaml") < 6600 {
		blocks.WriteString("```yaml\nk: 1\n```\n")
	}
	return []struct{ name, file, src string }{
		{"YAML, a flow list of 9,990 items", "flow.yml", "a: [" + rep("1,", 9990) + "1]\n"},
		{"YAML, 6,600 keys with long values", "keys.yml", func() string {
			var b strings.Builder
			for i := 0; i < 6600; i++ {
				fmt.Fprintf(&b, "k%d: %s\n", i, strings.Repeat("v", 70))
			}
			return b.String()
		}()},
		{"YAML, 512 KiB block scalar", "text.yml", "a: |\n" + rep("  "+strings.Repeat("text ", 15)+"\n", size/78)},
		{"YAML, 199 lists 99 deep", "deep99.yml", "a: [" + rep(strings.Repeat("[", 98)+strings.Repeat("]", 98)+",", 199) + "1]\n"},
		{"YAML, 98 block levels", "block98.yml", indentedKeys(98, size)},
		{"Markdown, 512 KiB of lines 15 containers deep", "nested.md", nestedLines.String()},
		{"Markdown, 512 KiB of indented list items", "indented.md", indented.String()},
		{"Markdown, 6,600 yaml blocks", "blocks.md", blocks.String()},
	}
}

// indentedKeys is a mapping nested levels deep by indentation, then
// sibling keys at the deepest level up to size bytes.
func indentedKeys(levels, size int) string {
	var b strings.Builder
	for i := range levels {
		b.WriteString(strings.Repeat(" ", i) + "k:\n")
	}
	for i := 0; b.Len() < size-200 && i < 6000; i++ {
		fmt.Fprintf(&b, "%sk%d: %s\n", strings.Repeat(" ", levels), i, strings.Repeat("v", 8))
	}
	return b.String()
}

// TestWorstAccepted measures, in a child process, the files the limits
// let through that cost the parsers the most. The figures are in
// bench/README.md; the bounds here only catch a large regression.
func TestWorstAccepted(t *testing.T) {
	if testing.Short() {
		t.Skip("slow")
	}
	dir := t.TempDir()
	for _, tt := range worstAccepted() {
		path := filepath.Join(dir, tt.file)
		if err := os.WriteFile(path, []byte(tt.src), 0o600); err != nil {
			t.Fatal(err)
		}
		elapsed, peak, out, cpu := runChild(t, path)
		if out != "<nil>" && !strings.Contains(out, "no yaml code block") {
			t.Errorf("%s: %s", tt.name, out)
		}
		// The child's CPU time, not the wall clock: under the race
		// detector, with other packages' tests on the same two cores,
		// the wall clock measures the machine's load.
		if cpu > 3*time.Second || peak > 500<<20 {
			t.Errorf("%s: %v of CPU (%v wall) and %d MB", tt.name, cpu, elapsed, peak>>20)
		}
		t.Logf("%s (%d KB): parsed in %v, peak RSS %.0f MB (CPU time of the whole child %v)", tt.name, len(tt.src)>>10, elapsed.Round(time.Millisecond), float64(peak)/(1<<20), cpu.Round(time.Millisecond))
	}
}
