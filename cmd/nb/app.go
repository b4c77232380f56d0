package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/joho/godotenv"

	"github.com/nbots/nb/agent"
	"github.com/nbots/nb/cartridge"
	"github.com/nbots/nb/provider"
	"github.com/nbots/nb/robopage/cli"
	"github.com/nbots/nb/script"
	"github.com/nbots/nb/script/fennel"
	"github.com/nbots/nb/state"
	"github.com/nbots/nb/term"
	"github.com/nbots/nb/tool"
	"github.com/nbots/nb/tool/function"
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

// signalError ends a run stopped by a signal.
type signalError struct{ sig os.Signal }

func (e *signalError) Error() string { return "stopped by " + e.sig.String() }

// App is one run of nb.
type App struct {
	Args           []string
	Stdin          *os.File
	Stdout, Stderr *os.File
	Getenv         func(string) string
}

// usageError is a mistake on the command line (exit 2).
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg + " (see nb help)" }

// Run dispatches the command line and returns the exit code.
func (a *App) Run() int {
	args := a.Args
	if len(args) == 0 {
		return a.help()
	}
	switch args[0] {
	case "", "help", "-h", "--help":
		return a.help()
	case "version", "--version":
		fmt.Fprintln(a.Stdout, Version)
		return exitOK
	case "specification":
		fmt.Fprintln(a.Stdout, Specification)
		return exitOK
	case "security":
		a.loadDotEnv()
		return a.security()
	case "robopages":
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		return cli.Main(ctx, args[1:], a.Stdin, a.Stdout, a.Stderr)
	}
	a.loadDotEnv()
	return a.report(a.cartridgeCommand(args))
}

// report prints err as one line (or a located block) and picks the exit code.
func (a *App) report(err error) int {
	if err == nil {
		return exitOK
	}
	var se *signalError
	if errors.As(err, &se) {
		if se.sig == syscall.SIGTERM {
			return exitTerminated
		}
		return exitInterrupt
	}
	if errors.Is(err, context.Canceled) {
		return exitInterrupt
	}
	fmt.Fprintln(a.Stderr, "nb: "+err.Error())
	var ue *usageError
	if errors.As(err, &ue) {
		return exitUsage
	}
	return exitFailure
}

// loadDotEnv reads .env in the working directory without overriding
// variables that are set.
func (a *App) loadDotEnv() {
	if _, err := os.Stat(".env"); err != nil {
		return
	}
	if err := godotenv.Load(".env"); err != nil {
		// godotenv's parse errors quote the file's text (the rest of the
		// file, for a bad name), and a .env holds API keys: say only what
		// is wrong with it.
		var pe *os.PathError
		if errors.As(err, &pe) {
			fmt.Fprintf(a.Stderr, "nb: .env: %v (ignored)\n", pe.Err)
			return
		}
		fmt.Fprintln(a.Stderr, "nb: .env: not in NAME=value form (a bad variable name or an unterminated quote); the whole file is ignored")
	}
}

func (a *App) help() int {
	io.WriteString(a.Stdout, helpText) //nolint:errcheck // nothing to do about a closed stdout
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

  nb - STATE-KEY state
  nb cartridge.yml STATE-KEY state
  nb cartridge.yml - state list
  nb cartridge.yml STATE-KEY state delete

  nb robopages serve|run|validate|view|create|install ...

  nb security
  nb specification
  nb version
  nb help

eval reads the message from its words, or else from standard input:
  cat article.txt | nb translate.yml - eval | nb summarize.yml - eval

Environment: NANO_BOTS_CARTRIDGES_PATH, NANO_BOTS_STATE_PATH,
NANO_BOTS_END_USER, NANO_BOTS_ENCRYPTION_PASSWORD, NANO_BOTS_HISTORY_BUDGET,
NO_COLOR, CLICOLOR_FORCE; a .env file in the working directory is read.
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

// cartridgeCommand handles nb CARTRIDGE STATE COMMAND [WORDS...].
func (a *App) cartridgeCommand(args []string) error {
	cart, err := a.loadCartridge(args[0])
	if err != nil {
		return err
	}
	for _, w := range cart.Warnings {
		fmt.Fprintln(a.Stderr, "nb: warning: "+w)
	}
	key := ""
	if len(args) > 1 {
		key = strings.TrimSpace(args[1])
		if key == "-" {
			key = ""
		}
	}
	if len(args) < 3 {
		return &usageError{"missing command: give eval, repl, state or cartridge after the cartridge and the state key"}
	}
	switch cmd, rest := args[2], args[3:]; cmd {
	case "eval":
		return a.eval(cart, key, rest)
	case "repl":
		if len(rest) > 0 {
			return &usageError{"repl takes no words"}
		}
		return a.repl(cart, key)
	case "state":
		return a.stateCommand(cart, key, rest)
	case "cartridge":
		out, err := cart.Marshal()
		if err != nil {
			return err
		}
		a.Stdout.Write(out) //nolint:errcheck // nothing to do about a closed stdout
		return nil
	default:
		return &usageError{fmt.Sprintf("unknown command %q: use eval, repl, state or cartridge", cmd)}
	}
}

func (a *App) loadCartridge(name string) (*cartridge.Cartridge, error) {
	if name == "-" {
		return cartridge.Default(os.LookupEnv), nil
	}
	path, err := cartridge.Find(name, cartridge.EnvFromOS())
	if err != nil {
		return nil, err
	}
	return cartridge.Load(path, os.LookupEnv)
}

// session is everything an eval or a REPL needs.
type session struct {
	agent   *agent.Agent
	printer *term.Printer
}

func (a *App) newSession(cart *cartridge.Cartridge, key string, mode cartridge.Mode) (*session, error) {
	if err := cart.RequireProvider(); err != nil {
		return nil, err
	}
	if err := a.checkAdapters(cart, mode); err != nil {
		return nil, err
	}
	p := cart.Provider()
	endUser := EndUser(cart, a.Getenv)
	cfg := provider.Config{ID: p.ID, Credentials: p.Credentials, Options: p.Options, Settings: p.Settings}
	if _, ok := p.Settings["user"]; ok {
		cfg.User = state.NewCipher(a.Getenv("NANO_BOTS_ENCRYPTION_PASSWORD")).Soft(endUser)
	}
	prov, err := provider.New(cfg)
	if err != nil {
		return nil, credentialError(cart, err)
	}
	policy := provider.DefaultRetryPolicy()
	policy.OnRetry = func(err error, attempt int, delay time.Duration) {
		fmt.Fprintf(a.Stderr, "nb: %v; retrying in %.1fs (%d/%d)\n", err, delay.Seconds(), attempt, policy.MaxRetries)
	}
	prov = provider.WithRetry(prov, policy)

	fl := cart.FunctionLimits()
	scripts := script.New(script.Options{
		Sandboxed: cart.Sandboxed(), FennelCacheDir: fennelCacheDir(), Environ: os.Environ(),
		Limits: script.Limits{CPU: script.CPUUnits(fl.CPUSeconds), Memory: fl.Memory, Timeout: fl.Timeout},
	})
	tools := &tool.Set{}
	for _, t := range function.FromCartridge(cart, scripts) {
		tools.Add(t)
	}
	robo, err := robopageTools(context.Background(), cart, a.Stderr)
	if err != nil {
		return nil, err
	}
	for _, t := range robo {
		tools.Add(t)
	}

	var store *state.Store
	if key != "" {
		paths := a.statePaths(cart)
		store, err = paths.Open(botOf(cart), endUser, key)
		if err != nil {
			return nil, err
		}
	}
	color := term.ColorEnabled(a.Getenv, a.Stdout, a.Stderr)
	printer := &term.Printer{W: a.Stdout, Cartridge: cart, Mode: mode, Color: color}
	ag, err := agent.New(cart, agent.Options{
		Mode: mode, Provider: prov, Tools: tools, Scripts: scripts, Store: store, OnEvent: printer.OnEvent,
		Confirmer: &term.Confirmer{Printer: printer, Stderr: a.Stderr},
	})
	if err != nil {
		return nil, err
	}
	return &session{agent: ag, printer: printer}, nil
}

// checkAdapters reports conflicting adapters before anything is sent.
func (a *App) checkAdapters(cart *cartridge.Cartridge, mode cartridge.Mode) error {
	for _, dir := range []string{"input", "output"} {
		if _, err := cart.Adapter(mode, dir); err != nil {
			return err
		}
	}
	for _, action := range []cartridge.ToolAction{cartridge.Confirming, cartridge.Executing, cartridge.Responding} {
		if _, err := cart.FeedbackAdapter(mode, action); err != nil {
			return err
		}
	}
	return nil
}

// credentialError names the variable behind a missing credential.
func credentialError(cart *cartridge.Cartridge, err error) error {
	var me *provider.MissingCredentialError
	if !errors.As(err, &me) {
		return fmt.Errorf("%s: %w", displayPath(cart), err)
	}
	key := "provider.credentials." + me.Key
	line := cart.Line(key)
	if line == 0 {
		line = cart.Line("provider")
	}
	if cart.Path == "" {
		line = 0 // a line of the built-in default cartridge means nothing to the user
	}
	loc := displayPath(cart)
	if line > 0 {
		loc = fmt.Sprintf("%s:%d", loc, line)
	}
	raw := cart.RawString("provider", "credentials", me.Key)
	if v, ok := cart.MissingFor(key); ok {
		return fmt.Errorf("%s: %s is %s, but the environment variable %s is not set: export it, or put it in a .env file", loc, key, raw, v)
	}
	if v, ok := cartridge.EnvVar(raw); ok {
		return fmt.Errorf("%s: %s is %s, but the environment variable %s is empty: export it, or put it in a .env file", loc, key, raw, v)
	}
	return fmt.Errorf("%s: %s is needed by the %s provider but is not set in the cartridge", loc, key, me.Provider)
}

func displayPath(c *cartridge.Cartridge) string {
	if c.Path == "" {
		return "default cartridge (-)"
	}
	return c.Path
}

// EndUser is the end-user identity: NANO_BOTS_END_USER, overridden by a
// non-blank provider.settings.user (for any provider, as the specification
// says), else "unknown".
func EndUser(c *cartridge.Cartridge, getenv func(string) string) string {
	user := strings.TrimSpace(getenv("NANO_BOTS_END_USER"))
	if s := strings.TrimSpace(c.String("provider", "settings", "user")); s != "" {
		user = s
	}
	if user == "" {
		user = "unknown"
	}
	return user
}

func botOf(c *cartridge.Cartridge) state.Bot {
	m := c.Meta()
	return state.Bot{Author: m.Author, Name: m.Name, Version: m.Version}
}

func (a *App) statePaths(c *cartridge.Cartridge) state.Paths {
	root := state.RootFrom(c.String("state", "path"), c.String("state", "directory"), state.EnvFromOS())
	p := state.Paths{Root: root}
	if pw := a.Getenv("NANO_BOTS_ENCRYPTION_PASSWORD"); pw != "" {
		p.Cipher = state.NewCipher(pw)
	}
	return p
}

// fennelCacheDir is where compiled Fennel is kept across runs; "" (no
// home folder) keeps it in memory only.
func fennelCacheDir() string {
	dir, err := fennel.DefaultCacheDir()
	if err != nil {
		return ""
	}
	return dir
}

// eval runs one exchange: the words joined by spaces, or else all of
// standard input minus one trailing line ending.
func (a *App) eval(cart *cartridge.Cartridge, key string, words []string) error {
	// The session first: a cartridge that cannot run is reported before
	// the user types (or a pipe produces) a message it could not send.
	s, err := a.newSession(cart, key, cartridge.Eval)
	if err != nil {
		return err
	}
	input := strings.Join(words, " ")
	if input == "" {
		if term.IsTerminal(a.Stdin) {
			fmt.Fprintln(a.Stderr, "nb: reading the message from standard input; end it with Ctrl-D")
		}
		data, err := io.ReadAll(a.Stdin)
		if err != nil {
			return fmt.Errorf("read standard input: %w", err)
		}
		input = chomp(string(data))
	}
	if strings.TrimSpace(input) == "" {
		return &usageError{"nothing to send: give the message as words after eval, or on standard input"}
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	go func() {
		// signal.Stop does not close sigs: the end of the eval ends this too.
		select {
		case sig := <-sigs:
			cancel(&signalError{sig: sig})
		case <-ctx.Done():
		}
	}()
	s.printer.Prefix()
	_, err = s.agent.Ask(ctx, input)
	if err != nil {
		if s.printer.Wrote {
			io.WriteString(a.Stdout, "\n") //nolint:errcheck // end the partial line
		}
		if cause := context.Cause(ctx); cause != nil {
			return cause
		}
		return err
	}
	s.printer.Suffix()
	return nil
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
	s, err := a.newSession(cart, key, cartridge.REPL)
	if err != nil {
		return err
	}
	failed := 0
	r := &term.REPL{
		Agent: s.agent, Printer: s.printer, Stdin: a.Stdin, Stderr: a.Stderr,
		HistoryFile: a.historyFile(cart),
		Prompt:      renderPrompt(cart, s.printer.Color),
		ReportError: func(err error) {
			failed++
			fmt.Fprintln(a.Stderr, "nb: "+err.Error())
		},
	}
	if err := r.Run(context.Background()); err != nil {
		return err
	}
	if failed > 0 && !term.IsTerminal(a.Stdin) {
		// Piped, a REPL is a script: its exit status says whether every
		// message got its answer.
		return &reportedError{fmt.Sprintf("%d of the messages failed", failed)}
	}
	return nil
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
	root := state.RootFrom("", "", state.EnvFromOS())
	name := "default"
	if c.Path != "" {
		m := c.Meta()
		if m.Author != "" && m.Name != "" {
			name = state.Slug(m.Author) + "_" + state.Slug(m.Name)
		} else {
			abs, _ := filepath.Abs(c.Path)
			name = state.Slug(strings.ReplaceAll(abs, "/", " "))
		}
	}
	return filepath.Join(root, state.Implementation, "repl-history", name+".history")
}

// stateCommand prints, lists or deletes stored conversations.
func (a *App) stateCommand(cart *cartridge.Cartridge, key string, rest []string) error {
	paths := a.statePaths(cart)
	bot := botOf(cart)
	endUser := EndUser(cart, a.Getenv)
	sub := ""
	if len(rest) > 0 {
		sub = rest[0]
	}
	switch sub {
	case "list":
		keys, err := paths.List(bot)
		if err != nil {
			return err
		}
		if len(keys) == 0 {
			dir, _ := paths.CartridgeDir(bot)
			fmt.Fprintf(a.Stderr, "nb: no stored conversations in %s\n", dir)
			return nil
		}
		w := tabwriter.NewWriter(a.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "KEY\tEND USER\tLAST ACTIVITY\tEVENTS")
		for _, k := range keys {
			events := fmt.Sprint(k.Events)
			if k.Events < 0 {
				events = "?"
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", k.Key, k.EndUser, k.LastActivity.Local().Format("2006-01-02 15:04:05"), events)
		}
		return w.Flush()
	case "delete", "":
		if key == "" {
			if sub == "delete" {
				return &usageError{"state delete needs a state key: nb CARTRIDGE KEY state delete"}
			}
			return &usageError{"state needs a state key (- is stateless): nb CARTRIDGE KEY state, or nb CARTRIDGE - state list"}
		}
		store, err := paths.Open(bot, endUser, key)
		if err != nil {
			return err
		}
		if sub == "delete" {
			if err := store.Delete(); err != nil {
				return err
			}
			fmt.Fprintf(a.Stderr, "nb: deleted the state of key %q (%s)\n", key, store.Dir)
			return nil
		}
		doc, err := store.Load()
		if err != nil {
			return err
		}
		out := struct {
			Path    string        `json:"path"`
			Key     string        `json:"key"`
			History []state.Event `json:"history"`
		}{store.File(), key, doc.History}
		enc := json.NewEncoder(a.Stdout)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		return enc.Encode(out)
	default:
		return &usageError{fmt.Sprintf("unknown state command %q: use state, state list or state delete", sub)}
	}
}
