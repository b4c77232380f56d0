package main

import (
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/nbots/nb/cartridge"
)

// subcommands are nb's own commands, for suggestions and completion.
var subcommands = []string{"serve", "agents", "mcp", "robopages", "gateway", "security", "specification", "version", "completion", "help"}

// cartridgeCommands are the commands after a cartridge and a state key.
var cartridgeCommands = []string{"eval", "repl", "state", "cartridge", "mcp"}

// approvalFlags takes the leading --yes, -y and --allow-tool NAME flags
// (before the cartridge, so that eval's words stay free to start with a
// dash) and returns the rest of the arguments.
func (a *App) approvalFlags(args []string) ([]string, error) {
	for len(args) > 0 {
		f := args[0]
		switch {
		case f == "--yes" || f == "-y":
			a.approve.All = true
			args = args[1:]
		case f == "--allow-tool":
			if len(args) < 2 || strings.TrimSpace(args[1]) == "" {
				return nil, &usageError{"--allow-tool needs a tool's name (nb --allow-tool exec bot.yml - repl)"}
			}
			for _, name := range strings.Split(args[1], ",") {
				a.approve.Allow(strings.TrimSpace(name))
			}
			args = args[2:]
		case strings.HasPrefix(f, "--allow-tool="):
			for _, name := range strings.Split(strings.TrimPrefix(f, "--allow-tool="), ",") {
				a.approve.Allow(strings.TrimSpace(name))
			}
			args = args[1:]
		default:
			return args, nil
		}
	}
	return args, nil
}

// leadingFlagError explains a flag before the cartridge or the command
// that nb does not take there (nb --yse bot.yml - eval hi).
func leadingFlagError(f string) error {
	name, _, _ := strings.Cut(strings.TrimLeft(f, "-"), "=")
	msg := fmt.Sprintf("unknown flag %s", f)
	if near := cartridge.Nearest(name, []string{"yes", "allow-tool", "help", "version"}); near != "" {
		msg += fmt.Sprintf(": did you mean --%s?", near)
	}
	return &usageError{msg + " (before the cartridge nb takes --yes, --allow-tool NAME, --help and --version; a command's own flags come after it: nb serve --listen ...)"}
}

// commandSlip names the common slips of nb CARTRIDGE STATE-KEY COMMAND: a
// mistyped subcommand (nb serv), a forgotten state key (nb bot.yml eval
// hi), a forgotten command (nb bot.yml).
func (a *App) commandSlip(args []string) error {
	if !strings.ContainsAny(args[0], "/.") && args[0] != "-" {
		if s := cartridge.Nearest(args[0], subcommands); s != "" {
			// Only when no cartridge has that name.
			if _, err := cartridge.Find(args[0], a.host().CartridgeEnv()); err != nil {
				return &usageError{fmt.Sprintf("unknown command %q: did you mean nb %s?", args[0], s)}
			}
		}
	}
	if len(args) >= 2 && slices.Contains(cartridgeCommands, args[1]) && (len(args) < 3 || !slices.Contains(cartridgeCommands, args[2])) {
		return &usageError{fmt.Sprintf("the state key is missing: nb %s - %s (- keeps no conversation; a key keeps one)", args[0], strings.Join(args[1:], " "))}
	}
	switch len(args) {
	case 1:
		return &usageError{fmt.Sprintf("missing the state key and the command: nb %s - eval \"message\" (or - repl, - state, - cartridge; a key instead of - keeps the conversation)", args[0])}
	case 2:
		return &usageError{"missing command: give eval, repl, state or cartridge after the cartridge and the state key"}
	}
	return nil
}

// versionText is nb version: the version, the commit and its date when
// the binary was built from a checkout, the build date, the Go version
// and platform.
func versionText() string {
	var b strings.Builder
	fmt.Fprintf(&b, "nb %s (Nano Bots specification %s)\n", Version, Specification)
	commit, when, dirty := "unknown", "", ""
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				commit = s.Value
			case "vcs.time":
				when = s.Value
			case "vcs.modified":
				if s.Value == "true" {
					dirty = " (with uncommitted changes)"
				}
			}
		}
	}
	if when != "" {
		commit += " of " + when
	}
	fmt.Fprintf(&b, "commit: %s%s\n", commit, dirty)
	built := buildDate
	if built == "" {
		// Without -ldflags "-X main.buildDate=...", the binary's own date.
		if exe, err := os.Executable(); err == nil {
			if fi, err := os.Stat(exe); err == nil {
				built = fi.ModTime().UTC().Format(time.RFC3339)
			}
		}
	}
	if built != "" {
		fmt.Fprintf(&b, "built: %s\n", built)
	}
	fmt.Fprintf(&b, "go: %s %s/%s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return b.String()
}

// buildDate is set at link time (-ldflags "-X main.buildDate=…"); without
// it nb version shows the commit's date.
var buildDate string
