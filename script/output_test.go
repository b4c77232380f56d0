package script

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestOutput: what a script prints goes to the writer of WithOutput,
// never to nb's standard output; without one it is discarded.
func TestOutput(t *testing.T) {
	// Catch anything written to the process's standard output.
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	saved := os.Stdout
	os.Stdout = w
	var leaked bytes.Buffer
	copied := make(chan struct{})
	go func() { _, _ = io.Copy(&leaked, r); close(copied) }()
	defer func() {
		os.Stdout = saved
		w.Close()
		<-copied
		if leaked.Len() > 0 {
			t.Errorf("scripts wrote to nb's standard output: %q", leaked.String())
		}
	}()

	open := New(Options{Sandboxed: false, Environ: os.Environ()})
	code := `print("p", 1) io.write("w", 2, "\n") io.stdout:write("o\n") io.stderr:write("e\n")
		io.output():write("d\n") os.execute("echo x; echo y >&2") io.popen("echo z >&2"):close()
		return io.read("l") == nil and io.stdin:read("a") == nil`
	var out bytes.Buffer
	got, err := open.Call(WithOutput(context.Background(), &out), Source{Lang: Lua, Code: code})
	if err != nil || got != true {
		t.Fatalf("%v, %v", got, err)
	}
	if want := "p\t1\nw2\no\ne\nd\nx\ny\nz\n"; out.String() != want {
		t.Errorf("output %q, want %q", out.String(), want)
	}
	// Fennel prints the same way.
	out.Reset()
	if _, err := open.Call(WithOutput(context.Background(), &out), Source{Lang: Fennel, Code: `(print :fennel)`}); err != nil || out.String() != "fennel\n" {
		t.Errorf("fennel: %q, %v", out.String(), err)
	}
	// No writer: discarded.
	if _, err := open.Call(context.Background(), Source{Lang: Lua, Code: code}); err != nil {
		t.Fatal(err)
	}
	// What would read nb's standard input refuses.
	for _, code := range []string{`return io.lines()`, `return dofile()`, `return io.input("x")`} {
		if _, err := open.Call(context.Background(), Source{Lang: Lua, Code: code}); err == nil {
			t.Errorf("%s: no error", code)
		}
	}
}

// TestOutputConcurrent: calls sharing a writer write one at a time, and
// nothing is written after Call returns.
func TestOutputConcurrent(t *testing.T) {
	open := New(Options{Sandboxed: false})
	var out lockedCheck
	ctx := WithOutput(context.Background(), &out)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if _, err := open.Call(ctx, Source{Lang: Lua, Code: `for i = 1, 200 do io.write("0123456789\n") end`}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	out.mu.Lock()
	defer out.mu.Unlock()
	if out.overlap {
		t.Error("two calls wrote at once")
	}
	if n := strings.Count(out.buf.String(), "0123456789\n"); n != 8*200 {
		t.Errorf("%d lines", n)
	}

	// A call the caller gave up on writes nothing afterwards.
	var late lockedCheck
	ctx, cancel := context.WithTimeout(WithOutput(context.Background(), &late), 100*time.Millisecond)
	defer cancel()
	_, err := open.Call(ctx, Source{Lang: Lua, Code: `local t = os.clock() while os.clock() - t < 0.5 do end print("late")`})
	if err == nil {
		t.Fatal("no timeout")
	}
	time.Sleep(700 * time.Millisecond)
	late.mu.Lock()
	defer late.mu.Unlock()
	if late.buf.Len() > 0 {
		t.Errorf("written after Call returned: %q", late.buf.String())
	}
}

// lockedCheck records writes and whether two ever overlapped.
type lockedCheck struct {
	mu      sync.Mutex
	busy    bool
	overlap bool
	buf     bytes.Buffer
}

func (l *lockedCheck) Write(p []byte) (int, error) {
	l.mu.Lock()
	if l.busy {
		l.overlap = true
	}
	l.busy = true
	l.mu.Unlock()
	time.Sleep(time.Microsecond)
	l.mu.Lock()
	l.buf.Write(p)
	l.busy = false
	l.mu.Unlock()
	return len(p), nil
}

// TestChildrenStopWithTheCall: the commands of a canceled call, and what
// they left in the background, are killed; so are background commands
// of a call that returned.
func TestChildrenStopWithTheCall(t *testing.T) {
	open := New(Options{Sandboxed: false, Environ: os.Environ()})
	marker := func(n int) string { return "6" + strings.Repeat("1", n) + ".5" } // a unique sleep time
	tests := []struct {
		name, code, mark string
		cancel           bool
	}{
		{"os.execute canceled", `os.execute("sleep %s & sleep %s")`, marker(3), true},
		{"io.popen canceled", `return io.popen("sleep %s & sleep %s"):read("a")`, marker(4), true},
		{"background left by a finished call", `os.execute("sleep %s & true %s") return 1`, marker(5), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code := strings.ReplaceAll(tt.code, "%s", tt.mark)
			ctx, cancel := context.WithCancel(context.Background())
			if tt.cancel {
				time.AfterFunc(300*time.Millisecond, cancel)
			}
			start := time.Now()
			_, err := open.Call(ctx, Source{Lang: Lua, Code: code})
			cancel()
			if tt.cancel {
				var le *LimitError
				if !errors.As(err, &le) || le.Kind != LimitCanceled {
					t.Errorf("err = %v, want a cancellation", err)
				}
				if took := time.Since(start); took > 2*time.Second {
					t.Errorf("the call returned after %v", took)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(5 * time.Second)
			for {
				left := processesWith(tt.mark)
				if len(left) == 0 {
					return
				}
				if time.Now().After(deadline) {
					t.Fatalf("processes left: %v", left)
				}
				time.Sleep(50 * time.Millisecond)
			}
		})
	}
}

// processesWith lists the command lines of processes containing s.
func processesWith(s string) []string {
	var out []string
	dirs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, f := range dirs {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		line := strings.ReplaceAll(string(data), "\x00", " ")
		if strings.Contains(line, s) {
			out = append(out, f+": "+line)
		}
	}
	return out
}
