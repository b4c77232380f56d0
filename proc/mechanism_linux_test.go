//go:build linux

package proc

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// mechanisms lists the mechanisms to test on this system; each test runs
// under every one that is available, so the fallbacks are tested even
// where namespaces exist.
func mechanisms(t *testing.T) []Mechanism {
	var out []Mechanism
	for _, m := range []Mechanism{ProcessGroup, Sweep, Cgroup, Bubblewrap, UserNamespace, PIDNamespace} {
		if err := Available(m); err != nil {
			t.Logf("%s: not available here: %v", m, err)
			continue
		}
		out = append(out, m)
	}
	return out
}

// command builds a set-up command running script with sh.
func command(t *testing.T, ctx context.Context, m Mechanism, script string) *exec.Cmd {
	t.Helper()
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", script)
	cmd.Env = Env([]string{"PATH=" + os.Getenv("PATH")}, nil)
	if err := SetupOptions(cmd, Options{Mechanism: m, Grace: 500 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { Reap(cmd) }) // Reap is safe twice, and releases a cgroup
	if got := MechanismOf(cmd); got != m {
		t.Fatalf("MechanismOf = %s, want %s", got, m)
	}
	return cmd
}

// hostPid is shell code that writes the shell's pid as nb sees it (in a
// pid namespace $$ is the pid inside) to file, then becomes cmd.
func hostPid(file, cmd string) string {
	return `read -r p _ < /proc/self/stat; echo $p > ` + file + `; exec ` + cmd
}

// sleeper is shell code that creates file, then becomes a sleep whose
// command line no other process has: sleeping finds it in nb's /proc,
// whatever namespace or /proc the command has.
func sleeper(file string) (code, token string) {
	token = fmt.Sprintf("600.%09d", rand.Int32N(1e9))
	return `touch ` + file + `; exec sleep ` + token, token
}

// sleeping lists the live processes running sleep token.
func sleeping(token string) []int {
	var out []int
	want := "sleep\x00" + token + "\x00"
	for _, p := range scanProcs() {
		if p.zombie {
			continue
		}
		if b, err := os.ReadFile("/proc/" + strconv.Itoa(p.pid) + "/cmdline"); err == nil && string(b) == want {
			out = append(out, p.pid)
		}
	}
	return out
}

// waitSleeping waits for each token's sleep to run.
func waitSleeping(t *testing.T, tokens ...string) {
	t.Helper()
	for _, tok := range tokens {
		for i := 0; len(sleeping(tok)) == 0; i++ {
			if i == 500 {
				t.Fatalf("sleep %s never ran", tok)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// waitNotSleeping waits for the sleep of token to end.
func waitNotSleeping(t *testing.T, what, token string) {
	t.Helper()
	deadline := time.Now().Add(Grace + 3*time.Second)
	for time.Now().Before(deadline) {
		if len(sleeping(token)) == 0 {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, pid := range sleeping(token) {
		syscall.Kill(pid, syscall.SIGKILL) //nolint:errcheck // clean up after the failure
	}
	t.Errorf("%s (sleep %s) survived its command", what, token)
}

// TestNothingSurvives: whatever a command leaves behind, in its group,
// in a session of its own (setsid) or after a double fork, is gone after
// Wait and Reap. The process group alone (the former behaviour) fails
// the setsid and double-fork cases.
func TestNothingSurvives(t *testing.T) {
	for _, m := range mechanisms(t) {
		t.Run(strings.ReplaceAll(m.String(), " ", "-"), func(t *testing.T) {
			dir := t.TempDir()
			group, gt := sleeper(filepath.Join(dir, "group"))
			session, st := sleeper(filepath.Join(dir, "session"))
			double, dt := sleeper(filepath.Join(dir, "double"))
			// The command ends once the test has seen the three sleeps run.
			script := `(` + group + `) >/dev/null 2>&1 &
setsid sh -c '` + session + `' >/dev/null 2>&1 &
sh -c 'setsid sh -c "` + double + `" >/dev/null 2>&1 &' &
cd ` + dir + ` && while [ ! -e go ]; do sleep 0.01; done`
			cmd := command(t, context.Background(), m, script)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			waitSleeping(t, gt, st, dt)
			os.WriteFile(filepath.Join(dir, "go"), nil, 0o644)
			if err := cmd.Wait(); err != nil {
				t.Fatal(err)
			}
			Reap(cmd)
			for i, what := range []string{"background child", "setsid child", "double-forked child"} {
				tok := []string{gt, st, dt}[i]
				if m == ProcessGroup && i > 0 {
					for _, pid := range sleeping(tok) {
						syscall.Kill(pid, syscall.SIGKILL) //nolint:errcheck // the known limit of the process group
					}
					continue
				}
				waitNotSleeping(t, what, tok)
			}
		})
	}
}

// TestCancelKillsAll: cancelling the context stops the command and
// everything it started, even a process that ignores SIGTERM in a
// session of its own.
func TestCancelKillsAll(t *testing.T) {
	for _, m := range mechanisms(t) {
		t.Run(strings.ReplaceAll(m.String(), " ", "-"), func(t *testing.T) {
			dir := t.TempDir()
			child, ct := sleeper(filepath.Join(dir, "child"))
			escaped, et := sleeper(filepath.Join(dir, "escaped"))
			tokens := []string{ct}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			script := `(trap "" TERM; ` + child + `) & `
			if m != ProcessGroup {
				script += `setsid sh -c 'trap "" TERM; ` + escaped + `' & `
				tokens = append(tokens, et)
			}
			cmd := command(t, ctx, m, script+`wait`)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			waitSleeping(t, tokens...)
			cancel()
			start := time.Now()
			cmd.Wait() //nolint:errcheck // killed on purpose
			Reap(cmd)
			if d := time.Since(start); d > 4*time.Second {
				t.Errorf("Wait took %v", d)
			}
			for _, tok := range tokens {
				waitNotSleeping(t, "child", tok)
			}
		})
	}
}

// TestBubblewrap: through bwrap the command is pid 2 of its namespace,
// with its own /proc: signals reach it as usual, and a death by signal
// shows as bwrap's exit status 128+n.
func TestBubblewrap(t *testing.T) {
	if err := Available(Bubblewrap); err != nil {
		t.Skip(err)
	}
	cmd := command(t, context.Background(), Bubblewrap, `echo $$; ls /proc | grep -c '^[0-9]'`)
	out, err := cmd.Output()
	if err != nil || strings.Fields(string(out))[0] != "2" {
		t.Errorf("pid inside: %q %v, want 2", out, err)
	}
	if n, _ := strconv.Atoi(strings.Fields(string(out))[1]); n > 5 {
		t.Errorf("the command's /proc lists %d processes: not its own /proc", n)
	}
	cmd = command(t, context.Background(), Bubblewrap, `kill -9 $$`)
	err = cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 137 {
		t.Errorf("kill -9 $$: %v, want exit status 137", err)
	}
	cmd = command(t, context.Background(), Bubblewrap, `pwd`)
	cmd.Dir = t.TempDir()
	if out, err := cmd.Output(); err != nil || strings.TrimSpace(string(out)) != cmd.Dir {
		t.Errorf("working folder %q %v, want %s", out, err, cmd.Dir)
	}
}

// TestInitSignals: in a pid namespace the command is pid 1, which the
// kernel shields from signals it does not handle. Cancelling still ends
// it at once (SIGKILL stands in for SIGTERM), and a command that handles
// SIGTERM gets SIGTERM.
func TestInitSignals(t *testing.T) {
	for _, m := range []Mechanism{PIDNamespace, UserNamespace} {
		if Available(m) != nil {
			continue
		}
		t.Run(strings.ReplaceAll(m.String(), " ", "-"), func(t *testing.T) {
			cmd := command(t, context.Background(), m, `echo $$`)
			out, err := cmd.Output()
			Reap(cmd)
			if err != nil || strings.TrimSpace(string(out)) != "1" {
				t.Fatalf("the command is not pid 1 of its namespace: %q %v", out, err)
			}

			// A long grace period: SIGTERM, ignored, would take all of it.
			ctx, cancel := context.WithCancel(context.Background())
			cmd = exec.CommandContext(ctx, "/bin/sh", "-c", `exec sleep 60`)
			cmd.Env = []string{}
			if err := SetupOptions(cmd, Options{Mechanism: m, Grace: 10 * time.Second}); err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			waitExec(t, cmd, "sleep")
			cancel()
			start := time.Now()
			cmd.Wait() //nolint:errcheck // killed on purpose
			Reap(cmd)
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("cancel took %v: SIGTERM was not replaced by SIGKILL", d)
			}
			if ws := cmd.ProcessState.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
				t.Errorf("status %v, want killed by SIGKILL", cmd.ProcessState)
			}

			ready := filepath.Join(t.TempDir(), "ready")
			cmd = command(t, context.Background(), m, `trap "exit 7" TERM; touch `+ready+`; while :; do sleep 0.01; done`)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			waitFile(t, ready)
			if err := Signal(cmd, syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			err = cmd.Wait()
			Reap(cmd)
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 7 {
				t.Errorf("a command that handles SIGTERM: %v, want exit status 7", err)
			}

			cmd = command(t, context.Background(), m, `exec sleep 60`)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			waitExec(t, cmd, "sleep")
			if err := Signal(cmd, syscall.SIGINT); err != nil {
				t.Fatal(err)
			}
			done := make(chan struct{})
			go func() { cmd.Wait(); close(done) }() //nolint:errcheck // killed on purpose
			select {
			case <-done:
			case <-time.After(3 * time.Second):
				cmd.Process.Kill() //nolint:errcheck // clean up
				t.Error("SIGINT did not end a pid 1 without a handler")
			}
			Reap(cmd)
		})
	}
}

// waitExec waits until the command's process runs program (the shell
// has exec'd it): before that the shell's signal handlers apply.
func waitExec(t *testing.T, cmd *exec.Cmd, program string) {
	t.Helper()
	for i := 0; i < 500; i++ {
		if b, err := os.ReadFile("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/comm"); err == nil && strings.TrimSpace(string(b)) == program {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("the command never became %s", program)
}

// TestSweepMarker: the sweep finds a process that left the group and
// was orphaned, through the marker Setup adds to the environment.
func TestSweepMarker(t *testing.T) {
	if Available(Sweep) != nil {
		t.Skip("no /proc")
	}
	file := filepath.Join(t.TempDir(), "pid")
	cmd := command(t, context.Background(), Sweep, `setsid sh -c '`+hostPid(file, "sleep 60")+`' >/dev/null 2>&1 & sleep 0.01`)
	if !slices.ContainsFunc(cmd.Env, func(kv string) bool { return strings.HasPrefix(kv, MarkerName+"=") }) {
		t.Fatalf("no marker in %q", cmd.Env)
	}
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	pid := waitPid(t, file)
	// The orphan's parent is now init; only the marker ties it to the call.
	Reap(cmd)
	waitGone(t, "orphan", pid)
}

// TestCgroupRemoved: the call's cgroup is gone after Reap.
func TestCgroupRemoved(t *testing.T) {
	if err := Available(Cgroup); err != nil {
		t.Skip(err)
	}
	cmd := command(t, context.Background(), Cgroup, `sleep 60 >/dev/null 2>&1 & cat /proc/self/cgroup`)
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	v, _ := calls.Load(cmd)
	dir := v.(*call).sys.cgroupDir
	if !strings.Contains(string(out), filepath.Base(dir)) {
		t.Errorf("the command ran in %q, not in %s", out, dir)
	}
	Reap(cmd)
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("cgroup %s left behind: %v", dir, err)
	}
	Reap(cmd) // twice is harmless
}

// TestSetupUnavailable: forcing a mechanism the system lacks is an error.
func TestSetupUnavailable(t *testing.T) {
	for _, m := range []Mechanism{Sweep, Cgroup, Bubblewrap, UserNamespace, PIDNamespace} {
		if Available(m) == nil {
			continue
		}
		if err := SetupOptions(exec.CommandContext(context.Background(), "/bin/true"), Options{Mechanism: m}); err == nil {
			t.Errorf("%s: no error", m)
		}
	}
	if m := Detect(); Available(m) != nil {
		t.Errorf("Detect() = %s, which is not available", m)
	}
}

func waitFile(t *testing.T, file string) {
	t.Helper()
	for i := 0; i < 500; i++ {
		if _, err := os.Stat(file); err == nil {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%s never appeared", file)
}

func waitPid(t *testing.T, file string) int {
	t.Helper()
	for i := 0; i < 500; i++ {
		b, err := os.ReadFile(file)
		if err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				return pid
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("the command never wrote its child's pid to %s", file)
	return 0
}

func waitGone(t *testing.T, what string, pid int) {
	t.Helper()
	deadline := time.Now().Add(Grace + 3*time.Second)
	for time.Now().Before(deadline) {
		if syscall.Kill(pid, 0) != nil {
			return
		}
		// A zombie is gone for our purpose: it runs nothing.
		if b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat"); err == nil {
			if p, ok := parseStat(pid, b); ok && p.zombie {
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	syscall.Kill(pid, syscall.SIGKILL) //nolint:errcheck // clean up after the failure
	t.Errorf("%s (process %d) survived its command", what, pid)
}

// BenchmarkMechanismCost runs a short command (/bin/true) under the
// process group alone and under each other mechanism in turn, so both
// see the same machine load, and reports the median of each and of
// their differences: what a call pays for the guarantee.
func BenchmarkMechanismCost(b *testing.B) {
	run := func(m Mechanism) time.Duration {
		start := time.Now()
		cmd := exec.CommandContext(context.Background(), "/bin/true")
		cmd.Env = []string{}
		if err := SetupOptions(cmd, Options{Mechanism: m}); err != nil {
			b.Fatal(err)
		}
		if err := cmd.Run(); err != nil {
			b.Fatal(err)
		}
		Reap(cmd)
		return time.Since(start)
	}
	ms := func(d []time.Duration) float64 {
		slices.Sort(d)
		return float64(d[len(d)/2]) / float64(time.Millisecond)
	}
	for _, m := range []Mechanism{Sweep, Cgroup, Bubblewrap, UserNamespace, PIDNamespace} {
		if Available(m) != nil {
			continue
		}
		b.Run(strings.ReplaceAll(m.String(), " ", "-"), func(b *testing.B) {
			var group, mech, diff []time.Duration
			for b.Loop() {
				g, x := run(ProcessGroup), run(m)
				group, mech, diff = append(group, g), append(mech, x), append(diff, x-g)
			}
			b.ReportMetric(ms(group), "group-p50-ms")
			b.ReportMetric(ms(mech), "mechanism-p50-ms")
			b.ReportMetric(ms(diff), "cost-p50-ms")
		})
	}
}

// TestParentEnviron: a child run as nb's user can read nb's environment
// in /proc/<pid>/environ, whatever its own holds, except in a user
// namespace (what docs/security.md says).
func TestParentEnviron(t *testing.T) {
	file := "/proc/" + strconv.Itoa(os.Getpid()) + "/environ"
	for _, m := range mechanisms(t) {
		cmd := command(t, context.Background(), m, `cat `+file+` >/dev/null 2>&1`)
		readable := cmd.Run() == nil
		Reap(cmd)
		if want := m != UserNamespace && m != Bubblewrap; readable != want {
			t.Errorf("%s: the child could read nb's environ: %v, want %v", m, readable, want)
		}
	}
}
