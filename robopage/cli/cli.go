// Package cli implements `nb robopages`: serve, run, validate, view,
// create and install, with the flags and defaults of the robopages
// command line. cmd/nb calls Main with the arguments after "robopages".
package cli

import (
	"bufio"
	"context"
	"embed"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nbots/nb/robopage"
	"github.com/nbots/nb/robopage/server"
)

//go:embed templates
var templates embed.FS

const usage = `Usage: nb robopages <command> [flags]

Robopages are YAML pages that describe command-line tools for language models.

Commands:
  serve     serve the pages over the robopages HTTP API (127.0.0.1:8000)
  run       run one function from the command line
  validate  check the pages and list the broken ones
  view      list the pages and their functions
  create    write a new page from a template
  install   install pages from a local archive (.zip, .tar.gz) or folder

The pages are read from --path, else $ROBOPAGES_PATH, else ~/.robopages.
Run "nb robopages <command> -h" for the flags of a command.
`

// Main runs `nb robopages` with args (what follows "robopages") and
// returns the exit status: 0 on success, 1 on failure, 2 on bad usage.
func Main(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stdout, usage)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	c := &command{ctx: ctx, stdin: stdin, stdout: stdout, stderr: stderr}
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
		fmt.Fprintf(stderr, "nb robopages: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
	if err := run(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		var u usageError
		if errors.As(err, &u) {
			fmt.Fprintf(stderr, "nb robopages %s: %v\n", args[0], err)
			return 2
		}
		if !errors.Is(err, errReported) {
			fmt.Fprintf(stderr, "nb robopages %s: %v\n", args[0], err)
		}
		return 1
	}
	return 0
}

// errReported is a failure already explained on stderr or stdout.
var errReported = errors.New("reported")

type usageError struct{ error }

type command struct {
	ctx            context.Context
	stdin          io.Reader
	stdout, stderr io.Writer
}

func (c *command) flags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet("nb robopages "+name, flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	return fs
}

func parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{err}
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("unexpected argument %q", fs.Arg(0))}
	}
	return nil
}

// pathFlag defines -P/--path.
func pathFlag(fs *flag.FlagSet) *string {
	p := new(string)
	def := robopage.DefaultPath()
	fs.StringVar(p, "P", def, "shorthand for --path")
	fs.StringVar(p, "path", def, "a page file or a folder of pages (default $ROBOPAGES_PATH, else ~/.robopages)")
	return p
}

// limits defines the executor flags shared by serve and run.
type limits struct {
	timeout   time.Duration
	maxOutput int
	workers   int
}

func limitFlags(fs *flag.FlagSet, workers int) *limits {
	l := &limits{}
	fs.DurationVar(&l.timeout, "timeout", robopage.DefaultTimeout, "longest run of one call; the process group is killed after it (0 for none)")
	fs.IntVar(&l.maxOutput, "max-output", robopage.DefaultMaxOutput, "bytes kept of each of stdout and stderr of a call (0 for no cap)")
	fs.IntVar(&l.workers, "workers", workers, "calls running at once (0 for the number of CPUs)")
	return l
}

func (l *limits) executor() *robopage.Executor {
	ex := &robopage.Executor{Timeout: l.timeout, MaxOutput: l.maxOutput, Workers: l.workers}
	if l.timeout == 0 {
		ex.Timeout = -1
	}
	if l.maxOutput == 0 {
		ex.MaxOutput = -1
	}
	return ex
}

// sshFlags defines the reference's SSH flags, which nb does not support.
func sshFlags(fs *flag.FlagSet) *string {
	ssh := new(string)
	fs.StringVar(ssh, "ssh", "", "not supported by nb")
	fs.String("ssh-key", "", "not supported by nb")
	fs.String("ssh-key-passphrase", "", "not supported by nb")
	return ssh
}

var errSSH = usageError{errors.New("--ssh is not supported by nb: run nb robopages on the remote host instead")}

// load loads the pages and reports the skipped ones on stderr.
func (c *command) load(path, filter string) (*robopage.Library, error) {
	lib, err := robopage.Load(path, filter)
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
	fs := c.flags("serve")
	path := pathFlag(fs)
	var filter, addr, token string
	var lazy, allowRemote bool
	fs.StringVar(&filter, "F", "", "shorthand for --filter")
	fs.StringVar(&filter, "filter", "", "load only the pages whose path contains this text")
	fs.StringVar(&addr, "A", "127.0.0.1:8000", "shorthand for --address")
	fs.StringVar(&addr, "address", "127.0.0.1:8000", "host:port to listen on")
	fs.BoolVar(&lazy, "lazy", false, "pull or build container images on first use instead of at start")
	// The environment's token is read after parsing: as a flag default it
	// would be printed in the usage text.
	fs.StringVar(&token, "token", "", "require \"Authorization: Bearer <token>\" on every request (default $ROBOPAGES_TOKEN)")
	fs.BoolVar(&allowRemote, "allow-remote", false, "listen on an address other machines can reach (needs --token)")
	lim := limitFlags(fs, 0)
	ssh := sshFlags(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	if *ssh != "" {
		return errSSH
	}
	if token == "" {
		token = os.Getenv("ROBOPAGES_TOKEN")
	}
	if err := server.CheckAddress(addr, allowRemote, token); err != nil {
		return err
	}
	lib, err := c.load(*path, filter)
	if err != nil {
		return err
	}
	ex := lim.executor()
	if !lazy {
		for _, p := range ex.Prefetch(c.ctx, lib) {
			fmt.Fprintf(c.stderr, "warning: %s\n", p)
		}
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w; choose another --address", addr, err)
	}
	log := slog.New(slog.NewTextHandler(c.stderr, nil))
	fmt.Fprintf(c.stderr, "serving %d functions of %d pages on http://%s\n", len(lib.Functions()), len(lib.Pages), ln.Addr())
	return server.Serve(c.ctx, ln, &server.Server{Library: lib, Executor: ex, Token: token, Log: log})
}

// defines collects repeated -D key=value flags.
type defines map[string]string

func (d defines) String() string { return "" }

func (d defines) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok {
		return fmt.Errorf("%q is not key=value", s)
	}
	d[k] = v
	return nil
}

func (c *command) run(args []string) error {
	fs := c.flags("run")
	path := pathFlag(fs)
	var function string
	var auto bool
	defs := defines{}
	fs.StringVar(&function, "F", "", "shorthand for --function")
	fs.StringVar(&function, "function", "", "the function to run (required)")
	fs.Var(defs, "D", "shorthand for --define")
	fs.Var(defs, "define", "an argument as name=value (repeatable); the others are asked for")
	fs.BoolVar(&auto, "A", false, "shorthand for --auto")
	fs.BoolVar(&auto, "auto", false, "run without asking for confirmation")
	lim := limitFlags(fs, 10)
	ssh := sshFlags(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	if *ssh != "" {
		return errSSH
	}
	if function == "" {
		return usageError{errors.New("--function is required: name the function to run (see nb robopages view)")}
	}
	lib, err := c.load(*path, "")
	if err != nil {
		return err
	}
	f, ok := lib.Function(function)
	if !ok {
		return fmt.Errorf("function %s not found", function)
	}
	in := bufio.NewReader(c.stdin)
	arguments := map[string]string{}
	for _, p := range f.Parameters {
		if v, ok := defs[p.Name]; ok {
			arguments[p.Name] = v
			continue
		}
		fmt.Fprintf(c.stdout, ">> enter value for argument '%s' (%s): ", p.Name, p.Description)
		line, err := in.ReadString('\n')
		if err != nil && line == "" {
			return fmt.Errorf("argument %s: no answer on standard input; pass it with -D %s=<value>", p.Name, p.Name)
		}
		arguments[p.Name] = strings.TrimSpace(line)
	}
	ex := lim.executor()
	plan, err := ex.Prepare(f, arguments)
	if err != nil {
		return err
	}
	if !auto {
		fmt.Fprintf(c.stdout, "\n%s\n\n>> enter 'y' to proceed or any other key to cancel: ", plan)
		line, _ := in.ReadString('\n')
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
	fs := c.flags("validate")
	path := pathFlag(fs)
	var skipDocker bool
	fs.BoolVar(&skipDocker, "skip-docker", false, "do not pull or build images nor check volumes")
	if err := parse(fs, args); err != nil {
		return err
	}
	lib, err := robopage.Load(*path, "")
	if err != nil {
		return err
	}
	problems := lib.Validate(c.ctx, robopage.ValidateOptions{Host: true, Containers: !skipDocker})
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
			rel, err := filepath.Rel(robopage.ExpandPath(*path), p.File)
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
	fmt.Fprintf(c.stdout, "\n%s, %s: %d broken, %s\n", plural(len(rows), "page"), plural(functions, "function"), broken, plural(warnings, "warning"))
	if broken > 0 {
		return errReported
	}
	return nil
}

func plural(n int, word string) string {
	if n == 1 {
		return fmt.Sprintf("1 %s", word)
	}
	return fmt.Sprintf("%d %ss", n, word)
}

func (c *command) view(args []string) error {
	fs := c.flags("view")
	path := pathFlag(fs)
	var filter string
	fs.StringVar(&filter, "F", "", "shorthand for --filter")
	fs.StringVar(&filter, "filter", "", "show only the pages whose path contains this text")
	if err := parse(fs, args); err != nil {
		return err
	}
	lib, err := c.load(*path, filter)
	if err != nil {
		return err
	}
	ex := &robopage.Executor{}
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
	fs := c.flags("create")
	var template, name string
	fs.StringVar(&template, "T", "basic", "shorthand for --template")
	fs.StringVar(&template, "template", "basic", "basic, docker-image or docker-build")
	fs.StringVar(&name, "N", "robopage.yml", "shorthand for --name")
	fs.StringVar(&name, "name", "robopage.yml", "the file to write")
	if err := parse(fs, args); err != nil {
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
