package cartridge

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestBuiltinsAbsent(t *testing.T) {
	for _, src := range []string{"provider: {id: openai}\n", "builtins: false\n", "builtins: null\n"} {
		c := parse(t, src)
		b, err := c.Builtins()
		if err != nil || b != nil {
			t.Errorf("%q: Builtins() = %+v, %v; want nil, nil", src, b, err)
		}
	}
}

func TestBuiltinsKnownTopLevelKey(t *testing.T) {
	c := parse(t, "builtins: {files: true}\n")
	for _, w := range c.Warnings {
		if strings.Contains(w, "builtins") {
			t.Errorf("builtins is reported as unknown: %s", w)
		}
	}
}

func TestBuiltinsDefaultsAndSettings(t *testing.T) {
	env := func(name string) (string, bool) {
		if name == "BRAVE_API_KEY" {
			return "k-123", true
		}
		return "", false
	}
	src := `builtins:
  files: {workspace: ./ws, write: false, hard-links: true}
  exec: {timeout: 2.5, sandbox: on, network: true, env: [GOPATH], writable: ~/.cache/go-build}
  web:
    fetch: {allow-hosts: [intranet.example], max-bytes: 1000, timeout: 5}
    search: {api-key: ENV/BRAVE_API_KEY, count: 3}
  spawn: {max-depth: 1, managed: true, models: [gpt-5-mini]}
`
	c, err := Parse([]byte(src), "bot.yml", FormatYAML, env)
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.Builtins()
	if err != nil {
		t.Fatal(err)
	}
	want := &Builtins{
		Files: &BuiltinFiles{Workspace: "./ws", Write: false, Profile: "auto", HardLinks: true},
		Exec:  &BuiltinExec{Timeout: 2500 * time.Millisecond, Sandbox: "on", Network: true, Env: []string{"GOPATH"}, Writable: []string{"~/.cache/go-build"}},
		Web: &BuiltinWeb{
			Fetch:  &BuiltinFetch{AllowHosts: []string{"intranet.example"}, MaxBytes: 1000, Timeout: 5 * time.Second},
			Search: &BuiltinSearch{Provider: "brave", APIKey: "k-123", Count: 3},
		},
		Spawn: &BuiltinSpawn{MaxDepth: 1, Managed: true, Models: []string{"gpt-5-mini"}},
		Line:  1,
	}
	if diff := cmp.Diff(want, b); diff != "" {
		t.Errorf("Builtins() (-want +got):\n%s", diff)
	}

	c = parse(t, "builtins: {files: true, exec: {}, web: {fetch: true}, spawn: true}\n")
	b, err = c.Builtins()
	if err != nil {
		t.Fatal(err)
	}
	want = &Builtins{
		Files: &BuiltinFiles{Workspace: ".", Write: true, Profile: "auto"},
		Exec:  &BuiltinExec{Sandbox: "auto"},
		Web:   &BuiltinWeb{Fetch: &BuiltinFetch{}},
		Spawn: &BuiltinSpawn{MaxDepth: 2},
		Line:  1,
	}
	if diff := cmp.Diff(want, b); diff != "" {
		t.Errorf("defaults (-want +got):\n%s", diff)
	}
}

func TestBuiltinsMissingSearchKey(t *testing.T) {
	c, err := Parse([]byte("builtins:\n  web:\n    search: {api-key: ENV/NB_TEST_UNSET_KEY}\n"), "bot.yml", FormatYAML, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.Builtins()
	if err != nil {
		t.Fatal(err)
	}
	if s := b.Web.Search; s == nil || s.APIKey != "" || s.APIKeyVar != "NB_TEST_UNSET_KEY" {
		t.Errorf("search = %+v, want no key and the variable NB_TEST_UNSET_KEY", s)
	}
}

func TestBuiltinsEnvironment(t *testing.T) {
	for _, tc := range []struct {
		src  string
		want *BuiltinEnvironment
	}{
		{"builtins:\n  files: true\n", nil},
		{"builtins:\n  environment: local\n", nil},
		{"builtins:\n  environment: ssh://dev@build1/home/dev/src\n", &BuiltinEnvironment{URL: "ssh://dev@build1/home/dev/src", User: "dev", Host: "build1", Path: "/home/dev/src"}},
		{"builtins:\n  environment: ssh://[::1]:2222/src/?known-hosts=~/kh&identity=keys/id\n", &BuiltinEnvironment{URL: "ssh://[::1]:2222/src/?known-hosts=~/kh&identity=keys/id",
			Host: "::1", Port: 2222, Path: "/src/", KnownHosts: "~/kh", Identity: "keys/id"}},
	} {
		c, err := Parse([]byte(tc.src), "bot.yml", FormatYAML, nil)
		if err != nil {
			t.Fatal(err)
		}
		b, err := c.Builtins()
		if err != nil {
			t.Fatalf("%q: %v", tc.src, err)
		}
		if got := b.Environment; (got == nil) != (tc.want == nil) || got != nil && *got != *tc.want {
			t.Errorf("%q: environment %+v, want %+v", tc.src, got, tc.want)
		}
	}
}

func TestBuiltinsErrors(t *testing.T) {
	for _, tc := range []struct{ src, want string }{
		{"builtins: [files]\n", "bot.yml:1: builtins: must be a mapping of groups (files, exec, web, spawn), not a list"},
		{"builtins:\n  shell: true\n", "bot.yml:2: builtins.shell: unknown setting (known: files, exec, web, spawn, limits, environment)"},
		{"builtins:\n  file: {}\n", "bot.yml:2: builtins.file: unknown setting: did you mean \"files\"? (known: files, exec, web, spawn, limits, environment)"},
		{"builtins:\n  exec:\n    sandbox: yes-please\n", `bot.yml:3: builtins.exec.sandbox: must be auto (bubblewrap when it works here), on (refuse to run without it) or off, not "yes-please"`},
		{"builtins:\n  exec:\n    sandbx: off\n", "bot.yml:3: builtins.exec.sandbx: unknown setting: did you mean \"sandbox\"? (known: workspace, timeout, sandbox, network, env, read-only, writable, path-append)"},
		{"builtins:\n  exec:\n    timeout: -1\n", "bot.yml:3: builtins.exec.timeout: must be a number of seconds above 0 and at most a day, not -1"},
		{"builtins:\n  exec:\n    timeout: soon\n", "bot.yml:3: builtins.exec.timeout: must be a number of seconds, not text"},
		{"builtins:\n  files:\n    workspace: [a]\n", "bot.yml:3: builtins.files.workspace: must be text, not a list"},
		{"builtins:\n  files:\n    write: maybe\n", "bot.yml:3: builtins.files.write: must be true or false, not text"},
		{"builtins:\n  files: 3\n", "bot.yml:2: builtins.files: must be true, false or a mapping of settings, not a number"},
		{"builtins:\n  spawn:\n    max-depth: 0\n", "bot.yml:3: builtins.spawn.max-depth: must be a whole number above 0, not 0"},
		{"builtins:\n  spawn:\n    managed: yes please\n", "bot.yml:3: builtins.spawn.managed: must be true or false, not text"},
		{"builtins:\n  web:\n    fetch:\n      allow-hosts: [a, 3]\n", "bot.yml:4: builtins.web.fetch.allow-hosts[1]: must be non-empty text, not a number"},
		{"builtins:\n  limits: 5\n", "bot.yml:2: builtins.limits: must be a mapping of tool names to limits (read_file: 20000, or grep: {chars: 20000, lines: 200, mode: tail}), not a number"},
		{"builtins:\n  limits:\n    grep: 0\n", "bot.yml:3: builtins.limits.grep: must be a whole number above 0, not 0"},
		{"builtins:\n  limits:\n    grep: many\n", "bot.yml:3: builtins.limits.grep: must be a number of characters or a mapping of chars, lines and mode, not text"},
		{"builtins:\n  limits:\n    exec:\n      lines: 10\n      mode: middle\n", `bot.yml:5: builtins.limits.exec.mode: must be head_tail (keep the head and the tail) or tail (keep the end), not "middle"`},
		{"builtins:\n  environment: 3\n", "bot.yml:2: builtins.environment: must be text, not a number"},
		{"builtins:\n  environment: remote\n", `bot.yml:2: builtins.environment: must be local or an SSH address (ssh://user@host/path), not "remote"`},
		{"builtins:\n  environment: https://dev.example/src\n", "bot.yml:2: builtins.environment: must be local or an SSH address (ssh://user@host/path), not a https: address"},
		{"builtins:\n  environment: ssh://dev@build1\n", "bot.yml:2: builtins.environment: names no folder: give the workspace's absolute path on build1 after the host (ssh://user@host/path)"},
		{"builtins:\n  environment: ssh:///src\n", "bot.yml:2: builtins.environment: names no host (ssh://user@host/path)"},
		{"builtins:\n  environment: ssh://dev@build1:99999/src\n", `bot.yml:2: builtins.environment: has the port "99999", which is not a number from 1 to 65535`},
		{"builtins:\n  environment: ssh://dev:hunter2@build1/src\n", "bot.yml:2: builtins.environment: holds a password: nb logs in with keys only (the SSH agent's, or ?identity=FILE), so leave it out of the address"},
		{"builtins:\n  environment: ssh://dev@build1/src/../etc\n", `bot.yml:2: builtins.environment: has the path "/src/../etc", which is not clean (no .., . or //): give the workspace's path as it is`},
		{"builtins:\n  environment: ssh://dev@build1/src?key=a\n", `bot.yml:2: builtins.environment: has the setting "key", which nb does not know (known-hosts or identity)`},
		{"builtins:\n  environment: ssh://dev@build1/src?identity=\n", "bot.yml:2: builtins.environment: has an empty identity: give a file"},
		{"builtins:\n  limits:\n    exec:\n      char: 10\n", "bot.yml:4: builtins.limits.exec.char: unknown setting: did you mean \"chars\"? (known: chars, lines, mode)"},
	} {
		c, err := Parse([]byte(tc.src), "bot.yml", FormatYAML, nil)
		if err != nil {
			t.Fatalf("%q: %v", tc.src, err)
		}
		_, err = c.Builtins()
		if err == nil || err.Error() != tc.want {
			t.Errorf("%q:\n got %v\nwant %s", tc.src, err, tc.want)
		}
	}
}
