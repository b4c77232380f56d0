package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/joho/godotenv"

	"github.com/nbots/nb/bot"
	"github.com/nbots/nb/builtin"
	"github.com/nbots/nb/cartridge"
	"github.com/nbots/nb/cmd/nb/cliflag"
	"github.com/nbots/nb/proc"
	"github.com/nbots/nb/provider"
	"github.com/nbots/nb/robopage"
	"github.com/nbots/nb/script/fennel"
	"github.com/nbots/nb/state"
	"github.com/nbots/nb/state/storeurl"
	"github.com/nbots/nb/term"
)

// Version is nb's version.
const Version = "0.1.0"

// Specification is the version of the Nano Bots specification nb implements.
const Specification = "3.2.0"

// Exit codes.
const (
	exitOK         = 0
	exitFailure    = 1
	exitUsage      = 2
	exitInterrupt  = 130 // 128 + SIGINT
	exitTerminated = 143 // 128 + SIGTERM
)

// App is one run of nb.
type App struct {
	Args           []string
	Stdin          *os.File
	Stdout, Stderr *os.File
	// Environ is the process's environment, with the variables of a .env
	// file that it does not set.
	Environ []string

	dotenv     map[string]bool // the variables .env set
	dotenvPath string
	executor   *robopage.Executor
	// approve is what --yes and --allow-tool approved from the shell.
	approve term.Approval
	// store is the conversation store of --store or NB_STORE (nil: the
	// files), see openStore.
	store *storeurl.Store
	// lastFlags is the flag set made last (nb help --man reads it).
	lastFlags *cliflag.Set
	// requireSandbox refuses exec's commands where bubblewrap cannot run
	// (nb gateway without --allow-unsandboxed-exec).
	requireSandbox bool
	// signals is the handler of SIGINT and SIGTERM Main installed (nil
	// in tests: nothing is cancelled).
	signals *signals
	// logOut, when set, takes what would go to Stderr as lines of text
	// (a server's --log-format json: see cliflag.JSONLines).
	logOut *cliflag.JSONLines
}

// stderr is where messages go: Stderr, or the JSON lines of a server
// logging in JSON.
func (a *App) stderr() io.Writer {
	if a.logOut != nil {
		return a.logOut
	}
	return a.Stderr
}

// jsonStderr turns standard error into JSON lines for the rest of the
// command (--log-format json); flush writes a last unfinished line.
func (a *App) jsonStderr() (flush func()) {
	a.logOut = cliflag.NewJSONLines(a.Stderr)
	return a.logOut.Flush
}

// Getenv returns a variable of the environment, "" when unset.
func (a *App) Getenv(name string) string {
	v, _ := proc.Lookup(a.Environ, name)
	return v
}

// usageError is a mistake on the command line (exit 2).
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg + " (see nb help)" }

// Run dispatches the command line and returns the exit code.
func (a *App) Run() int {
	args, err := a.approvalFlags(a.Args)
	if err != nil {
		return a.report(err)
	}
	if len(args) == 0 {
		return a.help()
	}
	if f := args[0]; len(f) > 1 && f[0] == '-' && f != "-h" && f != "--help" && f != "--version" {
		return a.report(leadingFlagError(f))
	}
	switch args[0] {
	case "", "-h", "--help":
		return a.help()
	case "help":
		return a.report(a.helpCommand(args[1:]))
	case "--version":
		io.WriteString(a.Stdout, versionText()) //nolint:errcheck // nothing to do about a closed stdout
		return exitOK
	case "version", "specification", "security":
		if isCartridgeCommand(args) {
			break
		}
		if err := a.simpleCommand(args); err != nil {
			return a.report(err)
		}
		switch args[0] {
		case "version":
			io.WriteString(a.Stdout, versionText()) //nolint:errcheck // nothing to do about a closed stdout
		case "specification":
			fmt.Fprintln(a.Stdout, Specification)
		default:
			a.loadDotEnv()
			return a.security()
		}
		return exitOK
	case "completion":
		if !isCartridgeCommand(args) {
			return a.report(a.completion(args[1:]))
		}
	case "serve":
		if isServeCommand(args) {
			a.loadDotEnv()
			return a.serveCommand(args[1:])
		}
	case "gateway":
		if isGatewayCommand(args) {
			a.loadDotEnv()
			return a.gatewayCommand(args[1:])
		}
	case "agents":
		if isAgentsCommand(args) {
			a.loadDotEnv()
			return a.report(a.agentsCommand(args[1:]))
		}
	case "mcp":
		a.loadDotEnv()
		return a.report(a.mcpCommand(args[1:]))
	case "robopages":
		return a.robopages(args[1:])
	case "pipeline":
		if isPipelineCommand(args) {
			a.loadDotEnv()
			return a.report(a.pipelineCommand(args[1:]))
		}
	case "state":
		if isStateCommand(args) {
			a.loadDotEnv()
			return a.report(a.stateTransfer(args[1:]))
		}
	}
	a.loadDotEnv()
	return a.report(a.cartridgeCommand(args))
}

// report prints err as one line (or a located block) and picks the exit
// code. The one rule for signals: a command a signal stopped before it
// was done exits 128 plus the signal's number (130 for SIGINT, 143 for
// SIGTERM), whether it returns the signal (the context's cause) or the
// context's error; a server that a signal asks to stop and that stops
// cleanly has done its work, and returns nil: 0.
func (a *App) report(err error) int {
	if err == nil {
		return exitOK
	}
	var se *signalError
	if errors.As(err, &se) || (errors.Is(err, context.Canceled) && errors.As(context.Cause(a.context()), &se)) {
		return se.ExitCode()
	}
	if errors.Is(err, context.Canceled) {
		return exitInterrupt
	}
	if errors.Is(err, cliflag.ErrHelp) {
		return exitOK
	}
	fmt.Fprintln(a.stderr(), "nb: "+err.Error())
	var ue *usageError
	var fe *cliflag.UsageError
	if errors.As(err, &ue) || errors.As(err, &fe) {
		return exitUsage
	}
	return exitFailure
}

// loadDotEnv reads .env in the working directory, filling the variables
// that are unset or empty (never overriding a value), unless NB_DOTENV=0. It says on stderr which
// variables it set, and remembers them (see checkDotEnv).
func (a *App) loadDotEnv() {
	if a.Getenv("NB_DOTENV") == "0" {
		return
	}
	if _, err := os.Stat(".env"); err != nil {
		return
	}
	vars, err := godotenv.Read(".env")
	if err != nil {
		// godotenv's parse errors quote the file's text (the rest of the
		// file, for a bad name), and a .env holds API keys: say only what
		// is wrong with it.
		var pe *os.PathError
		if errors.As(err, &pe) {
			fmt.Fprintf(a.Stderr, "nb: .env: %v (ignored)\n", pe.Err)
			return
		}
		fmt.Fprintln(a.Stderr, "nb: .env: not in NAME=value form (a bad variable name or an unterminated quote); the whole file is ignored")
		return
	}
	names := make([]string, 0, len(vars))
	for name := range vars {
		names = append(names, name)
	}
	sort.Strings(names)
	var set []string
	for _, name := range names {
		if v, _ := proc.Lookup(a.Environ, name); v == "" {
			a.Environ = append(a.Environ, name+"="+vars[name])
			set = append(set, name)
		}
	}
	if len(set) == 0 {
		return
	}
	a.dotenv = map[string]bool{}
	for _, name := range set {
		a.dotenv[name] = true
	}
	a.dotenvPath = ".env"
	if abs, err := filepath.Abs(".env"); err == nil {
		a.dotenvPath = abs
	}
	fmt.Fprintf(a.Stderr, "nb: %s set %s (NB_DOTENV=0 to ignore it)\n", a.dotenvPath, strings.Join(set, ", "))
}

// addressKeys are the provider keys that say where requests go.
var addressKeys = map[string]bool{"address": true, "endpoint": true, "url": true, "base-url": true, "base_url": true, "host": true}

// checkDotEnv refuses a cartridge whose provider address comes from a
// .env file while a credential comes from the user's own environment: a
// cloned repository's .env would otherwise receive the user's key.
func (a *App) checkDotEnv(c *cartridge.Cartridge) error {
	if len(a.dotenv) == 0 {
		return nil
	}
	var address, credential *cartridge.EnvRef
	for i, ref := range c.EnvRefs {
		section, key, ok := strings.Cut(strings.TrimPrefix(ref.Path, "provider."), ".")
		if !ok || !strings.HasPrefix(ref.Path, "provider.") || (section != "credentials" && section != "options") {
			continue
		}
		switch {
		case addressKeys[key] && a.dotenv[ref.Var]:
			address = &c.EnvRefs[i]
		case section == "credentials" && !addressKeys[key] && !a.dotenv[ref.Var] && a.Getenv(ref.Var) != "":
			credential = &c.EnvRefs[i]
		}
	}
	if address == nil || credential == nil {
		return nil
	}
	return fmt.Errorf("%s sets %s, the address of %s's provider (%s), while %s (%s) comes from your own environment: refusing to send your credential where a .env file says; set the address in your environment too, or run with NB_DOTENV=0",
		a.dotenvPath, address.Var, displayPath(c), address.Path, credential.Var, credential.Path)
}

func (a *App) help() int {
	io.WriteString(a.Stdout, helpText+"\n"+environmentHelp("")) //nolint:errcheck // nothing to do about a closed stdout
	return exitOK
}

const helpText = `
Nano Bots ` + Version + ` (specification ` + Specification + `)

  nb - - eval "hello"
  nb - - repl

  nb cartridge.yml - eval "hello"
  nb cartridge.yml - repl

  nb - STATE-KEY eval "hello"
  nb - STATE-KEY repl

  nb cartridge.yml STATE-KEY eval "hello"
  nb cartridge.yml STATE-KEY repl

  nb - - cartridge
  nb cartridge.yml - cartridge

  nb cartridge.yml - mcp
  nb mcp serve [--listen ADDR] [--cors-origins ORIGINS] [--yes] [CARTRIDGE|DIR ...]

  nb - STATE-KEY state
  nb cartridge.yml STATE-KEY state
  nb cartridge.yml - state list
  nb cartridge.yml STATE-KEY state delete
  nb state export|import [--store URL]      move conversations between stores

  nb serve [--listen localhost:3048] [DIR...]
  nb robopages serve|run|validate|view|create|install ...

  nb gateway [--config FILE] [--workspace DIR] [--listen 127.0.0.1:18790]
  nb gateway init | chat [--message TEXT] [--session KEY] | pair CODE | status | cron ...

  nb pipeline check|run|resume|graph FLOW.dot   attractor's DOT pipelines

  nb agents list http://host:port
  nb agents run http://host:port/NAME "message" [--tools cartridge.yml] [--yes]

  nb security
  nb specification
  nb version
  nb completion bash|zsh|fish
  nb help [COMMAND...]                     (or nb COMMAND --help)
  nb help --man                            the manual page, in roff

eval reads the message from its words, or else from standard input:
  cat article.txt | nb translate.yml - eval | nb summarize.yml - eval

serve answers the Nano Bots API (the editor plugins' server) for the
cartridges of the folders; nb serve --help lists its flags.

Tools that ask before they run can be approved from the shell:
  nb --yes bot.yml - eval "..."              every call of this run
  nb --allow-tool exec bot.yml - repl        that tool (repeatable)
and "a" (always) at a confirmation approves that tool for the session.

  nb completion bash|zsh|fish                shell completion
`

func (a *App) security() int {
	password := a.Getenv("NANO_BOTS_ENCRYPTION_PASSWORD")
	var b strings.Builder
	b.WriteString("\n")
	if password != "" && state.NewCipher(password).Check() {
		b.WriteString("✅ Encryption is enabled and properly working.\n     This means that your data is stored in an encrypted format on your disk.\n")
	} else {
		b.WriteString("❌ Encryption is not being utilized to store your content.\n     This means that your data can be easily read because it is stored in plaintext.\n")
	}
	b.WriteString("\n")
	if password != "" && password != state.UnsafePassword {
		b.WriteString("✅ A password is being used for the encrypted content.\n     This means that only those who possess the password can decrypt your data.\n")
	} else {
		b.WriteString("❌ No custom password is being used for the encrypted content.\n     This means that anyone can easily decrypt your data.\n")
	}
	b.WriteString("\n")
	io.WriteString(a.Stdout, b.String()) //nolint:errcheck // nothing to do about a closed stdout
	return exitOK
}

// cartridgeCommand handles nb CARTRIDGE STATE COMMAND [WORDS...]. The
// command line is checked before the cartridge is looked for: a mistake
// in it is a usage error (exit 2) whatever the cartridge.
func (a *App) cartridgeCommand(args []string) error {
	if err := a.commandSlip(args); err != nil {
		return err
	}
	cmd, rest := args[2], args[3:]
	if cmd != "eval" && (slices.Contains(rest, "--help") || slices.Contains(rest, "-h")) {
		// Eval's words are the message; the other commands take no
		// dashed words, so --help there is the command's help.
		if _, ok := cartridgeHelp[cmd]; ok {
			return a.helpCommand([]string{cmd})
		}
	}
	switch cmd {
	case "eval", "state", "cartridge", "mcp":
	case "repl":
		if len(rest) > 0 {
			return &usageError{"repl takes no words"}
		}
	default:
		return &usageError{fmt.Sprintf("unknown command %q: use eval, repl, state, cartridge or mcp", cmd)}
	}
	key := strings.TrimSpace(args[1])
	if key == "" {
		// An unset $KEY would otherwise run statelessly without a word.
		return &usageError{"the state key is empty: give a key, or - for a conversation that is not kept"}
	}
	if key == "-" {
		key = ""
	}
	cart, err := a.loadCartridge(args[0])
	if err != nil {
		return err
	}
	if key != "" || cmd == "state" { // a stateless exchange needs no store
		if err := a.openStore(a.context(), ""); err != nil {
			return err
		}
		defer a.closeStore()
	}
	for _, w := range cart.Warnings {
		fmt.Fprintln(a.Stderr, "nb: warning: "+w)
	}
	if err := a.checkDotEnv(cart); err != nil {
		return err
	}
	switch cmd {
	case "eval":
		return a.eval(cart, key, rest)
	case "repl":
		if len(rest) > 0 {
			return &usageError{"repl takes no words"}
		}
		return a.repl(cart, key)
	case "state":
		return a.stateCommand(cart, key, rest)
	case "mcp":
		if len(rest) > 0 {
			return &usageError{"mcp takes no words"}
		}
		return a.mcpStatus(cart)
	default: // cartridge
		out, err := cart.Marshal()
		if err != nil {
			return err
		}
		a.Stdout.Write(out) //nolint:errcheck // nothing to do about a closed stdout
		return a.builtinsStatus(cart)
	}
}

// builtinsStatus follows the cartridge with how its built-in tools will
// run (the exec sandbox above all), as YAML comments: the output stays a
// cartridge.
func (a *App) builtinsStatus(cart *cartridge.Cartridge) error {
	var b strings.Builder
	if bs, err := cart.Builtins(); err != nil {
		return err
	} else if bs != nil {
		st, err := bot.BuiltinsStatus(cart, a.host())
		if err != nil {
			return err
		}
		b.WriteString("# builtins, as they will run here:\n")
		for _, line := range st.Lines() {
			b.WriteString("#   " + line + "\n")
		}
	}
	text, ok, err := bot.ContextOf(cart, a.host())
	if err != nil {
		return err
	}
	if ok {
		b.WriteString("# context, as it would be sent first in the system prompt (the context key):\n")
		for _, line := range strings.Split(text, "\n") {
			b.WriteString(strings.TrimRight("#   "+line, " ") + "\n")
		}
	}
	io.WriteString(a.Stdout, b.String()) //nolint:errcheck // nothing to do about a closed stdout
	return nil
}

// host is what nb lends its bots: the process's environment, the user's
// own credential files, the Fennel cache, warnings on stderr.
func (a *App) host() bot.Host {
	return bot.Host{
		Environ:              a.Environ,
		AllowHostCredentials: true,
		AllowMCP:             true,
		FennelCacheDir:       a.fennelCacheDir(),
		Robopages:            a.robopageExecutor(),
		Warn:                 func(msg string) { fmt.Fprintln(a.stderr(), "nb: warning: "+msg) },
		Store:                a.sharedStore(),
		Builtins:             builtin.Options{RequireSandbox: a.requireSandbox, RequireAdvice: unsandboxedAdvice},
	}
}

func (a *App) loadCartridge(name string) (*cartridge.Cartridge, error) {
	return a.host().Load(name)
}

// session is everything an eval or a REPL needs.
type session struct {
	*bot.Session
	printer   *term.Printer
	confirmer *term.Confirmer
}

func (a *App) newSession(ctx context.Context, cart *cartridge.Cartridge, key string, mode cartridge.Mode) (*session, error) {
	b, err := bot.New(ctx, cart, a.host())
	if err != nil {
		return nil, err
	}
	if err := b.Ready(mode); err != nil {
		return nil, err
	}
	color := term.ColorEnabled(a.Getenv, a.Stdout, a.Stderr)
	printer := &term.Printer{W: a.Stdout, Err: a.Stderr, MaxRetries: provider.DefaultRetryPolicy().MaxRetries, Cartridge: cart, Mode: mode, Color: color}
	if term.IsTerminal(a.Stderr) && a.Getenv("TERM") != "dumb" && a.Getenv("TERM") != "" {
		printer.Status = a.Stderr
	}
	confirmer := &term.Confirmer{Printer: printer, Stderr: a.Stderr, Approval: a.approve.Clone()}
	s := bot.NewSession(b, bot.Exchange{
		Mode: mode, Key: key, Wait: true,
		OnEvent: printer.OnEvent, Confirmer: confirmer, Output: a.Stderr,
	})
	return &session{Session: s, printer: printer, confirmer: confirmer}, nil
}

// newSessionInterruptible builds a session that a signal interrupts
// while it is built (the cartridge's MCP servers starting).
func (a *App) newSessionInterruptible(cart *cartridge.Cartridge, key string, mode cartridge.Mode) (*session, error) {
	ctx := a.context()
	s, err := a.newSession(ctx, cart, key, mode)
	if cause := context.Cause(ctx); err != nil && cause != nil {
		return nil, cause
	}
	return s, err
}

func displayPath(c *cartridge.Cartridge) string { return bot.DisplayPath(c) }

// fennelCacheDir is where compiled Fennel is kept across runs; "" (no
// home folder) keeps it in memory only.
func (a *App) fennelCacheDir() string {
	dir, err := fennel.DefaultCacheDir(a.Getenv)
	if err != nil {
		return ""
	}
	return dir
}

// eval runs one exchange: the words joined by spaces, or else all of
// standard input minus one trailing line ending.
func (a *App) eval(cart *cartridge.Cartridge, key string, words []string) error {
	// Signals are caught from the start: Ctrl-C while the cartridge's MCP
	// servers start must stop them, not leave them behind.
	ctx := a.context()
	// The session first: a cartridge that cannot run is reported before
	// the user types (or a pipe produces) a message it could not send.
	s, err := a.newSession(ctx, cart, key, cartridge.Eval)
	if err != nil {
		if cause := context.Cause(ctx); cause != nil {
			return cause
		}
		return err
	}
	defer s.Bot.Close()
	input, err := a.message(words)
	if err != nil {
		return err
	}
	if strings.TrimSpace(input) == "" {
		return &usageError{"nothing to send: give the message as words after eval, or on standard input"}
	}
	s.printer.Prefix()
	res, err := s.Ask(ctx, input)
	s.printer.EndStatus()
	if err != nil {
		if s.printer.Wrote {
			io.WriteString(a.Stdout, "\n") //nolint:errcheck // end the partial line
		} else if context.Cause(ctx) != nil && term.IsTerminal(a.Stderr) {
			io.WriteString(a.Stderr, "\n") //nolint:errcheck // end the line the terminal echoed ^C on
		}
		if cause := context.Cause(ctx); cause != nil {
			return cause
		}
		return err
	}
	s.printer.Suffix()
	if res != nil && res.Notice != "" {
		// A limit stopped the exchange before an answer: the state key
		// keeps the conversation, and the notice says how to go on.
		if s.printer.Wrote {
			io.WriteString(a.Stdout, "\n") //nolint:errcheck // end the partial line
		}
		return &reportedError{res.Notice}
	}
	return nil
}

// message is what eval sends: the words joined by spaces; else all of
// standard input minus one trailing line ending; with both, the piped
// content, a blank line, then the words (as other LLM command-line tools
// do: cat notes.txt | nb bot.yml - eval "summarize this"). Standard input
// is read with words only when something is piped or redirected from a
// file: never from a terminal or /dev/null.
func (a *App) message(words []string) (string, error) {
	input := strings.Join(words, " ")
	if input != "" {
		if !piped(a.Stdin) {
			return input, nil
		}
		data, err := io.ReadAll(a.Stdin)
		if err != nil {
			return "", fmt.Errorf("read standard input: %w", err)
		}
		if content := chomp(string(data)); strings.TrimSpace(content) != "" {
			return content + "\n\n" + input, nil
		}
		return input, nil
	}
	if term.IsTerminal(a.Stdin) {
		fmt.Fprintln(a.Stderr, "nb: reading the message from standard input; end it with Ctrl-D")
	}
	data, err := io.ReadAll(a.Stdin)
	if err != nil {
		return "", fmt.Errorf("read standard input: %w", err)
	}
	return chomp(string(data)), nil
}

// piped tells whether f is a pipe or a regular file (something given to
// nb on purpose), not a terminal or a device such as /dev/null.
func piped(f *os.File) bool {
	if f == nil {
		return false
	}
	fi, err := f.Stat()
	if err != nil {
		return false
	}
	return fi.Mode()&os.ModeNamedPipe != 0 || fi.Mode().IsRegular()
}

// chomp removes one trailing line ending (\n, \r\n or \r), like Ruby's.
func chomp(s string) string {
	switch {
	case strings.HasSuffix(s, "\r\n"):
		return s[:len(s)-2]
	case strings.HasSuffix(s, "\n"), strings.HasSuffix(s, "\r"):
		return s[:len(s)-1]
	}
	return s
}

func (a *App) repl(cart *cartridge.Cartridge, key string) error {
	s, err := a.newSessionInterruptible(cart, key, cartridge.REPL)
	if err != nil {
		return err
	}
	defer s.Bot.Close()
	failed := 0
	r := &term.REPL{
		Session: s, Confirmer: s.confirmer, Printer: s.printer, Stdin: a.Stdin, Stdout: a.Stdout, Stderr: a.Stderr,
		Term:        a.Getenv("TERM"),
		HistoryFile: a.historyFile(cart),
		Prompt:      renderPrompt(cart, s.printer.Color),
		PlainPrompt: renderPrompt(cart, false),
		ReportError: func(err error) {
			failed++
			fmt.Fprintln(a.Stderr, "nb: "+err.Error())
		},
		Interrupts: a.interrupts(),
	}
	s.Exchange.Steering = r.Steering // lines typed while an answer runs
	if err := r.Run(a.context()); err != nil {
		return err
	}
	if failed > 0 && !term.IsTerminal(a.Stdin) {
		// Piped, a REPL is a script: its exit status says whether every
		// message got its answer.
		return &reportedError{fmt.Sprintf("%d of the messages failed", failed)}
	}
	return nil
}

// reportUnreadable says how many stored conversations the current
// password cannot open, so a changed password does not look like lost data.
func (a *App) reportUnreadable(n int) {
	if n == 0 {
		return
	}
	what := "stored conversations of this cartridge cannot"
	if n == 1 {
		what = "stored conversation of this cartridge cannot"
	}
	if a.Getenv("NANO_BOTS_ENCRYPTION_PASSWORD") == "" {
		fmt.Fprintf(a.Stderr, "nb: %d %s be read: they are encrypted, and NANO_BOTS_ENCRYPTION_PASSWORD is not set\n", n, what)
		return
	}
	fmt.Fprintf(a.Stderr, "nb: %d %s be decrypted with the current NANO_BOTS_ENCRYPTION_PASSWORD (stored with another password?)\n", n, what)
}

// reportedError is a failure whose details were already printed.
type reportedError struct{ msg string }

func (e *reportedError) Error() string { return e.msg }

func renderPrompt(c *cartridge.Cartridge, color bool) string {
	var b strings.Builder
	for _, part := range c.Prompt() {
		b.WriteString(term.Paint(part.Text, part.Color, color))
	}
	return b.String()
}

// historyFile is the REPL's line history for this cartridge.
func (a *App) historyFile(c *cartridge.Cartridge) string {
	if a.Getenv("NANO_BOTS_ENCRYPTION_PASSWORD") != "" {
		// The line history would keep in plaintext what the state
		// encrypts: with encryption on, the REPL keeps none.
		return ""
	}
	abs := ""
	if c.Path != "" {
		abs, _ = filepath.Abs(c.Path)
	}
	m := c.Meta()
	return state.LineHistoryFile(a.host().StateEnv(), m.Author, m.Name, abs)
}

// stateCommand prints, lists or deletes stored conversations.
func (a *App) stateCommand(cart *cartridge.Cartridge, key string, rest []string) error {
	host := a.host()
	store := host.StateStore(cart)
	ctx := a.context()
	stateBot := bot.StateBot(cart)
	endUser := host.EndUser(cart, "")
	sub := ""
	if len(rest) > 0 {
		sub = rest[0]
	}
	switch sub {
	case "list":
		list, err := store.List(ctx, stateBot)
		if err != nil {
			return err
		}
		a.reportUnreadable(list.Unreadable)
		if len(list.Keys) == 0 {
			dir, _ := store.Location(stateBot)
			fmt.Fprintf(a.Stderr, "nb: no stored conversations in %s\n", dir)
			return nil
		}
		w := tabwriter.NewWriter(a.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "KEY\tEND USER\tLAST ACTIVITY\tEVENTS")
		for _, k := range list.Keys {
			fmt.Fprintf(w, "%s\t%s\t%s\t%d\n", k.Key, k.EndUser, k.LastActivity.Local().Format("2006-01-02 15:04:05"), k.Events)
		}
		return w.Flush()
	case "delete", "":
		if key == "" {
			if sub == "delete" {
				return &usageError{"state delete needs a state key: nb CARTRIDGE KEY state delete"}
			}
			return &usageError{"state needs a state key (- is stateless): nb CARTRIDGE KEY state, or nb CARTRIDGE - state list"}
		}
		conv, err := store.Open(stateBot, endUser, key)
		if err != nil {
			return err
		}
		if sub == "delete" {
			existed, err := conv.Delete(ctx)
			if err != nil {
				return err
			}
			if existed {
				fmt.Fprintf(a.Stderr, "nb: deleted the state of key %q (%s)\n", key, conv.Location())
			} else {
				fmt.Fprintf(a.Stderr, "nb: nothing is stored under key %q (%s)\n", key, conv.Location())
			}
			return nil
		}
		history, err := conv.History(ctx)
		if err != nil {
			return err
		}
		if len(history) == 0 {
			if list, err := store.List(ctx, stateBot); err == nil {
				a.reportUnreadable(list.Unreadable)
			}
		}
		out := struct {
			Path    string            `json:"path"`
			Key     string            `json:"key"`
			History []state.JSONEvent `json:"history"`
		}{conv.HistoryLocation(), key, state.JSON(history)}
		enc := json.NewEncoder(a.Stdout)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		return enc.Encode(out)
	default:
		return &usageError{fmt.Sprintf("unknown state command %q: use state, state list or state delete", sub)}
	}
}
