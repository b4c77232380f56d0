//go:build !unix

package main

import "errors"

// reexec is not available here: the gateway stops, for its supervisor
// to start again.
func (a *App) reexec() error {
	return errors.New("/restart: this system cannot replace the process: the gateway stopped; start it again")
}
