package main

import (
	cli "github.com/nbots/nb/cmd/nb/robopages"
	"github.com/nbots/nb/robopage"
	"github.com/nbots/nb/term"
)

// robopages runs `nb robopages ...` with the process's environment and
// streams. Ctrl-C or SIGTERM stop it: serve shuts down and exits 0, the
// other commands exit 130 or 143.
func (a *App) robopages(args []string) int {
	return cli.Main(a.context(), args, cli.Process{
		Environ:  a.Environ,
		Stdin:    a.Stdin,
		Stdout:   a.Stdout,
		Stderr:   a.Stderr,
		Terminal: term.IsTerminal(a.Stdin),
		Flags:    a.flags,
	})
}

// robopageExecutor runs the robopages of the cartridges of this process,
// with the environment after .env is read.
func (a *App) robopageExecutor() *robopage.Executor {
	if a.executor == nil {
		a.executor = robopage.NewExecutor(a.Environ)
	}
	return a.executor
}
