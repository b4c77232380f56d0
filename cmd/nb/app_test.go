package main

import (
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/nbots/nb/cartridge"
	"github.com/nbots/nb/provider/openai/openaitest"
	"github.com/nbots/nb/provider/providertest"
)

func TestChomp(t *testing.T) {
	for in, want := range map[string]string{"a\n": "a", "a\r\n": "a", "a\r": "a", "a\n\n": "a\n", "a": "a", "": "", "\n": ""} {
		if got := chomp(in); got != want {
			t.Errorf("chomp(%q) = %q, want %q", in, got, want)
		}
	}
}

// An eval leaves no goroutine behind (App runs in-process in benchmarks
// and could be embedded): the one watching for Ctrl-C ends with it.
func TestEvalLeavesNoGoroutine(t *testing.T) {
	srv := httptest.NewServer(openaitest.New(providertest.Echo))
	defer srv.Close()
	dir := t.TempDir()
	cart := filepath.Join(dir, "bot.yml")
	src := "provider: {id: openai, credentials: {address: " + srv.URL + ", access-token: k}, settings: {model: m}}\n"
	if err := os.WriteFile(cart, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	devnull, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer devnull.Close()
	for range 3 {
		app := &App{Args: []string{cart, "-", "eval", "hi"}, Stdin: devnull, Stdout: devnull, Stderr: devnull, Environ: os.Environ()}
		if code := app.Run(); code != 0 {
			t.Fatalf("exit code %d", code)
		}
	}
	const watcher = "nb.(*App).eval.func"
	var stacks string
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		buf := make([]byte, 1<<20)
		stacks = string(buf[:runtime.Stack(buf, true)])
		if !strings.Contains(stacks, watcher) {
			return
		}
	}
	t.Errorf("%d signal watchers still running after the evals ended", strings.Count(stacks, watcher))
}

func TestNoHistoryFileWithEncryption(t *testing.T) {
	c := cartridge.Default(os.LookupEnv)
	a := &App{Environ: []string{"HOME=/home/u"}}
	if a.historyFile(c) == "" {
		t.Fatal("no history file without encryption")
	}
	a.Environ = append(a.Environ, "NANO_BOTS_ENCRYPTION_PASSWORD=pw")
	if f := a.historyFile(c); f != "" {
		t.Fatalf("history file %q kept in plaintext with encryption on", f)
	}
}
