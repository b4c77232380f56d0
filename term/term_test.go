package term

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/nbots/nb/agent"
	"github.com/nbots/nb/cartridge"
	"github.com/nbots/nb/tool"
)

func parse(t *testing.T, src string) *cartridge.Cartridge {
	t.Helper()
	c, err := cartridge.Parse([]byte(src), "test.yml", cartridge.FormatYAML, os.LookupEnv)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Feedback is prefix + text + suffix, the whole wrapped in the colour.
func TestPrinterFeedback(t *testing.T) {
	c := parse(t, `
interfaces:
  tools:
    color: red
    executing:
      prefix: '> '
      suffix: "\n"
  repl:
    tools:
      executing:
        prefix: '[repl] '
`)
	cases := []struct {
		mode   cartridge.Mode
		action cartridge.ToolAction
		color  bool
		want   string
	}{
		{cartridge.Eval, cartridge.Executing, false, "> f {}\n"},
		{cartridge.REPL, cartridge.Executing, false, "[repl] f {}\n"},
		{cartridge.Eval, cartridge.Executing, true, "\x1b[31m> f {}\n\x1b[0m"},
		{cartridge.Eval, cartridge.Responding, false, "f {}\n\n"},
		{cartridge.Eval, cartridge.Confirming, false, "f {} [yN] "},
	}
	for _, tc := range cases {
		var out bytes.Buffer
		p := &Printer{W: &out, Cartridge: c, Mode: tc.mode, Color: tc.color}
		p.OnEvent(agent.Event{Kind: agent.Feedback, Action: tc.action, Text: "f {}"})
		if out.String() != tc.want {
			t.Errorf("%s %s colour %v: got %q, want %q", tc.mode, tc.action, tc.color, out.String(), tc.want)
		}
		if !p.Wrote {
			t.Errorf("Wrote not set")
		}
	}
}

// Streamed chunks are coloured each on its own.
func TestPrinterChunks(t *testing.T) {
	c := parse(t, "interfaces:\n  output:\n    color: blue\n")
	var out bytes.Buffer
	p := &Printer{W: &out, Cartridge: c, Mode: cartridge.Eval, Color: true}
	p.OnEvent(agent.Event{Kind: agent.TextDelta, Text: "Hel"})
	p.OnEvent(agent.Event{Kind: agent.TextDelta, Text: "lo"})
	if want := "\x1b[34mHel\x1b[0m\x1b[34mlo\x1b[0m"; out.String() != want {
		t.Errorf("got %q, want %q", out.String(), want)
	}
}

type lines struct {
	line   string
	err    error
	prompt string
}

func (l *lines) ReadLine(_ context.Context, prompt string) (string, error) {
	l.prompt = prompt
	return l.line, l.err
}

// The Confirmer shows the confirming feedback as the prompt and matches
// the line against the cartridge's yes-words (trimmed, any case; empty is
// the default). A reader that fails (end of input) is a no; Ctrl-C at the
// question stops the exchange.
func TestConfirmerReader(t *testing.T) {
	c := parse(t, "interfaces:\n  tools:\n    confirming:\n      prefix: '? '\n")
	p := &Printer{Cartridge: c, Mode: cartridge.REPL}
	for _, tc := range []struct {
		line string
		want bool
	}{{" Y ", true}, {"yes", true}, {"", false}, {"sure", false}, {"n", false}} {
		r := &lines{line: tc.line}
		conf := &Confirmer{Printer: p, Reader: r}
		ok, err := conf.Confirm(context.Background(), tool.Call{Name: "f"}, `f {"a":1}`)
		if err != nil || ok != tc.want {
			t.Errorf("%q: got %v, %v; want %v", tc.line, ok, err, tc.want)
		}
		if r.prompt != `? f {"a":1} [yN] ` {
			t.Errorf("prompt %q", r.prompt)
		}
	}
	r := &lines{err: errors.New("end of input")}
	conf := &Confirmer{Printer: p, Reader: r}
	if ok, err := conf.Confirm(context.Background(), tool.Call{Name: "f"}, "f {}"); ok || err != nil {
		t.Errorf("a failed read: %v, %v; want a plain no", ok, err)
	}
	r.err = ErrInterrupted
	if ok, err := conf.Confirm(context.Background(), tool.Call{Name: "f"}, "f {}"); ok || !errors.Is(err, ErrInterrupted) {
		t.Errorf("Ctrl-C: %v, %v; want the exchange stopped", ok, err)
	}
}

// The default answer and custom yes-words are the cartridge's.
func TestConfirmerCartridgeRules(t *testing.T) {
	c := parse(t, "interfaces:\n  tools:\n    confirming:\n      default: 'S'\n      yeses: ['Sim', 'S']\n")
	p := &Printer{Cartridge: c, Mode: cartridge.Eval}
	for line, want := range map[string]bool{"": true, "sim": true, "y": false} {
		ok, _ := (&Confirmer{Printer: p, Reader: &lines{line: line}}).Confirm(context.Background(), tool.Call{Name: "f"}, "f {}")
		if ok != want {
			t.Errorf("%q: %v, want %v", line, ok, want)
		}
	}
}

// The colour rule: NO_COLOR wins, CLICOLOR_FORCE forces, else terminals only.
func TestColorEnabled(t *testing.T) {
	env := func(kv ...string) func(string) string {
		return func(k string) string {
			for i := 0; i < len(kv); i += 2 {
				if kv[i] == k {
					return kv[i+1]
				}
			}
			return ""
		}
	}
	if ColorEnabled(env("NO_COLOR", "1", "CLICOLOR_FORCE", "1"), nil, nil) {
		t.Error("NO_COLOR did not win")
	}
	if !ColorEnabled(env("CLICOLOR_FORCE", "1"), nil, nil) {
		t.Error("CLICOLOR_FORCE did not force")
	}
	if ColorEnabled(env("CLICOLOR_FORCE", "0"), nil, nil) {
		t.Error("CLICOLOR_FORCE=0 forced")
	}
	if ColorEnabled(env(), nil, nil) {
		t.Error("colour without a terminal")
	}
	if got := Paint("x", "no-such-colour", true); !strings.Contains(got, "x") || got != "x" {
		t.Errorf("unknown colour: %q", got)
	}
}

// "a" (always) approves the call and every later call of that tool in the
// session, without asking again; other tools are still asked about.
func TestConfirmerAlways(t *testing.T) {
	c := parse(t, "meta: {}\n")
	p := &Printer{Cartridge: c, Mode: cartridge.REPL}
	r := &lines{line: "a"}
	conf := &Confirmer{Printer: p, Reader: r, Approval: &Approval{}}
	if ok, err := conf.Confirm(context.Background(), tool.Call{Name: "exec"}, "exec {}"); !ok || err != nil {
		t.Fatalf("a: %v %v", ok, err)
	}
	r.line, r.prompt = "n", ""
	if ok, _ := conf.Confirm(context.Background(), tool.Call{Name: "exec"}, "exec {}"); !ok || r.prompt != "" {
		t.Errorf("exec asked again (%q) or denied", r.prompt)
	}
	if ok, _ := conf.Confirm(context.Background(), tool.Call{Name: "write_file"}, "write_file {}"); ok || r.prompt == "" {
		t.Errorf("write_file was not asked about")
	}
	pre := &Approval{}
	pre.Allow("grep")
	conf = &Confirmer{Printer: p, Reader: &lines{line: "n"}, Approval: pre.Clone()}
	if ok, _ := conf.Confirm(context.Background(), tool.Call{Name: "grep"}, "grep {}"); !ok {
		t.Error("--allow-tool grep did not approve grep")
	}
}
