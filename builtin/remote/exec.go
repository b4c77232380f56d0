package remote

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/nbots/nb/builtin/environment"
)

// wrapper runs a command on the remote side. It reads the command and
// its variables from standard input (so neither is on a command line
// other users of the machine can see, but for the shell's own argument,
// as locally), starts it with setsid in a process group of its own, whose
// id it prints as the first line of the output (for nb to stop the group
// at the timeout), waits for it, and kills whatever the command left
// running in its group, as proc.Reap does locally. bash runs the command
// where the machine has it, else sh. The wrapper's own messages (a shell
// reporting its job "Terminated") are dropped; the command's are not.
// kill is written in POSIX's form (-s SIG --), which dash also takes.
const wrapper = `eval "$(cat)"
setsid sh -c 'printf "%s\n" "$$"; if command -v bash >/dev/null 2>&1; then exec bash -c "$1"; else exec sh -c "$1"; fi' nb-exec "$NB_COMMAND" </dev/null &
pg=$!
exec 2>/dev/null
wait "$pg"; st=$?
kill -s KILL -- "-$pg"
exit "$st"`

// startWait bounds the wait for a command to start on the remote side
// (when the timeout is shorter).
const startWait = 30 * time.Second

// gate passes writes on until it is shut: the session's copying may
// outlive Run when the server does not close it, and must not write
// into the caller's buffers then.
type gate struct {
	mu     sync.Mutex
	w      io.Writer
	closed bool
}

func (g *gate) Write(p []byte) (int, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed || g.w == nil {
		return len(p), nil
	}
	return g.w.Write(p)
}

func (g *gate) shut() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
}

// validName reports whether name is a shell variable's name: it is
// written unquoted into the script the wrapper evaluates.
func validName(name string) bool {
	for i, r := range name {
		if r != '_' && !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || i > 0 && '0' <= r && r <= '9') {
			return false
		}
	}
	return name != ""
}

// quote quotes s for a POSIX shell.
func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// Run runs c in the remote workspace (see environment.Runner).
func (e *Env) Run(ctx context.Context, c environment.Command) (environment.Exit, error) {
	client, _, err := e.clients(ctx)
	if err != nil {
		return environment.Exit{Code: -1}, err
	}
	sess, err := client.NewSession()
	if err != nil {
		return environment.Exit{Code: -1}, fmt.Errorf("cannot open a session on %s: %v", e.addr, err)
	}
	defer sess.Close()

	var input strings.Builder
	for _, kv := range c.Env {
		name, value, _ := strings.Cut(kv, "=")
		if !validName(name) {
			return environment.Exit{Code: -1}, fmt.Errorf("%q is not a variable name a shell takes (letters, digits and _)", name)
		}
		fmt.Fprintf(&input, "export %s=%s\n", name, quote(value))
	}
	if c.PathAppend != "" {
		fmt.Fprintf(&input, "PATH=\"${PATH:+$PATH:}\"%s; export PATH\n", quote(c.PathAppend))
	}
	fmt.Fprintf(&input, "NB_COMMAND=%s\n", quote(c.Line))
	sess.Stdin = strings.NewReader(input.String())
	stdout, stderr := &gate{w: c.Stdout}, &gate{w: c.Stderr}
	defer stdout.shut()
	defer stderr.shut()
	pgid := &groupLine{next: stdout, got: make(chan struct{})}
	sess.Stdout, sess.Stderr = pgid, stderr
	if err := sess.Start(e.start); err != nil {
		return environment.Exit{Code: -1}, fmt.Errorf("cannot run a command on %s: %v", e.addr, err)
	}
	done := make(chan error, 1)
	go func() { done <- sess.Wait() }()

	// The timeout counts from the command's start, as locally, not from
	// the session's: the login shell's start-up files (a .bashrc) may
	// take a while, which startWait bounds.
	timer := time.NewTimer(max(c.Timeout, startWait))
	defer timer.Stop()
	var waitErr error
	exit := environment.Exit{}
	started := pgid.got
wait:
	for {
		select {
		case waitErr = <-done:
		case <-started:
			started = nil
			timer.Reset(c.Timeout)
			continue
		case <-timer.C:
			exit.TimedOut = true
			waitErr = e.stop(client, sess, pgid, done, c.Grace)
		case <-ctx.Done():
			waitErr = e.stop(client, sess, pgid, done, c.Grace)
		}
		break wait
	}
	var ee *ssh.ExitError
	switch {
	case waitErr == nil:
	case errors.As(waitErr, &ee):
		exit.Code = ee.ExitStatus()
		if ee.Signal() != "" {
			exit.Signal = ee.Signal()
		}
	case exit.TimedOut || ctx.Err() != nil:
		exit.Code = -1
	default:
		return environment.Exit{Code: -1}, fmt.Errorf("the command's session on %s ended: %v", e.addr, waitErr)
	}
	return exit, nil
}

// stop stops the command's process group as proc does locally: SIGTERM,
// then SIGKILL after grace, each sent by kill(1) in a session of its own;
// then it closes the session if it still has not ended.
func (e *Env) stop(client *ssh.Client, sess *ssh.Session, g *groupLine, done <-chan error, grace time.Duration) error {
	select {
	case <-g.got:
	case err := <-done:
		return err
	case <-time.After(5 * time.Second):
	}
	if id := g.id(); id > 0 {
		for _, sig := range []string{"TERM", "KILL"} {
			e.kill(client, sig, id)
			select {
			case err := <-done:
				return err
			case <-time.After(grace):
			}
		}
	}
	sess.Close()
	select {
	case err := <-done:
		return err
	case <-time.After(grace):
		return errors.New("the session did not end")
	}
}

// kill sends sig to the remote process group id.
func (e *Env) kill(client *ssh.Client, sig string, id int) {
	s, err := client.NewSession()
	if err != nil {
		return
	}
	defer s.Close()
	_ = s.Run(fmt.Sprintf("kill -s %s -- -%d 2>/dev/null", sig, id))
}

// groupLine takes the wrapper's first line of output (the process
// group's id) and passes the rest on.
type groupLine struct {
	next io.Writer
	mu   sync.Mutex
	line []byte
	pgid int
	seen bool
	got  chan struct{}
}

func (g *groupLine) Write(p []byte) (int, error) {
	n := len(p)
	g.mu.Lock()
	if !g.seen {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			g.line = append(g.line, p...)
			g.mu.Unlock()
			return n, nil
		}
		g.line = append(g.line, p[:i]...)
		g.pgid, _ = strconv.Atoi(string(g.line))
		g.seen = true
		close(g.got)
		p = p[i+1:]
	}
	g.mu.Unlock()
	if len(p) > 0 && g.next != nil {
		if _, err := g.next.Write(p); err != nil {
			return n, err
		}
	}
	return n, nil
}

func (g *groupLine) id() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.pgid
}
