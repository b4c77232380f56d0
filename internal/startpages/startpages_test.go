package startpages

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// fileRSS reads the file-backed part of the process's resident set, in KiB.
func fileRSS(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/smaps_rollup")
	if err != nil {
		t.Skip("no /proc/self/smaps_rollup:", err)
	}
	var rss, anon int
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		n, _ := strconv.Atoi(f[1])
		switch f[0] {
		case "Rss:":
			rss = n
		case "Anonymous:":
			anon = n
		}
	}
	return rss - anon
}

// TestReleaseDropsTheBinarysPages: the test binary's code and tables,
// resident after start, leave the resident set, and the process goes on
// running (its code comes back from the page cache).
func TestReleaseDropsTheBinarysPages(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("Linux only")
	}
	before := fileRSS(t)
	dropped := Release()
	after := fileRSS(t)
	t.Logf("file-backed RSS %d KiB before, %d KiB after; %d KiB of mappings dropped", before, after, dropped>>10)
	if dropped == 0 {
		t.Fatal("Release dropped no mapping of the executable")
	}
	// The test binary is small: the code of the test itself, 64 KiB
	// around each page it runs, comes back at once.
	if after > before*3/4 {
		t.Errorf("file-backed RSS %d KiB after Release, %d KiB before: want a quarter less at least", after, before)
	}
	// Code that had run before still runs, and so does new work.
	if s := strconv.Itoa(42) + strings.Repeat("x", 2); s != "42xx" {
		t.Fatalf("got %q", s)
	}
	if Release() == 0 {
		t.Error("a second Release dropped nothing")
	}
}
