package proc

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestEnvAllowList(t *testing.T) {
	parent := []string{
		"PATH=/usr/bin", "HOME=/home/u", "LANG=C.UTF-8", "LC_ALL=C", "TERM=xterm",
		"TOKEN=t", "PASSWORD=p", "PGPASSWORD=p", "APIKEY=k", "DATABASE_URL=postgres://u:p@h/d",
		"GH_PAT=x", "PASSPHRASE=x", "OPENAI_API_KEY_2=x", "NANO_BOTS_ENCRYPTION_PASSWORD=x",
		"WANTED=yes", "=weird", "noequals",
	}
	got := Env(parent, []string{"WANTED", "ABSENT"}, "EXTRA=1", "HOME=/override")
	want := []string{"PATH=/usr/bin", "HOME=/override", "LANG=C.UTF-8", "LC_ALL=C", "TERM=xterm", "WANTED=yes", "EXTRA=1"}
	if !slices.Equal(got, want) {
		t.Errorf("Env = %q\nwant %q", got, want)
	}
}

func TestLookup(t *testing.T) {
	env := []string{"A=1", "B=2", "A=3"}
	if v, ok := Lookup(env, "A"); !ok || v != "3" {
		t.Errorf("Lookup(A) = %q, %v", v, ok)
	}
	if _, ok := Lookup(env, "C"); ok {
		t.Error("Lookup(C) found a value")
	}
}

// TestCommandEnvEmpty: a command's environment is empty unless set.
func TestCommandEnvEmpty(t *testing.T) {
	t.Setenv("NB_PROC_SECRET", "s3cret")
	out, err := Command(context.Background(), "/usr/bin/env").Output()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), "s3cret") {
		t.Errorf("the child saw nb's environment:\n%s", out)
	}
}

// TestCancelKillsGroup: cancelling the context stops the command and a
// background grandchild that ignores SIGTERM.
func TestCancelKillsGroup(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "pid")
	ctx, cancel := context.WithCancel(context.Background())
	cmd := Command(ctx, "/bin/sh", "-c", `(trap "" TERM; sleep 60) & echo $! > `+pidFile+`; wait`)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	grandchild := waitPid(t, pidFile)
	cancel()
	start := time.Now()
	cmd.Wait() //nolint:errcheck // killed on purpose
	Reap(cmd)
	if d := time.Since(start); d > Grace+2*time.Second {
		t.Errorf("Wait took %v", d)
	}
	waitGone(t, grandchild)
}

// TestReapAfterExit: a command that exits leaving a background child
// behind has it killed by Reap.
func TestReapAfterExit(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "pid")
	cmd := Command(context.Background(), "/bin/sh", "-c", `sleep 60 >/dev/null 2>&1 & echo $! > `+pidFile)
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	grandchild := waitPid(t, pidFile)
	Reap(cmd)
	waitGone(t, grandchild)
}

func waitPid(t *testing.T, file string) int {
	t.Helper()
	for i := 0; i < 200; i++ {
		b, err := os.ReadFile(file)
		if err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				return pid
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("the command never wrote its child's pid")
	return 0
}

func waitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(Grace + 3*time.Second)
	for time.Now().Before(deadline) {
		if syscall.Kill(pid, 0) != nil {
			return
		}
		// A zombie is gone for our purpose: it runs nothing.
		if b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat"); err == nil && strings.Contains(string(b), ") Z ") {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	syscall.Kill(pid, syscall.SIGKILL) //nolint:errcheck // clean up after the failure
	t.Errorf("process %d survived its command", pid)
}
