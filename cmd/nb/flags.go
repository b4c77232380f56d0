package main

import (
	"errors"
	"fmt"

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

// parseFlags reads the flags of a command that takes no other words; help
// is true when the help was printed.
func parseFlags(fs *cliflag.Set, args []string) (help bool, err error) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, cliflag.ErrHelp) {
			return true, nil
		}
		return false, err
	}
	if fs.NArg() > 0 {
		return false, &usageError{msg: fmt.Sprintf("%s: unexpected argument %q", fs.Name, fs.Arg(0))}
	}
	return false, nil
}
