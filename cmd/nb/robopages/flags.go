package robopages

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/nbots/nb/cmd/nb/cliflag"
)

// flagSet is a command's flags in nb's one grammar (cmd/nb/cliflag):
// -P, --path PATH.
type flagSet struct {
	set  *cliflag.Set
	name string
}

func (c *command) flags(name, synopsis string) *flagSet {
	full := strings.TrimSpace("nb robopages " + name)
	newSet := c.newFlags
	if newSet == nil {
		newSet = func(name, usage, about string) *cliflag.Set {
			return cliflag.New(name, usage, about, c.stdout, c.stderr)
		}
	}
	return &flagSet{set: newSet(full, full+" [flags]", synopsis), name: name}
}

// shown sets the help's placeholder and default of the flag just defined.
func (f *flagSet) shown(long, arg string) {
	if arg != "" {
		f.set.Placeholder(long, arg)
	}
}

func (f *flagSet) stringVar(p *string, short, long, def, arg, usage string) {
	f.set.StringVarP(p, long, short, def, usage)
	f.shown(long, arg)
}

func (f *flagSet) boolVar(p *bool, short, long, usage string) {
	f.set.BoolVarP(p, long, short, false, usage)
}

func (f *flagSet) durationVar(p *time.Duration, long string, def time.Duration, usage string) {
	f.set.DurationVar(p, long, def, usage)
	f.shown(long, "DURATION")
}

func (f *flagSet) intVar(p *int, long string, def int, arg, usage string) {
	f.set.IntVar(p, long, def, usage)
	f.shown(long, arg)
}

func (f *flagSet) varFlag(v pflag.Value, short, long, arg, usage string) {
	f.set.VarP(v, long, short, usage)
	f.shown(long, arg)
}

// parse reads the flags; --help prints the help on stdout (cliflag.ErrHelp),
// a mistake is a usage error that points at the help.
func (f *flagSet) parse(args []string, _ io.Writer) error {
	if err := f.set.Parse(args); err != nil {
		var ue *cliflag.UsageError
		if errors.As(err, &ue) {
			return usageError{fmt.Errorf("%v (see nb robopages %s --help)", ue.Err, f.name)}
		}
		return err
	}
	if f.set.NArg() > 0 {
		return usageError{fmt.Errorf("unexpected argument %q (see nb robopages %s --help)", f.set.Arg(0), f.name)}
	}
	return nil
}
