package robopages

import (
	"archive/zip"
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
)

func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"nb": func() {
			if len(os.Args) < 2 || os.Args[1] != "robopages" {
				os.Stderr.WriteString("usage: nb robopages ...\n")
				os.Exit(2)
			}
			// NB_TEST_TERMINAL stands for a terminal on standard input.
			os.Exit(Main(context.Background(), os.Args[2:], Process{Environ: os.Environ(), Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Terminal: os.Getenv("NB_TEST_TERMINAL") == "1"}))
		},
	})
}

func TestScripts(t *testing.T) {
	corpus, _ := filepath.Abs("../../../shared/corpus/robopages")
	testscript.Run(t, testscript.Params{
		Dir: "testdata/script",
		Condition: func(cond string) (bool, error) {
			if cond == "corpus" { // the shared corpus beside the repository, as in CI
				_, err := os.Stat(corpus)
				return err == nil, nil
			}
			return false, fmt.Errorf("unknown condition %q", cond)
		},
		Setup: func(env *testscript.Env) error {
			env.Setenv("CORPUS", corpus)
			env.Setenv("HOME", env.WorkDir)
			return nil
		},
	})
}

func TestInstallZip(t *testing.T) {
	dir := t.TempDir()
	zpath := filepath.Join(dir, "robopages-main.zip")
	f, _ := os.Create(zpath)
	zw := zip.NewWriter(f)
	for name, body := range map[string]string{
		"robopages-main/":                  "",
		"robopages-main/utilities/web.yml": "description: d\nfunctions: {}\n",
		"robopages-main/README.md":         "readme",
	} {
		w, _ := zw.Create(name)
		io.WriteString(w, body)
	}
	zw.Close()
	f.Close()
	dest := filepath.Join(dir, "pages")
	var out, errOut strings.Builder
	if code := Main(context.Background(), []string{"install", "-S", zpath, "-P", dest}, Process{Stdout: &out, Stderr: &errOut}); code != 0 {
		t.Fatalf("install: %d %s", code, errOut.String())
	}
	if b, err := os.ReadFile(filepath.Join(dest, "utilities", "web.yml")); err != nil || !strings.HasPrefix(string(b), "description") {
		t.Errorf("web.yml: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dest, "README.md")); err != nil {
		t.Error(err)
	}
	if code := Main(context.Background(), []string{"install", "-S", zpath, "-P", dest}, Process{Stdout: &out, Stderr: &errOut}); code != 1 || !strings.Contains(errOut.String(), "already exists") {
		t.Errorf("second install: %d %s", code, errOut.String())
	}
}

// An entry cannot leave the destination.
func TestExtractStaysInside(t *testing.T) {
	dir := t.TempDir()
	dest := filepath.Join(dir, "a", "dest")
	_, err := extract([]archiveFile{{name: "x/p.yml", data: []byte("p")}, {name: "../../escape.yml", data: []byte("no")}}, dest)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dest, "escape.yml")); err != nil {
		t.Errorf("escape.yml not kept inside: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "escape.yml")); err == nil {
		t.Error("an entry escaped the destination")
	}
}

// serve answers until its context ends.
func TestServe(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "p.yml"), []byte("description: d\nfunctions:\n  hello:\n    description: d\n    parameters: {}\n    cmdline: [echo, hello]\n"), 0o644)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	done := make(chan int)
	go func() {
		done <- Main(ctx, []string{"serve", "-P", dir, "-A", "127.0.0.1:0", "--lazy"}, Process{Environ: os.Environ(), Stdout: io.Discard, Stderr: pw})
		pw.Close()
	}()
	sc := bufio.NewScanner(pr)
	addr := ""
	for sc.Scan() {
		if a, ok := strings.CutPrefix(sc.Text(), "serving 1 functions of 1 pages on "); ok {
			addr = a
			break
		}
	}
	go io.Copy(io.Discard, pr)
	if addr == "" {
		t.Fatal("no serving line")
	}
	resp, err := http.Post(addr+"/process", "application/json", strings.NewReader(`[{"id":"1","function":{"name":"hello","arguments":{}}}]`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != `[{"role":"tool","call_id":"1","content":"hello\n"}]` {
		t.Errorf("answer %s", b)
	}
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("exit %d", code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not stop")
	}
}

// exitCause is a context cause with an exit status, as cmd/nb's signals.
type exitCause int

func (e exitCause) Error() string { return "stopped" }
func (e exitCause) ExitCode() int { return int(e) }

// A run stopped by its context (Ctrl-C, SIGTERM) is not a success: it
// exits 130, or the code the cause carries (143 for SIGTERM). It used to
// exit 0.
func TestRunInterrupted(t *testing.T) {
	dir := t.TempDir()
	started := filepath.Join(dir, "started")
	os.WriteFile(filepath.Join(dir, "p.yml"), []byte("functions:\n  nap:\n    description: d\n    parameters: {}\n    cmdline: [sh, -c, 'touch "+started+"; exec sleep 30']\n"), 0o644)
	for _, cause := range []error{nil, exitCause(143)} {
		os.Remove(started)
		ctx, cancel := context.WithCancelCause(context.Background())
		done := make(chan int)
		var out strings.Builder
		go func() {
			done <- Main(ctx, []string{"run", "-P", dir, "-F", "nap", "-A"}, Process{Environ: os.Environ(), Stdout: &out, Stderr: io.Discard})
		}()
		for i := 0; i < 500; i++ {
			if _, err := os.Stat(started); err == nil {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		cancel(cause)
		want := 130
		if cause != nil {
			want = 143
		}
		select {
		case code := <-done:
			if code != want {
				t.Errorf("cause %v: exit %d, want %d", cause, code, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("run did not stop")
		}
	}
	// Interrupted while asking for an argument.
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	defer pw.Close()
	os.WriteFile(filepath.Join(dir, "q.yml"), []byte("functions:\n  ask:\n    description: d\n    parameters: {x: {type: string, description: d}}\n    cmdline: [echo, '${x}']\n"), 0o644)
	done := make(chan int)
	go func() {
		done <- Main(ctx, []string{"run", "-P", dir, "-F", "ask"}, Process{Environ: os.Environ(), Stdin: pr, Stdout: io.Discard, Stderr: io.Discard, Terminal: true})
	}()
	time.Sleep(100 * time.Millisecond)
	cancel()
	select {
	case code := <-done:
		if code != 130 {
			t.Errorf("interrupted prompt: exit %d, want 130", code)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the prompt did not end on Ctrl-C")
	}
}
