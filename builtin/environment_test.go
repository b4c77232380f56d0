package builtin

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nbots/nb/builtin/internal/sshdtest"
	"github.com/nbots/nb/tool"
)

// place is one environment of the conformance table: its tools and the
// workspace folder they work in (on this machine: the SSH server is on
// loopback, so the test can look at both sides).
type place struct {
	name  string
	dir   string
	tools map[string]tool.Tool
	st    Status
}

// conformanceCartridge is the cartridge both places load; environment is
// empty for the local one.
func conformanceCartridge(environment string) string {
	src := "provider: {id: openai, settings: {model: gpt-4o}}\nbuiltins:\n" +
		"  files: {profile: nanobot}\n" +
		"  exec: {sandbox: off, timeout: 20, env: [NB_SHOWN]}\n"
	if environment != "" {
		src += "  environment: " + environment + "\n"
	}
	return src
}

var conformanceEnviron = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/nonexistent-home", "NB_SECRET=leaked", "NB_SHOWN=shown"}

func newPlace(t *testing.T, name, environment, dir string) *place {
	t.Helper()
	c := load(t, conformanceCartridge(environment), nil)
	o := Options{Environ: conformanceEnviron}
	if environment == "" {
		o.CartridgeDir = dir
	}
	tools, st, err := FromCartridge(c, o)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	p := &place{name: name, dir: dir, tools: map[string]tool.Tool{}, st: st}
	for _, tl := range tools {
		p.tools[tl.Spec().Name] = tl
	}
	return p
}

// run runs one call and renders its answer: the text, "ERROR: " and the
// error, or the error result's text, with the workspace's path as WS.
func (p *place) run(ctx context.Context, name string, args map[string]any) string {
	res, err := p.tools[name].Run(ctx, tool.Call{Name: name, Arguments: args})
	var text string
	switch r := res.(type) {
	case nil:
		text = "ERROR: " + err.Error()
	case string:
		text = r
	case *tool.Result:
		text = r.Text
		if r.IsError {
			text = "ERROR RESULT: " + text
		}
	default:
		text = fmt.Sprintf("%T %v", res, res)
	}
	return strings.ReplaceAll(text, p.dir, "WS")
}

// TestEnvironmentConformance runs the same file-tool and exec calls on
// this machine and over SSH (Debian's sshd on loopback) and wants the
// same answers: results, limits, timeouts that kill the command's
// process group, confirmations, and refusals of paths that leave the
// workspace.
func TestEnvironmentConformance(t *testing.T) {
	s := sshdtest.Start(t)
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "secret"), []byte("secret\n"), 0o644)
	localDir, remoteDir := t.TempDir(), t.TempDir()
	for _, d := range []string{localDir, remoteDir} {
		os.Symlink(outside, filepath.Join(d, "link-out"))
		os.Symlink(filepath.Join(outside, "secret"), filepath.Join(d, "secret-link"))
	}
	addr := fmt.Sprintf("ssh://%s@%s%s?known-hosts=%s&identity=%s", s.User, s.Addr(), remoteDir, s.KnownHosts, s.Identity)
	places := []*place{newPlace(t, "local", "", localDir), newPlace(t, "ssh", addr, remoteDir)}

	steps := []struct {
		tool string
		args map[string]any
		want string // a part of the answer
	}{
		{"write_file", map[string]any{"path": "a/b.txt", "content": "one\ntwo\nthree\n"}, "Created a/b.txt (14 bytes)."},
		{"write_file", map[string]any{"path": "a/b.txt", "content": "one\ntwo\nthree\n"}, "Wrote a/b.txt"},
		{"read_file", map[string]any{"path": "a/b.txt"}, "2| two"},
		{"read_file", map[string]any{"path": "a/b.txt", "offset": 2, "limit": 1}, "Showing lines 2-2 of 3"},
		{"edit_file", map[string]any{"path": "a/b.txt", "old_text": "two", "new_text": "2"}, "replaced 1 occurrence"},
		{"edit_file", map[string]any{"path": "a/b.txt", "old_text": "nine", "new_text": "9"}, "was not found in a/b.txt"},
		{"write_file", map[string]any{"path": "a/c.go", "content": "package a\n"}, "Created"},
		{"list_dir", map[string]any{"path": "a"}, "b.txt (12 bytes)"},
		{"list_dir", map[string]any{}, "link-out -> " + outside},
		{"glob", map[string]any{"pattern": "**/*.txt"}, "a/b.txt"},
		{"grep", map[string]any{"pattern": "thr"}, "a/b.txt:3: three"},
		{"grep", map[string]any{"pattern": "pack", "glob": "*.go"}, "a/c.go:1: package a"},
		{"read_file", map[string]any{"path": "nope.txt"}, "no such file or folder in the workspace"},
		{"read_file", map[string]any{"path": "a"}, "is a folder, not a file"},
		// Paths that leave the workspace.
		{"read_file", map[string]any{"path": "../x"}, "is outside the workspace"},
		{"read_file", map[string]any{"path": "/etc/passwd"}, "is outside the workspace"},
		{"read_file", map[string]any{"path": "link-out/secret"}, "is outside the workspace"},
		{"read_file", map[string]any{"path": "secret-link"}, "is outside the workspace"},
		{"write_file", map[string]any{"path": "link-out/new", "content": "x"}, "is outside the workspace"},
		{"write_file", map[string]any{"path": "a/../../escaped", "content": "x"}, "is outside the workspace"},
		{"edit_file", map[string]any{"path": "link-out/secret", "old_text": "secret", "new_text": "x"}, "is outside the workspace"},
		{"grep", map[string]any{"pattern": "secret"}, "No matches"},
		{"list_dir", map[string]any{"path": "link-out"}, "is outside the workspace"},
		// exec: output, errors, exit codes, the environment, limits.
		{"exec", map[string]any{"command": "echo out; echo err >&2; exit 3"}, "out\nSTDERR:\nerr\nExit code: 3"},
		{"exec", map[string]any{"command": "pwd; cat a/b.txt"}, "WS\none\n2\nthree"},
		{"exec", map[string]any{"command": "echo ${NB_SECRET:-none} ${NB_SHOWN:-none}"}, "none shown"},
		{"exec", map[string]any{"command": "seq 1 300000"}, "bytes of output left out"},
		{"exec", map[string]any{"command": "sleep 100 & echo $! > left.pid"}, "Exit code: 0"},
		{"exec", map[string]any{"command": "sleep 100 & echo $! > bg.pid; echo started; sleep 100", "timeout": 2}, "the command timed out after 2 seconds"},
		{"exec", map[string]any{"command": "cat bg.pid >/dev/null && echo ok"}, "ok"},
	}
	for _, step := range steps {
		var answers []string
		for _, p := range places {
			got := p.run(context.Background(), step.tool, step.args)
			if !strings.Contains(got, step.want) {
				t.Errorf("%s: %s %v = %q; want %q in it", p.name, step.tool, step.args, clip(got), step.want)
			}
			answers = append(answers, got)
		}
		if answers[0] != answers[1] {
			t.Errorf("%s %v answers differ:\nlocal: %q\nssh:   %q", step.tool, step.args, clip(answers[0]), clip(answers[1]))
		}
	}
	for _, p := range places {
		if _, err := os.Stat(filepath.Join(outside, "new")); err == nil {
			t.Errorf("%s: a file was written outside the workspace", p.name)
		}
		if data, _ := os.ReadFile(filepath.Join(outside, "secret")); string(data) != "secret\n" {
			t.Errorf("%s: the file outside was changed: %q", p.name, data)
		}
		// What the command left running and what the timeout stopped
		// are gone, on both machines.
		for _, f := range []string{"left.pid", "bg.pid"} {
			assertGone(t, p.name, filepath.Join(p.dir, f))
		}
	}

	// The same tools, limits and confirmations: a call is confirmed
	// when its tool is not read-only, and exec says where it runs.
	for name, lt := range places[0].tools {
		rt, ok := places[1].tools[name]
		if !ok {
			t.Errorf("ssh has no %s", name)
			continue
		}
		if readOnly(lt) != readOnly(rt) {
			t.Errorf("%s: read-only %v locally, %v over SSH", name, readOnly(lt), readOnly(rt))
		}
		if ll, ok := lt.(interface{ OutputLimits() tool.Limits }); ok {
			if rl := rt.(interface{ OutputLimits() tool.Limits }).OutputLimits(); rl != ll.OutputLimits() {
				t.Errorf("%s: limits %+v locally, %+v over SSH", name, ll.OutputLimits(), rl)
			}
		}
	}
	where := places[1].tools["exec"].(interface{ Where() string }).Where()
	if want := "on " + s.User + "@127.0.0.1 over SSH"; !strings.Contains(where, want) {
		t.Errorf("exec's Where over SSH = %q; want %q", where, want)
	}
	if !strings.Contains(strings.Join(places[1].st.Lines(), "\n"), "files: workspace ssh://"+s.User+"@"+s.Addr()+remoteDir) {
		t.Errorf("status lines: %q", places[1].st.Lines())
	}

	// Live output: exec streams its output while it runs, on both.
	for _, p := range places {
		var mu sync.Mutex
		var live strings.Builder
		ctx := tool.WithLiveOutput(context.Background(), func(stream, text string) {
			mu.Lock()
			live.WriteString(stream + ":" + text)
			mu.Unlock()
		})
		p.run(ctx, "exec", map[string]any{"command": "echo first; echo second >&2"})
		mu.Lock()
		got := live.String()
		mu.Unlock()
		if !strings.Contains(got, "stdout:first") || !strings.Contains(got, "stderr:second") {
			t.Errorf("%s: live output %q", p.name, got)
		}
	}
}

// assertGone fails unless the process whose pid is in file has ended.
func assertGone(t *testing.T, name, file string) {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Errorf("%s: %v", name, err)
		return
	}
	pid := strings.TrimSpace(string(data))
	for deadline := time.Now().Add(10 * time.Second); ; {
		stat, err := os.ReadFile("/proc/" + pid + "/stat")
		if err != nil || strings.Contains(string(stat), ") Z ") {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("%s: process %s (%s) still runs", name, pid, filepath.Base(file))
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func clip(s string) string {
	if len(s) > 600 {
		return s[:300] + " … " + s[len(s)-300:]
	}
	return s
}

// TestEnvironmentRefusals: an SSH server whose key is not known is
// refused at the cartridge's builtins.environment, naming the host and
// the file; settings that only apply on this machine are refused.
func TestEnvironmentRefusals(t *testing.T) {
	s := sshdtest.Start(t)
	empty := filepath.Join(t.TempDir(), "known_hosts")
	os.WriteFile(empty, nil, 0o600)
	dir := t.TempDir()
	for _, tc := range []struct{ src, env, want string }{
		{"", fmt.Sprintf("ssh://%s@%s%s?known-hosts=%s&identity=%s", s.User, s.Addr(), dir, empty, s.Identity),
			fmt.Sprintf("bot.yml:5: builtins.environment: the host [127.0.0.1]:%d is unknown: its key is not in %s", s.Port, empty)},
		{"", fmt.Sprintf("ssh://%s@%s%s/nope?known-hosts=%s&identity=%s", s.User, s.Addr(), dir, s.KnownHosts, s.Identity),
			"builtins.environment: the remote workspace " + dir + "/nope on 127.0.0.1 cannot be used: no such file or folder"},
		{"builtins:\n  files: {workspace: src}\n  environment: ssh://u@h/src\n", "", "bot.yml:2: builtins.files.workspace: the workspace is the folder of builtins.environment (ssh://u@h/src): leave this setting out"},
		{"builtins:\n  exec: {read-only: [/opt]}\n  environment: ssh://u@h/src\n", "", "bot.yml:2: builtins.exec.read-only: applies to bubblewrap on this machine, not to commands run over SSH: leave it out"},
		{"builtins:\n  exec: {sandbox: on}\n  environment: ssh://u@h/src\n", "", "bot.yml:2: builtins.exec.sandbox: cannot be on with builtins.environment: bubblewrap sandboxes commands on this machine, and these run on h (set auto or off)"},
	} {
		src := tc.src
		if tc.env != "" {
			src = conformanceCartridge(tc.env)
		}
		_, _, err := FromCartridge(load(t, src, nil), Options{Environ: conformanceEnviron})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s:\n got %v\nwant %s", tc.env, err, tc.want)
		}
	}
}

// readOnly is whether the agent runs t's calls without a confirmation.
func readOnly(t tool.Tool) bool {
	r, ok := t.(tool.ReadOnly)
	return ok && r.ReadOnly()
}
