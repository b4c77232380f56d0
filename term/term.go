// Package term is nb's terminal front-end: it prints an agent's events
// with the cartridge's affixes and colours, asks for tool confirmations,
// and runs the REPL.
package term

import (
	"os"

	"golang.org/x/term"

	"github.com/nbots/nb/color"
)

// ColorEnabled decides whether output is coloured: never when NO_COLOR is
// set, always when CLICOLOR_FORCE is set (and not 0), else only when
// stdout and stderr are both terminals and TERM is not dumb (the
// reference's rule).
func ColorEnabled(getenv func(string) string, stdout, stderr *os.File) bool {
	if getenv("NO_COLOR") != "" {
		return false
	}
	if f := getenv("CLICOLOR_FORCE"); f != "" && f != "0" {
		return true
	}
	if getenv("TERM") == "dumb" {
		return false
	}
	return IsTerminal(stdout) && IsTerminal(stderr)
}

// IsTerminal reports whether f is a terminal.
func IsTerminal(f *os.File) bool {
	return f != nil && term.IsTerminal(int(f.Fd()))
}

// Paint wraps text in the named colour when enabled; an unknown name
// (already refused when the cartridge was loaded) leaves text as it is.
func Paint(text, name string, enabled bool) string {
	if !enabled || name == "" {
		return text
	}
	sgr, err := color.SGR(name)
	if err != nil {
		return text
	}
	return color.Wrap(text, sgr)
}
