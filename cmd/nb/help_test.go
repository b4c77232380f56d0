package main

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/nbots/nb/cmd/nb/gatewaycmd"
)

// runNB runs nb in this process with args and returns its exit code,
// stdout and stderr.
func runNB(t *testing.T, environ []string, args ...string) (int, string, string) {
	t.Helper()
	return runNBStdin(t, environ, "", args...)
}

// runNBStdin is runNB with stdin read from a file holding stdin.
func runNBStdin(t *testing.T, environ []string, stdin string, args ...string) (int, string, string) {
	t.Helper()
	return runApp(t, &App{}, environ, stdin, args...)
}

// runApp is runNBStdin on a, whose streams, arguments and environment it
// fills (a test sets the rest: its signal handler, say).
func runApp(t *testing.T, a *App, environ []string, stdin string, args ...string) (int, string, string) {
	t.Helper()
	dir := t.TempDir()
	files := map[string]*os.File{}
	for _, name := range []string{"stdin", "stdout", "stderr"} {
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		files[name] = f
	}
	if _, err := files["stdin"].WriteString(stdin); err != nil {
		t.Fatal(err)
	}
	files["stdin"].Seek(0, 0) //nolint:errcheck // a new file
	a.Args, a.Stdin, a.Stdout, a.Stderr, a.Environ = args, files["stdin"], files["stdout"], files["stderr"], environ
	code := a.Run()
	out, _ := os.ReadFile(files["stdout"].Name())
	errOut, _ := os.ReadFile(files["stderr"].Name())
	return code, string(out), string(errOut)
}

// singleDashLong is a long flag written with one dash (-listen), the
// spelling nb's help no longer uses.
var singleDashLong = regexp.MustCompile(`(^|[\s\[(|,])-[a-zA-Z][a-zA-Z0-9-]+`)

// TestHelpEveryCommand walks every command's --help: each exits 0,
// shows its flags GNU-style (no single-dash long flag) and lists the
// environment it reads; and every subcommand nb dispatches has a help.
func TestHelpEveryCommand(t *testing.T) {
	env := []string{"HOME=" + t.TempDir(), "NB_DOTENV=0"}
	for _, path := range helpPaths {
		args := append(slices.Clone(path), "--help")
		if _, ok := cartridgeHelp[path[0]]; ok && len(path) == 1 {
			args = append([]string{"help"}, path...)
		}
		code, out, errOut := runNB(t, env, args...)
		name := "nb " + strings.Join(args, " ")
		if code != 0 || errOut != "" {
			t.Errorf("%s: exit %d, stderr %q", name, code, errOut)
			continue
		}
		if !strings.HasPrefix(out, "Usage:\n") {
			t.Errorf("%s: the help does not start with Usage:\n%s", name, out)
		}
		if m := singleDashLong.FindString(out); m != "" {
			t.Errorf("%s: a single-dash long flag %q in the help:\n%s", name, strings.TrimSpace(m), out)
		}
		if !strings.Contains(out, "\nEnvironment:\n  ") {
			t.Errorf("%s: no environment list in the help:\n%s", name, out)
		}
		// nb help COMMAND is the same help.
		if code, same, _ := runNB(t, env, append([]string{"help"}, path...)...); code != 0 || same != out {
			t.Errorf("nb help %s differs from %s", strings.Join(path, " "), name)
		}
	}
	// The top help has no single-dash long flag either.
	if _, out, _ := runNB(t, env, "help"); singleDashLong.MatchString(out) {
		t.Errorf("nb help: a single-dash long flag %q", singleDashLong.FindString(out))
	}

	// Every subcommand dispatched has a help.
	covered := func(p ...string) bool {
		return slices.ContainsFunc(helpPaths, func(h []string) bool { return slices.Equal(h, p) })
	}
	for _, c := range subcommands {
		if c != "help" && !covered(c) {
			t.Errorf("nb %s is not in helpPaths", c)
		}
	}
	for _, c := range cartridgeCommands {
		if c != "mcp" && !covered(c) {
			t.Errorf("nb CARTRIDGE KEY %s is not in helpPaths", c)
		}
	}
	for _, c := range gatewaycmd.Commands() {
		if !covered("gateway", c) {
			t.Errorf("nb gateway %s is not in helpPaths", c)
		}
	}
	for _, c := range []string{"init", "chat", "pair"} {
		if !covered("gateway", c) {
			t.Errorf("nb gateway %s is not in helpPaths", c)
		}
	}
	for _, c := range []string{"list", "run"} {
		if !covered("agents", c) {
			t.Errorf("nb agents %s is not in helpPaths", c)
		}
	}
}

// TestManPage: nb help --man is roff made of the same help texts.
func TestManPage(t *testing.T) {
	code, out, errOut := runNB(t, []string{"HOME=" + t.TempDir(), "NB_DOTENV=0"}, "help", "--man")
	if code != 0 || errOut != "" {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{".TH NB 1 ", ".SS \"nb serve\"", "\\fB\\-\\-listen\\fR \\fIHOST:PORT\\fR", ".SS \"nb gateway cron add\"", "\\fBNB_AGENTS_TOKEN\\fR"} {
		if !strings.Contains(out, want) {
			t.Errorf("the man page lacks %q", want)
		}
	}
}
