package robopages

import (
	"flag"
	"fmt"
	"io"
	"text/tabwriter"
	"time"
)

// flagSet is a flag.FlagSet whose flags may have a one-letter alias and
// whose help lists each flag once, as "-P, --path PATH".
type flagSet struct {
	fs       *flag.FlagSet
	name     string
	synopsis string
	entries  []flagEntry
}

type flagEntry struct {
	short, long string
	arg         string // the value's placeholder; empty for a boolean
	usage       string
	def         string // the default shown; empty for none
}

func (c *command) flags(name, synopsis string) *flagSet {
	fs := flag.NewFlagSet("nb robopages "+name, flag.ContinueOnError)
	// parse prints the help itself: on stdout when asked for, and only a
	// pointer to it after a mistake (Main prints the mistake).
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return &flagSet{fs: fs, name: name, synopsis: synopsis}
}

func (f *flagSet) add(short, long, arg, usage, def string) {
	f.entries = append(f.entries, flagEntry{short, long, arg, usage, def})
}

func (f *flagSet) stringVar(p *string, short, long, def, arg, usage string) {
	f.fs.StringVar(p, long, def, usage)
	if short != "" {
		f.fs.StringVar(p, short, def, usage)
	}
	f.add(short, long, arg, usage, def)
}

func (f *flagSet) boolVar(p *bool, short, long, usage string) {
	f.fs.BoolVar(p, long, false, usage)
	if short != "" {
		f.fs.BoolVar(p, short, false, usage)
	}
	f.add(short, long, "", usage, "")
}

func (f *flagSet) durationVar(p *time.Duration, long string, def time.Duration, usage string) {
	f.fs.DurationVar(p, long, def, usage)
	f.add("", long, "DURATION", usage, def.String())
}

func (f *flagSet) intVar(p *int, long string, def int, arg, usage string) {
	f.fs.IntVar(p, long, def, usage)
	shown := ""
	if def != 0 {
		shown = fmt.Sprint(def)
	}
	f.add("", long, arg, usage, shown)
}

func (f *flagSet) varFlag(v flag.Value, short, long, arg, usage string) {
	f.fs.Var(v, long, usage)
	if short != "" {
		f.fs.Var(v, short, usage)
	}
	f.add(short, long, arg, usage, "")
}

// usage writes the command's help.
func (f *flagSet) usage(w io.Writer) {
	fmt.Fprintf(w, "Usage: nb robopages %s [flags]\n\n%s\n\nFlags:\n", f.name, f.synopsis)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, e := range f.entries {
		names := "    --" + e.long
		if e.short != "" {
			names = "-" + e.short + ", --" + e.long
		}
		if e.arg != "" {
			names += " " + e.arg
		}
		text := e.usage
		if e.def != "" {
			text += " (default " + e.def + ")"
		}
		fmt.Fprintf(tw, "  %s\t%s\n", names, text)
	}
	fmt.Fprintf(tw, "  -h, --help\tshow this help\n")
	tw.Flush()
}

// parse reads the flags; -h prints the help on stdout (flag.ErrHelp), a
// mistake is a usage error that points at the help.
func (f *flagSet) parse(args []string, stdout io.Writer) error {
	if err := f.fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			f.usage(stdout)
			return err
		}
		return usageError{fmt.Errorf("%v (see nb robopages %s --help)", err, f.name)}
	}
	if f.fs.NArg() > 0 {
		return usageError{fmt.Errorf("unexpected argument %q (see nb robopages %s --help)", f.fs.Arg(0), f.name)}
	}
	return nil
}
