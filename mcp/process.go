package mcp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/nbots/nb/cartridge"
	"github.com/nbots/nb/proc"
)

// process is a stdio server's program, in its own process group.
type process struct {
	name   string
	cmd    *exec.Cmd
	cancel context.CancelFunc // stops the group (SIGTERM, then SIGKILL)
	stdin  io.Closer
	stderr *tail
	exited chan struct{} // closed once the program exited and its group was reaped
	err    error         // Wait's result, set before exited is closed
	once   sync.Once
}

// startProcess starts a stdio server's program with an allow-listed
// environment and returns the transport that talks to it.
func startProcess(c *Clients, cfg cartridge.MCPServer) (*process, sdk.Transport, error) {
	home, _ := proc.Lookup(c.cfg.Environ, "HOME")
	dir := c.cfg.Dir
	if cfg.Dir != "" {
		dir = resolve(cfg.Dir, c.cfg.Dir, home)
	}
	pathValue, _ := proc.Lookup(c.cfg.Environ, "PATH")
	path, err := lookPath(cfg.Command, pathValue, c.cfg.Dir, home)
	if err != nil {
		return nil, nil, err
	}
	extra := make([]string, 0, len(cfg.Env))
	for _, k := range sortedKeys(cfg.Env) {
		extra = append(extra, k+"="+cfg.Env[k])
	}

	ctx, cancel := context.WithCancel(c.ctx)
	cmd := proc.Command(ctx, path, cfg.Args...)
	cmd.Args[0] = cfg.Command
	cmd.Env = proc.Env(c.cfg.Environ, nil, extra...)
	cmd.Dir = dir
	p := &process{name: cfg.Name, cmd: cmd, cancel: cancel, stderr: newTail(cfg.Name, c.cfg.Stderr), exited: make(chan struct{})}

	// os.Pipe rather than cmd.StdoutPipe: Wait must not close our end
	// while the answer to a call is still to be read.
	inR, inW, err := os.Pipe()
	if err != nil {
		cancel()
		return nil, nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		cancel()
		inR.Close()
		inW.Close()
		return nil, nil, err
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, p.stderr
	if err := cmd.Start(); err != nil {
		cancel()
		inR.Close()
		inW.Close()
		outR.Close()
		outW.Close()
		return nil, nil, fmt.Errorf("cannot run %s: %v", cfg.Command, unwrapExec(err))
	}
	inR.Close()
	outW.Close()
	p.stdin = inW
	go func() {
		p.err = cmd.Wait()
		// Children the server left behind hold its output open and
		// would outlive it: the group goes with its leader.
		proc.Reap(cmd)
		close(p.exited)
	}()
	return p, &sdk.IOTransport{Reader: outR, Writer: inW}, nil
}

// stop ends the program: its input is closed (the MCP specification's
// way to ask a stdio server to exit), then, if it is still running after
// a moment, its group gets SIGTERM and, after proc.Grace, SIGKILL. It
// returns when the program has exited and its group is reaped.
func (p *process) stop() {
	p.once.Do(func() {
		p.stdin.Close()
		select {
		case <-p.exited:
		case <-time.After(time.Second):
			p.cancel()
			<-p.exited
		}
		p.cancel()
	})
	<-p.exited
}

// exitStatus waits up to wait for the program to exit and describes how
// it ended; "" if it is still running.
func (p *process) exitStatus(wait time.Duration) string {
	select {
	case <-p.exited:
	case <-time.After(wait):
		return ""
	}
	if p.err == nil {
		return "exit status 0"
	}
	var ee *exec.ExitError
	if errors.As(p.err, &ee) {
		return ee.String()
	}
	return p.err.Error()
}

// lookPath finds a command as a shell would, in the PATH nb was given
// (not in nb's own environment); a name with a slash is relative to dir.
func lookPath(name, pathValue, dir, home string) (string, error) {
	if strings.Contains(name, "/") {
		p := resolve(name, dir, home)
		if err := executable(p); err != nil {
			return "", fmt.Errorf("cannot run %s: %v", name, err)
		}
		return p, nil
	}
	for _, d := range filepath.SplitList(pathValue) {
		if d == "" {
			continue
		}
		p := filepath.Join(resolve(d, dir, home), name)
		if executable(p) == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("cannot run %s: it is not in PATH (%s); install it or give its full path", name, pathValue)
}

// resolve makes p absolute: ~/ is home, a relative path is in dir.
func resolve(p, dir, home string) string {
	if rest, ok := strings.CutPrefix(p, "~/"); ok && home != "" {
		return filepath.Join(home, rest)
	}
	if filepath.IsAbs(p) || dir == "" {
		return p
	}
	return filepath.Join(dir, p)
}

func executable(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return unwrapExec(err)
	}
	if fi.IsDir() {
		return fmt.Errorf("%s is a folder", p)
	}
	if fi.Mode()&0o111 == 0 {
		return fmt.Errorf("%s is not executable", p)
	}
	return nil
}

func unwrapExec(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s: %v", pe.Path, pe.Err)
	}
	return err
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// tail keeps the last lines a program wrote on its standard error, for
// reports, and copies them to an optional sink with the server's name.
type tail struct {
	mu   sync.Mutex
	name string
	sink io.Writer
	buf  []byte // the last tailBytes bytes
	line []byte // a partial line for the sink
}

const tailBytes = 2048

// maxSinkLine bounds a line given to the sink: a longer one (a program
// that never ends its lines) is passed on in pieces.
const maxSinkLine = 4096

func newTail(name string, sink io.Writer) *tail { return &tail{name: name, sink: sink} }

func (t *tail) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, b...)
	if len(t.buf) > tailBytes {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-tailBytes:]...)
	}
	if t.sink != nil {
		t.line = append(t.line, b...)
		for {
			i := bytes.IndexByte(t.line, '\n')
			if i < 0 {
				break
			}
			fmt.Fprintf(t.sink, "[%s] %s\n", t.name, t.line[:i])
			t.line = t.line[i+1:]
		}
		for len(t.line) > maxSinkLine {
			fmt.Fprintf(t.sink, "[%s] %s\n", t.name, t.line[:maxSinkLine])
			t.line = t.line[maxSinkLine:]
		}
		// Keep the partial line in a buffer of its own size, not in
		// what once held all of it.
		t.line = append([]byte(nil), t.line...)
	}
	return len(b), nil
}

// Tail returns the last lines (at most 10, whole lines when it can).
func (t *tail) Tail() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := strings.TrimRight(string(t.buf), "\n")
	if len(t.buf) >= tailBytes {
		if i := strings.IndexByte(s, '\n'); i >= 0 {
			s = s[i+1:]
		}
	}
	lines := strings.Split(s, "\n")
	if len(lines) > 10 {
		lines = lines[len(lines)-10:]
	}
	return strings.TrimSpace(strings.Join(lines, "\n"))
}
