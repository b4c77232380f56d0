package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"

	"github.com/nbots/nb/cartridge"
	"github.com/nbots/nb/robopage"
	"github.com/nbots/nb/robopage/cli"
	"github.com/nbots/nb/term"
	"github.com/nbots/nb/tool"
)

// robopages runs `nb robopages ...` with the process's environment and
// streams. Ctrl-C or SIGTERM stop it: serve shuts down and exits 0, the
// other commands exit 130 or 143.
func (a *App) robopages(args []string) int {
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	go func() {
		select {
		case sig := <-sigs:
			cancel(&signalError{sig: sig})
		case <-ctx.Done():
		}
	}()
	return cli.Main(ctx, args, cli.Process{
		Environ:  os.Environ(),
		Stdin:    a.Stdin,
		Stdout:   a.Stdout,
		Stderr:   a.Stderr,
		Terminal: term.IsTerminal(a.Stdin),
	})
}

// ExitCode is the status of a command stopped by the signal: 128 plus
// its number, as shells report it.
func (e *signalError) ExitCode() int {
	if e.sig == syscall.SIGTERM {
		return exitTerminated
	}
	return exitInterrupt
}

// robopageExecutor runs the robopages of every cartridge of this process:
// one bound on concurrent runs, and the children's environment taken
// from nb's (after .env is loaded) by the allow-list of package proc.
var robopageExecutor = sync.OnceValue(func() *robopage.Executor {
	return &robopage.Executor{Environ: os.Environ(), Engine: os.Getenv("ROBOPAGES_CONTAINER_RUNTIME")}
})

// robopageTools loads the tools a cartridge's robopages key names
// (paths relative to the cartridge's folder; ~ and $VAR expanded).
// Broken pages are skipped; their problems are reported on stderr.
func robopageTools(ctx context.Context, c *cartridge.Cartridge, stderr io.Writer) ([]tool.Tool, error) {
	var out []tool.Tool
	base := ""
	if c.Path != "" {
		base = filepath.Dir(c.Path)
	}
	ex := robopageExecutor()
	for _, ref := range c.Robopages() {
		tools, problems, err := robopage.LoadTools(ctx, robopage.ResolvePath(ref.Path, base, ex.Environ), ref.Filter, ex)
		if errors.Is(err, robopage.ErrNoPages) {
			return nil, fmt.Errorf("%s:%d: robopages: %w: fix its `path` in the cartridge (a relative path starts at the cartridge's folder)", displayPath(c), ref.Line, err)
		}
		if err != nil {
			return nil, fmt.Errorf("%s:%d: robopages: %w", displayPath(c), ref.Line, err)
		}
		for _, p := range problems {
			if p.Severity == robopage.Error {
				fmt.Fprintf(stderr, "nb: warning: robopage skipped: %v\n", p)
			} else {
				fmt.Fprintf(stderr, "nb: warning: robopage: %v\n", p)
			}
		}
		out = append(out, tools...)
	}
	return out, nil
}
