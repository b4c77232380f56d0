package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nbots/nb/provider/openai/openaitest"
	"github.com/nbots/nb/provider/providertest"
)

// nbServe starts this test binary as `nb serve` (testscript.Main runs it
// as nb when it is called nb) on a free port, and waits until it answers.
func nbServe(t *testing.T, dir string, env []string, args ...string) (*exec.Cmd, string, *bytes.Buffer) {
	t.Helper()
	return nbServeIn(t, "", env, append(args, dir)...)
}

// nbServeIn starts nb serve --listen ADDR args in the folder cwd ("" for
// the test's).
func nbServeIn(t *testing.T, cwd string, env []string, args ...string) (*exec.Cmd, string, *bytes.Buffer) {
	t.Helper()
	addr := freeAddr(t)
	cmd := exec.Command(nbBinary(t), append([]string{"serve", "--listen", addr}, args...)...)
	cmd.Dir = cwd
	cmd.Env = append([]string{"HOME=" + t.TempDir(), "PATH=" + os.Getenv("PATH")}, env...)
	url := "http://" + addr
	stderr := startServer(t, cmd, url+"/healthz")
	return cmd, url, stderr
}

// nbBinary links this test binary as nb in a temporary folder:
// testscript.Main runs it as nb when it is called nb.
func nbBinary(t *testing.T) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "nb")
	if err := os.Symlink(self, bin); err != nil {
		t.Fatal(err)
	}
	return bin
}

// freeAddr is a loopback address no one listens on, for a server's
// --listen.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// startServer starts cmd (an nb server) with its standard error in the
// returned buffer, kills it when the test ends, and waits until a GET of
// probe answers.
func startServer(t *testing.T, cmd *exec.Cmd, probe string) *bytes.Buffer {
	t.Helper()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() }) //nolint:errcheck // may have exited
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if resp, err := http.Get(probe); err == nil {
			resp.Body.Close()
			return &stderr
		}
		if time.Now().After(deadline) {
			t.Fatalf("nb %s did not start:\n%s", cmd.Args[1], stderr.String())
		}
	}
}

func post(url, body string) (int, string, error) {
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// SIGTERM stops new runs, lets the runs in flight finish (an evaluation
// and a stream that its client keeps polling), then exits 0; past the
// grace period, runs are cancelled.
func TestServeSIGTERM(t *testing.T) {
	if testing.Short() {
		t.Skip("starts nb serve")
	}
	provider := openaitest.New(func(turn providertest.Turn) providertest.Reply {
		if turn.LastUser() == "long" {
			return providertest.Reply{Chunks: []string{"never"}, Delay: 3 * time.Second}
		}
		return providertest.Reply{Chunks: []string{"a", "b", "c", "d", "e"}, Delay: 150 * time.Millisecond}
	})
	fake := httptest.NewServer(provider)
	defer fake.Close()
	dir := t.TempDir()
	src := "meta: {name: Slow}\nprovider: {id: openai, credentials: {address: ENV/OPENAI_API_ADDRESS, access-token: k}, settings: {model: m}}\n"
	if err := os.WriteFile(filepath.Join(dir, "slow.yml"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	env := []string{"OPENAI_API_ADDRESS=" + fake.URL}

	t.Run("runs in flight finish", func(t *testing.T) {
		cmd, url, stderr := nbServe(t, dir, env, "--grace", "10s")
		var wg sync.WaitGroup
		var evalStatus int
		var evalBody string
		wg.Add(2)
		go func() {
			defer wg.Done()
			evalStatus, evalBody, _ = post(url+"/cartridges", `{"cartridge": "slow", "input": "hi"}`)
		}()
		_, created, err := post(url+"/cartridges/stream", `{"cartridge": "slow", "input": "hi"}`)
		if err != nil {
			t.Fatal(err)
		}
		var stream struct{ ID string }
		json.Unmarshal([]byte(created), &stream) //nolint:errcheck // checked below
		if stream.ID == "" {
			t.Fatalf("no stream: %s", created)
		}
		var final map[string]any
		go func() {
			defer wg.Done()
			for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); {
				resp, err := http.Get(url + "/cartridges/stream/" + stream.ID)
				if err != nil {
					return
				}
				json.NewDecoder(resp.Body).Decode(&final) //nolint:errcheck // checked below
				resp.Body.Close()
				if final["state"] != "pending" {
					return
				}
			}
		}()
		// Both runs are in flight once the provider has their requests.
		until(t, "the runs reach the provider", func() bool { return len(provider.Recorder.Bodies()) >= 2 })
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		until(t, "the server says it is stopping", func() bool {
			resp, err := http.Get(url + "/healthz")
			if err != nil {
				return false
			}
			resp.Body.Close()
			return resp.StatusCode == http.StatusServiceUnavailable
		})
		if status, body, err := post(url+"/cartridges", `{"cartridge": "slow", "input": "late"}`); err != nil || status != 503 {
			t.Errorf("a new run after SIGTERM: %d %s %v", status, body, err)
		}
		wg.Wait()
		if evalStatus != 200 || !strings.Contains(evalBody, `"output":"abcde\n"`) {
			t.Errorf("the evaluation in flight: %d %s", evalStatus, evalBody)
		}
		if final["state"] != "finished" || final["output"] != "abcde\n" {
			t.Errorf("the stream in flight: %v", final)
		}
		if err := waitExit(cmd, 10*time.Second); err != nil {
			t.Fatalf("%v\n%s", err, stderr)
		}
		if !strings.Contains(stderr.String(), "msg=stopped") {
			t.Errorf("stderr:\n%s", stderr)
		}
	})

	t.Run("grace over", func(t *testing.T) {
		cmd, url, stderr := nbServe(t, dir, env, "--grace", "300ms")
		done := make(chan string, 1)
		go func() {
			status, body, err := post(url+"/cartridges", `{"cartridge": "slow", "input": "long"}`)
			done <- fmt.Sprint(status, " ", body, err)
		}()
		time.Sleep(300 * time.Millisecond)
		start := time.Now()
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if err := waitExit(cmd, 10*time.Second); err != nil {
			t.Fatalf("%v\n%s", err, stderr)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("stopping took %v", d)
		}
		if got := <-done; !strings.HasPrefix(got, "503 ") || !strings.Contains(got, "shutting down") {
			t.Errorf("the cancelled run answered %s", got)
		}
	})
}

func waitExit(cmd *exec.Cmd, d time.Duration) error {
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			return fmt.Errorf("nb serve exited with %v", err)
		}
		return nil
	case <-time.After(d):
		return fmt.Errorf("nb serve did not exit within %v of SIGTERM", d)
	}
}

// until waits for cond, checking it every 10 ms for 10 s at most.
func until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting: %s", what)
		}
	}
}

// nb serve fails closed: a cartridge's exec with sandbox: auto is refused
// where bubblewrap cannot run, unless the operator passes
// --allow-unsandboxed-exec.
func TestServeUnsandboxedExec(t *testing.T) {
	if testing.Short() {
		t.Skip("starts nb serve")
	}
	fake := httptest.NewServer(openaitest.New(providertest.Echo))
	defer fake.Close()
	dir := t.TempDir()
	src := "meta: {name: Shell}\nsafety: {tools: {confirmable: false}}\nbuiltins: {exec: {}}\nprovider: {id: openai, credentials: {address: ENV/OPENAI_API_ADDRESS, access-token: k}, settings: {model: m}}\n"
	if err := os.WriteFile(filepath.Join(dir, "shell.yml"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	// A bwrap that fails, as in a container without the privileges.
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "bwrap"), []byte("#!/bin/sh\necho 'bwrap: Creating new namespace failed: Operation not permitted' >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	env := []string{"OPENAI_API_ADDRESS=" + fake.URL, "PATH=" + bin + ":" + os.Getenv("PATH")}
	ask := `{"cartridge": "shell", "input": "call exec {\"command\": \"echo ran-unsandboxed\"}"}`

	_, url, _ := nbServe(t, dir, env)
	status, body, err := post(url+"/cartridges", ask)
	if err != nil || status != 200 || !strings.Contains(body, "this server runs commands only sandboxed") || !strings.Contains(body, "--allow-unsandboxed-exec") || strings.Contains(body, "ran-unsandboxed\\n") {
		t.Errorf("without --allow-unsandboxed-exec: %d %s %v", status, body, err)
	}

	_, url, _ = nbServe(t, dir, env, "--allow-unsandboxed-exec")
	status, body, err = post(url+"/cartridges", ask)
	if err != nil || status != 200 || !strings.Contains(body, "ran-unsandboxed\\n") {
		t.Errorf("with --allow-unsandboxed-exec: %d %s %v", status, body, err)
	}
}

// nb serve without a folder, and without NANO_BOTS_CARTRIDGES_PATH,
// serves the current folder's cartridges and says so; /v1/models and
// /agents name the default cartridge usably.
func TestServeDefaultFolder(t *testing.T) {
	if testing.Short() {
		t.Skip("starts nb serve")
	}
	fake := httptest.NewServer(openaitest.New(providertest.Echo))
	defer fake.Close()
	dir := t.TempDir()
	src := "meta: {name: Writer, author: Ann}\nprovider: {id: openai, credentials: {address: ENV/OPENAI_API_ADDRESS, access-token: k}, settings: {model: m}}\n"
	if err := os.WriteFile(filepath.Join(dir, "writer.yml"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	env := []string{"OPENAI_API_ADDRESS=" + fake.URL, "OPENAI_API_KEY=k"}
	cmd, url, stderr := nbServeIn(t, dir, env)
	resp, err := http.Get(url + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if want := `{"object":"list","data":[{"id":"default","object":"model","created":0,"owned_by":"nb"},{"id":"writer","object":"model","created":`; !strings.HasPrefix(string(body), want) || !strings.Contains(string(body), `"owned_by":"Ann"`) {
		t.Errorf("/v1/models: %s", body)
	}
	status, answer, err := post(url+"/v1/chat/completions", `{"model": "default", "messages": [{"role": "user", "content": "hi"}]}`)
	if err != nil || status != 200 || !strings.Contains(answer, `"content":"echo: hi"`) {
		t.Errorf("model default: %d %s %v", status, answer, err)
	}
	resp, err = http.Get(url + "/agents/default")
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `"description":"nb's built-in default cartridge`) {
		t.Errorf("/agents/default: %s", body)
	}
	// stderr is read once nb serve has ended (its writes race a read).
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := waitExit(cmd, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if want := "nb: serving 1 cartridge of " + dir + ", and the default cartridge, on " + url + " "; !strings.Contains(stderr.String(), want) {
		t.Errorf("stderr lacks %q:\n%s", want, stderr)
	}
}
