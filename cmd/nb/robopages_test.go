package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// `nb robopages run` stopped by Ctrl-C or SIGTERM exits 130 or 143 (it
// exited 0), and the command it ran does not survive it.
func TestRobopagesRunSignals(t *testing.T) {
	dir := t.TempDir()
	started := filepath.Join(dir, "started")
	os.WriteFile(filepath.Join(dir, "p.yml"), []byte("functions:\n  nap:\n    description: d\n    parameters: {}\n    cmdline: [sh, -c, 'touch "+started+"; exec sleep 30']\n"), 0o644)
	for sig, want := range map[syscall.Signal]int{syscall.SIGINT: 130, syscall.SIGTERM: 143} {
		os.Remove(started)
		cmd := exec.Command(os.Args[0], "robopages", "run", "-P", dir, "-F", "nap", "-A")
		cmd.Args[0] = "nb" // testscript.Main runs nb for that name
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 500; i++ {
			if _, err := os.Stat(started); err == nil {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		cmd.Process.Signal(sig)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			t.Fatalf("%v: nb robopages run did not stop", sig)
		}
		if code := cmd.ProcessState.ExitCode(); code != want {
			t.Errorf("%v: exit %d, want %d", sig, code, want)
		}
	}
}
