package main

import (
	"github.com/nbots/nb/cmd/nb/cliflag"
)

// flags returns the flag set of an nb command (nb serve): the one
// grammar of cmd/nb/cliflag, with the help's environment section from
// the table of environ.go. A command adds a flag with one line:
//
//	store := fs.String("store", "", "where conversations are kept (`URL`)")
func (a *App) flags(name, usage, about string) *cliflag.Set {
	fs := cliflag.New(name, usage, about, a.Stdout, a.Stderr)
	fs.Environment = environmentHelp(name)
	a.lastFlags = fs
	return fs
}
