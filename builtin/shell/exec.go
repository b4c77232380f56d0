// Package shell is the exec built-in tool: it runs `bash -c COMMAND` in
// the workspace, with a time limit, in its own process group (package
// proc: the whole group is stopped with SIGTERM, then SIGKILL, and
// whatever it left behind is killed when the call ends), with an
// allow-listed environment that never holds nb's secrets, and, when the
// machine has it, under bubblewrap: the system read-only, the workspace
// the only writable folder, no network unless allowed. With a remote
// environment (Options.Remote) the commands run on another machine
// instead, with the same limits, output and result.
package shell

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nbots/nb/builtin/environment"
	"github.com/nbots/nb/builtin/files"
	"github.com/nbots/nb/builtin/internal/arg"
	"github.com/nbots/nb/proc"
	"github.com/nbots/nb/tool"
)

const (
	// DefaultTimeout is a command's time limit when the cartridge sets none.
	DefaultTimeout = 60 * time.Second
	// MaxTimeout bounds the timeout a call may ask for.
	MaxTimeout = 600 * time.Second
	// defaultCapture is how many bytes of each stream are kept.
	defaultCapture = 1 << 20
	// drainWait bounds the wait for a stream's last bytes once the
	// command's group is gone (an escaped process may hold the pipe).
	drainWait = time.Second
)

// Options configure the exec tool.
type Options struct {
	// Workspace is the folder commands run in (an absolute path).
	Workspace string
	// Timeout is a command's default time limit (DefaultTimeout if 0).
	Timeout time.Duration
	// Sandbox is SandboxAuto (the default), SandboxOn or SandboxOff.
	Sandbox string
	// Network lets sandboxed commands use the network.
	Network bool
	// Environ is nb's environment (NAME=value entries), given by the
	// caller: commands see its allow-listed part only (proc.Env).
	Environ []string
	// Env names more variables of Environ that commands see.
	Env []string
	// PathAppend is appended to the PATH commands see (a folder, or
	// folders joined by the list separator).
	PathAppend string
	// ReadOnly and Writable are more absolute paths the sandbox shows.
	ReadOnly, Writable []string
	// MaxOutput is how many bytes of each stream are kept (1 MiB if 0).
	MaxOutput int
	// Bwrap is bubblewrap's path; empty looks for bwrap in the PATH of
	// Environ, then at /usr/bin/bwrap.
	Bwrap string
	// RequireSandbox makes SandboxAuto refuse commands where bubblewrap
	// cannot run, as SandboxOn does: servers (nb serve, the gateway) fail
	// closed unless their operator allows unsandboxed commands.
	RequireSandbox bool
	// RequireAdvice says how the operator lets commands run unsandboxed
	// where RequireSandbox refuses them, in the words of the command
	// that runs the server ("start the server with a flag"); empty: a
	// neutral text.
	RequireAdvice string
	// Notice, when set, is told once, at the first command run without a
	// sandbox, that it runs unsandboxed and why.
	Notice func(msg string)
	// Remote, when set, runs the commands on another machine (package
	// remote): Workspace is then a path there, and the sandbox settings
	// do not apply (New refuses SandboxOn).
	Remote environment.Runner
}

// Status says how commands will run, for `nb CART - cartridge`.
type Status struct {
	// Mode is the configured sandbox mode.
	Mode string
	// Sandboxed is true when commands run under bubblewrap.
	Sandboxed bool
	// Network is true when sandboxed commands may use the network.
	Network bool
	// Refused is true when commands are refused (sandbox: on without a
	// working bubblewrap).
	Refused bool
	// Reason says why bubblewrap is not used, when it is not.
	Reason string
	// Required is true when a server refused sandbox: auto without
	// bubblewrap (Options.RequireSandbox).
	Required bool
	// Advice is Options.RequireAdvice, said when Required.
	Advice string
	// Remote says where commands run when they run on another machine
	// (environment.Runner.Where); empty for this machine.
	Remote string
}

func (s Status) String() string {
	switch {
	case s.Remote != "":
		return "runs commands " + s.Remote + " (bubblewrap does not apply there)"
	case s.Sandboxed && s.Network:
		return "sandboxed by bubblewrap: the system read-only, the workspace the only writable folder, network allowed"
	case s.Sandboxed:
		return "sandboxed by bubblewrap: the system read-only, the workspace the only writable folder, no network"
	case s.Refused && s.Required:
		advice := s.Advice
		if advice == "" {
			advice = "have its operator allow unsandboxed commands"
		}
		return "refused: this server runs commands only sandboxed, and bubblewrap cannot run here (" + s.Reason + "): install the Debian package bubblewrap, or " + advice
	case s.Refused:
		return "refused: sandbox is on, but bubblewrap cannot run here (" + s.Reason + "): install the Debian package bubblewrap, or set builtins.exec.sandbox to auto or off"
	case s.Mode == SandboxOff:
		return "NOT sandboxed (sandbox: off): commands run with nb's rights; only the confirmation protects the machine"
	}
	return "NOT sandboxed: bubblewrap cannot run here (" + s.Reason + "); commands run with nb's rights. Install the Debian package bubblewrap, or set builtins.exec.sandbox: off to say this is intended"
}

// Exec is the exec tool.
type Exec struct {
	cfg     Options
	shell   string
	sandbox *sandbox // nil: unwrapped
	// remoteEnv is what Options.Env names of Options.Environ, NAME=value,
	// sent with every remote command (Options.Remote).
	remoteEnv []string
	status    Status
	noticed   sync.Once
	// schema is the tool's Parameters, built at the first Spec (they
	// depend on cfg alone; a spec's Parameters are read-only).
	schemaOnce sync.Once
	schema     map[string]any
}

// New returns the exec tool and how it will run commands. With
// SandboxAuto or SandboxOn it checks, by running `true` under bubblewrap,
// that the sandbox works on this machine.
func New(cfg Options) (*Exec, Status, error) {
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.MaxOutput <= 0 {
		cfg.MaxOutput = defaultCapture
	}
	if cfg.Sandbox == "" {
		cfg.Sandbox = SandboxAuto
	}
	if cfg.Remote != nil {
		if cfg.Sandbox == SandboxOn {
			return nil, Status{}, fmt.Errorf("exec: sandbox is on, but commands run %s, where nb cannot sandbox them: set builtins.exec.sandbox to auto or off", cfg.Remote.Where())
		}
		cfg.Workspace = cfg.Remote.Dir()
		t := &Exec{cfg: cfg, status: Status{Mode: cfg.Sandbox, Remote: cfg.Remote.Where()}}
		for _, name := range cfg.Env {
			if v, ok := proc.Lookup(cfg.Environ, name); ok {
				t.remoteEnv = append(t.remoteEnv, name+"="+v)
			}
		}
		return t, t.status, nil
	}
	if !filepath.IsAbs(cfg.Workspace) {
		return nil, Status{}, fmt.Errorf("exec: the workspace %q is not an absolute path", cfg.Workspace)
	}
	if info, err := os.Stat(cfg.Workspace); err != nil || !info.IsDir() {
		return nil, Status{}, fmt.Errorf("exec: the workspace %s is not a folder", cfg.Workspace)
	}
	t := &Exec{cfg: cfg, status: Status{Mode: cfg.Sandbox}}
	t.shell = lookPath(cfg.Environ, "bash", "/bin/bash", "/usr/bin/bash")
	if t.shell == "" {
		return nil, Status{}, errors.New("exec: bash is not installed (looked in PATH, /bin and /usr/bin)")
	}
	switch cfg.Sandbox {
	case SandboxOff:
	case SandboxAuto, SandboxOn:
		sb := &sandbox{workspace: cfg.Workspace, network: cfg.Network, readOnly: cfg.ReadOnly, writable: cfg.Writable}
		if home, ok := proc.Lookup(cfg.Environ, "HOME"); ok && filepath.IsAbs(home) && !within(home, cfg.Workspace) {
			sb.home = filepath.Clean(home)
		}
		sb.bwrap = cfg.Bwrap
		if sb.bwrap == "" {
			sb.bwrap = lookPath(cfg.Environ, "bwrap", "/usr/bin/bwrap")
		} else if !isExecutable(sb.bwrap) {
			sb.bwrap = ""
		}
		var err error
		if sb.bwrap == "" {
			err = errors.New("bwrap is not installed")
		} else {
			err = sb.probe(cfg.Environ, t.shell)
		}
		if err != nil {
			t.status.Reason = err.Error()
			t.status.Refused = cfg.Sandbox == SandboxOn || cfg.RequireSandbox
			t.status.Required = cfg.Sandbox == SandboxAuto && cfg.RequireSandbox
			t.status.Advice = cfg.RequireAdvice
		} else {
			t.sandbox = sb
			t.status.Sandboxed, t.status.Network = true, cfg.Network
		}
	default:
		return nil, Status{}, fmt.Errorf("exec: unknown sandbox mode %q (auto, on or off)", cfg.Sandbox)
	}
	return t, t.status, nil
}

// within reports whether p is dir or below it.
func within(p, dir string) bool {
	r, err := filepath.Rel(dir, p)
	return err == nil && r != ".." && !strings.HasPrefix(r, "../")
}

// Status says how the tool runs commands.
func (t *Exec) Status() Status { return t.status }

// Where says where the commands run, for a confirmation: "sandboxed by
// bubblewrap, no network" or "NOT sandboxed: with your rights".
func (t *Exec) Where() string {
	switch {
	case t.status.Remote != "":
		return t.status.Remote
	case t.status.Sandboxed && t.status.Network:
		return "sandboxed by bubblewrap, network allowed"
	case t.status.Sandboxed:
		return "sandboxed by bubblewrap, no network"
	case t.status.Refused:
		return "refused: no sandbox"
	case t.status.Mode == SandboxOff:
		return "NOT sandboxed (sandbox: off): with your rights"
	}
	return "NOT sandboxed (bubblewrap cannot run here): with your rights"
}

func (t *Exec) Spec() tool.Spec {
	where := "Commands run sandboxed: the system is read-only, the workspace is the only writable folder, and there is no network."
	switch {
	case t.status.Sandboxed && t.status.Network:
		where = "Commands run sandboxed: the system is read-only and the workspace is the only writable folder; the network is reachable."
	case t.status.Remote != "":
		where = "Commands run " + t.status.Remote + ": be careful."
	case !t.status.Sandboxed:
		where = "Commands run with the user's rights: be careful."
	}
	return tool.Spec{
		Name: "exec",
		Description: "Run a shell command with bash -c in the workspace (" + t.cfg.Workspace + ") and return its output, its errors and its exit code. " +
			where + fmt.Sprintf(" A command is stopped after its timeout (%d s unless set); programs it starts in the background are stopped when it ends. ", int(t.cfg.Timeout/time.Second)) +
			"Standard input is empty: use non-interactive flags.",
		Parameters: t.parameters(),
	}
}

// parameters is the schema, built once.
func (t *Exec) parameters() map[string]any {
	t.schemaOnce.Do(func() {
		t.schema = map[string]any{
			"type": "object",
			"properties": map[string]any{
				"command": map[string]any{"type": "string", "description": "The command, run by bash -c."},
				"timeout": map[string]any{"type": "integer", "minimum": 1, "maximum": int(MaxTimeout / time.Second), "description": fmt.Sprintf("The time limit in seconds (default %d).", int(t.cfg.Timeout/time.Second))},
			},
			"required": []any{"command"},
		}
	})
	return t.schema
}

// OutputLimits: the attractor's shell limits, 30,000 characters and 256 lines.
func (t *Exec) OutputLimits() tool.Limits { return tool.Limits{Chars: 30_000, Lines: 256} }

// Warn returns why a call's command looks dangerous, or "": a front-end
// may show it with the confirmation. It is advice, not a protection.
func (t *Exec) Warn(call tool.Call) string {
	cmd, _ := call.Arguments["command"].(string)
	return Warning(cmd)
}

// Run runs one command.
func (t *Exec) Run(ctx context.Context, call tool.Call) (any, error) {
	command, err := arg.String(call.Arguments, "command", true)
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(command) == "" {
		return nil, errors.New("the command is empty")
	}
	secs, err := arg.Int(call.Arguments, "timeout", int(t.cfg.Timeout/time.Second), 1, int(MaxTimeout/time.Second))
	if err != nil {
		return nil, err
	}
	if t.status.Refused {
		return nil, errors.New("exec is refused: " + strings.TrimPrefix(t.status.String(), "refused: "))
	}
	if !t.status.Sandboxed && t.status.Remote == "" && t.cfg.Notice != nil {
		t.noticed.Do(func() { t.cfg.Notice("exec runs commands " + t.status.String()) })
	}
	if p := files.PolicyFrom(ctx); p != nil && p.RequireSandbox && t.sandbox == nil {
		return nil, errors.New("exec is refused in this chat: commands would run outside the sandbox, where the files the gateway protects cannot be hidden from them (the owner may turn the sandbox on: tools.exec.sandbox)")
	}
	timeout := time.Duration(secs) * time.Second
	if _, set := call.Arguments["timeout"]; !set {
		timeout = t.cfg.Timeout
	}
	// A command may change the files the policy watches (the owner's
	// prompt files) as the file tools do: told the same way.
	defer files.PolicyFrom(ctx).Watch()()
	run := t.run
	if t.cfg.Remote != nil {
		run = t.runRemote
	}
	res, err := run(ctx, command, timeout)
	if err != nil {
		return nil, err
	}
	return res.result(timeout), nil
}

// outcome is what a command did.
type outcome struct {
	stdout, stderr string
	exit           string // the exit code, or the signal that killed it
	timedOut       bool
	elapsed        time.Duration
}

// runRemote runs command with the remote runner, into the same captures
// and live output as a local command.
func (t *Exec) runRemote(ctx context.Context, command string, timeout time.Duration) (*outcome, error) {
	live := tool.LiveOutputFrom(ctx)
	stdout, stderr := newCapture(t.cfg.MaxOutput), newCapture(t.cfg.MaxOutput)
	outLive, errLive := tool.NewLiveWriter(live, "stdout"), tool.NewLiveWriter(live, "stderr")
	start := time.Now()
	exit, err := t.cfg.Remote.Run(ctx, environment.Command{
		Line: command, Timeout: timeout, Grace: proc.Grace, Env: t.remoteEnv, PathAppend: t.cfg.PathAppend,
		Stdout: tee(stdout, outLive), Stderr: tee(stderr, errLive),
	})
	if outLive != nil {
		outLive.Flush()
	}
	if errLive != nil {
		errLive.Flush()
	}
	if ctx.Err() != nil {
		return nil, ctx.Err() // the user stopped the exchange
	}
	if err != nil {
		return nil, fmt.Errorf("exec: %v", err)
	}
	text := fmt.Sprint(exit.Code)
	if exit.Signal != "" {
		text = "killed by signal " + exit.Signal
	}
	return &outcome{stdout: stdout.String(), stderr: stderr.String(), exit: text, timedOut: exit.TimedOut, elapsed: time.Since(start)}, nil
}

// tee writes to the capture and, when there is one, the live output.
func tee(c *capture, live *tool.LiveWriter) io.Writer {
	if live == nil {
		return c
	}
	return io.MultiWriter(c, live)
}

// run runs command and waits for it and its group.
func (t *Exec) run(ctx context.Context, command string, timeout time.Duration) (*outcome, error) {
	runCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	argv := []string{t.shell, "-c", command}
	var extra []string
	if t.cfg.PathAppend != "" {
		path, _ := proc.Lookup(t.cfg.Environ, "PATH")
		extra = append(extra, "PATH="+strings.TrimPrefix(path+string(os.PathListSeparator)+t.cfg.PathAppend, string(os.PathListSeparator)))
	}
	var info *os.File // bwrap's --info-fd, read for the sandbox's pid
	var stop graceful
	if t.sandbox != nil {
		r, w, err := os.Pipe()
		if err != nil {
			return nil, fmt.Errorf("exec: %v", err)
		}
		info = w
		defer w.Close()
		stop.watch(r)
		argv = append([]string{t.sandbox.bwrap}, t.sandbox.args(append([]string{"--info-fd", "3"}, policyArgs(files.PolicyFrom(ctx))...), argv...)...)
		extra = append(extra, "TMPDIR=/tmp")
	}
	var cmd *exec.Cmd
	if info == nil {
		cmd = proc.Command(runCtx, argv[0], argv[1:]...)
		cmd.Env = append(cmd.Env, proc.Env(t.cfg.Environ, t.cfg.Env, extra...)...) // keep what proc.Command set (the sweep's marker)
	} else {
		// bwrap makes the pid namespace itself (--unshare-pid,
		// --die-with-parent): nothing of the command outlives it. A
		// namespace of proc's around it would hide the sandbox's pids,
		// which stop signals by, so the process group is enough here.
		cmd = exec.CommandContext(runCtx, argv[0], argv[1:]...)
		cmd.Env = proc.Env(t.cfg.Environ, t.cfg.Env, extra...)
		if err := proc.SetupOptions(cmd, proc.Options{Mechanism: proc.ProcessGroup}); err != nil {
			return nil, fmt.Errorf("exec: %v", err)
		}
		cmd.ExtraFiles = []*os.File{info}
		cmd.Cancel = stop.cancel(cmd)
	}
	cmd.Dir = t.cfg.Workspace

	stdout, stderr := newCapture(t.cfg.MaxOutput), newCapture(t.cfg.MaxOutput)
	drained, err := pipeOutput(cmd, stdout, stderr, tool.LiveOutputFrom(ctx))
	if err != nil {
		return nil, fmt.Errorf("exec: %v", err)
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		drained.abort()
		return nil, fmt.Errorf("exec: cannot start %s: %v", argv[0], err)
	}
	drained.started()
	if info != nil {
		info.Close() // bwrap has its own copy
	}
	waitErr := cmd.Wait()
	elapsed := time.Since(start)
	if runCtx.Err() != nil {
		// The group got SIGTERM with its leader: give the rest of it the
		// same grace before the SIGKILL of Reap.
		waitGroupGone(cmd.Process.Pid, proc.Grace)
	}
	// Whatever the command left running in its group dies with the call.
	proc.Reap(cmd)
	drained.wait(drainWait)

	out := &outcome{stdout: stdout.String(), stderr: stderr.String(), exit: exitText(cmd.ProcessState), elapsed: elapsed}
	if ctx.Err() != nil {
		return nil, ctx.Err() // the user stopped the exchange
	}
	if runCtx.Err() == context.DeadlineExceeded {
		out.timedOut = true
	} else if waitErr != nil && cmd.ProcessState == nil {
		return nil, fmt.Errorf("exec: %v", waitErr)
	}
	return out, nil
}

// result formats an outcome as nanobot does: the output, the errors
// under "STDERR:", then the exit code; a timeout is an error result that
// keeps the partial output.
func (o *outcome) result(timeout time.Duration) any {
	var parts []string
	if s := strings.TrimRight(o.stdout, "\n"); s != "" {
		parts = append(parts, s)
	}
	if s := strings.TrimRight(o.stderr, "\n"); strings.TrimSpace(s) != "" {
		parts = append(parts, "STDERR:\n"+s)
	}
	if len(parts) == 0 {
		parts = append(parts, "(no output)")
	}
	if o.timedOut {
		parts = append(parts, fmt.Sprintf("[ERROR: the command timed out after %d seconds: it and everything it started were stopped (SIGTERM, then SIGKILL). The output above is partial. Retry with a larger timeout (at most %d) or a quicker command.]",
			int(timeout/time.Second), int(MaxTimeout/time.Second)))
		return &tool.Result{Text: strings.Join(parts, "\n"), IsError: true}
	}
	parts = append(parts, "Exit code: "+o.exit)
	return strings.Join(parts, "\n")
}

// waitGroupGone waits until the process group pgid is empty, at most d.
func waitGroupGone(pgid int, d time.Duration) {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if err := syscall.Kill(-pgid, 0); errors.Is(err, syscall.ESRCH) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// exitText is the exit code, or the signal that killed the command.
func exitText(state *os.ProcessState) string {
	if state == nil {
		return "unknown"
	}
	if ws, ok := state.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return fmt.Sprintf("killed by signal %d (%s)", int(ws.Signal()), ws.Signal())
	}
	return fmt.Sprint(state.ExitCode())
}

// drain copies a command's output pipes into captures, and as it comes
// to the exchange's live output (tool.LiveOutputFrom) when it has one,
// so a front-end shows a long command's progress. The pipes are
// os.Pipe files handed to the command, so Wait does not wait for them:
// a background process that keeps them open cannot hold the call; the
// reading ends after the group is reaped, or after a grace period.
type drain struct {
	readers, writers []*os.File
	wg               sync.WaitGroup
}

func pipeOutput(cmd *exec.Cmd, stdout, stderr *capture, live tool.LiveOutput) (*drain, error) {
	d := &drain{}
	for i, sink := range []*capture{stdout, stderr} {
		shown := tool.NewLiveWriter(live, [2]string{"stdout", "stderr"}[i])
		r, w, err := os.Pipe()
		if err != nil {
			d.abort()
			return nil, err
		}
		d.readers = append(d.readers, r)
		d.writers = append(d.writers, w)
		d.wg.Add(1)
		go func() {
			defer d.wg.Done()
			defer shown.Flush()
			buf := make([]byte, 32<<10)
			for {
				n, err := r.Read(buf)
				if n > 0 {
					sink.Write(buf[:n])
					if shown != nil {
						shown.Write(buf[:n])
					}
				}
				if err != nil {
					return
				}
			}
		}()
	}
	cmd.Stdout, cmd.Stderr = d.writers[0], d.writers[1]
	return d, nil
}

// started closes nb's copies of the writing ends: the command has its own.
func (d *drain) started() {
	for _, w := range d.writers {
		w.Close()
	}
}

// wait waits for the readers to see the end of the output, at most grace;
// then it closes the reading ends, which ends them.
func (d *drain) wait(grace time.Duration) {
	done := make(chan struct{})
	go func() { d.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(grace):
	}
	for _, r := range d.readers {
		r.Close()
	}
	<-done
}

func (d *drain) abort() {
	for _, w := range d.writers {
		w.Close()
	}
	for _, r := range d.readers {
		r.Close()
	}
	d.wg.Wait()
}
