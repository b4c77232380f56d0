// Package sshdtest starts Debian's OpenSSH server on loopback for tests:
// a throw-away sshd with its own host key, configuration and authorized
// keys, logging in the user the tests run as. Without sshd a test skips,
// saying how to install it; in CI (CI=true) it fails instead.
package sshdtest

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
)

// Sshd is where the binary is (Debian's openssh-server).
const Sshd = "/usr/sbin/sshd"

// Server is a running sshd.
type Server struct {
	// Host and Port are its address (127.0.0.1 and a free port).
	Host string
	Port int
	// User is the user it logs in (the tests' own).
	User string
	// KnownHosts is a known_hosts file that lists its host key.
	KnownHosts string
	// Identity is a private key file (OpenSSH format) it accepts.
	Identity string
	// Key is that key, for an agent.
	Key ed25519.PrivateKey
	// HostKey is the server's public host key.
	HostKey ssh.PublicKey
}

// Addr is host:port.
func (s *Server) Addr() string { return net.JoinHostPort(s.Host, strconv.Itoa(s.Port)) }

// Start starts sshd for the test; it is stopped at the test's end.
func Start(t testing.TB) *Server {
	t.Helper()
	if _, err := os.Stat(Sshd); err != nil {
		msg := "sshd is not installed (" + Sshd + "): install the Debian package openssh-server (scripts/install-debian-packages does)"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	u, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	hostPub, hostFile := writeKey(t, dir, "host_key")
	clientPub, clientFile := writeKey(t, dir, "id_ed25519")
	authorized := filepath.Join(dir, "authorized_keys")
	if err := os.WriteFile(authorized, ssh.MarshalAuthorizedKey(clientPub), 0o600); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		// sshd run by root separates privileges into this folder.
		_ = os.MkdirAll("/run/sshd", 0o755)
	}
	sftpServer := "/usr/lib/openssh/sftp-server"
	var lastErr error
	for try := 0; try < 5; try++ {
		port := freePort(t)
		conf := filepath.Join(dir, "sshd_config")
		text := strings.Join([]string{
			"Port " + strconv.Itoa(port),
			"ListenAddress 127.0.0.1",
			"HostKey " + hostFile,
			"PidFile " + filepath.Join(dir, "sshd.pid"),
			"AuthorizedKeysFile " + authorized,
			"UsePAM no",
			"StrictModes no",
			"PasswordAuthentication no",
			"KbdInteractiveAuthentication no",
			"PubkeyAuthentication yes",
			"PermitRootLogin prohibit-password",
			"AllowTcpForwarding no",
			"X11Forwarding no",
			"PrintMotd no",
			"LogLevel ERROR",
			"Subsystem sftp " + sftpServer,
		}, "\n") + "\n"
		if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(Sshd, "-D", "-e", "-f", conf)
		var log syncBuilder
		cmd.Stdout, cmd.Stderr = &log, &log
		// The server's children (a connection's sshd, a command left
		// running) may hold its output open after it is killed.
		cmd.WaitDelay = time.Second
		if err := cmd.Start(); err != nil {
			t.Fatalf("starting sshd: %v", err)
		}
		exited := make(chan struct{})
		go func() { cmd.Wait(); close(exited) }()
		if up(port, exited) {
			t.Cleanup(func() {
				cmd.Process.Kill()
				<-exited
			})
			key, _ := ssh.ParseRawPrivateKey(mustRead(t, clientFile))
			known := filepath.Join(dir, "known_hosts")
			line := fmt.Sprintf("[127.0.0.1]:%d %s", port, ssh.MarshalAuthorizedKey(hostPub))
			if err := os.WriteFile(known, []byte(line), 0o600); err != nil {
				t.Fatal(err)
			}
			return &Server{Host: "127.0.0.1", Port: port, User: u.Username, KnownHosts: known, Identity: clientFile,
				Key: *key.(*ed25519.PrivateKey), HostKey: hostPub}
		}
		cmd.Process.Kill()
		<-exited
		lastErr = fmt.Errorf("sshd did not start: %s", log.String())
	}
	t.Fatal(lastErr)
	return nil
}

// up waits until port accepts connections, or sshd exited.
func up(port int, exited <-chan struct{}) bool {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return false
		default:
		}
		if c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), time.Second); err == nil {
			c.Close()
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}

// freePort is a port nothing listens on now (sshd takes no port 0).
func freePort(t testing.TB) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// writeKey makes an ed25519 key and writes its private half to dir/name.
func writeKey(t testing.TB, dir, name string) (ssh.PublicKey, string) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, name)
	if err := os.WriteFile(file, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	sp, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return sp, file
}

func mustRead(t testing.TB, file string) []byte {
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// syncBuilder is a strings.Builder safe for the two streams' copiers.
type syncBuilder struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuilder) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuilder) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
