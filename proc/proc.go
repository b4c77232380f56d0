// Package proc starts the programs nb runs on a user's behalf: the
// children of unsandboxed functions, robopages run on the host, MCP stdio
// servers and the exec built-in. Every child gets the same treatment: an
// allow-listed environment (never nb's secrets), its own process group,
// and, when its call ends, no process it started survives it, not even
// one that left the group with setsid or a double fork.
//
// How the last point is made depends on the system (see Mechanism and
// Detect): on Linux a new pid namespace when nb may create one (as root,
// or unprivileged through a user namespace), else through bubblewrap,
// else a cgroup of its own, else a sweep of /proc; elsewhere the process
// group only. docs/security.md says what each one costs and changes.
package proc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// BaseNames are the variables every child inherits from nb's environment
// (LC_* too): what programs need to run, and no secrets. Anything else a
// child should see is named explicitly by the cartridge or the page.
var BaseNames = []string{"PATH", "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "TERM", "TZ", "TMPDIR", "SHELL"}

// EngineNames are the variables a container engine (docker, podman)
// reads to find and reach its daemon. Pass them (as Env's names) only to
// the engine's own process: the programs in the container never see nb's
// environment anyway, and programs on the host have no use for them.
var EngineNames = []string{
	"DOCKER_HOST", "DOCKER_CONTEXT", "DOCKER_CONFIG", "DOCKER_CERT_PATH", "DOCKER_TLS_VERIFY", "DOCKER_API_VERSION",
	"CONTAINER_HOST", "CONTAINER_CONNECTION", "CONTAINER_SSHKEY", "CONTAINERS_CONF", "CONTAINERS_STORAGE_CONF",
	"CONTAINERS_REGISTRIES_CONF", "REGISTRY_AUTH_FILE", "XDG_RUNTIME_DIR", "XDG_CONFIG_HOME", "XDG_DATA_HOME",
}

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

// Grace is how long a call's processes have between SIGTERM and SIGKILL
// when its context ends (Options.Grace changes it per command).
const Grace = 2 * time.Second

// Mechanism is how no process of a call outlives it.
type Mechanism int

const (
	// Auto is the best mechanism this system allows; see Detect.
	Auto Mechanism = iota
	// ProcessGroup kills the command's process group only: a process
	// that moved to another group or session (setsid, a daemon's double
	// fork) survives. It is what remains where /proc is missing (macOS,
	// the BSDs).
	ProcessGroup
	// Sweep kills the process group, then scans /proc for what the call
	// left elsewhere: processes in a group or session led by one of its
	// processes, their descendants, and processes whose environment holds
	// the call's MarkerName variable (Setup adds it to cmd.Env). A
	// process that leaves the group, drops the variable and is orphaned
	// before the scan escapes. Linux only.
	Sweep
	// Cgroup starts the command in a cgroup v2 of its own (nb-<pid>-<n>
	// beside nb's own) and ends the call with cgroup.kill: nothing
	// escapes. Linux 5.14 or later, with a cgroup nb may create (root, or
	// a delegated subtree such as a systemd user service).
	Cgroup
	// Bubblewrap runs the command through bwrap (/usr/bin/bwrap, Debian's
	// bubblewrap) in a new pid namespace with its own /proc, for systems
	// that let bwrap create namespaces but not nb (Ubuntu 24.04 restricts
	// unprivileged user namespaces to programs such as bwrap). bwrap is
	// the namespace's init and the command is pid 2, so signals reach it
	// as usual, but a command killed by a signal shows as exit status
	// 128+n, bwrap's. Each call costs bwrap's set-up (mounts), tens of
	// milliseconds.
	Bubblewrap
	// UserNamespace is PIDNamespace for a user without privileges: the
	// command also gets a user namespace that maps only the user's own
	// uid and gid. Inside it, files of other users show as owned by
	// nobody and setuid programs (sudo) do not work.
	UserNamespace
	// PIDNamespace starts the command as the first process (pid 1) of a
	// new pid namespace: when it exits the kernel kills every process
	// left in the namespace, whatever group or session it moved to.
	// Needs CAP_SYS_ADMIN (root). See Signal for what being pid 1 changes.
	PIDNamespace
)

// String is the mechanism's name in messages and documentation.
func (m Mechanism) String() string {
	switch m {
	case Auto:
		return "auto"
	case ProcessGroup:
		return "process group"
	case Sweep:
		return "sweep"
	case Cgroup:
		return "cgroup"
	case Bubblewrap:
		return "bubblewrap"
	case UserNamespace:
		return "user and pid namespace"
	case PIDNamespace:
		return "pid namespace"
	}
	return fmt.Sprintf("mechanism(%d)", int(m))
}

// MarkerName is the variable Setup adds to a command's environment when
// the Sweep mechanism is used: its value is unique to the call, and the
// sweep kills the processes that still carry it.
const MarkerName = "NB_PROC_CALL"

// Options changes how SetupOptions treats a command.
type Options struct {
	// Mechanism forces a mechanism; Auto (the zero value) is Detect().
	Mechanism Mechanism
	// Grace is the time between SIGTERM and SIGKILL when the command's
	// context ends; 0 is Grace.
	Grace time.Duration
}

// Command returns a command that runs name under Setup: its own process
// group, the Auto mechanism, SIGTERM when ctx ends and SIGKILL after
// Grace; Wait returns at most Grace after that even if a grandchild holds
// the output pipes open. Call Reap after Wait. The environment is empty
// until the caller sets Env (use Env): a child never inherits nb's
// environment by accident. With the Sweep mechanism, keep the marker
// Setup puts in Env: append to cmd.Env instead of replacing it.
func Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = []string{}
	Setup(cmd)
	return cmd
}

// Setup prepares an already built command (from exec.CommandContext) as
// Command does, with the Auto mechanism. Call it after setting cmd.Env
// and before Start; call Reap after Wait, and also when Start fails (a
// cgroup is made here, before Start).
func Setup(cmd *exec.Cmd) {
	if err := SetupOptions(cmd, Options{}); err != nil {
		// Auto falls back by itself; only a broken system gets here.
		_ = SetupOptions(cmd, Options{Mechanism: ProcessGroup})
	}
}

// SetupOptions prepares cmd like Setup with a chosen mechanism and
// grace period. A mechanism this system cannot provide is an error (see
// Available); Auto never fails: it falls back to the next mechanism when
// the detected one cannot be prepared for this command.
func SetupOptions(cmd *exec.Cmd, opts Options) error {
	m := opts.Mechanism
	if m == Auto {
		m = Detect()
	} else if err := Available(m); err != nil {
		return err
	}
	c := &call{cmd: cmd, grace: opts.Grace}
	if c.grace <= 0 {
		c.grace = Grace
	}
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	for {
		err := c.prepare(m)
		if err == nil {
			break
		}
		if opts.Mechanism != Auto || m <= ProcessGroup {
			return err
		}
		// The next mechanism down that this system provides.
		for m--; m > ProcessGroup && Available(m) != nil; m-- {
		}
	}
	c.mech = m
	if c.needsReap() {
		calls.Store(cmd, c)
	}
	cmd.Cancel = func() error {
		if cmd.Process == nil {
			return nil
		}
		c.terminate()
		return nil
	}
	cmd.WaitDelay = c.grace + 500*time.Millisecond
	return nil
}

// MechanismOf returns the mechanism Setup chose for cmd: Auto when cmd
// was not set up by this package.
func MechanismOf(cmd *exec.Cmd) Mechanism {
	if v, ok := calls.Load(cmd); ok {
		return v.(*call).mech
	}
	if a := cmd.SysProcAttr; a != nil && cmd.Cancel != nil {
		if m := namespaceOf(cmd); m != Auto {
			return m
		}
		if a.Setpgid {
			return ProcessGroup
		}
	}
	return Auto
}

// calls holds the commands whose mechanism needs Reap (Cgroup, Sweep)
// until Reap releases them.
var calls sync.Map // *exec.Cmd -> *call

// call is one command set up by SetupOptions.
type call struct {
	cmd   *exec.Cmd
	mech  Mechanism
	grace time.Duration
	sys   sysCall // what the mechanism needs (a cgroup, a marker)
}

func (c *call) needsReap() bool { return c.mech == Cgroup || c.mech == Sweep }

// terminate is the command's Cancel: SIGTERM to every process of the
// call, SIGKILL to all after the grace period.
func (c *call) terminate() {
	p := c.cmd.Process
	if c.mech == PIDNamespace || c.mech == UserNamespace {
		// pid 1 of a namespace gets only the signals it handles: one
		// that would have ended it gets SIGKILL instead (which ends the
		// namespace with it).
		if handling(p.Pid, syscall.SIGTERM) == defaultAction {
			_ = p.Kill()
			return
		}
	}
	c.signalAll(syscall.SIGTERM)
	time.AfterFunc(c.grace, func() {
		if errors.Is(p.Signal(syscall.Signal(0)), os.ErrProcessDone) {
			return // Wait is over; Reap deals with what is left
		}
		c.killAll()
	})
}

// signalAll sends sig to the command's process group, and to the rest of
// the call where the mechanism knows it.
func (c *call) signalAll(sig syscall.Signal) {
	pid := c.cmd.Process.Pid
	_ = syscall.Kill(-pid, sig)
	c.signalRest(sig)
}

// killAll kills every process of the call.
func (c *call) killAll() {
	switch c.mech {
	case PIDNamespace, UserNamespace:
		_ = c.cmd.Process.Kill()
	default:
		_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
		c.killRest()
	}
}

// Reap kills whatever the command left behind once Wait has returned
// (background grandchildren, processes that left its group) and releases
// what Setup took (a cgroup). With a pid namespace the kernel has already
// done it. Reap is safe to call more than once, and for a command that
// never started.
func Reap(cmd *exec.Cmd) {
	v, ok := calls.LoadAndDelete(cmd)
	if !ok {
		switch MechanismOf(cmd) {
		case PIDNamespace, UserNamespace:
			return
		}
		if cmd.Process != nil && cmd.Process.Pid > 0 {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
		return
	}
	c := v.(*call)
	if cmd.Process != nil && cmd.Process.Pid > 0 {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	c.reap()
}

// Signal sends sig to the command's process group (and, with Cgroup and
// Sweep, to the rest of the call). Use it rather than cmd.Process.Signal:
// under PIDNamespace and UserNamespace the command is the init of its
// namespace, and the kernel delivers to it only the signals it handles.
// Signal then replaces a signal whose default action would have ended
// the command by SIGKILL, which ends it and everything it started.
func Signal(cmd *exec.Cmd, sig syscall.Signal) error {
	if cmd.Process == nil {
		return errors.New("proc: the command has not started")
	}
	if err := cmd.Process.Signal(syscall.Signal(0)); err != nil {
		return err
	}
	c := &call{cmd: cmd, mech: MechanismOf(cmd)}
	if v, ok := calls.Load(cmd); ok {
		c = v.(*call)
	}
	if (c.mech == PIDNamespace || c.mech == UserNamespace) && terminates(sig) && handling(cmd.Process.Pid, sig) == defaultAction {
		return cmd.Process.Kill()
	}
	c.signalAll(sig)
	return nil
}

// terminates reports whether sig's default action ends a process.
func terminates(sig syscall.Signal) bool {
	switch sig {
	case 0, syscall.SIGCHLD, syscall.SIGCONT, syscall.SIGURG, syscall.SIGWINCH,
		syscall.SIGSTOP, syscall.SIGTSTP, syscall.SIGTTIN, syscall.SIGTTOU:
		return false
	}
	return true
}

// disposition is what a process does with a signal.
type disposition int

const (
	defaultAction disposition = iota
	caught
	ignored
)
