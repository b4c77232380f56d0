//go:build linux

package proc

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// sysCall is what the Linux mechanisms keep per command.
type sysCall struct {
	cgroupDir string   // Cgroup: the call's cgroup folder
	cgroupFD  *os.File // Cgroup: the folder, open for clone3
	marker    string   // Sweep: MarkerName's value
	since     uint64   // Sweep: clock ticks since boot at Setup, less a second
}

// Detect returns the mechanism Auto uses on this system, probed once per
// process: Cgroup when nb may create a cgroup v2 with cgroup.kill beside
// its own (nothing escapes, and the command keeps the usual signal
// semantics), PIDNamespace when nb may create a pid namespace (root),
// UserNamespace when an unprivileged user namespace may hold one,
// Bubblewrap when bwrap is installed and may, else Sweep. The cgroup
// comes first because a command that is the init of a pid namespace
// cannot be killed by signals it does not handle, its own included: a
// shell's `kill $$` would do nothing.
func Detect() Mechanism { return detected() }

var detected = sync.OnceValue(func() Mechanism {
	for _, m := range []Mechanism{Cgroup, PIDNamespace, UserNamespace, Bubblewrap, Sweep} {
		if Available(m) == nil {
			return m
		}
	}
	return ProcessGroup
})

// Available returns nil when this system provides m, else why not. The
// answer is probed once per process.
func Available(m Mechanism) error {
	switch m {
	case Auto, ProcessGroup:
		return nil
	case Sweep:
		return sweepErr()
	case Cgroup:
		return cgroupErr()
	case Bubblewrap:
		return bwrapErr()
	case UserNamespace:
		return userErr()
	case PIDNamespace:
		return pidErr()
	}
	return fmt.Errorf("proc: unknown mechanism %d", int(m))
}

var (
	pidErr = sync.OnceValue(func() error {
		return probe("a pid namespace", &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID})
	})
	userErr = sync.OnceValue(func() error {
		return probe("a user namespace", userAttr())
	})
	sweepErr = sync.OnceValue(func() error {
		if _, err := os.Stat("/proc/self/stat"); err != nil {
			return fmt.Errorf("proc: the sweep needs /proc: %w", err)
		}
		return nil
	})
	cgroupErr = sync.OnceValue(probeCgroup)
	bwrapErr  = sync.OnceValue(probeBwrap)
)

// bwrapPaths are where bwrap is looked for: nb does not read PATH here,
// and a bwrap found elsewhere would be a program the user did not vet.
var bwrapPaths = []string{"/usr/bin/bwrap", "/bin/bwrap", "/usr/local/bin/bwrap"}

// bwrapPath is the bwrap binary found, or "".
var bwrapPath = sync.OnceValue(func() string {
	for _, p := range bwrapPaths {
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return p
		}
	}
	return ""
})

// bwrapArgs are bwrap's options before the command: the whole file
// system as it is, a new pid namespace with its own /proc, and the
// namespace's end when bwrap's outer process ends.
var bwrapArgs = []string{"--dev-bind", "/", "/", "--proc", "/proc", "--unshare-pid", "--die-with-parent", "--"}

// probeBwrap runs bwrap --version inside the sandbox it would make.
func probeBwrap() error {
	bw := bwrapPath()
	if bw == "" {
		return fmt.Errorf("proc: bubblewrap is not installed (%s)", strings.Join(bwrapPaths, ", "))
	}
	cmd := exec.Command(bw, append(append([]string(nil), bwrapArgs...), bw, "--version")...)
	cmd.Env = []string{}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("proc: bubblewrap cannot make a pid namespace here: %v: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

func userAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER | syscall.CLONE_NEWPID,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: os.Getuid(), HostID: os.Getuid(), Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: os.Getgid(), HostID: os.Getgid(), Size: 1}},
	}
}

// probe starts a program that does not exist with attr: the error says
// whether the clone (and so the namespace or cgroup) was refused or only
// the exec failed, without depending on any program being installed.
func probe(what string, attr *syscall.SysProcAttr) error {
	_, err := syscall.ForkExec("/nonexistent/nb-proc-probe", []string{"nb-proc-probe"}, &syscall.ProcAttr{Env: []string{}, Sys: attr})
	if errors.Is(err, syscall.ENOENT) {
		return nil
	}
	if err == nil {
		err = errors.New("the probe started")
	}
	return fmt.Errorf("proc: cannot create %s: %w", what, err)
}

// namespaceOf tells the namespace mechanism of a command.
func namespaceOf(cmd *exec.Cmd) Mechanism {
	a := cmd.SysProcAttr
	switch {
	case a == nil:
	case len(cmd.Args) > len(bwrapArgs) && cmd.Path == bwrapPath() && cmd.Args[1] == bwrapArgs[0] && cmd.Args[len(bwrapArgs)] == "--":
		return Bubblewrap
	case a.Cloneflags&syscall.CLONE_NEWUSER != 0:
		return UserNamespace
	case a.Cloneflags&syscall.CLONE_NEWPID != 0:
		return PIDNamespace
	}
	return Auto
}

func (c *call) prepare(m Mechanism) error {
	a := c.cmd.SysProcAttr
	switch m {
	case ProcessGroup:
	case PIDNamespace:
		a.Cloneflags |= syscall.CLONE_NEWPID
	case UserNamespace:
		u := userAttr()
		a.Cloneflags |= u.Cloneflags
		a.UidMappings, a.GidMappings, a.GidMappingsEnableSetgroups = u.UidMappings, u.GidMappings, false
	case Bubblewrap:
		bw := bwrapPath()
		if bw == "" {
			return bwrapErr()
		}
		if c.cmd.Err != nil {
			return nil // Start reports it
		}
		args := append([]string{"bwrap"}, bwrapArgs...)
		args = append(args, c.cmd.Path)
		c.cmd.Args = append(args, c.cmd.Args[1:]...)
		c.cmd.Path = bw
	case Cgroup:
		dir, f, err := newCgroup()
		if err != nil {
			return err
		}
		a.UseCgroupFD, a.CgroupFD = true, int(f.Fd())
		c.sys.cgroupDir, c.sys.cgroupFD = dir, f
	case Sweep:
		var b [12]byte
		_, _ = rand.Read(b[:])
		c.sys.marker = hex.EncodeToString(b[:])
		if t := uptimeTicks(); t > ticksPerSecond {
			c.sys.since = t - ticksPerSecond
		}
		// A nil Env means nb's own environment, which this package does
		// not read: such a command goes without the marker.
		if c.cmd.Env != nil {
			c.cmd.Env = append(c.cmd.Env, MarkerName+"="+c.sys.marker)
		}
	default:
		return fmt.Errorf("proc: unknown mechanism %d", int(m))
	}
	return nil
}

// signalRest sends sig to the processes of the call outside its group.
func (c *call) signalRest(sig syscall.Signal) {
	switch c.mech {
	case Cgroup:
		for _, pid := range cgroupPids(c.sys.cgroupDir) {
			_ = syscall.Kill(pid, sig)
		}
	case Sweep:
		for _, pid := range c.sweepFind() {
			_ = syscall.Kill(pid, sig)
		}
	}
}

// killRest kills the processes of the call outside its group.
func (c *call) killRest() {
	switch c.mech {
	case Cgroup:
		_ = os.WriteFile(filepath.Join(c.sys.cgroupDir, "cgroup.kill"), []byte("1"), 0)
	case Sweep:
		c.sweepKill()
	}
}

// reap kills what is left of the call and releases its cgroup.
func (c *call) reap() {
	switch c.mech {
	case Cgroup:
		dir := c.sys.cgroupDir
		_ = os.WriteFile(filepath.Join(dir, "cgroup.kill"), []byte("1"), 0)
		// cgroup.kill returns before the processes are gone; a populated
		// cgroup cannot be removed.
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			if err := syscall.Rmdir(dir); err == nil || errors.Is(err, syscall.ENOENT) {
				break
			}
		}
		c.sys.cgroupFD.Close()
	case Sweep:
		c.sweepKill()
	}
}

// sweepKill kills what the sweep finds until it finds nothing (a process
// may fork while the sweep runs).
func (c *call) sweepKill() {
	for range 20 {
		pids := c.sweepFind()
		if len(pids) == 0 {
			return
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(time.Millisecond)
	}
}

// procInfo is what the sweep reads from /proc/<pid>/stat.
type procInfo struct {
	pid, ppid, pgid, sid int
	zombie               bool
	start                uint64
}

// sweepFind lists the live processes of the call: those in the command's
// group, those carrying the call's marker, then, until nothing changes,
// the children of those found and the members of groups and sessions
// they lead.
func (c *call) sweepFind() []int {
	leader := 0
	if c.cmd.Process != nil {
		leader = c.cmd.Process.Pid
	}
	procs := scanProcs()
	self := os.Getpid()
	found := map[int]bool{}
	needle := []byte("\x00" + MarkerName + "=" + c.sys.marker + "\x00")
	for _, p := range procs {
		switch {
		case p.pid == self || p.pid == 1:
		case leader > 0 && (p.pgid == leader || p.pid == leader):
			found[p.pid] = true
		case c.sys.marker != "" && p.start >= c.sys.since && !p.zombie:
			env, err := os.ReadFile("/proc/" + strconv.Itoa(p.pid) + "/environ")
			if err == nil && bytes.Contains(append([]byte{0}, env...), needle) {
				found[p.pid] = true
			}
		}
	}
	for changed := len(found) > 0; changed; {
		changed = false
		for _, p := range procs {
			if found[p.pid] || p.pid == self || p.pid == 1 {
				continue
			}
			if found[p.ppid] || found[p.pgid] || found[p.sid] {
				found[p.pid] = true
				changed = true
			}
		}
	}
	var out []int
	for _, p := range procs {
		if found[p.pid] && !p.zombie {
			out = append(out, p.pid)
		}
	}
	return out
}

// scanProcs reads every process's stat line.
func scanProcs() []procInfo {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	out := make([]procInfo, 0, len(entries))
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		if p, ok := parseStat(pid, b); ok {
			out = append(out, p)
		}
	}
	return out
}

// parseStat reads state, ppid, pgrp, session and starttime from a stat
// line; the command name may hold spaces and parentheses, so the fields
// are counted from the last ')'.
func parseStat(pid int, b []byte) (procInfo, bool) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procInfo{}, false
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state); starttime is field 22.
	if len(f) < 20 {
		return procInfo{}, false
	}
	p := procInfo{pid: pid, zombie: f[0] == "Z" || f[0] == "X"}
	p.ppid, _ = strconv.Atoi(f[1])
	p.pgid, _ = strconv.Atoi(f[2])
	p.sid, _ = strconv.Atoi(f[3])
	p.start, _ = strconv.ParseUint(f[19], 10, 64)
	return p, true
}

// ticksPerSecond is USER_HZ, the unit of /proc's start times: 100 on
// every architecture Linux supports today.
const ticksPerSecond = 100

// uptimeTicks is the time since boot in clock ticks.
func uptimeTicks() uint64 {
	b, err := os.ReadFile("/proc/uptime")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	s, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return 0
	}
	return uint64(s * ticksPerSecond)
}

// handling reads how process pid handles sig from /proc/<pid>/status.
func handling(pid int, sig syscall.Signal) disposition {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return defaultAction
	}
	bit := uint64(1) << (uint(sig) - 1)
	var cgt, ign uint64
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "SigCgt:"); ok {
			cgt, _ = strconv.ParseUint(strings.TrimSpace(v), 16, 64)
		} else if v, ok := strings.CutPrefix(line, "SigIgn:"); ok {
			ign, _ = strconv.ParseUint(strings.TrimSpace(v), 16, 64)
		}
	}
	switch {
	case cgt&bit != 0:
		return caught
	case ign&bit != 0:
		return ignored
	}
	return defaultAction
}

// cgroupSeq numbers the cgroups of this process.
var cgroupSeq atomic.Int64

// cgroupBase is the cgroup v2 folder of nb itself: the calls' cgroups
// are created inside it.
var cgroupBase = sync.OnceValues(func() (string, error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	rel := ""
	found := false
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "0::"); ok {
			rel, found = v, true
		}
	}
	if !found {
		return "", errors.New("no cgroup v2 hierarchy")
	}
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return "", err
	}
	for line := range strings.SplitSeq(string(mi), "\n") {
		pre, post, ok := strings.Cut(line, " - ")
		if !ok || !strings.HasPrefix(post, "cgroup2 ") {
			continue
		}
		f := strings.Fields(pre)
		if len(f) < 5 {
			continue
		}
		root, mount := f[3], f[4]
		if r, ok := strings.CutPrefix(rel, root); ok || root == "/" {
			if root == "/" {
				r = rel
			}
			return filepath.Join(mount, r), nil
		}
	}
	return "", errors.New("cgroup v2 is not mounted")
})

// newCgroup creates a cgroup for one call and opens it for clone3.
func newCgroup() (string, *os.File, error) {
	base, err := cgroupBase()
	if err != nil {
		return "", nil, fmt.Errorf("proc: cgroup: %w", err)
	}
	dir := filepath.Join(base, fmt.Sprintf("nb-%d-%d", os.Getpid(), cgroupSeq.Add(1)))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return "", nil, fmt.Errorf("proc: cgroup: %w", err)
	}
	f, err := os.Open(dir)
	if err != nil {
		_ = syscall.Rmdir(dir)
		return "", nil, fmt.Errorf("proc: cgroup: %w", err)
	}
	return dir, f, nil
}

func probeCgroup() error {
	dir, f, err := newCgroup()
	if err != nil {
		return err
	}
	defer syscall.Rmdir(dir) //nolint:errcheck // best effort
	defer f.Close()
	if _, err := os.Stat(filepath.Join(dir, "cgroup.kill")); err != nil {
		return fmt.Errorf("proc: cgroup: no cgroup.kill (Linux 5.14 or later): %w", err)
	}
	return probe("a process in a cgroup", &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: int(f.Fd())})
}

// cgroupPids lists the processes of a cgroup.
func cgroupPids(dir string) []int {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return nil
	}
	var out []int
	for _, s := range strings.Fields(string(b)) {
		if pid, err := strconv.Atoi(s); err == nil && pid != os.Getpid() {
			out = append(out, pid)
		}
	}
	return out
}
