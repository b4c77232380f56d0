// Package proc starts the programs nb runs on a user's behalf: the
// children of unsandboxed functions, robopages run on the host, MCP stdio
// servers and the exec built-in. Every child gets the same treatment: an
// allow-listed environment (never nb's secrets), its own process group,
// and, when its call ends, the whole group is stopped with it.
package proc

import (
	"context"
	"errors"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"time"
)

// BaseNames are the variables every child inherits from nb's environment
// (LC_* too): what programs need to run, and no secrets. Anything else a
// child should see is named explicitly by the cartridge or the page.
var BaseNames = []string{"PATH", "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "TERM", "TZ", "TMPDIR", "SHELL"}

// Env returns a child's environment: the BaseNames and LC_* variables of
// parent (in NAME=value form, as os.Environ gives), then the variables of
// parent listed in names, then extra (NAME=value entries that override
// what came before). A deny-list cannot know every secret's name
// (TOKEN, PGPASSWORD, DATABASE_URL, GH_PAT...), so nothing else passes.
func Env(parent []string, names []string, extra ...string) []string {
	out := make([]string, 0, len(BaseNames)+len(names)+len(extra))
	index := map[string]int{}
	set := func(kv string) {
		name, _, _ := strings.Cut(kv, "=")
		if i, ok := index[name]; ok {
			out[i] = kv
			return
		}
		index[name] = len(out)
		out = append(out, kv)
	}
	for _, kv := range parent {
		name, _, ok := strings.Cut(kv, "=")
		if !ok || name == "" {
			continue
		}
		if slices.Contains(BaseNames, name) || strings.HasPrefix(name, "LC_") || slices.Contains(names, name) {
			set(kv)
		}
	}
	for _, kv := range extra {
		if name, _, ok := strings.Cut(kv, "="); ok && name != "" {
			set(kv)
		}
	}
	return out
}

// Lookup returns the value of name in environ (NAME=value entries); the
// last entry wins, as in os/exec.
func Lookup(environ []string, name string) (string, bool) {
	for i := len(environ) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(environ[i], "="); ok && k == name {
			return v, true
		}
	}
	return "", false
}

// Grace is how long a group has between SIGTERM and SIGKILL.
const Grace = 2 * time.Second

// Command returns a command that runs name in its own process group.
// When ctx ends, the whole group gets SIGTERM, then SIGKILL after Grace;
// Wait returns at most Grace after that even if a grandchild holds the
// output pipes open. Call Reap after Wait to kill whatever the group
// left behind. The environment is empty until the caller sets Env (use
// Env): a child never inherits nb's environment by accident.
func Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = []string{}
	Setup(cmd)
	return cmd
}

// Setup makes an already built command (from exec.CommandContext) run in
// its own process group and stop with its group, as Command does.
func Setup(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	cmd.Cancel = func() error {
		if cmd.Process == nil {
			return nil
		}
		pid := cmd.Process.Pid
		_ = syscall.Kill(-pid, syscall.SIGTERM)
		// The group's leader may be gone while its children ignore
		// SIGTERM: kill the group after the grace period anyway.
		time.AfterFunc(Grace, func() { _ = syscall.Kill(-pid, syscall.SIGKILL) })
		return nil
	}
	cmd.WaitDelay = Grace + 500*time.Millisecond
}

// Reap kills every process left in the command's group (background
// grandchildren of a command that has exited). It is safe to call after
// Wait, and a no-op for a command that never started.
func Reap(cmd *exec.Cmd) {
	if cmd.Process == nil || cmd.Process.Pid <= 0 {
		return
	}
	if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return
	}
}
