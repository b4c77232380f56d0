package script

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Inputs that used to crash or exhaust the process run in a child
// process (this test binary, run again): if one still crashes, the child
// dies and the test fails, but the test binary goes on.

// childCase is a call run in a child process.
type childCase struct {
	name      string
	lang      Lang
	code      string        // the source, or
	gen       func() string // a source too big to write out
	unsandbox bool
	limits    Limits
	// want is a substring of the call's error; "" when it must succeed.
	want string
	// racy: golua's coroutines race when one ends (see TestCoroutines),
	// so the case does not run under the race detector.
	racy bool
}

func (c childCase) source() string {
	if c.gen != nil {
		return c.gen()
	}
	return c.code
}

// childReport is what the child prints about its call.
type childReport struct {
	Err string
	// Took is the time of the call (compile included), in ms.
	Took float64
	// BaseRSS is the child's resident memory before the call, in KiB.
	BaseRSS int64
}

// childResult is the child's report and what the parent measured.
type childResult struct {
	childReport
	// MaxRSS is the child's peak resident memory (getrusage), in KiB.
	MaxRSS int64
	Output string
}

const childVar = "NB_SCRIPT_TEST_CHILD"

// runChild runs the case named name of cases in a child process.
func runChild(t *testing.T, test, name string) childResult {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), childVar+"="+name)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var res childResult
	res.Output = out.String()
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		res.MaxRSS = ru.Maxrss
	}
	if err != nil {
		t.Fatalf("the child process died (%v): the input still takes the process down\n%s", err, tail(res.Output, 40))
	}
	sc := bufio.NewScanner(strings.NewReader(res.Output))
	sc.Buffer(nil, 1<<20)
	found := false
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "nb-child-report: "); ok {
			if err := json.Unmarshal([]byte(rest), &res.childReport); err != nil {
				t.Fatal(err)
			}
			found = true
		}
	}
	if !found {
		t.Fatalf("the child printed no report:\n%s", tail(res.Output, 40))
	}
	return res
}

func tail(s string, lines int) string {
	l := strings.Split(s, "\n")
	if len(l) > lines {
		l = l[len(l)-lines:]
	}
	return strings.Join(l, "\n")
}

// childMain runs, in the child, the case its environment names, and
// prints the report.
func childMain(t *testing.T, cases []childCase) {
	name := os.Getenv(childVar)
	if name == "" {
		t.Skip("runs in a child process")
	}
	for _, c := range cases {
		if c.name != name {
			continue
		}
		src := c.source()
		r := New(Options{Sandboxed: !c.unsandbox, Limits: c.limits})
		runtime.GC()
		rep := childReport{BaseRSS: currentRSS()}
		start := time.Now()
		_, err := r.Call(context.Background(), Source{Lang: c.lang, Code: src, File: "bot.yml", Line: 3})
		rep.Took = float64(time.Since(start).Microseconds()) / 1000
		if err != nil {
			rep.Err = err.Error()
			if len(rep.Err) > 2000 {
				rep.Err = rep.Err[:2000]
			}
		}
		data, _ := json.Marshal(rep)
		fmt.Printf("nb-child-report: %s\n", data)
		return
	}
	t.Fatalf("no case %q", name)
}

// currentRSS is the process's resident memory in KiB (Linux).
func currentRSS() int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return n
		}
	}
	return 0
}
