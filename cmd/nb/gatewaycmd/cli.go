// Package gatewaycmd implements `nb gateway` and its commands (init,
// chat, pair, status, cron, sessions, channels): it turns the arguments,
// the environment and the configuration into gateway/gatewayrun's
// options (a flag first, then the environment, then the configuration)
// and errors into exit statuses. cmd/nb calls Main with the arguments
// after "gateway" and a context its signal handler ends.
package gatewaycmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"

	"github.com/nbots/nb/bot"
	"github.com/nbots/nb/builtin"
	"github.com/nbots/nb/cmd/nb/cliflag"
	"github.com/nbots/nb/internal/httpguard"
	"github.com/nbots/nb/proc"
	"github.com/nbots/nb/state"
	"github.com/nbots/nb/state/storeurl"
	"github.com/nbots/nb/term"
	"github.com/nbots/nb/tool"
)

// Process is what Main takes from the process it runs in: nothing below
// cmd/nb reads the environment or the terminal itself.
type Process struct {
	// Environ is the environment, with the variables of a .env file.
	Environ []string
	// Stdin is what nb gateway chat reads (nil: nothing); Stdout and
	// Stderr are the outputs.
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// Flags, when set, makes the flag set of each command: cmd/nb's,
	// whose help lists the environment the command reads. nil makes a
	// plain one.
	Flags func(name, usage, about string) *cliflag.Set
	// Host, when set, is the bot host the assistant is built with, given
	// the store the command opened (nil: the files) and the sandbox
	// policy; nil makes one from Environ.
	Host func(store state.Store, requireSandbox bool) bot.Host
	// OpenStore opens the conversation store at a URL (--store, NB_STORE
	// or gateway.store); nil opens it with storeurl's defaults.
	OpenStore func(ctx context.Context, url string) (*storeurl.Store, error)
	// Approval is what --yes and --allow-tool approved before the
	// command (nb gateway chat's turns); nil approves nothing.
	Approval *term.Approval
	// Restart, when set, starts nb gateway again after the owner's
	// /restart stopped it (cmd/nb replaces the process); nil ends it.
	Restart func() error
	// Version is nb's version (the spans' service.version).
	Version string
}

// Exit statuses of Main besides 0: a failure, a mistake on the command
// line, and a command stopped by its context (Ctrl-C). When the
// context's cause has an ExitCode method (cmd/nb's signals), that code is
// used instead of ExitInterrupted.
const (
	ExitFailure     = 1
	ExitUsage       = 2
	ExitInterrupted = 130
)

// Main runs `nb gateway` with args (what follows "gateway") until ctx
// ends, and returns the exit status.
func Main(ctx context.Context, args []string, p Process) int {
	cl := &cli{environ: p.Environ, stdin: p.Stdin, stdout: p.Stdout, stderr: p.Stderr, newFlags: p.Flags, newHost: p.Host, dialStore: p.OpenStore, approval: p.Approval, restart: p.Restart, version: p.Version}
	return cl.report(ctx, cl.run(ctx, args))
}

// cli is one run of nb gateway.
type cli struct {
	environ        []string
	stdin          io.Reader
	stdout, stderr io.Writer
	version        string
	newFlags       func(name, usage, about string) *cliflag.Set
	newHost        func(store state.Store, requireSandbox bool) bot.Host
	dialStore      func(ctx context.Context, url string) (*storeurl.Store, error)
	approval       *term.Approval
	restart        func() error
	// store is the conversation store opened (nil: the files).
	store *storeurl.Store
	// requireSandbox refuses exec's commands where bubblewrap cannot run
	// (nb gateway without --allow-unsandboxed-exec, nb gateway chat).
	requireSandbox bool
}

// gatewaySubcommands are nb gateway NAME ... besides init, chat and pair.
var gatewaySubcommands = map[string]func(cl *cli, ctx context.Context, args []string) error{
	"cron":     (*cli).gatewayCronCommand,
	"status":   (*cli).gatewayStatus,
	"sessions": (*cli).gatewaySessionsCommand,
	"channels": (*cli).gatewayChannelsCommand,
}

// Commands are the commands of nb gateway besides init, chat and pair
// (nb help lists each).
func Commands() []string {
	return slices.Sorted(maps.Keys(gatewaySubcommands))
}

// run runs the command args name.
func (cl *cli) run(ctx context.Context, args []string) error {
	if len(args) > 0 {
		switch args[0] {
		case "init":
			return cl.gatewayInit(args[1:])
		case "onboard":
			return cl.gatewayOnboard(args[1:])
		case "pair":
			return cl.gatewayPair(ctx, args[1:])
		case "chat", "agent": // agent: nanobot's name
			return cl.gatewayChat(ctx, args[0], args[1:])
		}
		if fn, ok := gatewaySubcommands[args[0]]; ok {
			return fn(cl, ctx, args[1:])
		}
	}
	return cl.gatewayServe(ctx, args)
}

// report prints err as cmd/nb does ("nb: ..." on stderr) and returns the
// exit status.
func (cl *cli) report(ctx context.Context, err error) int {
	if err == nil {
		return 0
	}
	var ec interface{ ExitCode() int }
	if errors.As(err, &ec) {
		return ec.ExitCode()
	}
	if errors.Is(err, context.Canceled) {
		if errors.As(context.Cause(ctx), &ec) {
			return ec.ExitCode()
		}
		return ExitInterrupted
	}
	if errors.Is(err, cliflag.ErrHelp) {
		return 0
	}
	fmt.Fprintln(cl.stderr, "nb: "+err.Error())
	var ue *usageError
	var fe *cliflag.UsageError
	if errors.As(err, &ue) || errors.As(err, &fe) {
		return ExitUsage
	}
	return ExitFailure
}

// usageError is a mistake on the command line (exit 2).
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg + " (see nb help)" }

func (cl *cli) getenv(name string) string {
	v, _ := proc.Lookup(cl.environ, name)
	return v
}

func (cl *cli) flags(name, usage, about string) *cliflag.Set {
	if cl.newFlags != nil {
		return cl.newFlags(name, usage, about)
	}
	return cliflag.New(name, usage, about, cl.stdout, cl.stderr)
}

// host is the assistant's bot host, with the store opened and the
// sandbox policy.
func (cl *cli) host() bot.Host {
	var st state.Store
	if cl.store != nil {
		st = cl.store.Store
	}
	if cl.newHost != nil {
		h := cl.newHost(st, cl.requireSandbox)
		// Warnings go where this command's messages go (JSON lines
		// under --log-format json).
		h.Warn = func(msg string) { fmt.Fprintln(cl.stderr, "nb: warning: "+msg) }
		return h
	}
	return bot.Host{Environ: cl.environ, AllowHostCredentials: true, AllowMCP: true, Store: st,
		Warn:     func(msg string) { fmt.Fprintln(cl.stderr, "nb: warning: "+msg) },
		Builtins: builtin.Options{RequireSandbox: cl.requireSandbox, RequireAdvice: "start the server with --allow-unsandboxed-exec"}}
}

// openStore opens the conversation store of flagValue, else NB_STORE,
// unless one is open.
func (cl *cli) openStore(ctx context.Context, flagValue string) error {
	raw := flagValue
	if raw == "" {
		raw = cl.getenv("NB_STORE")
	}
	if raw == "" || cl.store != nil {
		return nil
	}
	dial := cl.dialStore
	if dial == nil {
		dial = func(ctx context.Context, raw string) (*storeurl.Store, error) {
			return storeurl.Open(ctx, raw, storeurl.Options{})
		}
	}
	s, err := dial(ctx, raw)
	if err != nil {
		return err
	}
	cl.store = s
	return nil
}

// closeStore closes what openStore opened.
func (cl *cli) closeStore() {
	if cl.store != nil {
		cl.store.Close()
		cl.store = nil
	}
}

// storeChecks are the readiness checks of the store: a replica that
// cannot reach it is not ready.
func (cl *cli) storeChecks() []httpguard.Check {
	if cl.store == nil || !cl.store.Shared {
		return nil
	}
	return []httpguard.Check{{Name: "store", Run: cl.store.Ping}}
}

// approvedTools runs the tool calls approved from the shell (--yes,
// --allow-tool) in nb gateway chat's turns.
type approvedTools struct{ approval *term.Approval }

func (c approvedTools) Confirm(_ context.Context, call tool.Call, _ string) (bool, error) {
	return c.approval.Allows(call.Name), nil
}
