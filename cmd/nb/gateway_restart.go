//go:build unix

package main

import (
	"fmt"
	"os"
	"syscall"
)

// reexec replaces the process with a new nb gateway of the same
// arguments and environment (/restart, as nanobot's os.execv), once the
// stopped gateway has released everything.
func (a *App) reexec() error {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("/restart: %w", err)
	}
	fmt.Fprintln(a.Stderr, "nb: restarting (/restart)")
	return syscall.Exec(exe, append([]string{exe}, a.Args...), a.Environ)
}
