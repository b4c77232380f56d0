package main

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// initBudget is the most heap (bytes) each of these packages may
// allocate when the process starts: every nb command initialises every
// package the binary links, so what these build eagerly is paid by `nb
// version` and a cold eval alike. Each builds its table on first use
// (color's X11 index, web_fetch's HTML-to-Markdown converter, the Fennel
// compiler's special forms, the planner's schema, the gateway's <think>
// expression); before, they allocated 7.4, 7.4, 7.4, 3.9 and 4.0 KB.
var initBudget = map[string]int{
	"github.com/nbots/nb/color":         1500,
	"github.com/nbots/nb/builtin/web":   1500,
	"github.com/nbots/nb/script/fennel": 4500,
	"github.com/nbots/nb/agent":         2000,
	"github.com/nbots/nb/gateway":       1000,
}

// TestInitAllocations runs this test binary with no test and
// GODEBUG=inittrace=1 and holds the packages above to their budgets.
func TestInitAllocations(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v: %s", err, stderr.String())
	}
	lines := 0
	out := stderr.String()
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		// init PKG @T ms, C ms clock, B bytes, N allocs
		f := strings.Fields(sc.Text())
		if len(f) < 10 || f[0] != "init" || f[8] != "bytes," {
			continue
		}
		lines++
		budget, ok := initBudget[f[1]]
		if !ok {
			continue // a package missing from the trace allocates nothing at start
		}
		b, err := strconv.Atoi(f[7])
		if err != nil {
			t.Fatalf("inittrace line %q: %v", sc.Text(), err)
		}
		if b > budget {
			t.Errorf("%s allocates %d bytes at initialisation, more than its %d: build the table on first use", f[1], b, budget)
		}
	}
	if lines < 50 {
		t.Fatalf("read %d inittrace lines; has the format changed?\n%s", lines, out)
	}
}
