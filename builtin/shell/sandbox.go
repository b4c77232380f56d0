package shell

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nbots/nb/builtin/files"
	"github.com/nbots/nb/proc"
)

// The sandbox modes of builtins.exec.sandbox.
const (
	// SandboxAuto runs commands under bubblewrap when it works on this
	// machine, and without it (saying so in the status) when it does not.
	SandboxAuto = "auto"
	// SandboxOn refuses to run commands without bubblewrap.
	SandboxOn = "on"
	// SandboxOff runs commands as they are, with nb's rights.
	SandboxOff = "off"
)

// systemDirs are shown read-only to sandboxed commands when they exist:
// what programs need to run, and nothing of the user's.
var systemDirs = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"}

// systemEtc are the files of /etc a sandboxed command sees (read-only):
// name resolution, certificates, users and groups, the dynamic linker's
// cache, the time zone. Not /etc as a whole: it holds secrets (shadow,
// keys of services).
var systemEtc = []string{
	"/etc/alternatives", "/etc/ssl", "/etc/ca-certificates", "/etc/pki", "/etc/resolv.conf", "/etc/hosts",
	"/etc/nsswitch.conf", "/etc/host.conf", "/etc/gai.conf", "/etc/services", "/etc/protocols",
	"/etc/passwd", "/etc/group", "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d",
	"/etc/localtime", "/etc/timezone", "/etc/mime.types", "/etc/gitconfig", "/etc/os-release",
	"/etc/bash.bashrc", "/etc/inputrc", "/etc/terminfo",
}

// sandbox describes how commands are wrapped.
type sandbox struct {
	bwrap     string // path of bwrap; empty when commands run unwrapped
	workspace string
	network   bool
	home      string // nb's HOME, hidden behind an empty folder
	readOnly  []string
	writable  []string
}

// args returns bwrap's arguments for running argv in the sandbox; extra
// are more options of bwrap's.
func (s *sandbox) args(extra []string, argv ...string) []string {
	a := []string{
		"--die-with-parent", // nothing survives nb
		"--new-session",     // no TIOCSTI into nb's terminal
		"--unshare-all",     // pid (everything dies with the command), net, ipc, uts, cgroup, user when possible
		"--cap-drop", "ALL", // as root, bwrap keeps capabilities unless told
	}
	if s.network {
		a = append(a, "--share-net")
	}
	for _, d := range systemDirs {
		if target, err := os.Readlink(d); err == nil {
			a = append(a, "--symlink", target, d) // merged /usr: /bin -> usr/bin
			continue
		}
		a = append(a, "--ro-bind-try", d, d)
	}
	for _, f := range systemEtc {
		a = append(a, "--ro-bind-try", f, f)
	}
	a = append(a, "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp")
	if s.home != "" && s.home != "/" {
		// An empty home: programs that write there work, nothing of the
		// user's (keys, tokens, histories) is visible.
		a = append(a, "--tmpfs", s.home)
	}
	for _, p := range s.readOnly {
		a = append(a, "--ro-bind-try", p, p)
	}
	for _, p := range s.writable {
		a = append(a, "--bind-try", p, p)
	}
	a = append(a, "--bind", s.workspace, s.workspace, "--chdir", s.workspace)
	a = append(a, extra...)
	return append(append(a, "--"), argv...)
}

// probes caches the outcome of probe by bwrap's arguments: a bot and its
// sub-agents, or a server's many bots, check the sandbox once.
var probes sync.Map // string -> error (nil stored as errOK)

var errOK = errors.New("ok")

// probe runs `true` in the sandbox and reports why it cannot run, if it
// cannot: bwrap missing, or present but refused the namespaces it needs
// (a container without the privileges, a kernel with user namespaces off).
func (s *sandbox) probe(environ []string, shell string) error {
	key := s.bwrap + "\x00" + strings.Join(s.args(nil, shell, "-c", "true"), "\x00")
	if v, ok := probes.Load(key); ok {
		if v == errOK {
			return nil
		}
		return v.(error)
	}
	err := s.run(environ, shell)
	if err == nil {
		probes.Store(key, errOK)
	} else {
		probes.Store(key, err)
	}
	return err
}

func (s *sandbox) run(environ []string, shell string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := proc.Command(ctx, s.bwrap, s.args(nil, shell, "-c", "true")...)
	cmd.Env = append(cmd.Env, proc.Env(environ, nil)...) // keep what proc.Command set (the sweep's marker)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	proc.Reap(cmd)
	if err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = err.Error()
		}
		return fmt.Errorf("bwrap failed: %s", msg)
	}
	return nil
}

// lookPath finds an executable in the PATH of environ (the caller's
// environment, never nb's own), then in fallbacks.
func lookPath(environ []string, name string, fallbacks ...string) string {
	path, _ := proc.Lookup(environ, "PATH")
	for _, dir := range filepath.SplitList(path) {
		if dir == "" || !filepath.IsAbs(dir) {
			continue
		}
		if p := filepath.Join(dir, name); isExecutable(p) {
			return p
		}
	}
	for _, p := range fallbacks {
		if isExecutable(p) {
			return p
		}
	}
	return ""
}

func isExecutable(p string) bool {
	info, err := os.Stat(p)
	return err == nil && info.Mode().IsRegular() && info.Mode().Perm()&0o111 != 0
}

// graceful makes cmd (bwrap, started with --info-fd 3 and info as its
// file 3) stop like any exec command when its context ends: SIGTERM to
// the sandboxed command's process group, SIGKILL to everything Grace
// later. Signalling bwrap itself would kill the sandbox at once: bwrap
// does not pass signals on, and its processes die with it.
type graceful struct {
	pid atomic.Int64 // the sandbox's init, in nb's pid namespace
}

// watch reads the sandbox's init pid from bwrap's --info-fd output.
func (g *graceful) watch(info *os.File) {
	go func() {
		defer info.Close()
		var v struct {
			ChildPid int64 `json:"child-pid"`
		}
		if json.NewDecoder(info).Decode(&v) == nil && v.ChildPid > 0 {
			g.pid.Store(v.ChildPid)
		}
	}()
}

// cancel is cmd.Cancel for a sandboxed command.
func (g *graceful) cancel(cmd *exec.Cmd) func() error {
	return func() error {
		if cmd.Process == nil {
			return nil
		}
		group := cmd.Process.Pid // bwrap leads its own process group
		if init := int(g.pid.Load()); init > 0 {
			// The sandbox's init leads the session and the process group
			// of the command (--new-session): the group gets SIGTERM.
			_ = syscall.Kill(-init, syscall.SIGTERM)
		} else {
			_ = syscall.Kill(-group, syscall.SIGTERM)
		}
		time.AfterFunc(proc.Grace, func() { _ = syscall.Kill(-group, syscall.SIGKILL) })
		return nil
	}
}

// policyArgs are bwrap's options that apply a call's file policy (see
// files.Policy) inside the sandbox, after the workspace is bound: a
// hidden folder is an empty one, a hidden file an empty read-only one,
// the visible files inside a hidden folder are bound back read-only, and
// the read-only paths are bound read-only. A path that does not exist is
// left alone (the gateway creates its folders before the first turn).
func policyArgs(p *files.Policy) []string {
	if p == nil {
		return nil
	}
	var a []string
	for _, h := range p.Hidden {
		// A link is hidden where it leads: bwrap mounts on the target.
		if real, err := filepath.EvalSymlinks(h); err == nil {
			h = real
		}
		fi, err := os.Stat(h)
		switch {
		case err != nil:
		case fi.IsDir():
			a = append(a, "--tmpfs", h)
		default:
			a = append(a, "--ro-bind", "/dev/null", h)
		}
	}
	for _, v := range p.Visible {
		if !anyHidden(v, p.Hidden) {
			continue
		}
		a = append(a, "--ro-bind-try", v, v)
	}
	for _, r := range p.ReadOnly {
		a = append(a, "--ro-bind-try", r, r)
	}
	return a
}

// anyHidden reports whether v lies in one of the hidden folders.
func anyHidden(v string, hidden []string) bool {
	for _, h := range hidden {
		if strings.HasPrefix(v, h+string(os.PathSeparator)) {
			return true
		}
	}
	return false
}
