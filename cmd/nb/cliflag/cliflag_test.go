package cliflag

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

func newSet() (*Set, *bytes.Buffer, *bytes.Buffer) {
	var out, errOut bytes.Buffer
	s := New("nb demo", "nb demo [flags] WORD...", "A demo.", &out, &errOut)
	s.Environment = "Environment:\n  NB_DEMO  a variable\n"
	return s, &out, &errOut
}

// The grammar: --long value, --long=value, -s value, flags among words,
// -- ending them; single-dash long flags and old names still work, said
// to be deprecated.
func TestParse(t *testing.T) {
	s, _, errOut := newSet()
	listen := s.String("listen", "", "`host:port`")
	msg := s.StringP("message", "m", "", "the `text`")
	yes := s.BoolP("yes", "y", false, "approve")
	tools := s.StringSlice("allow-tool", nil, "a `name`")
	s.Old("allow-tools", "yes")
	err := s.Parse([]string{"one", "-listen", "-x-", "--message=-5", "two", "--allow-tool", "a,b", "--allow-tool=c", "--allow-tools", "--", "--yes"})
	if err != nil {
		t.Fatal(err)
	}
	if *listen != "-x-" || *msg != "-5" || !*yes || strings.Join(*tools, " ") != "a b c" || strings.Join(s.Args(), " ") != "one two --yes" {
		t.Errorf("listen %q message %q yes %v tools %q args %q", *listen, *msg, *yes, *tools, s.Args())
	}
	for _, want := range []string{"nb: demo -listen is deprecated: write --listen", "nb: demo --allow-tools is deprecated: write --yes"} {
		if !strings.Contains(errOut.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
}

func TestMistakes(t *testing.T) {
	s, _, _ := newSet()
	s.String("listen", "", "`host:port`")
	err := s.Parse([]string{"--lisen", "x"})
	var ue *UsageError
	if !errors.As(err, &ue) || err.Error() != "demo: unknown flag --lisen: did you mean --listen? (see nb demo --help)" {
		t.Errorf("%v", err)
	}
	s, _, _ = newSet()
	s.String("listen", "", "`host:port`")
	if err := s.Parse([]string{"--listen"}); err == nil || !strings.Contains(err.Error(), "flag needs an argument: --listen") {
		t.Errorf("%v", err)
	}
}

// --help prints the help on stdout: GNU-style flags, the environment.
func TestHelp(t *testing.T) {
	s, out, _ := newSet()
	s.String("listen", "localhost:3048", "`host:port` to listen on")
	s.BoolP("yes", "y", false, "approve every call")
	s.String("old", "", "")
	s.Deprecated("old", "write --listen")
	if err := s.Parse([]string{"-h"}); !errors.Is(err, ErrHelp) {
		t.Fatalf("%v", err)
	}
	want := `Usage:
  nb demo [flags] WORD...

A demo.

Flags:
      --listen HOST:PORT  host:port to listen on (default localhost:3048)
  -y, --yes               approve every call
  -h, --help              show this help

Environment:
  NB_DEMO  a variable
`
	if out.String() != want {
		t.Errorf("help:\n%s\nwant:\n%s", out, want)
	}
}

// TestParseOnly: a command that takes flags only refuses a word left
// over as a mistake on the command line, and reports the help printed.
func TestParseOnly(t *testing.T) {
	s, _, _ := newSet()
	s.String("listen", "", "`host:port`")
	help, err := s.ParseOnly([]string{"--listen", "x", "extra"})
	var ue *UsageError
	if help || !errors.As(err, &ue) || err.Error() != `demo: unexpected argument "extra" (see nb demo --help)` {
		t.Errorf("help %v, error %v", help, err)
	}
	s, out, _ := newSet()
	if help, err := s.ParseOnly([]string{"--help"}); !help || err != nil || out.Len() == 0 {
		t.Errorf("--help: help %v, error %v, printed %q", help, err, out)
	}
	s, _, _ = newSet()
	if help, err := s.ParseOnly(nil); help || err != nil {
		t.Errorf("no words: help %v, error %v", help, err)
	}
}
