package remote

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"

	"github.com/nbots/nb/builtin/environment"
	"github.com/nbots/nb/builtin/internal/sshdtest"
)

func dial(t *testing.T, s *sshdtest.Server, dir string) *Env {
	t.Helper()
	e, err := Dial(context.Background(), Config{User: s.User, Host: s.Host, Port: s.Port, Dir: dir, KnownHosts: s.KnownHosts, Identity: s.Identity})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

func TestHostKeyChecks(t *testing.T) {
	s := sshdtest.Start(t)
	dir := t.TempDir()
	empty := filepath.Join(t.TempDir(), "known_hosts")
	os.WriteFile(empty, nil, 0o600)
	other, _, _ := ed25519.GenerateKey(rand.Reader)
	otherKey, _ := ssh.NewPublicKey(other)
	changed := filepath.Join(t.TempDir(), "known_hosts")
	os.WriteFile(changed, []byte("[127.0.0.1]:"+itoa(s.Port)+" "+string(ssh.MarshalAuthorizedKey(otherKey))), 0o600)
	for _, tc := range []struct {
		name, file string
		want       []string
	}{
		{"unknown", empty, []string{"[127.0.0.1]:" + itoa(s.Port), "is unknown", empty}},
		{"changed", changed, []string{"[127.0.0.1]:" + itoa(s.Port), "does not match", changed}},
		{"missing", filepath.Join(dir, "nope"), []string{"cannot be read", filepath.Join(dir, "nope")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Dial(context.Background(), Config{User: s.User, Host: s.Host, Port: s.Port, Dir: dir, KnownHosts: tc.file, Identity: s.Identity})
			if err == nil {
				t.Fatal("Dial succeeded; want a refusal")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// TestAgentLogin logs in with the key of an SSH agent (the agent
// protocol, served by x/crypto's keyring on a Unix socket), and refuses a
// login when no key is offered.
func TestAgentLogin(t *testing.T) {
	s := sshdtest.Start(t)
	sock := filepath.Join(t.TempDir(), "agent.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ring := agent.NewKeyring()
	if err := ring.Add(agent.AddedKey{PrivateKey: s.Key}); err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go agent.ServeAgent(ring, c)
		}
	}()
	home := t.TempDir()
	e, err := Dial(context.Background(), Config{User: s.User, Host: s.Host, Port: s.Port, Dir: t.TempDir(), KnownHosts: s.KnownHosts,
		Environ: []string{"HOME=" + home, "SSH_AUTH_SOCK=" + sock}})
	if err != nil {
		t.Fatal(err)
	}
	e.Close()
	_, err = Dial(context.Background(), Config{User: s.User, Host: s.Host, Port: s.Port, Dir: t.TempDir(), KnownHosts: s.KnownHosts,
		Environ: []string{"HOME=" + home}})
	if err == nil || !strings.Contains(err.Error(), "no key to log in with") {
		t.Errorf("Dial without keys = %v; want no key", err)
	}
}

// TestConfined refuses names that lead out of the workspace: .., absolute
// paths, and links whose target (resolved by the server) is outside.
func TestConfined(t *testing.T) {
	s := sshdtest.Start(t)
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "secret"), []byte("s"), 0o644)
	dir := t.TempDir()
	os.Symlink(outside, filepath.Join(dir, "out"))
	os.Symlink(filepath.Join(outside, "secret"), filepath.Join(dir, "secret-link"))
	os.Mkdir(filepath.Join(dir, "sub"), 0o755)
	os.Symlink("../inside.txt", filepath.Join(dir, "sub", "ok-link"))
	os.WriteFile(filepath.Join(dir, "inside.txt"), []byte("in"), 0o644)
	e := dial(t, s, dir)
	for _, name := range []string{"../x", "sub/../../x", "/etc/passwd", "out/secret", "secret-link", "out/new"} {
		if _, err := e.Open(name); !environment.IsEscape(err) {
			t.Errorf("Open(%q) = %v; want an escape", name, err)
		}
		if _, err := e.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644); !environment.IsEscape(err) {
			t.Errorf("OpenFile(%q, create) = %v; want an escape", name, err)
		}
	}
	if err := e.MkdirAll("out/made", 0o755); !environment.IsEscape(err) {
		t.Errorf("MkdirAll through a link out = %v", err)
	}
	if _, err := os.Stat(filepath.Join(outside, "made")); err == nil {
		t.Error("a folder was made outside")
	}
	f, err := e.Open("sub/ok-link")
	if err != nil {
		t.Fatalf("a link inside: %v", err)
	}
	f.Close()
	// A link itself may be looked at and removed: it is inside.
	if _, err := e.Lstat("secret-link"); err != nil {
		t.Errorf("Lstat of a link out = %v", err)
	}
	if _, err := e.Stat("nope"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Stat(nope) = %v; want not exist", err)
	}
}

// TestRunStopsGroup runs a command past its timeout: the whole remote
// process group is killed, the background child too.
func TestRunStopsGroup(t *testing.T) {
	s := sshdtest.Start(t)
	dir := t.TempDir()
	e := dial(t, s, dir)
	var out, errs bytes.Buffer
	exit, err := e.Run(context.Background(), environment.Command{
		Line: "sleep 300 & echo $! > bg.pid; echo started; sleep 300", Timeout: 2 * time.Second, Grace: 500 * time.Millisecond, Stdout: &out, Stderr: &errs,
	})
	if err != nil {
		t.Fatal(err)
	}
	if !exit.TimedOut {
		t.Errorf("exit %+v; want a timeout", exit)
	}
	if out.String() != "started\n" {
		t.Errorf("output %q, errors %q", out.String(), errs.String())
	}
	assertDead(t, filepath.Join(dir, "bg.pid"))
}

func assertDead(t *testing.T, pidFile string) {
	t.Helper()
	data, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid := strings.TrimSpace(string(data))
	deadline := time.Now().Add(5 * time.Second)
	for {
		stat, err := os.ReadFile("/proc/" + pid + "/stat")
		if err != nil || strings.Contains(string(stat), ") Z ") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %s still runs: %s", pid, stat)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestValidName(t *testing.T) {
	for name, want := range map[string]bool{"PATH": true, "_x1": true, "1x": false, "": false, "A;rm -rf ~": false, "A B": false, "É": false} {
		if got := validName(name); got != want {
			t.Errorf("validName(%q) = %v, want %v", name, got, want)
		}
	}
}

// TestReconnects: a connection that broke is opened again at the next
// use after idleCheck.
func TestReconnects(t *testing.T) {
	s := sshdtest.Start(t)
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "f"), []byte("x"), 0o644)
	e := dial(t, s, dir)
	old := e.client
	old.Close()
	e.mu.Lock()
	e.checked = time.Time{}
	e.mu.Unlock()
	if _, err := e.Stat("f"); err != nil {
		t.Fatalf("Stat after the connection broke: %v", err)
	}
	if e.client == old {
		t.Error("the connection was not opened again")
	}
}
