// Package cliflag is nb's one flag grammar, shared by every subcommand:
// GNU-style flags (--long, -s, --long=value, flags among the other
// words, -- ending them) read by github.com/spf13/pflag, a help text in
// one layout that lists the environment variables the command reads, old
// spellings kept for a release with a deprecation line on stderr, and
// "did you mean" for a mistyped flag.
//
// A command defines its flags on a Set as it would on a flag.FlagSet
// (one line each: fs.String("store", "", "the store `URL`")) and calls
// Parse.
package cliflag

import (
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/spf13/pflag"

	"github.com/nbots/nb/cartridge"
)

// ErrHelp is returned by Parse when the help was asked for and printed:
// the command has nothing else to do.
var ErrHelp = errors.New("help printed")

// UsageError is a mistake on the command line: the caller exits with 2.
type UsageError struct {
	// Command is the command's name (nb serve).
	Command string
	Err     error
}

func (e *UsageError) Error() string {
	return fmt.Sprintf("%s: %v (see %s --help)", strings.TrimPrefix(e.Command, "nb "), e.Err, e.Command)
}

func (e *UsageError) Unwrap() error { return e.Err }

// Set is the flags of one command, with its help.
type Set struct {
	*pflag.FlagSet
	// Name is the command as typed (nb mcp serve).
	Name string
	// Usage is the synopsis lines, without "Usage:" (nb serve [flags] [DIR...]).
	Usage string
	// About is the description printed under the synopsis.
	About string
	// Environment is the "Environment:" section of the help, from nb's
	// table of variables; every command's help has one.
	Environment string
	// Stdout receives the help asked for; Stderr the deprecation lines.
	Stdout, Stderr io.Writer

	old map[string]oldSpelling
}

// oldSpelling is a deprecated flag name kept for a release.
type oldSpelling struct {
	now  string // the name to write instead
	note string // said after the new name, if anything
}

// New returns the Set of command name (nb serve).
func New(name, usage, about string, stdout, stderr io.Writer) *Set {
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	fs.SortFlags = false
	return &Set{FlagSet: fs, Name: name, Usage: usage, About: about, Stdout: stdout, Stderr: stderr, old: map[string]oldSpelling{}}
}

// Old keeps the deprecated spelling old of flag now working, hidden from
// the help, with a line on stderr when it is used. The flag now must be
// defined already.
func (s *Set) Old(old, now string) { s.OldP(old, "", now) }

// OldP is Old for an old spelling that had a one-letter form too.
func (s *Set) OldP(old, short, now string) {
	f := s.Lookup(now)
	if f == nil {
		panic("cliflag: Old(" + old + "): no flag --" + now)
	}
	alias := s.VarPF(f.Value, old, short, f.Usage)
	alias.NoOptDefVal = f.NoOptDefVal
	alias.Hidden = true
	s.old[old] = oldSpelling{now: now}
}

// Deprecated hides the already defined flag name from the help and says
// note on stderr when it is used (for an old flag whose meaning differs
// from its successor's: note says what to write instead).
func (s *Set) Deprecated(name, note string) {
	f := s.Lookup(name)
	if f == nil {
		panic("cliflag: Deprecated(" + name + "): no such flag")
	}
	f.Hidden = true
	s.old[name] = oldSpelling{note: note}
}

// Parse reads args. It returns ErrHelp after printing the help for
// --help or -h, and a *UsageError for a mistake. A single-dash long
// flag (-listen, the Go flag package's spelling nb used before) still
// works, with a deprecation line.
func (s *Set) Parse(args []string) error {
	args = s.singleDash(args)
	if err := s.FlagSet.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			s.Help(s.Stdout)
			return ErrHelp
		}
		return &UsageError{Command: s.Name, Err: s.explain(err)}
	}
	var used []string
	s.Visit(func(f *pflag.Flag) {
		if _, ok := s.old[f.Name]; ok {
			used = append(used, f.Name)
		}
	})
	for _, name := range used {
		o := s.old[name]
		switch {
		case o.now != "":
			fmt.Fprintf(s.Stderr, "nb: %s --%s is deprecated: write --%s (the old spelling goes away in a future release)\n", s.short(), name, o.now)
		default:
			fmt.Fprintf(s.Stderr, "nb: %s --%s is deprecated: %s\n", s.short(), name, o.note)
		}
	}
	return nil
}

// ParseOnly is Parse for a command that takes flags and no other words:
// a word left over is a UsageError. help is true when the help was asked
// for and printed (the command has nothing else to do).
func (s *Set) ParseOnly(args []string) (help bool, err error) {
	if err := s.Parse(args); err != nil {
		if errors.Is(err, ErrHelp) {
			return true, nil
		}
		return false, err
	}
	if s.NArg() > 0 {
		return false, &UsageError{Command: s.Name, Err: fmt.Errorf("unexpected argument %q", s.Arg(0))}
	}
	return false, nil
}

// short is the command's name without nb, for messages that nb: starts.
func (s *Set) short() string { return strings.TrimPrefix(s.Name, "nb ") }

// singleDash rewrites -name and -name=value to --name when name is one
// of the set's long flags, saying on stderr that the spelling is
// deprecated.
func (s *Set) singleDash(args []string) []string {
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		arg := args[i]
		if arg == "--" {
			return append(out, args[i:]...)
		}
		if strings.HasPrefix(arg, "--") {
			out = append(out, arg)
			name, _, hasValue := strings.Cut(arg[2:], "=")
			if f := s.Lookup(name); f != nil && !hasValue && f.NoOptDefVal == "" && i+1 < len(args) {
				i++
				out = append(out, args[i]) // its value, whatever it looks like
			}
			continue
		}
		if len(arg) > 2 && arg[0] == '-' {
			name, _, hasValue := strings.Cut(arg[1:], "=")
			if f := s.Lookup(name); f != nil && len(name) > 1 {
				fmt.Fprintf(s.Stderr, "nb: %s -%s is deprecated: write --%s (one dash is for one-letter flags)\n", s.short(), name, name)
				out = append(out, "-"+arg)
				if !hasValue && f.NoOptDefVal == "" && i+1 < len(args) {
					i++
					out = append(out, args[i])
				}
				continue
			}
		}
		if len(arg) == 2 && arg[0] == '-' {
			out = append(out, arg)
			if f := s.ShorthandLookup(arg[1:]); f != nil && f.NoOptDefVal == "" && i+1 < len(args) {
				i++
				out = append(out, args[i])
			}
			continue
		}
		out = append(out, arg)
	}
	return out
}

// explain turns pflag's error into one in nb's words, with the nearest
// flag for an unknown one.
func (s *Set) explain(err error) error {
	var ne *pflag.NotExistError
	if errors.As(err, &ne) {
		name := ne.GetSpecifiedName()
		if short := ne.GetSpecifiedShortnames(); short != "" {
			return fmt.Errorf("unknown flag -%s", name)
		}
		if near := cartridge.Nearest(name, s.names()); near != "" {
			return fmt.Errorf("unknown flag --%s: did you mean --%s?", name, near)
		}
		return fmt.Errorf("unknown flag --%s", name)
	}
	return errors.New(strings.TrimPrefix(err.Error(), "pflag: "))
}

// names are the set's visible long flags.
func (s *Set) names() []string {
	var names []string
	s.VisitAll(func(f *pflag.Flag) {
		if !f.Hidden {
			names = append(names, f.Name)
		}
	})
	return names
}

// Placeholder sets the name shown for the value of flag name in the
// help (PATH), instead of the usage's `quoted` word or the value's type.
func (s *Set) Placeholder(name, arg string) {
	if err := s.SetAnnotation(name, placeholderKey, []string{arg}); err != nil {
		panic("cliflag: Placeholder: " + err.Error())
	}
}

const placeholderKey = "cliflag-placeholder"

// Entry is one flag as the help shows it.
type Entry struct {
	// Names are the spellings: "-y, --yes" or "--listen".
	Names string
	// Arg names the value ("" for a flag without one).
	Arg string
	// Usage says what the flag does; Default is its default, "" when
	// there is none worth showing.
	Usage, Default string
}

// Entries are the visible flags in the order they were defined, with
// --help last.
func (s *Set) Entries() []Entry {
	var out []Entry
	s.VisitAll(func(f *pflag.Flag) {
		if f.Hidden {
			return
		}
		e := Entry{Names: "--" + f.Name}
		if f.Shorthand != "" {
			e.Names = "-" + f.Shorthand + ", --" + f.Name
		}
		arg, usage := pflag.UnquoteUsage(f)
		if a := f.Annotations[placeholderKey]; len(a) > 0 {
			arg = a[0]
		}
		if f.NoOptDefVal != "" {
			arg = ""
		}
		switch arg {
		case "string", "strings":
			arg = "value"
		case "duration":
			arg = "duration"
		}
		e.Arg, e.Usage = strings.ToUpper(arg), usage
		switch f.DefValue {
		case "", "0", "false", "[]", "0s":
		default:
			e.Default = f.DefValue
		}
		out = append(out, e)
	})
	return append(out, Entry{Names: "-h, --help", Usage: "show this help"})
}

// Help writes the command's help: synopsis, description, flags and
// environment.
func (s *Set) Help(w io.Writer) {
	var b strings.Builder
	b.WriteString("Usage:\n")
	for _, line := range strings.Split(strings.TrimSpace(s.Usage), "\n") {
		b.WriteString("  " + strings.TrimSpace(line) + "\n")
	}
	if s.About != "" {
		b.WriteString("\n" + strings.TrimRight(s.About, "\n") + "\n")
	}
	b.WriteString("\nFlags:\n")
	entries := s.Entries()
	width := 0
	for _, e := range entries {
		if n := len(e.Names) + len(e.Arg) + 1; n > width && n <= 32 {
			width = n
		}
	}
	for _, e := range entries {
		names := e.Names
		if !strings.HasPrefix(names, "-") || strings.HasPrefix(names, "--") {
			names = "    " + names
		}
		if e.Arg != "" {
			names += " " + e.Arg
		}
		text := e.Usage
		if e.Default != "" {
			text += " (default " + e.Default + ")"
		}
		lines := wrap(text, 96-width-8)
		if len(names) > width+4 {
			b.WriteString("  " + names + "\n")
			b.WriteString(strings.Repeat(" ", width+8) + lines[0] + "\n")
		} else {
			fmt.Fprintf(&b, "  %-*s  %s\n", width+4, names, lines[0])
		}
		for _, l := range lines[1:] {
			b.WriteString(strings.Repeat(" ", width+8) + l + "\n")
		}
	}
	if s.Environment != "" {
		b.WriteString("\n" + strings.TrimRight(s.Environment, "\n") + "\n")
	}
	io.WriteString(w, b.String()) //nolint:errcheck // nothing to do about a closed stdout
}

// wrap cuts text into lines of at most width characters, at spaces.
func wrap(text string, width int) []string {
	if width < 30 {
		width = 30
	}
	var lines []string
	line := ""
	for _, word := range strings.Fields(text) {
		if line != "" && len(line)+1+len(word) > width {
			lines = append(lines, line)
			line = ""
		}
		if line != "" {
			line += " "
		}
		line += word
	}
	return append(lines, line)
}

// Flags lists the set's visible long flags as typed (--listen), sorted,
// for shell completion.
func (s *Set) Flags() []string {
	names := s.names()
	for i, n := range names {
		names[i] = "--" + n
	}
	sort.Strings(names)
	return names
}

// StoreDoc documents --store wherever a command takes it.
const StoreDoc = "where conversations are kept: postgres://user:password@host:port/database shares them between replicas (default: NB_STORE, else the state files)"
