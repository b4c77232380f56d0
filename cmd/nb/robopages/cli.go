// Package robopages implements `nb robopages`: serve, run, validate, view,
// create and install, with the flags and defaults of the robopages
// command line. cmd/nb calls Main with the arguments after "robopages".
package robopages

import (
	"bufio"
	"context"
	"embed"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nbots/nb/cartridge"
	"github.com/nbots/nb/cmd/nb/cliflag"
	"github.com/nbots/nb/internal/metric"
	"github.com/nbots/nb/proc"
	"github.com/nbots/nb/robopage"
	"github.com/nbots/nb/robopage/pageserver"
)

//go:embed templates
var templates embed.FS

const usage = `Usage: nb robopages COMMAND [flags]

Robopages are YAML pages that describe command-line tools for language models.

Commands:
  serve     serve the pages over the robopages HTTP API (127.0.0.1:8000)
  run       run one function from the command line
  validate  check the pages and list the broken ones
  view      list the pages and their functions
  create    write a new page from a template
  install   install pages from a local archive (.zip, .tar.gz) or folder

The pages are read from --path, else $ROBOPAGES_PATH, else ~/.robopages.
Run "nb robopages <command> --help" for the flags of a command.
`

// commands are the commands of nb robopages.
var commands = []string{"serve", "run", "validate", "view", "create", "install"}

// Process is what Main takes from the process it runs in: cmd/nb passes
// its own, since nothing below cmd/ reads the environment or looks at
// the terminal.
type Process struct {
	// Environ is the environment (os.Environ()): ROBOPAGES_PATH,
	// ROBOPAGES_TOKEN, ROBOPAGES_CONTAINER_RUNTIME, HOME for ~, and what
	// the children get a part of (see robopage.Executor.Environ).
	Environ []string
	// Stdin is where run reads answers; Stdout and Stderr are the outputs.
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// Terminal says that Stdin is a terminal: run asks there for the
	// required arguments not given with -D instead of failing.
	Terminal bool
	// Flags, when set, makes the flag set of each command (nb robopages
	// serve): cmd/nb's, whose help lists the environment the command
	// reads. nil makes a plain one.
	Flags func(name, usage, about string) *cliflag.Set
}

// Exit statuses of Main besides 0: a failure, a mistake on the command
// line, and a command stopped by its context (Ctrl-C). When the
// context's cause has an ExitCode method (cmd/nb's signals), that code is
// used instead of ExitInterrupted: 143 for SIGTERM.
const (
	ExitFailure     = 1
	ExitUsage       = 2
	ExitInterrupted = 130
)

// Main runs `nb robopages` with args (what follows "robopages") and
// returns the exit status. `serve` ends normally (0) when ctx ends; the
// other commands exit with ExitInterrupted or the cause's code.
func Main(ctx context.Context, args []string, p Process) int {
	c := &command{ctx: ctx, environ: p.Environ, stdin: p.Stdin, stdout: p.Stdout, stderr: p.Stderr, terminal: p.Terminal, newFlags: p.Flags}
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fs := c.flags("", strings.TrimSpace(usage[strings.Index(usage, "\n\n"):]))
		fs.set.Usage = "nb robopages COMMAND [flags]"
		fs.set.Parse([]string{"--help"}) //nolint:errcheck // only prints the help
		if len(args) == 0 {
			return ExitUsage
		}
		return 0
	}
	var run func([]string) error
	switch args[0] {
	case "serve":
		run = c.serve
	case "run":
		run = c.run
	case "validate":
		run = c.validate
	case "view":
		run = c.view
	case "create":
		run = c.create
	case "install":
		run = c.install
	default:
		if s := cartridge.Nearest(args[0], commands); s != "" {
			fmt.Fprintf(p.Stderr, "nb robopages: unknown command %q: did you mean nb robopages %s?\n", args[0], s)
			return ExitUsage
		}
		fmt.Fprintf(p.Stderr, "nb robopages: unknown command %q\n\n%s", args[0], usage)
		return ExitUsage
	}
	err := run(args[1:])
	if ctx.Err() != nil && args[0] != "serve" {
		var ec interface{ ExitCode() int }
		if errors.As(context.Cause(ctx), &ec) {
			return ec.ExitCode()
		}
		return ExitInterrupted
	}
	if err != nil {
		if errors.Is(err, cliflag.ErrHelp) {
			return 0
		}
		var u usageError
		if errors.As(err, &u) {
			fmt.Fprintf(c.stderr, "nb robopages %s: %v\n", args[0], err)
			return ExitUsage
		}
		if !errors.Is(err, errReported) {
			fmt.Fprintf(c.stderr, "nb robopages %s: %v\n", args[0], err)
		}
		return ExitFailure
	}
	return 0
}

// errReported is a failure already explained on stderr or stdout.
var errReported = errors.New("reported")

type usageError struct{ error }

type command struct {
	ctx            context.Context
	environ        []string
	stdin          io.Reader
	stdout, stderr io.Writer
	terminal       bool
	newFlags       func(name, usage, about string) *cliflag.Set
	lines          chan lineRead
}

type lineRead struct {
	text string
	err  error
}

// ask prints prompt and reads a line of Stdin; Ctrl-C (ctx) interrupts
// the wait. io.EOF means that Stdin ended without an answer.
func (c *command) ask(prompt string) (string, error) {
	fmt.Fprint(c.stdout, prompt)
	if c.lines == nil {
		c.lines = make(chan lineRead)
		go func() {
			in := bufio.NewReader(c.stdin)
			for {
				line, err := in.ReadString('\n')
				if err != nil && line != "" {
					err = nil
				}
				c.lines <- lineRead{strings.TrimRight(line, "\r\n"), err}
				if err != nil {
					return
				}
			}
		}()
	}
	select {
	case l := <-c.lines:
		return l.text, l.err
	case <-c.ctx.Done():
		fmt.Fprintln(c.stdout)
		return "", c.ctx.Err()
	}
}

func (c *command) lookupEnv(name string) string {
	v, _ := proc.Lookup(c.environ, name)
	return v
}

// pathFlag defines -P/--path.
func (c *command) pathFlag(fs *flagSet) *string {
	p := new(string)
	fs.stringVar(p, "P", "path", "", "PATH", "a page file or a folder of pages (default $ROBOPAGES_PATH, else ~/.robopages)")
	return p
}

// pagesPath is the path to load: --path, else $ROBOPAGES_PATH, else
// ~/.robopages, with ~ and $VAR expanded.
func (c *command) pagesPath(flagged string) string {
	if flagged == "" {
		flagged = robopage.DefaultPath(c.environ)
	}
	return robopage.ExpandPath(flagged, c.environ)
}

// limits defines the executor flags shared by serve and run.
type limits struct {
	timeout   time.Duration
	maxOutput int
	workers   int
	env       names
}

func limitFlags(fs *flagSet, workers int) *limits {
	l := &limits{}
	fs.durationVar(&l.timeout, "timeout", robopage.DefaultTimeout, "longest run of one call; the call's processes are stopped after it (0 for none)")
	fs.intVar(&l.maxOutput, "max-output", robopage.DefaultMaxOutput, "BYTES", "bytes kept of each of stdout and stderr of a call (0 for no cap)")
	fs.intVar(&l.workers, "workers", workers, "N", "calls running at once (0, the default for serve, is the number of CPUs)")
	fs.varFlag(&l.env, "", "env", "NAME", "pass nb's variable NAME to every function (repeatable); others reach a function only through ${env.NAME} in its page")
	return l
}

func (c *command) executor(l *limits) *robopage.Executor {
	ex := robopage.NewExecutor(c.environ)
	if l != nil {
		ex.Timeout, ex.MaxOutput, ex.Workers, ex.Names = l.timeout, l.maxOutput, l.workers, l.env
		if l.timeout == 0 {
			ex.Timeout = -1
		}
		if l.maxOutput == 0 {
			ex.MaxOutput = -1
		}
	}
	return ex
}

// names collects a repeated flag's values.
type names []string

func (n *names) String() string { return strings.Join(*n, ",") }

func (n *names) Type() string { return "NAME" }

func (n *names) Set(s string) error {
	if s == "" || strings.ContainsAny(s, "= ") {
		return fmt.Errorf("%q is not a variable name", s)
	}
	*n = append(*n, s)
	return nil
}

// sshFlags defines the reference's SSH flags, which nb does not support.
func sshFlags(fs *flagSet) *string {
	ssh := new(string)
	fs.stringVar(ssh, "", "ssh", "", "USER@HOST", "not supported by nb (nor --ssh-key, --ssh-key-passphrase): run nb on that host")
	fs.set.String("ssh-key", "", "not supported by nb")
	fs.set.String("ssh-key-passphrase", "", "not supported by nb")
	fs.set.MarkHidden("ssh-key")            //nolint:errcheck // defined just above
	fs.set.MarkHidden("ssh-key-passphrase") //nolint:errcheck // defined just above
	return ssh
}

var errSSH = usageError{errors.New("--ssh is not supported by nb: run nb robopages on the remote host instead")}

// load loads the pages and reports the skipped ones on stderr.
func (c *command) load(path, filter string) (*robopage.Library, error) {
	lib, err := robopage.Load(path, filter)
	if errors.Is(err, robopage.ErrNoPages) {
		return nil, fmt.Errorf("%w: pass --path, set ROBOPAGES_PATH, or install pages with nb robopages install", err)
	}
	if err != nil {
		return nil, err
	}
	for _, p := range lib.Problems {
		if p.Severity == robopage.Error {
			fmt.Fprintf(c.stderr, "skipped: %s\n", p)
		} else {
			fmt.Fprintf(c.stderr, "warning: %s\n", p)
		}
	}
	return lib, nil
}

func (c *command) serve(args []string) error {
	fs := c.flags("serve", "Serve the pages over the robopages HTTP API: GET / lists the functions, POST /process runs them.")
	path := c.pathFlag(fs)
	var filter, addr, token string
	var lazy, allowRemote bool
	var maxClient int
	fs.stringVar(&filter, "F", "filter", "", "TEXT", "load only the pages whose path contains this text")
	fs.stringVar(&addr, "", "listen", "127.0.0.1:8000", "HOST:PORT", "the address to listen on")
	fs.set.OldP("address", "A", "listen")
	fs.boolVar(&lazy, "", "lazy", "pull or build container images on first use instead of at start")
	// The environment's token is read after parsing: as a flag default it
	// would be printed in the help.
	fs.stringVar(&token, "", "token", "", "TOKEN", "require \"Authorization: Bearer TOKEN\" on every request (default $ROBOPAGES_TOKEN)")
	fs.boolVar(&allowRemote, "", "allow-remote", "listen on an address other machines can reach (needs --token)")
	var metricsAddr string
	fs.stringVar(&metricsAddr, "", "metrics-listen", "", "HOST:PORT", "serve GET /metrics on its own address instead of the API's (beyond loopback it needs --token)")
	fs.intVar(&maxClient, "max-client-conns", pageserver.DefaultMaxClientConns, "N", "open connections one client address may hold; more are refused with 429")
	var logFormat string
	fs.stringVar(&logFormat, "", "log-format", "text", "FORMAT", "text or json (every line on standard error one JSON object)")
	lim := limitFlags(fs, 0)
	ssh := sshFlags(fs)
	if err := fs.parse(args, c.stdout); err != nil {
		return err
	}
	if err := cliflag.CheckLogFormat(logFormat); err != nil {
		return usageError{err}
	}
	if logFormat == "json" {
		// Every line on standard error is then one JSON object (the
		// error that ends the command too: c.stderr stays so).
		jl := cliflag.NewJSONLines(c.stderr)
		c.stderr = jl
		defer jl.Flush()
	}
	if *ssh != "" {
		return errSSH
	}
	if token == "" {
		token = c.lookupEnv("ROBOPAGES_TOKEN")
	}
	if err := pageserver.CheckAddress(addr, allowRemote, token); err != nil {
		return addressAdvice(err)
	}
	lib, err := c.load(c.pagesPath(*path), filter)
	if err != nil {
		return err
	}
	ex := c.executor(lim)
	if !lazy {
		for _, p := range ex.Prefetch(c.ctx, lib) {
			c.warn(p)
		}
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w; choose another --listen", addr, err)
	}
	log, _ := cliflag.Logger(c.stderr, "info", logFormat)
	metric.Up(metric.Robopages)
	if metricsAddr != "" {
		if _, err := metric.Listen(c.ctx, metricsAddr, metric.Secret(token), func(err error) { log.Error("metrics listener", "error", err) }); err != nil {
			ln.Close()
			return fmt.Errorf("--metrics-listen: %w", err)
		}
	}
	fmt.Fprintf(c.stderr, "serving %d functions of %d pages on http://%s\n", len(lib.Functions()), len(lib.Pages), ln.Addr())
	return pageserver.Serve(c.ctx, ln, &pageserver.Server{Library: lib, Executor: ex, Token: token, Log: log, Metrics: metricsAddr == ""}, pageserver.Limits{MaxClientConns: maxClient, ConnsAdvice: "ask for a higher --max-client-conns"})
}

// warn prints a problem of Prefetch or Validate as a warning.
func (c *command) warn(p robopage.Problem) {
	if p.Engine {
		fmt.Fprintf(c.stderr, "warning: %s\n", p.Message)
		return
	}
	fmt.Fprintf(c.stderr, "warning: %s\n", p)
}

// defines collects repeated -D key=value flags.
type defines map[string]string

func (d defines) String() string { return "" }

func (d defines) Type() string { return "NAME=VALUE" }

func (d defines) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok {
		return fmt.Errorf("%q is not name=value", s)
	}
	d[k] = v
	return nil
}

func (c *command) run(args []string) error {
	fs := c.flags("run", "Run one function from the command line, with its arguments given as -D name=value.")
	path := c.pathFlag(fs)
	var function string
	var auto bool
	defs := defines{}
	fs.stringVar(&function, "F", "function", "", "NAME", "the function to run (required)")
	fs.varFlag(defs, "D", "define", "NAME=VALUE", "an argument (repeatable); on a terminal, missing required ones are asked for")
	fs.boolVar(&auto, "A", "auto", "run without asking for confirmation")
	lim := limitFlags(fs, 10)
	ssh := sshFlags(fs)
	if err := fs.parse(args, c.stdout); err != nil {
		return err
	}
	if *ssh != "" {
		return errSSH
	}
	if function == "" {
		return usageError{errors.New("--function is required: name the function to run (see nb robopages view)")}
	}
	lib, err := c.load(c.pagesPath(*path), "")
	if err != nil {
		return err
	}
	f, ok := lib.Function(function)
	if !ok {
		return fmt.Errorf("function %s not found: see nb robopages view for the functions", function)
	}
	var params []string
	for _, p := range f.Parameters {
		params = append(params, p.Name)
	}
	var unknown []string
	for k := range defs {
		if f.Parameter(k) == nil {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		has := "it has no parameters"
		if len(params) > 0 {
			has = "its parameters are " + strings.Join(params, ", ")
		}
		return usageError{fmt.Errorf("unknown %s %s for function %s: %s", noun(len(unknown), "argument"), strings.Join(unknown, ", "), f.Name, has)}
	}
	arguments := map[string]string{}
	var missing []*robopage.Parameter
	for _, p := range f.Parameters {
		if v, ok := defs[p.Name]; ok {
			arguments[p.Name] = v
		} else if p.Required {
			missing = append(missing, p)
		}
	}
	if len(missing) > 0 && !c.terminal {
		var ns []string
		for _, p := range missing {
			ns = append(ns, p.Name)
		}
		return usageError{fmt.Errorf("missing required %s %s for function %s: pass %s", noun(len(missing), "argument"), strings.Join(ns, ", "), f.Name, "-D name=value for each (standard input is not a terminal to ask on)")}
	}
	for _, p := range missing {
		line, err := c.ask(fmt.Sprintf(">> enter value for argument '%s' (%s): ", p.Name, oneLine(p.Description)))
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("argument %s: no answer on standard input; pass it with -D %s=<value>", p.Name, p.Name)
		}
		if err != nil {
			return err
		}
		arguments[p.Name] = strings.TrimSpace(line)
	}
	ex := c.executor(lim)
	plan, err := ex.Prepare(f, arguments)
	if err != nil {
		return err
	}
	if !auto {
		fmt.Fprintf(c.stdout, "\n%s\n\n", plan)
		line, err := c.ask(">> enter 'y' to proceed or any other key to cancel: ")
		if errors.Is(err, io.EOF) {
			return errors.New("no answer on standard input to confirm the command: pass -A/--auto to run it without asking")
		}
		if err != nil {
			return err
		}
		if strings.TrimSpace(line) != "y" {
			fmt.Fprintf(c.stdout, "\n<command execution cancelled by user>\n")
			return nil
		}
	}
	out, err := ex.Run(c.ctx, plan)
	if err != nil {
		return err
	}
	fmt.Fprintf(c.stdout, "\n%s\n", out)
	return nil
}

func (c *command) validate(args []string) error {
	fs := c.flags("validate", "Check the pages: list every page with its functions and problems; exit 1 when one is broken.")
	path := c.pathFlag(fs)
	var skipDocker bool
	fs.boolVar(&skipDocker, "", "skip-docker", "do not pull or build images nor check volumes")
	if err := fs.parse(args, c.stdout); err != nil {
		return err
	}
	root := c.pagesPath(*path)
	lib, err := robopage.Load(root, "")
	if errors.Is(err, robopage.ErrNoPages) {
		return fmt.Errorf("%w: pass --path or set ROBOPAGES_PATH", err)
	}
	if err != nil {
		return err
	}
	all := lib.Validate(c.ctx, robopage.ValidateOptions{Executor: c.executor(nil), Host: true, Containers: !skipDocker})
	var problems, engine []robopage.Problem
	for _, p := range all {
		if p.Engine {
			engine = append(engine, p)
		} else {
			problems = append(problems, p)
		}
	}
	type count struct{ errors, warnings int }
	per := map[string]*count{}
	for _, p := range problems {
		cnt := per[p.File]
		if cnt == nil {
			cnt = &count{}
			per[p.File] = cnt
		}
		if p.Severity == robopage.Error {
			cnt.errors++
		} else {
			cnt.warnings++
		}
	}
	// Every page found: the loaded ones and those skipped.
	type row struct {
		file, rel string
		functions int
		loaded    bool
	}
	var rows []row
	seen := map[string]bool{}
	for _, p := range lib.Pages {
		rows = append(rows, row{p.File, p.Rel, len(p.Functions), true})
		seen[p.File] = true
	}
	for _, p := range lib.Problems {
		if !seen[p.File] && p.Severity == robopage.Error {
			rel, err := filepath.Rel(root, p.File)
			if err != nil {
				rel = p.File
			}
			rows = append(rows, row{p.File, filepath.ToSlash(rel), 0, false})
			seen[p.File] = true
		}
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].rel < rows[j].rel })
	tw := tabwriter.NewWriter(c.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PAGE\tFUNCTIONS\tSTATUS")
	broken, functions, warnings := 0, 0, 0
	for _, r := range rows {
		cnt := per[r.file]
		if cnt == nil {
			cnt = &count{}
		}
		functions += r.functions
		warnings += cnt.warnings
		status := "ok"
		switch {
		case !r.loaded:
			status = "broken: not loaded"
			broken++
		case cnt.errors > 0:
			status = fmt.Sprintf("broken: %s", plural(cnt.errors, "error"))
			broken++
		}
		if cnt.warnings > 0 {
			if status == "ok" {
				status = plural(cnt.warnings, "warning")
			} else {
				status += ", " + plural(cnt.warnings, "warning")
			}
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\n", r.rel, r.functions, status)
	}
	tw.Flush()
	if len(problems) > 0 {
		fmt.Fprintln(c.stdout, "\nProblems:")
		for _, p := range problems {
			fmt.Fprintf(c.stdout, "%s: %s\n", p.Severity, p)
		}
	}
	for _, p := range engine {
		// One line for the engine, not one per function that needs it.
		fmt.Fprintf(c.stdout, "\n%s: %s (--skip-docker skips these checks)\n", p.Severity, p.Message)
	}
	fmt.Fprintf(c.stdout, "\n%s, %s: %d broken, %s\n", plural(len(rows), "page"), plural(functions, "function"), broken, plural(warnings, "warning"))
	if broken > 0 || len(engine) > 0 {
		return errReported
	}
	return nil
}

// noun is word, with an s when n is not 1.
func noun(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}

func plural(n int, word string) string {
	if n == 1 {
		return fmt.Sprintf("1 %s", word)
	}
	return fmt.Sprintf("%d %ss", n, word)
}

func (c *command) view(args []string) error {
	fs := c.flags("view", "List the pages, their functions, where each runs and its parameters.")
	path := c.pathFlag(fs)
	var filter string
	fs.stringVar(&filter, "F", "filter", "", "TEXT", "show only the pages whose path contains this text")
	if err := fs.parse(args, c.stdout); err != nil {
		return err
	}
	lib, err := c.load(c.pagesPath(*path), filter)
	if err != nil {
		return err
	}
	ex := c.executor(nil)
	for i, p := range lib.Pages {
		if i > 0 {
			fmt.Fprintln(c.stdout)
		}
		heading := append(append([]string(nil), p.Categories...), "["+p.Name+"]")
		fmt.Fprintln(c.stdout, strings.Join(heading, " > "))
		for _, f := range p.Functions {
			fmt.Fprintf(c.stdout, "  * %s : %s\n", f.Name, oneLine(f.Description))
			fmt.Fprintf(c.stdout, "      running with: %s\n", runningWith(ex, f))
			for _, par := range f.Parameters {
				req := ""
				if !par.Required {
					req = ", optional"
				}
				fmt.Fprintf(c.stdout, "      - %s (%s%s): %s\n", par.Name, par.Type, req, oneLine(par.Description))
			}
		}
	}
	return nil
}

// runningWith says where a function would run: the host program, sudo
// in a container, the container image, or nowhere.
func runningWith(ex *robopage.Executor, f *robopage.Function) string {
	cmdline, ok := f.CommandLine(robopage.OS(runtime.GOOS))
	if !ok || len(cmdline) == 0 {
		return "no command line for this platform"
	}
	sudo, program := false, ""
	for _, e := range cmdline {
		if e == "sudo" {
			sudo = true
		} else if program == "" {
			program = e
		}
	}
	host, found := ex.LookPath(program)
	c := f.Container
	switch {
	case c != nil && (sudo || !found || c.Force):
		return "docker " + c.ImageName()
	case sudo:
		return "sudo (no container: cannot run)"
	case found:
		return host
	}
	return "app not in $PATH"
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func (c *command) create(args []string) error {
	fs := c.flags("create", "Write a new page from a template.")
	var template, name string
	fs.stringVar(&template, "T", "template", "basic", "NAME", "basic, docker-image or docker-build")
	fs.stringVar(&name, "N", "name", "robopage.yml", "FILE", "the file to write")
	if err := fs.parse(args, c.stdout); err != nil {
		return err
	}
	files := map[string]string{"basic": "basic.yml", "docker-image": "docker_image.yml", "docker-build": "docker_build.yml"}
	src, ok := files[template]
	if !ok {
		return usageError{fmt.Errorf("unknown template %q: choose basic, docker-image or docker-build", template)}
	}
	write := func(dst, src string) error {
		data, err := templates.ReadFile("templates/" + src)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		f, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			if os.IsExist(err) {
				return fmt.Errorf("%s already exists: choose another --name or remove it", dst)
			}
			return err
		}
		if _, err := f.Write(data); err != nil {
			f.Close()
			return err
		}
		return f.Close()
	}
	if template == "docker-build" {
		df := filepath.Join(filepath.Dir(name), "nmap.Dockerfile")
		if err := write(df, "nmap.Dockerfile"); err != nil {
			return err
		}
		fmt.Fprintf(c.stdout, "wrote %s\n", df)
	}
	if err := write(name, src); err != nil {
		return err
	}
	fmt.Fprintf(c.stdout, "wrote %s\n", name)
	return nil
}

// addressAdvice words CheckAddress's refusal with serve's flags.
func addressAdvice(err error) error {
	var ae *pageserver.AddressError
	switch {
	case !errors.As(err, &ae):
		return err
	case ae.NeedsToken:
		return fmt.Errorf("--allow-remote needs --token (or ROBOPAGES_TOKEN): without one anybody who reaches %s can run programs here", ae.Addr)
	}
	return fmt.Errorf("refusing to listen on %s: other machines could run programs here; use a loopback address (127.0.0.1:8000), or pass --allow-remote with --token", ae.Addr)
}
