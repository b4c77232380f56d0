package main

import (
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/nbots/nb/cmd/nb/cliflag"
)

// helpPaths are every command with a help of its own (nb COMMAND
// --help), in the order nb help --man shows them. TestHelpEveryCommand
// walks them, and fails when a subcommand is missing here.
var helpPaths = [][]string{
	{"eval"}, {"repl"}, {"state"}, {"cartridge"},
	{"serve"},
	{"mcp"}, {"mcp", "serve"},
	{"agents"}, {"agents", "list"}, {"agents", "run"},
	{"robopages"}, {"robopages", "serve"}, {"robopages", "run"}, {"robopages", "validate"},
	{"robopages", "view"}, {"robopages", "create"}, {"robopages", "install"},
	{"gateway"}, {"gateway", "init"}, {"gateway", "onboard"}, {"gateway", "chat"}, {"gateway", "pair"}, {"gateway", "status"},
	{"gateway", "cron"}, {"gateway", "cron", "list"}, {"gateway", "cron", "add"}, {"gateway", "cron", "remove"},
	{"gateway", "cron", "enable"}, {"gateway", "cron", "run"},
	{"gateway", "sessions"}, {"gateway", "sessions", "import"}, {"gateway", "sessions", "export"},
	{"gateway", "channels"},
	{"pipeline"}, {"pipeline", "check"}, {"pipeline", "run"}, {"pipeline", "resume"}, {"pipeline", "graph"},
	{"state", "export"}, {"state", "import"},
	{"security"}, {"specification"}, {"version"}, {"completion"},
}

// cartridgeHelp are the helps of the commands after a cartridge and a
// state key: nb help eval.
var cartridgeHelp = map[string][2]string{
	"eval": {"nb [--yes] [--allow-tool NAME] CARTRIDGE STATE-KEY eval [MESSAGE...]",
		`Sends the message (its words, or else standard input) to the cartridge's bot
and prints the answer. CARTRIDGE is a file, a name looked up in
NANO_BOTS_CARTRIDGES_PATH, or - for the default cartridge; STATE-KEY keeps the
conversation under that key, or - keeps none. The flags come before the
cartridge, so that the message's words may start with a dash.`},
	"repl": {"nb [--yes] [--allow-tool NAME] CARTRIDGE STATE-KEY repl",
		`Talks with the cartridge's bot, one message per line (exit, quit or Ctrl-D to
leave). With TERM unset or dumb, or standard input not a terminal, lines are
read plainly. At a tool's confirmation, "a" approves that tool for the session.`},
	"state": {"nb CARTRIDGE STATE-KEY state\nnb CARTRIDGE - state list\nnb CARTRIDGE STATE-KEY state delete",
		`Prints the conversation kept under STATE-KEY, lists the kept conversations of the
cartridge, or deletes one (see docs/store.md).`},
	"cartridge": {"nb CARTRIDGE - cartridge",
		`Prints the cartridge as nb reads it (defaults filled in), with how its built-in
tools will run here (the exec sandbox above all) as YAML comments.`},
}

// simpleCommand reads the flags of a command that takes none (nb
// version): only --help.
func (a *App) simpleCommand(args []string) error {
	about := map[string]string{
		"version":       "Prints nb's version, the commit and date it was built from, and the Go version.",
		"specification": "Prints the version of the Nano Bots specification nb implements.",
		"security":      "Tells whether the conversations kept on disk are encrypted, and with a password\n(NANO_BOTS_ENCRYPTION_PASSWORD).",
	}[args[0]]
	fs := a.flags("nb "+args[0], "nb "+args[0], about)
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return &usageError{fmt.Sprintf("nb %s takes no words", args[0])}
	}
	return nil
}

// isCartridgeCommand tells nb version - eval hi (a cartridge named
// version) from nb version.
func isCartridgeCommand(args []string) bool {
	return len(args) >= 3 && slices.Contains(cartridgeCommands, args[2])
}

// helpCommand is nb help [COMMAND...] and nb help --man.
func (a *App) helpCommand(args []string) error {
	switch {
	case len(args) == 0:
		a.help()
		return nil
	case len(args) == 1 && args[0] == "--man":
		return a.manPage()
	}
	if h, ok := cartridgeHelp[args[0]]; ok && len(args) == 1 {
		fs := a.flags("nb "+args[0], h[0], h[1])
		if args[0] == "eval" || args[0] == "repl" {
			fs.BoolP("yes", "y", false, "approve every tool call of this run without asking")
			fs.StringSlice("allow-tool", nil, "approve every call of the tool `name` (repeatable, or comma-separated)")
		}
		return fs.Parse([]string{"--help"})
	}
	for _, p := range helpPaths {
		if slices.Equal(p, args) {
			code := a.withArgs(append(slices.Clone(args), "--help")).Run()
			if code != exitOK {
				return &reportedError{"no help"}
			}
			return nil
		}
	}
	return &usageError{fmt.Sprintf("no command nb %s", strings.Join(args, " "))}
}

// withArgs is a copy of a that runs args.
func (a *App) withArgs(args []string) *App {
	return &App{Args: args, Stdin: a.Stdin, Stdout: a.Stdout, Stderr: a.Stderr, Environ: a.Environ}
}

// helpSet returns the flag set of the command at path, as its --help
// shows it, without printing anything.
func (a *App) helpSet(path []string) (*cliflag.Set, error) {
	null, err := os.Open(os.DevNull)
	if err != nil {
		return nil, err
	}
	defer null.Close()
	sub := &App{Stdin: null, Stdout: null, Stderr: null, Environ: a.Environ}
	if _, ok := cartridgeHelp[path[0]]; ok && len(path) == 1 {
		sub.Args = append([]string{"help"}, path...)
	} else {
		sub.Args = append(slices.Clone(path), "--help")
	}
	if code := sub.Run(); code != exitOK || sub.lastFlags == nil {
		return nil, fmt.Errorf("nb %s --help failed", strings.Join(path, " "))
	}
	return sub.lastFlags, nil
}
