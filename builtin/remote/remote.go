// Package remote is the SSH execution environment of nb's files and exec
// built-ins (builtins.environment: ssh://user@host/path): the file tools
// work on the remote folder over SFTP, confined to it, and exec runs its
// commands there in a process group of their own, so an agent works on
// a remote development machine with the same tools, limits and
// confirmations as on this one.
//
// The server's host key must be in a known_hosts file (an unknown or
// changed key is refused, naming the host and the file); nb logs in with
// the keys of the SSH agent (SSH_AUTH_SOCK) or a key file, never a
// password. Nothing of nb's environment goes to the remote side but the
// variables the cartridge names for exec (builtins.exec.env).
package remote

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/nbots/nb/builtin/environment"
	"github.com/nbots/nb/proc"
)

// DialTimeout bounds connecting and logging in.
const DialTimeout = 20 * time.Second

// Config says where to connect and how to log in.
type Config struct {
	// User is the remote user; empty: USER of Environ.
	User string
	// Host and Port are the server's (Port 0: 22).
	Host string
	Port int
	// Dir is the workspace's absolute path on the remote machine.
	Dir string
	// KnownHosts is the known_hosts file that must hold the server's key;
	// empty: ~/.ssh/known_hosts of Environ's HOME.
	KnownHosts string
	// Identity is a private key file to log in with; empty: the SSH
	// agent's keys (SSH_AUTH_SOCK of Environ), then ~/.ssh/id_ed25519,
	// id_ecdsa and id_rsa where they exist.
	Identity string
	// Environ is nb's environment: only HOME, USER and SSH_AUTH_SOCK are
	// read from it.
	Environ []string
}

// Env is a workspace on a remote machine: environment.Environment over
// one SSH connection.
type Env struct {
	cfg   Config
	addr  string // host:port
	where string
	dir   string // the workspace's real path there
	// start is the command line exec's sessions run: the wrapper in dir.
	start string

	mu     sync.Mutex
	client *ssh.Client
	sftp   *sftp.Client
	// checked is when the connection was last known to work.
	checked time.Time
}

// idleCheck is how long a connection is trusted after a check: past it,
// the next use checks it first (a keepalive round trip) and reconnects
// when it broke.
const idleCheck = 15 * time.Second

var _ environment.Environment = (*Env)(nil)

// Dial connects to the server, logs in and opens the workspace, which
// must be a folder there. Its errors say what to do.
func Dial(ctx context.Context, cfg Config) (*Env, error) {
	if cfg.User == "" {
		cfg.User, _ = proc.Lookup(cfg.Environ, "USER")
		if cfg.User == "" {
			return nil, errors.New("no remote user: write it in the address (ssh://user@host/path)")
		}
	}
	if cfg.Port == 0 {
		cfg.Port = 22
	}
	if !path.IsAbs(cfg.Dir) {
		return nil, fmt.Errorf("the remote workspace %q is not an absolute path", cfg.Dir)
	}
	e := &Env{cfg: cfg, addr: net.JoinHostPort(cfg.Host, strconv.Itoa(cfg.Port))}
	e.where = "on " + cfg.User + "@" + cfg.Host + " over SSH, with that user's rights"
	if err := e.connect(ctx); err != nil {
		return nil, err
	}
	real, err := e.sftp.RealPath(path.Clean(cfg.Dir))
	if err == nil {
		var info os.FileInfo
		if info, err = e.sftp.Stat(real); err == nil && !info.IsDir() {
			err = errors.New("not a folder")
		}
	}
	if err != nil {
		e.Close()
		return nil, fmt.Errorf("the remote workspace %s on %s cannot be used: %v", cfg.Dir, cfg.Host, sftpText(err))
	}
	e.dir = real
	e.start = "cd -- " + quote(real) + " && exec sh -c " + quote(wrapper)
	return e, nil
}

// connect (re)opens the connection and its SFTP session.
func (e *Env) connect(ctx context.Context) error {
	conf, release, err := e.clientConfig()
	if err != nil {
		return err
	}
	defer release()
	d := net.Dialer{Timeout: DialTimeout}
	ctx, cancel := context.WithTimeout(ctx, DialTimeout)
	defer cancel()
	conn, err := d.DialContext(ctx, "tcp", e.addr)
	if err != nil {
		return fmt.Errorf("cannot reach %s: %v", e.addr, err)
	}
	_ = conn.SetDeadline(time.Now().Add(DialTimeout))
	c, chans, reqs, err := ssh.NewClientConn(conn, e.addr, conf)
	if err != nil {
		conn.Close()
		var ke *knownhosts.KeyError
		var he hostKeyError
		switch {
		case errors.As(err, &he):
			return he
		case errors.As(err, &ke):
			return hostKeyError{host: e.hostName(), file: e.knownHosts(), changed: len(ke.Want) > 0}
		case strings.Contains(err.Error(), "unable to authenticate"):
			return fmt.Errorf("%s@%s refused nb's keys (%s): add one of them to that user's authorized_keys", e.cfg.User, e.addr, e.keySources())
		}
		return fmt.Errorf("cannot log in to %s: %v", e.addr, err)
	}
	_ = conn.SetDeadline(time.Time{})
	client := ssh.NewClient(c, chans, reqs)
	sc, err := sftp.NewClient(client)
	if err != nil {
		client.Close()
		return fmt.Errorf("%s offers no SFTP (the file tools need its sftp subsystem): %v", e.addr, err)
	}
	e.client, e.sftp = client, sc
	return nil
}

// hostName is the host as known_hosts names it.
func (e *Env) hostName() string { return knownhosts.Normalize(e.addr) }

func (e *Env) knownHosts() string {
	if e.cfg.KnownHosts != "" {
		return e.cfg.KnownHosts
	}
	home, _ := proc.Lookup(e.cfg.Environ, "HOME")
	return filepath.Join(home, ".ssh", "known_hosts")
}

// hostKeyError refuses a server whose key known_hosts does not vouch for.
type hostKeyError struct {
	host, file string
	changed    bool
	missing    error // the file could not be read
}

func (h hostKeyError) Error() string {
	switch {
	case h.missing != nil:
		return fmt.Sprintf("the host key of %s cannot be checked: the known_hosts file %s cannot be read (%v); nb connects only to hosts it lists (add the host with ssh-keyscan, after checking the key's fingerprint)", h.host, h.file, h.missing)
	case h.changed:
		return fmt.Sprintf("the host key of %s does not match the one in %s: the key changed, or someone is in the middle; nb refuses to connect (if the change is expected, replace the line in %s)", h.host, h.file, h.file)
	}
	return fmt.Sprintf("the host %s is unknown: its key is not in %s; nb connects only to hosts listed there (check the key's fingerprint, then add it, e.g. with ssh-keyscan)", h.host, h.file)
}

// clientConfig is the SSH login: known_hosts checking and the keys.
// release ends the connection to the agent once the login is over.
func (e *Env) clientConfig() (conf *ssh.ClientConfig, release func(), err error) {
	file := e.knownHosts()
	check, err := knownhosts.New(file)
	if err != nil {
		return nil, nil, hostKeyError{host: e.hostName(), file: file, missing: err}
	}
	auth, release, err := e.auth()
	if err != nil {
		return nil, nil, err
	}
	return &ssh.ClientConfig{
		User: e.cfg.User, Auth: auth, HostKeyCallback: check,
		HostKeyAlgorithms: hostAlgorithms(check, e.addr),
		Timeout:           DialTimeout,
	}, release, nil
}

// hostAlgorithms are the key types known_hosts holds for addr, so the
// server shows the key that can be checked, not another it also has.
// Nil (any) when the host is not listed: the check refuses it anyway.
func hostAlgorithms(check ssh.HostKeyCallback, addr string) []string {
	tcp, _ := net.ResolveTCPAddr("tcp", addr)
	err := check(addr, tcp, probeKey{})
	var ke *knownhosts.KeyError
	if !errors.As(err, &ke) || len(ke.Want) == 0 {
		return nil
	}
	var out []string
	for _, k := range ke.Want {
		switch t := k.Key.Type(); t {
		case ssh.KeyAlgoRSA:
			out = append(out, ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256, ssh.KeyAlgoRSA)
		default:
			out = append(out, t)
		}
	}
	return out
}

// probeKey is a key no known_hosts line holds: checking it lists the
// keys that are there.
type probeKey struct{}

func (probeKey) Type() string                        { return "nb-probe" }
func (probeKey) Marshal() []byte                     { return []byte("nb-probe") }
func (probeKey) Verify([]byte, *ssh.Signature) error { return errors.New("no") }

// auth are the login methods: the key file, or the agent's keys and the
// usual key files; release closes the connection to the agent.
func (e *Env) auth() (methods []ssh.AuthMethod, release func(), err error) {
	release = func() {}
	if e.cfg.Identity != "" {
		s, err := loadKey(e.cfg.Identity)
		if err != nil {
			return nil, nil, err
		}
		return []ssh.AuthMethod{ssh.PublicKeys(s)}, release, nil
	}
	var signers []ssh.Signer
	if sock, ok := proc.Lookup(e.cfg.Environ, "SSH_AUTH_SOCK"); ok && sock != "" {
		// A stale socket is passed over: the key files may still do.
		if conn, err := net.DialTimeout("unix", sock, DialTimeout); err == nil {
			release = func() { conn.Close() }
			if a, err := agent.NewClient(conn).Signers(); err == nil {
				signers = append(signers, a...)
			}
		}
	}
	if home, ok := proc.Lookup(e.cfg.Environ, "HOME"); ok && home != "" {
		for _, name := range []string{"id_ed25519", "id_ecdsa", "id_rsa"} {
			if s, err := loadKey(filepath.Join(home, ".ssh", name)); err == nil {
				signers = append(signers, s)
			}
		}
	}
	if len(signers) == 0 {
		release()
		return nil, nil, errors.New("no key to log in with: start ssh-agent with a key (SSH_AUTH_SOCK), or give a key file (?identity=PATH in the address)")
	}
	return []ssh.AuthMethod{ssh.PublicKeys(signers...)}, release, nil
}

func (e *Env) keySources() string {
	if e.cfg.Identity != "" {
		return "the key file " + e.cfg.Identity
	}
	return "the SSH agent's keys and ~/.ssh/id_*"
}

// loadKey reads a private key file.
func loadKey(file string) (ssh.Signer, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("the key file %s cannot be read: %v", file, err)
	}
	s, err := ssh.ParsePrivateKey(data)
	var pe *ssh.PassphraseMissingError
	if errors.As(err, &pe) {
		return nil, fmt.Errorf("the key file %s has a passphrase: load it into ssh-agent (ssh-add %s) and leave ?identity out", file, file)
	}
	if err != nil {
		return nil, fmt.Errorf("the key file %s is not a private key nb can read: %v", file, err)
	}
	return s, nil
}

// clients returns the live connection, reconnecting once when it broke.
func (e *Env) clients(ctx context.Context) (*ssh.Client, *sftp.Client, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.client != nil {
		if time.Since(e.checked) < idleCheck {
			return e.client, e.sftp, nil
		}
		if _, _, err := e.client.SendRequest("keepalive@openssh.com", true, nil); err == nil {
			e.checked = time.Now()
			return e.client, e.sftp, nil
		}
		e.sftp.Close()
		e.client.Close()
		e.client, e.sftp = nil, nil
	}
	if err := e.connect(ctx); err != nil {
		return nil, nil, err
	}
	e.checked = time.Now()
	return e.client, e.sftp, nil
}

// files is the SFTP client for the file operations.
func (e *Env) files() (*sftp.Client, error) {
	_, sc, err := e.clients(context.Background())
	return sc, err
}

// Where says where commands run.
func (e *Env) Where() string { return e.where }

// Dir is the workspace's real path on the remote machine.
func (e *Env) Dir() string { return e.dir }

// URL is the workspace's address, for status lines.
func (e *Env) URL() string {
	host := e.cfg.Host
	if e.cfg.Port != 22 {
		host = e.addr
	}
	return "ssh://" + e.cfg.User + "@" + host + e.dir
}

// Close ends the connection.
func (e *Env) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.client == nil {
		return nil
	}
	e.sftp.Close()
	err := e.client.Close()
	e.client, e.sftp = nil, nil
	return err
}

// sftpText is an SFTP error without its packet details.
func sftpText(err error) string {
	var se *sftp.StatusError
	if errors.As(err, &se) {
		switch se.FxCode() {
		case sftp.ErrSSHFxNoSuchFile:
			return "no such file or folder"
		case sftp.ErrSSHFxPermissionDenied:
			return "permission denied"
		}
	}
	if errors.Is(err, os.ErrNotExist) {
		return "no such file or folder"
	}
	return err.Error()
}
