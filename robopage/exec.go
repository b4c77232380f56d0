package robopage

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/nbots/nb/proc"
)

// Defaults of an Executor's limits.
const (
	DefaultTimeout   = 10 * time.Minute
	DefaultMaxOutput = 1 << 20
	DefaultKillGrace = 2 * time.Second
)

// ContainerRuntimeVar names the variable that chooses the container
// engine of the pages' containers, as the robopages CLI reads it.
const ContainerRuntimeVar = "ROBOPAGES_CONTAINER_RUNTIME"

// NewExecutor returns the default executor of a process whose
// environment is environ: its functions see environ, and the container
// engine is $ROBOPAGES_CONTAINER_RUNTIME (docker or podman when unset).
func NewExecutor(environ []string) *Executor {
	engine, _ := proc.Lookup(environ, ContainerRuntimeVar)
	return &Executor{Environ: environ, Engine: engine}
}

// Executor runs functions: it interpolates the arguments, chooses the host
// or a container, and runs the command with a timeout, an output cap and a
// bound on concurrent runs. The zero value is ready to use; an Executor
// must not be copied after first use.
type Executor struct {
	// Timeout bounds one run; 0 is DefaultTimeout, negative is none. On
	// timeout every process of the call gets SIGTERM, then SIGKILL after
	// KillGrace (a command without a SIGTERM handler that runs as the
	// init of a pid namespace gets SIGKILL at once; see package proc).
	Timeout time.Duration
	// KillGrace is the time between SIGTERM and SIGKILL; 0 is DefaultKillGrace.
	KillGrace time.Duration
	// MaxOutput caps the bytes kept from each of stdout and stderr; 0 is
	// DefaultMaxOutput, negative is no cap. The rest is read and dropped.
	MaxOutput int
	// Workers bounds the runs in progress; 0 is the number of CPUs.
	Workers int
	// Environ is nb's environment (NAME=value, as os.Environ gives): the
	// PATH programs and the container engine are looked up in, and what
	// ${env.NAME} reads. Children never get it whole: a program on the
	// host gets proc.Env (PATH, HOME, USER, the locale, TERM, TZ, TMPDIR,
	// SHELL), the variables its page reads with ${env.NAME} and those of
	// Names; the container engine gets proc.Env and proc.EngineNames.
	// Empty means no variables at all (and no PATH).
	Environ []string
	// Names are variables of Environ passed to every function explicitly:
	// in the environment of a program on the host, through the env file
	// of a container.
	Names []string
	// Engine is the container engine (a name or a path); empty is docker,
	// else podman, found on PATH. (NewExecutor takes it from
	// $ROBOPAGES_CONTAINER_RUNTIME.)
	Engine string
	// Dir is the children's working folder; empty is the current one.
	Dir string
	// GOOS chooses among `platforms`; empty is this system's (macos for darwin).
	GOOS string
	// Mechanism is how nothing a call started survives it (see package
	// proc); the zero value is the best this system allows.
	Mechanism proc.Mechanism

	once   sync.Once
	sem    chan struct{}
	path   string
	imgMu  sync.Mutex
	images map[string]bool
	engMu  sync.Mutex
	engErr error     // the engine's last failure to answer
	engAt  time.Time // when engErr was found
	engOK  bool      // the engine answered once
}

func (e *Executor) init() {
	e.once.Do(func() {
		n := e.Workers
		if n <= 0 {
			n = runtime.NumCPU()
		}
		e.sem = make(chan struct{}, n)
		e.path, _ = proc.Lookup(e.Environ, "PATH")
		e.images = map[string]bool{}
	})
}

func (e *Executor) goos() string {
	if e.GOOS != "" {
		return e.GOOS
	}
	return OS(runtime.GOOS)
}

// LookPath finds a program in the PATH of the executor's environment.
func (e *Executor) LookPath(program string) (string, bool) {
	e.init()
	return lookPath(program, e.path)
}

func lookPath(program, path string) (string, bool) {
	if program == "" {
		return "", false
	}
	if strings.Contains(program, "/") {
		if isExecutable(program) {
			abs, err := filepath.Abs(program)
			if err != nil {
				return program, true
			}
			return abs, true
		}
		return "", false
	}
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, program)
		if isExecutable(p) {
			if abs, err := filepath.Abs(p); err == nil {
				return abs, true
			}
			return p, true
		}
	}
	return "", false
}

func isExecutable(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir() && st.Mode()&0o111 != 0
}

// engine finds the container engine.
func (e *Executor) engine() (string, error) {
	e.init()
	names := []string{"docker", "podman"}
	if e.Engine != "" {
		names = []string{e.Engine}
	}
	for _, n := range names {
		if p, ok := lookPath(n, e.path); ok {
			return p, nil
		}
	}
	return "", fmt.Errorf("docker executable not found: %s not on PATH; install docker or podman to run this function in a container", strings.Join(names, " or "))
}

// Plan is a call checked and interpolated, ready to run.
type Plan struct {
	// Function is the function called.
	Function *Function
	// Args is the interpolated command line with every `sudo` removed;
	// Args[0] is the program as the page names it.
	Args []string
	// Env holds the variables read through ${env.NAME}; the child gets them.
	Env map[string]string
	// Sudo is true when the page asked for sudo: the command then runs in
	// its container, never with sudo on the host.
	Sudo bool
	// HostPath is the program's absolute path on the host; empty when it
	// is not on PATH.
	HostPath string
	// Container is true when the command runs in the function's container.
	Container bool
	// Engine is the container engine's path when Container is true.
	Engine string
}

// Prepare checks a call's arguments and builds its command line: missing
// required and undeclared arguments are errors, placeholders are
// replaced, `sudo` is removed, and the host or a container is chosen (a
// container when the program is not on PATH, the page forces it, or sudo
// is asked for). The messages are those of the reference.
func (e *Executor) Prepare(f *Function, args map[string]string) (*Plan, error) {
	e.init()
	for _, p := range f.Parameters {
		if _, ok := args[p.Name]; !ok && p.Required {
			return nil, fmt.Errorf("missing required argument %s for function %s", p.Name, f.Name)
		}
	}
	names := make([]string, 0, len(args))
	for k := range args {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if f.Parameter(k) == nil {
			return nil, fmt.Errorf("unknown argument %s for function %s", k, f.Name)
		}
	}
	cmdline, ok := f.CommandLine(e.goos())
	if !ok {
		return nil, fmt.Errorf("no command line for platform %s", e.goos())
	}
	scope := &Scope{Args: args, LookupEnv: e.lookupEnv, Check: checkValue(f)}
	for _, p := range f.Parameters {
		if p.Default != nil {
			if scope.Defaults == nil {
				scope.Defaults = map[string]string{}
			}
			scope.Defaults[p.Name] = *p.Default
		}
	}
	plan := &Plan{Function: f}
	for _, elem := range cmdline {
		v, err := scope.Interpolate(elem)
		if err != nil {
			return nil, err
		}
		if v == "sudo" {
			plan.Sudo = true
			continue
		}
		plan.Args = append(plan.Args, v)
	}
	plan.Env = scope.Env
	if len(plan.Args) == 0 || plan.Args[0] == "" {
		return nil, errors.New("empty command line")
	}
	plan.HostPath, _ = lookPath(plan.Args[0], e.path)
	c := f.Container
	if plan.Sudo || plan.HostPath == "" || (c != nil && c.Force) {
		if c == nil {
			return nil, fmt.Errorf("container required for function %s", f.Name)
		}
		eng, err := e.engine()
		if err != nil {
			return nil, err
		}
		plan.Container, plan.Engine = true, eng
	}
	return plan, nil
}

// ContainerArgs is the `docker run` command line of a plan that runs in a
// container, as the reference builds it:
//
//	<engine> run --rm [--env-file=<envFile>] [-v<volume>]... [<args>]... <image> [<program>] <arguments>...
//
// The program is kept only with preserve_app (as the page names it, not
// the host's path: the host's path means nothing in the image).
func (p *Plan) ContainerArgs(envFile string) []string {
	c := p.Function.Container
	argv := []string{p.Engine, "run", "--rm"}
	if envFile != "" {
		argv = append(argv, "--env-file="+envFile)
	}
	for _, v := range c.Volumes {
		argv = append(argv, "-v"+v)
	}
	argv = append(argv, c.Args...)
	argv = append(argv, c.ImageName())
	if c.PreserveApp {
		argv = append(argv, p.Args[0])
	}
	return append(argv, p.Args[1:]...)
}

// String is the command line as a person reads it: "sudo " when asked
// for, then the arguments separated by spaces; a container run is shown
// as its docker command line.
func (p *Plan) String() string {
	if p.Container {
		envFile := ""
		if len(p.Env) > 0 {
			envFile = "<env file>"
		}
		return strings.Join(p.ContainerArgs(envFile), " ")
	}
	s := strings.Join(p.Args, " ")
	if p.Sudo {
		s = "sudo " + s
	}
	return s
}

// Call prepares and runs a call; see Prepare and Run.
func (e *Executor) Call(ctx context.Context, f *Function, args map[string]string) (string, error) {
	plan, err := e.Prepare(f, args)
	if err != nil {
		return "", err
	}
	return e.Run(ctx, plan)
}

// lookupEnv reads a variable of Environ, for ${env.NAME}.
func (e *Executor) lookupEnv(name string) (string, bool) { return proc.Lookup(e.Environ, name) }

// childVars are the variables a plan's program gets beyond proc.Env's
// base: those its page read with ${env.NAME} and those of Names.
func (e *Executor) childVars(plan *Plan) map[string]string {
	vars := map[string]string{}
	for _, n := range e.Names {
		if v, ok := e.lookupEnv(n); ok {
			vars[n] = v
		}
	}
	for k, v := range plan.Env {
		vars[k] = v
	}
	return vars
}

// hostEnv is the environment of a program run on the host.
func (e *Executor) hostEnv(vars map[string]string) []string {
	extra := make([]string, 0, len(vars))
	for _, k := range sortedNames(vars) {
		extra = append(extra, k+"="+vars[k])
	}
	return proc.Env(e.Environ, nil, extra...)
}

// engineEnv is the environment of the container engine's process.
func (e *Executor) engineEnv() []string { return proc.Env(e.Environ, proc.EngineNames) }

// Run executes a plan and returns its content, the reference's layout of
// parts joined by newlines, each only when present: "EXIT CODE: <status>"
// when the command failed, stdout, stderr (prefixed "ERROR: " when the
// command failed). A note follows when the output was cut or the command
// timed out. A failing command is not an error; an error means the
// command could not be run (no image, no engine, no program).
func (e *Executor) Run(ctx context.Context, plan *Plan) (string, error) {
	e.init()
	select {
	case e.sem <- struct{}{}:
	case <-ctx.Done():
		return "", ctx.Err()
	}
	defer func() { <-e.sem }()

	vars := e.childVars(plan)
	if !plan.Container {
		return e.run(ctx, append([]string{plan.HostPath}, plan.Args[1:]...), e.hostEnv(vars))
	}
	if err := e.ensureImage(ctx, plan.Engine, plan.Function.Container); err != nil {
		return "", err
	}
	envFile := ""
	if len(vars) > 0 {
		f, err := writeEnvFile(vars)
		if err != nil {
			return "", err
		}
		defer os.Remove(f)
		envFile = f
	}
	return e.run(ctx, plan.ContainerArgs(envFile), e.engineEnv())
}

func sortedNames(vars map[string]string) []string {
	names := make([]string, 0, len(vars))
	for k := range vars {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}

// writeEnvFile writes KEY=value lines for `docker run --env-file`; the
// caller removes the file.
func writeEnvFile(vars map[string]string) (string, error) {
	f, err := os.CreateTemp("", "nb-robopage-*.env")
	if err != nil {
		return "", fmt.Errorf("write the container's environment file: %w", err)
	}
	var b strings.Builder
	for _, k := range sortedNames(vars) {
		// An env file has one variable per line: a newline would start another.
		v := strings.NewReplacer("\r", " ", "\n", " ").Replace(vars[k])
		b.WriteString(k + "=" + v + "\n")
	}
	_, err = f.WriteString(b.String())
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return "", fmt.Errorf("write the container's environment file: %w", err)
	}
	return f.Name(), nil
}

// run executes argv with the limits and formats its content.
func (e *Executor) run(ctx context.Context, argv []string, env []string) (string, error) {
	timeout := e.Timeout
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	grace := e.KillGrace
	if grace <= 0 {
		grace = DefaultKillGrace
	}
	maxOut := e.MaxOutput
	if maxOut == 0 {
		maxOut = DefaultMaxOutput
	}
	runCtx := ctx
	if timeout > 0 {
		var cancel context.CancelFunc
		runCtx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	cmd := exec.CommandContext(runCtx, argv[0], argv[1:]...)
	cmd.Env = env
	cmd.Dir = e.Dir
	stdout, stderr := &capped{max: maxOut}, &capped{max: maxOut}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := proc.SetupOptions(cmd, proc.Options{Mechanism: e.Mechanism, Grace: grace}); err != nil {
		return "", err
	}
	// Leave nothing of the call behind: background children of the
	// command would otherwise outlive it.
	defer proc.Reap(cmd)
	if err := cmd.Start(); err != nil {
		return "", spawnError(err)
	}
	err := cmd.Wait()
	if cmd.ProcessState == nil {
		return "", spawnError(err)
	}
	var notes []string
	if runCtx.Err() == context.DeadlineExceeded && ctx.Err() == nil {
		notes = append(notes, fmt.Sprintf("nb: timed out after %s: the command and everything it started were stopped", timeout))
	}
	for _, s := range []struct {
		name string
		c    *capped
	}{{"stdout", stdout}, {"stderr", stderr}} {
		if s.c.total > int64(len(s.c.buf)) {
			notes = append(notes, fmt.Sprintf("nb: %s cut to its first %d bytes of %d", s.name, len(s.c.buf), s.c.total))
		}
	}
	return content(cmd.ProcessState, stdout.String(), stderr.String(), notes), nil
}

// content lays out a command's result as the reference does.
func content(state *os.ProcessState, stdout, stderr string, notes []string) string {
	var parts []string
	failed := !state.Success()
	if failed {
		parts = append(parts, "EXIT CODE: "+exitText(state))
	}
	if stdout != "" {
		parts = append(parts, stdout)
	}
	if stderr != "" {
		if failed {
			stderr = "ERROR: " + stderr
		}
		parts = append(parts, stderr)
	}
	parts = append(parts, notes...)
	return strings.Join(parts, "\n")
}

// spawnError words a failure to start a program as the reference does
// ("No such file or directory (os error 2)").
func spawnError(err error) error {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		msg := errno.Error()
		if msg != "" {
			msg = strings.ToUpper(msg[:1]) + msg[1:]
		}
		return fmt.Errorf("%s (os error %d)", msg, int(errno))
	}
	return err
}

// capped keeps the first max bytes written and counts the rest.
type capped struct {
	buf   []byte
	max   int
	total int64
}

func (c *capped) Write(p []byte) (int, error) {
	c.total += int64(len(p))
	room := len(p)
	if c.max >= 0 {
		room = min(room, c.max-len(c.buf))
	}
	if room > 0 {
		c.buf = append(c.buf, p[:room]...)
	}
	return len(p), nil
}

// String is the kept bytes as text: a character cut by the cap is dropped
// and invalid UTF-8 becomes U+FFFD, as the reference's lossy decoding.
func (c *capped) String() string {
	b := c.buf
	if c.total > int64(len(b)) {
		for i := 0; i < utf8.UTFMax && len(b) > 0; i++ {
			r, size := utf8.DecodeLastRune(b)
			if r != utf8.RuneError || size != 1 {
				break
			}
			b = b[:len(b)-1]
		}
	}
	if utf8.Valid(b) {
		return string(b)
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}
