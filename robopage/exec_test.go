package robopage

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nbots/nb/proc"
)

// parseFunctions parses one page and returns its library.
func parseLibrary(t testing.TB, dir, src string) *Library {
	t.Helper()
	p, ps := Parse([]byte(src), "test.yml", dir)
	if p == nil {
		t.Fatalf("parse: %v", ps)
	}
	p.Name, p.Path = "test", filepath.Join(dir, "test.yml")
	return NewLibrary(dir, p)
}

func call(t testing.TB, ex *Executor, lib *Library, name string, args map[string]string) (string, error) {
	t.Helper()
	f, ok := lib.Function(name)
	if !ok {
		t.Fatalf("no function %s", name)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	return ex.Call(ctx, f, args)
}

const hostPage = `description: host programs
functions:
  echo:
    description: echo
    parameters:
      message: {type: string, description: m}
    cmdline: [echo, "${message}"]
  echo_n:
    description: echo without newline
    parameters: {}
    cmdline: [echo, -n, "Hello, World!"]
  printf:
    description: printf
    parameters:
      a: {type: string, description: a}
      b: {type: string, description: b, required: false}
    cmdline: [printf, "%s|%s|", "${a}", "${b or B default}"]
  fail:
    description: false
    parameters: {}
    cmdline: ["false"]
  ls:
    description: ls
    parameters: {}
    cmdline: [ls, nonexistent_file_for_nb_tests]
  both:
    description: stdout and stderr
    parameters:
      code: {type: string, description: exit code}
    cmdline: [sh, -c, "echo Hello && echo Error >&2 && exit ${code}", sh]
  script:
    description: a shell script
    parameters:
      script: {type: string, description: the script}
    cmdline: [sh, -c, "${script}"]
  secret:
    description: reads a variable
    parameters: {}
    cmdline: [sh, -c, "echo \"[$NB_TEST_SECRET][$NB_TEST_OTHER]\"", "${env.NB_TEST_SECRET}"]
  missing:
    description: missing program
    parameters: {}
    cmdline: [nb-no-such-program]
  sudo:
    description: sudo on the host
    parameters: {}
    cmdline: [sudo, echo, hi]
  symbols:
    description: platforms
    parameters: {}
    platforms:
      linux: [echo, linux]
      macos: [echo, macos]
`

func TestRunHost(t *testing.T) {
	lib := parseLibrary(t, t.TempDir(), hostPage)
	ex := &Executor{Environ: os.Environ()}
	tests := []struct {
		name string
		args map[string]string
		want string
	}{
		{"echo", map[string]string{"message": "test"}, "test\n"},
		{"echo", map[string]string{"message": "a b  'c' $(id)"}, "a b  'c' $(id)\n"},
		{"echo_n", nil, "Hello, World!"},
		{"printf", map[string]string{"a": "x y"}, "x y|B default|"},
		{"printf", map[string]string{"a": "1", "b": "2"}, "1|2|"},
		{"fail", nil, "EXIT CODE: exit status: 1"},
		{"both", map[string]string{"code": "0"}, "Hello\n\nError\n"},
		{"both", map[string]string{"code": "3"}, "EXIT CODE: exit status: 3\nHello\n\nERROR: Error\n"},
		{"script", map[string]string{"script": "printf '\\377ok'"}, "\uFFFDok"},
		{"script", map[string]string{"script": "true"}, ""},
	}
	for _, tt := range tests {
		got, err := call(t, ex, lib, tt.name, tt.args)
		if err != nil {
			t.Errorf("%s %v: %v", tt.name, tt.args, err)
			continue
		}
		if got != tt.want {
			t.Errorf("%s %v = %q, want %q", tt.name, tt.args, got, tt.want)
		}
	}
	// A command killed by a signal. In a pid namespace the command is
	// pid 1, which signals sent from inside never reach: the process
	// group alone lets it kill itself.
	got, err := call(t, &Executor{Environ: os.Environ(), Mechanism: proc.ProcessGroup}, lib, "script", map[string]string{"script": "kill -9 $$"})
	if err != nil || got != "EXIT CODE: signal: 9 (SIGKILL)" {
		t.Errorf("kill -9 $$ = %q, %v", got, err)
	}
	got, err = call(t, ex, lib, "ls", nil)
	if err != nil || !strings.HasPrefix(got, "EXIT CODE: exit status: ") || !strings.Contains(got, "\nERROR: ") {
		t.Errorf("ls nonexistent = %q, %v", got, err)
	}
	got, err = call(t, ex, lib, "symbols", nil)
	if err != nil || got != "linux\n" {
		t.Errorf("platforms = %q, %v", got, err)
	}
}

func TestPrepareErrors(t *testing.T) {
	lib := parseLibrary(t, t.TempDir(), hostPage)
	ex := &Executor{Environ: []string{"PATH=" + os.Getenv("PATH")}, Engine: "nb-no-such-engine"}
	tests := []struct {
		name string
		args map[string]string
		goos string
		want string
	}{
		{"echo", nil, "", "missing required argument message for function echo"},
		{"echo", map[string]string{"message": "x", "extra": "y", "bad": "z"}, "", "unknown argument bad for function echo"},
		{"missing", nil, "", "container required for function missing"},
		{"sudo", nil, "", "container required for function sudo"},
		{"symbols", nil, "plan9", "no command line for platform plan9"},
		{"secret", nil, "", "environment variable NB_TEST_SECRET not set"},
	}
	for _, tt := range tests {
		ex := &Executor{Environ: ex.Environ, GOOS: tt.goos, Engine: ex.Engine}
		f, _ := lib.Function(tt.name)
		_, err := ex.Prepare(f, tt.args)
		if err == nil || err.Error() != tt.want {
			t.Errorf("%s: error %v, want %q", tt.name, err, tt.want)
		}
	}
	empty := parseLibrary(t, t.TempDir(), "functions:\n  e:\n    description: d\n    parameters: {p: {type: string, description: d, required: false}}\n    cmdline: [sudo, '${p}']\n")
	f, _ := empty.Function("e")
	if _, err := ex.Prepare(f, nil); err == nil || err.Error() != "argument p not provided" {
		t.Errorf("empty: %v", err)
	}
	if _, err := ex.Prepare(f, map[string]string{"p": ""}); err == nil || err.Error() != "empty command line" {
		t.Errorf("empty: %v", err)
	}
}

// secrets are variables no child may see unless it is named explicitly:
// a deny-list cannot know their names.
var secrets = []string{"TOKEN=t0k", "PASSWORD=pw", "PGPASSWORD=pg", "APIKEY=k", "DATABASE_URL=postgres://u:p@h/d",
	"GH_PAT=gh", "PASSPHRASE=pp", "OPENAI_API_KEY_2=sk", "DOCKER_HOST=tcp://engine:2375", "http_proxy=http://proxy:3128"}

// Children get an allow-listed environment: the server's secrets reach a
// program only when its page asks for them with ${env.NAME} or the
// executor names them; the engine's variables reach only the engine.
func TestRunEnvironment(t *testing.T) {
	environ := append([]string{"PATH=" + os.Getenv("PATH"), "HOME=/home/u", "LC_ALL=C", "NB_TEST_SECRET=s3cret", "NB_TEST_OTHER=other"}, secrets...)
	lib := parseLibrary(t, t.TempDir(), hostPage)
	ex := &Executor{Environ: environ}
	got, err := call(t, ex, lib, "secret", nil)
	if err != nil || got != "[s3cret][]\n" {
		t.Errorf("secret = %q, %v; want [s3cret][]", got, err)
	}
	got, err = call(t, ex, lib, "script", map[string]string{"script": "env"})
	if err != nil || !strings.Contains(got, "PATH=") || !strings.Contains(got, "HOME=/home/u") || !strings.Contains(got, "LC_ALL=C") {
		t.Errorf("env = %q, %v", got, err)
	}
	for _, kv := range append([]string{"NB_TEST"}, secrets...) {
		name, _, _ := strings.Cut(kv, "=")
		if strings.Contains(got, name) {
			t.Errorf("the child saw %s:\n%s", name, got)
		}
	}
	// Names passes a variable explicitly.
	ex = &Executor{Environ: environ, Names: []string{"NB_TEST_OTHER", "NB_UNSET"}}
	got, err = call(t, ex, lib, "secret", nil)
	if err != nil || got != "[s3cret][other]\n" {
		t.Errorf("secret with Names = %q, %v; want [s3cret][other]", got, err)
	}
	// Without an environment there is nothing to read.
	f, _ := lib.Function("secret")
	if _, err := (&Executor{}).Prepare(f, nil); err == nil || err.Error() != "environment variable NB_TEST_SECRET not set" {
		t.Errorf("no environment: %v", err)
	}
}

// The container engine gets its own variables, the programs on the host
// do not; variables for the container go through the env file.
func TestEngineEnvironment(t *testing.T) {
	lib := parseLibrary(t, t.TempDir(), containerPage)
	dir, ex := fakeEngine(t, "docker")
	os.WriteFile(filepath.Join(dir, "docker"), []byte("#!/bin/sh\nenv | sort > \"$(dirname \"$0\")/engine-env\"\n[ \"$1\" = images ] && echo sha256:1\nexit 0\n"), 0o755)
	ex.Environ = append(ex.Environ, secrets...)
	ex.Names = []string{"PASSPHRASE"}
	if _, err := call(t, ex, lib, "forced", nil); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "engine-env"))
	got := string(b)
	if !strings.Contains(got, "DOCKER_HOST=tcp://engine:2375") {
		t.Errorf("the engine did not get DOCKER_HOST:\n%s", got)
	}
	for _, name := range []string{"TOKEN", "PGPASSWORD", "DATABASE_URL", "GH_PAT", "OPENAI_API_KEY_2", "http_proxy", "PASSPHRASE"} {
		if strings.Contains(got, name+"=") {
			t.Errorf("the engine saw %s:\n%s", name, got)
		}
	}
	hostLib := parseLibrary(t, t.TempDir(), hostPage)
	out, err := call(t, &Executor{Environ: ex.Environ}, hostLib, "script", map[string]string{"script": "env"})
	if err != nil || strings.Contains(out, "DOCKER_HOST") {
		t.Errorf("a host program saw DOCKER_HOST: %q %v", out, err)
	}
}

// Cancelling a call stops the command and all it started, a grandchild
// that ignores SIGTERM in a session of its own too. The test cancels once
// the grandchild runs, so it does not depend on the machine's speed.
func TestRunCancelKillsAll(t *testing.T) {
	dir := t.TempDir()
	lib := parseLibrary(t, dir, hostPage)
	for _, m := range []proc.Mechanism{proc.Auto, proc.ProcessGroup} {
		ex := &Executor{Environ: os.Environ(), KillGrace: 300 * time.Millisecond, Mechanism: m}
		// A sleep no other process runs: found in /proc whatever pid
		// namespace or /proc the command has.
		token := fmt.Sprintf("600.%09d", time.Now().UnixNano()%1e9)
		script := "sh -c 'trap \"\" TERM; exec sleep " + token + "' & wait"
		if m == proc.Auto {
			script = "setsid " + script
		}
		f, _ := lib.Function("script")
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan string, 1)
		go func() {
			out, err := ex.Call(ctx, f, map[string]string{"script": script})
			if err != nil {
				t.Error(err)
			}
			done <- out
		}()
		for i := 0; len(sleeping(token)) == 0; i++ {
			if i == 1000 {
				t.Fatalf("%s: the grandchild never ran", m)
			}
			time.Sleep(10 * time.Millisecond)
		}
		start := time.Now()
		cancel()
		got := <-done
		if took := time.Since(start); took > 5*time.Second {
			t.Errorf("%s: took %v", m, took)
		}
		if !strings.HasPrefix(got, "EXIT CODE: signal: ") {
			t.Errorf("%s: content %q", m, got)
		}
		deadline := time.Now().Add(3 * time.Second)
		for len(sleeping(token)) > 0 {
			if time.Now().After(deadline) {
				for _, pid := range sleeping(token) {
					syscall.Kill(pid, syscall.SIGKILL)
				}
				t.Fatalf("%s: the grandchild survived the call", m)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// sleeping lists the live processes running sleep token.
func sleeping(token string) []int {
	var out []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || string(b) != "sleep\x00"+token+"\x00" {
			continue
		}
		if st, err := os.ReadFile("/proc/" + e.Name() + "/stat"); err == nil && strings.Contains(string(st), ") Z ") {
			continue // a zombie runs nothing
		}
		pid, _ := strconv.Atoi(e.Name())
		out = append(out, pid)
	}
	return out
}

// A call that outlives its timeout is stopped and says so. The outcome
// does not depend on how far the command got: sleep never ends in time.
func TestRunTimeout(t *testing.T) {
	lib := parseLibrary(t, t.TempDir(), hostPage)
	ex := &Executor{Environ: os.Environ(), Timeout: 300 * time.Millisecond, KillGrace: 300 * time.Millisecond}
	got, err := call(t, ex, lib, "script", map[string]string{"script": "exec sleep 30"})
	if err != nil {
		t.Fatal(err)
	}
	// Without a SIGTERM handler, the init of a pid namespace gets SIGKILL.
	want := "EXIT CODE: signal: 15 (SIGTERM)"
	if m := proc.Detect(); m == proc.PIDNamespace || m == proc.UserNamespace {
		want = "EXIT CODE: signal: 9 (SIGKILL)"
	}
	if want += "\nnb: timed out after 300ms: the command and everything it started were stopped"; got != want {
		t.Errorf("content %q, want %q", got, want)
	}
}

func TestRunOutputCap(t *testing.T) {
	lib := parseLibrary(t, t.TempDir(), hostPage)
	ex := &Executor{Environ: os.Environ(), MaxOutput: 1 << 20}
	got, err := call(t, ex, lib, "script", map[string]string{"script": "head -c 10485760 /dev/zero | tr '\\0' a; echo done >&2"})
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Repeat("a", 1<<20) + "\ndone\n\nnb: stdout cut to its first 1048576 bytes of 10485760"
	if got != want {
		t.Errorf("content is %d bytes, ends %q", len(got), got[max(0, len(got)-80):])
	}
	// A multi-byte character cut by the cap is dropped, not mangled.
	ex = &Executor{Environ: os.Environ(), MaxOutput: 4}
	got, _ = call(t, ex, lib, "script", map[string]string{"script": "printf 'abcé'"})
	if got != "abc\nnb: stdout cut to its first 4 bytes of 5" {
		t.Errorf("cut rune: %q", got)
	}
}

func TestRunWorkersBound(t *testing.T) {
	lib := parseLibrary(t, t.TempDir(), hostPage)
	ex := &Executor{Environ: os.Environ(), Workers: 2}
	start := time.Now()
	done := make(chan string, 4)
	for i := 0; i < 4; i++ {
		go func() {
			out, _ := call(t, ex, lib, "script", map[string]string{"script": "sleep 0.3; echo ok"})
			done <- out
		}()
	}
	for i := 0; i < 4; i++ {
		if out := <-done; out != "ok\n" {
			t.Errorf("out %q", out)
		}
	}
	if took := time.Since(start); took < 550*time.Millisecond {
		t.Errorf("4 runs of 300ms with 2 workers took %v", took)
	}
}

const fakeDocker = `#!/bin/sh
dir=$(dirname "$0")
{ printf '%s' "$(basename "$0")"; for a in "$@"; do printf ' [%s]' "$a"; done; printf '\n'; } >> "$dir/calls.log"
case "$1" in
images) [ -f "$dir/have-image" ] && echo sha256:0123 ;;
run)
  for a in "$@"; do case "$a" in --env-file=*) f="${a#--env-file=}"; echo "$f" > "$dir/envfile"; cat "$f";; esac; done
  echo ran ;;
build) echo sha256:4567 ;;
esac
exit 0
`

// fakeEngine puts a fake container engine named name in a new folder and
// returns the folder and an executor whose PATH holds only it and the
// system's folders.
func fakeEngine(t *testing.T, name string) (string, *Executor) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(fakeDocker), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir, &Executor{Environ: []string{"PATH=" + dir + ":/usr/bin:/bin", "API_KEY=k3y"}}
}

func readCalls(t *testing.T, dir string) []string {
	t.Helper()
	b, _ := os.ReadFile(filepath.Join(dir, "calls.log"))
	os.Remove(filepath.Join(dir, "calls.log"))
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

const containerPage = `description: containers
functions:
  http_get:
    description: curl in a container when missing
    parameters:
      url: {type: string, description: u}
    container:
      image: alpine/curl
      platform: linux/amd64
      args: [--net=host]
      volumes: ["${cwd}:/data", "$HOME:/home"]
    cmdline: [nb-no-curl-here, -s, -L, "${url}"]
  forced:
    description: echo forced into a container
    parameters: {}
    container: {image: alpine, force: true}
    cmdline: [echo, hi]
  python_exec:
    description: preserve_app
    parameters:
      code: {type: string, description: c}
    container:
      force: true
      preserve_app: true
      image: python:3.7-alpine
      args: [--net=host]
    cmdline: [python, -c, "${code}"]
  nmap:
    description: a built image and sudo
    parameters:
      target: {type: string, description: t}
    container:
      build: {path: "${cwd}/nmap.Dockerfile", name: nmap_local}
      args: [--net=host, --cap-add=NET_RAW]
    cmdline: [sudo, echo, -sS, "${target}"]
  with_env:
    description: env file
    parameters: {}
    container: {image: ffufai, force: true}
    cmdline: [ffufai, --openai-key, "${env.API_KEY}"]
  no_dockerfile:
    description: missing Dockerfile
    parameters: {}
    container:
      build: {path: "${cwd}/missing.Dockerfile", name: x}
    cmdline: [nb-missing]
`

// The docker command lines, recorded by a fake docker.
func TestRunContainer(t *testing.T) {
	pages := t.TempDir()
	os.WriteFile(filepath.Join(pages, "nmap.Dockerfile"), []byte("FROM alpine\n"), 0o644)
	lib := parseLibrary(t, pages, containerPage)
	dir, ex := fakeEngine(t, "docker")
	docker := filepath.Join(dir, "docker")
	_ = docker

	got, err := call(t, ex, lib, "http_get", map[string]string{"url": "https://example.com/a b"})
	if err != nil || got != "ran\n" {
		t.Fatalf("http_get = %q, %v", got, err)
	}
	want := []string{
		"docker [version]",
		"docker [images] [-q] [alpine/curl]",
		"docker [pull] [--platform] [linux/amd64] [alpine/curl]",
		"docker [run] [--rm] [-v" + pages + ":/data] [-v$HOME:/home] [--net=host] [alpine/curl] [-s] [-L] [https://example.com/a b]",
	}
	if d := cmp.Diff(want, readCalls(t, dir)); d != "" {
		t.Errorf("http_get (-want +got):\n%s", d)
	}
	// The image is made once per executor.
	call(t, ex, lib, "http_get", map[string]string{"url": "u"})
	if d := cmp.Diff([]string{"docker [run] [--rm] [-v" + pages + ":/data] [-v$HOME:/home] [--net=host] [alpine/curl] [-s] [-L] [u]"}, readCalls(t, dir)); d != "" {
		t.Errorf("second http_get (-want +got):\n%s", d)
	}

	// An image already present is not pulled; force runs the container
	// although echo is on the host; the program is dropped.
	os.WriteFile(filepath.Join(dir, "have-image"), nil, 0o644)
	call(t, ex, lib, "forced", nil)
	want = []string{"docker [images] [-q] [alpine]", "docker [run] [--rm] [alpine] [hi]"}
	if d := cmp.Diff(want, readCalls(t, dir)); d != "" {
		t.Errorf("forced (-want +got):\n%s", d)
	}

	call(t, ex, lib, "python_exec", map[string]string{"code": "print('hi')"})
	want = []string{"docker [images] [-q] [python:3.7-alpine]", "docker [run] [--rm] [--net=host] [python:3.7-alpine] [python] [-c] [print('hi')]"}
	if d := cmp.Diff(want, readCalls(t, dir)); d != "" {
		t.Errorf("preserve_app (-want +got):\n%s", d)
	}

	// sudo is removed and sends the command to the container.
	call(t, ex, lib, "nmap", map[string]string{"target": "scanme.nmap.org"})
	want = []string{
		"docker [build] [-f] [" + pages + "/nmap.Dockerfile] [-t] [nmap_local] [--quiet] [" + pages + "]",
		"docker [run] [--rm] [--net=host] [--cap-add=NET_RAW] [nmap_local] [-sS] [scanme.nmap.org]",
	}
	if d := cmp.Diff(want, readCalls(t, dir)); d != "" {
		t.Errorf("build (-want +got):\n%s", d)
	}

	// ${env.NAME} reaches the container through a temporary env file.
	got, _ = call(t, ex, lib, "with_env", nil)
	calls := readCalls(t, dir)
	envFile, _ := os.ReadFile(filepath.Join(dir, "envfile"))
	envPath := strings.TrimSpace(string(envFile))
	want = []string{"docker [images] [-q] [ffufai]", "docker [run] [--rm] [--env-file=" + envPath + "] [ffufai] [--openai-key] [k3y]"}
	if d := cmp.Diff(want, calls); d != "" {
		t.Errorf("env (-want +got):\n%s", d)
	}
	if got != "API_KEY=k3y\nran\n" {
		t.Errorf("env file content %q", got)
	}
	if _, err := os.Stat(envPath); !os.IsNotExist(err) {
		t.Errorf("env file %s left behind", envPath)
	}

	if _, err := call(t, ex, lib, "no_dockerfile", nil); err == nil || err.Error() != "dockerfile '"+pages+"/missing.Dockerfile' does not exist" {
		t.Errorf("missing Dockerfile: %v", err)
	}
	os.Mkdir(filepath.Join(pages, "missing.Dockerfile"), 0o755)
	if _, err := call(t, ex, lib, "no_dockerfile", nil); err == nil || err.Error() != "path '"+pages+"/missing.Dockerfile' is not a dockerfile" {
		t.Errorf("Dockerfile is a folder: %v", err)
	}
}

func TestRunContainerEngines(t *testing.T) {
	lib := parseLibrary(t, t.TempDir(), containerPage)
	dir, ex := fakeEngine(t, "podman")
	os.WriteFile(filepath.Join(dir, "have-image"), nil, 0o644)
	if _, err := call(t, ex, lib, "forced", nil); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"podman [version]", "podman [images] [-q] [alpine]", "podman [run] [--rm] [alpine] [hi]"}, readCalls(t, dir)); d != "" {
		t.Errorf("podman (-want +got):\n%s", d)
	}
	ex = &Executor{Environ: []string{"PATH=" + t.TempDir()}}
	_, err := call(t, ex, lib, "forced", nil)
	if err == nil || err.Error() != "docker executable not found: docker or podman not on PATH; install docker or podman to run this function in a container" {
		t.Errorf("no engine: %v", err)
	}
	// A failing pull is the reference's error, with the engine's words.
	fail := t.TempDir()
	os.WriteFile(filepath.Join(fail, "docker"), []byte("#!/bin/sh\n[ \"$1\" = pull ] && { echo 'pull access denied for squealer' >&2; exit 1; }\nexit 0\n"), 0o755)
	ex = &Executor{Environ: []string{"PATH=" + fail + ":/usr/bin:/bin"}}
	_, err = call(t, ex, lib, "forced", nil)
	if err == nil || err.Error() != "command failed with status: exit status: 1 (docker pull alpine: pull access denied for squealer)" {
		t.Errorf("failed pull: %v", err)
	}
}

// A container engine that does not answer is one problem for all the
// functions that need it (serve printed one per function: 52 lines for
// the corpus), and calls fail with its words.
func TestEngineDownOnce(t *testing.T) {
	pages := t.TempDir()
	os.WriteFile(filepath.Join(pages, "nmap.Dockerfile"), []byte("FROM alpine\n"), 0o644)
	lib := parseLibrary(t, pages, containerPage)
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "docker"), []byte("#!/bin/sh\necho \"$*\" >> \"$(dirname \"$0\")/calls.log\"\necho 'Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?' >&2\nexit 1\n"), 0o755)
	ex := &Executor{Environ: []string{"PATH=" + dir + ":/usr/bin:/bin"}}
	ps := ex.Prefetch(context.Background(), lib)
	if len(ps) != 1 || !ps[0].Engine || !strings.Contains(ps[0].Message, "container engine docker does not answer") || !strings.Contains(ps[0].Message, "Cannot connect to the Docker daemon") || !strings.Contains(ps[0].Message, "the images of 6 functions were not made") {
		t.Errorf("Prefetch problems: %v", ps)
	}
	if calls := readCalls(t, dir); len(calls) != 1 || calls[0] != "version" {
		t.Errorf("engine calls %q, want one version", calls)
	}
	_, err := call(t, ex, lib, "forced", nil)
	var ee *EngineError
	if !errors.As(err, &ee) {
		t.Errorf("call: %v", err)
	}
	problems := lib.Validate(context.Background(), ValidateOptions{Executor: ex, Host: true, Containers: true})
	n := 0
	for _, p := range problems {
		if strings.Contains(p.Message, "Docker daemon") {
			n++
		}
	}
	if n != 1 {
		t.Errorf("Validate said it %d times: %v", n, problems)
	}
}
