package script

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fakeBB puts a shell script named bb first on PATH. With --prn it
// records the program and the parameters file, then prints what the
// program's first line asks for; with -e it copies its input, as
// `(->> *in* slurp read-string print)` would for a string.
func fakeBB(t *testing.T) (logDir string) {
	t.Helper()
	dir := t.TempDir()
	logDir = t.TempDir()
	script := `#!/bin/sh
if [ "$1" = "--prn" ]; then
  cp "$2" "` + logDir + `/program.clj"
  f=$(sed -n 's/.*(slurp "\([^"]*\)").*/\1/p' "$2")
  cp "$f" "` + logDir + `/parameters.json"
  env > "` + logDir + `/env"
  if grep -q "(throw" "$2"; then echo "----- Error ----- boom" >&2; exit 1; fi
  if grep -q "Thread/sleep" "$2"; then sleep 61.75 & sleep 61.75; fi
  echo "{:date-time 2023-12-02T14:19:18-03:00, :timezone America/Sao_Paulo}"
  exit 0
fi
if [ "$1" = "-e" ]; then cat; exit 0; fi
echo "unexpected arguments: $*" >&2
exit 2
`
	if err := os.WriteFile(filepath.Join(dir, "bb"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	return logDir
}

func TestClojure(t *testing.T) {
	logDir := fakeBB(t)
	t.Setenv("OPENAI_API_KEY", "sk-secret")
	t.Setenv("GITHUB_TOKEN", "ghp-secret")
	t.Setenv("NANO_BOTS_ENCRYPTION_PASSWORD", "pw")
	t.Setenv("GOOGLE_CREDENTIALS_FILE", "/x")
	t.Setenv("NB_HARMLESS", "dropped")
	t.Setenv("BABASHKA_PRELOADS", "(def x 1)")
	r := New(Options{Sandboxed: false, Environ: os.Environ()})
	src := Source{Lang: Clojure, Code: `(-> (java.time.ZonedDateTime/now) str)`, File: "bot.yml", Line: 7}
	got, err := r.Call(context.Background(), src, Param{"parameters", map[string]any{"from": 1.0}})
	if err != nil {
		t.Fatal(err)
	}
	if got != "{:date-time 2023-12-02T14:19:18-03:00, :timezone America/Sao_Paulo}\n" {
		t.Errorf("output %q", got)
	}
	program, _ := os.ReadFile(filepath.Join(logDir, "program.clj"))
	if !strings.Contains(string(program), `parameters (get injected-parameters "parameters")`) ||
		!strings.Contains(string(program), src.Code) {
		t.Errorf("program:\n%s", program)
	}
	params, _ := os.ReadFile(filepath.Join(logDir, "parameters.json"))
	if string(params) != `{"parameters":{"from":1}}` {
		t.Errorf("parameters file %s", params)
	}
	env, _ := os.ReadFile(filepath.Join(logDir, "env"))
	// An allow-list: PATH, HOME and Babashka's own variables pass;
	// secrets and everything else do not.
	for _, secret := range []string{"sk-secret", "ghp-secret", "NANO_BOTS_ENCRYPTION_PASSWORD", "GOOGLE_CREDENTIALS_FILE", "NB_HARMLESS"} {
		if strings.Contains(string(env), secret) {
			t.Errorf("the child saw %s", secret)
		}
	}
	for _, want := range []string{"PATH=", "BABASHKA_PRELOADS=(def x 1)"} {
		if !strings.Contains(string(env), want) {
			t.Errorf("the child did not get %s", want)
		}
	}

	_, err = r.Call(context.Background(), Source{Lang: Clojure, Code: `(throw (ex-info "boom" {}))`})
	var re *RuntimeError
	if !errors.As(err, &re) || !strings.Contains(re.Error(), "boom") {
		t.Errorf("failing program: %v", err)
	}
}

func TestClojureRefused(t *testing.T) {
	sandboxed := New(Options{Sandboxed: true})
	_, err := sandboxed.Call(context.Background(), Source{Lang: Clojure, Code: `(+ 1 2)`})
	// The reference's message, then how to run Clojure.
	if err == nil || !strings.HasPrefix(err.Error(), "Sandboxed Clojure not supported. ") ||
		!strings.Contains(err.Error(), "safety: {functions: {sandboxed: false}}") {
		t.Errorf("sandboxed: %v", err)
	}
	t.Setenv("PATH", t.TempDir())
	open := New(Options{Sandboxed: false, Environ: os.Environ()})
	_, err = open.Call(context.Background(), Source{Lang: Clojure, Code: `(+ 1 2)`})
	if err == nil || !strings.Contains(err.Error(), "install bb") {
		t.Errorf("without bb: %v", err)
	}
}

// TestClojureStopsWithTheCall: bb and what it started die when the call
// is canceled.
func TestClojureStopsWithTheCall(t *testing.T) {
	fakeBB(t)
	r := New(Options{Sandboxed: false, Environ: os.Environ()})
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(300*time.Millisecond, cancel)
	start := time.Now()
	_, err := r.Call(ctx, Source{Lang: Clojure, Code: `(Thread/sleep 60000)`})
	var le *LimitError
	if !errors.As(err, &le) || le.Kind != LimitCanceled {
		t.Errorf("err = %v, want a cancellation", err)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("the call returned after %v", took)
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(processesWith("61.75")) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("processes left: %v", processesWith("61.75"))
		}
		time.Sleep(50 * time.Millisecond)
	}
}
