package mcp

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/nbots/nb/cartridge"
)

// errStartTimeout is the cause of a start that took too long.
var errStartTimeout = errors.New("start timeout")

// maxRestarts is how many times a server that dies is started again.
const maxRestarts = 1

// server is the connection to one MCP server, restarted once when it
// dies.
type server struct {
	c   *Clients
	cfg cartridge.MCPServer

	mu       sync.Mutex
	state    State
	err      string
	sess     *sdk.ClientSession
	proc     *process // stdio servers
	ready    chan struct{}
	restarts int
	stopping bool
	info     string
	tools    []remoteTool // listed at the first start
	hidden   []string
	offered  []ToolInfo
	res      []ResourceInfo
	prompts  []PromptInfo
	kind     string // the transport that connected

	progress sync.Map // progress token -> func() that extends the call's time
	token    atomic.Uint64
}

type remoteTool struct {
	name, description string
	schema            map[string]any
}

func newServer(c *Clients, cfg cartridge.MCPServer) *server {
	s := &server{c: c, cfg: cfg, state: Starting, ready: make(chan struct{})}
	switch {
	case cfg.Transport == "stdio":
		s.kind = "stdio"
	case cfg.Transport == "sse":
		s.kind = "SSE"
	default:
		s.kind = "streamable HTTP"
	}
	return s
}

// start connects to the server (restart: again, after it died) and
// records the result; ctx bounds the start with the configured timeout.
func (s *server) start(ctx context.Context, restart bool) {
	// The session lives in conn, which outlives the start (the SSE
	// transport ties its stream to the context it connects with); the
	// start's deadline and ctx only cancel it while it starts.
	conn, cancel := context.WithCancelCause(s.c.ctx)
	timer := time.AfterFunc(s.c.cfg.StartTimeout, func() { cancel(errStartTimeout) })
	stopWatch := context.AfterFunc(ctx, func() { cancel(context.Cause(ctx)) })
	sess, p, err := s.connect(conn)
	if err == nil && !restart {
		err = s.list(conn, sess)
	}
	timer.Stop()
	stopWatch()
	if err != nil {
		if cause := context.Cause(conn); cause != nil {
			err = cause
		}
		cancel(nil)
	}

	s.mu.Lock()
	if s.stopping {
		s.mu.Unlock()
		if sess != nil {
			closeSession(sess, p)
		}
		return
	}
	if err != nil {
		if sess != nil {
			closeSession(sess, p)
		}
		s.state, s.err = Failed, s.describe(err, p)
		verb := "cannot start"
		if restart {
			verb = "could not be restarted"
		}
		// Reported before the waiting calls wake, so that a report
		// never follows the failures it explains.
		s.c.logf("MCP server %q (%s, %s) %s: %s; the bot runs without its tools", s.cfg.Name, s.cfg.Display, s.cfg.Where(), verb, s.err)
		s.markReady()
		s.mu.Unlock()
		return
	}
	s.sess, s.proc, s.state, s.err = sess, p, Running, ""
	s.markReady()
	s.mu.Unlock()
	go s.watch(sess, p)
}

// describe says why a start failed: the error, and for a program that
// exited, its exit status and the end of its standard error.
func (s *server) describe(err error, p *process) string {
	msg := err.Error()
	if errors.Is(err, errStartTimeout) {
		msg = fmt.Sprintf("it did not complete the MCP handshake within %s", s.c.cfg.StartTimeout)
	}
	if p != nil {
		if exit := p.exitStatus(200 * time.Millisecond); exit != "" {
			msg += " (" + exit + ")"
		}
		if tail := p.stderr.Tail(); tail != "" {
			msg += "; its standard error ends with:\n" + indent(tail)
		}
	}
	return msg
}

func indent(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = "    " + l
	}
	return strings.Join(lines, "\n")
}

// connect starts the program (or opens the HTTP session) and completes
// the MCP handshake.
func (s *server) connect(ctx context.Context) (*sdk.ClientSession, *process, error) {
	if len(s.cfg.Missing) > 0 {
		var names []string
		for _, m := range s.cfg.Missing {
			names = append(names, fmt.Sprintf("%s (ENV/%s)", m.Path, m.Var))
		}
		return nil, nil, fmt.Errorf("these variables are not set: %s", strings.Join(names, ", "))
	}
	client := sdk.NewClient(&sdk.Implementation{Name: "nb", Version: s.c.version()}, &sdk.ClientOptions{
		// No roots, sampling or elicitation: nb offers the server
		// nothing but calls.
		Capabilities:                &sdk.ClientCapabilities{},
		ProgressNotificationHandler: s.onProgress,
	})
	if s.cfg.Transport == "stdio" {
		p, transport, err := startProcess(s.c, s.cfg)
		if err != nil {
			return nil, nil, err
		}
		sess, err := connectWithin(ctx, client, transport)
		if err != nil {
			p.stop()
			return nil, p, err
		}
		return sess, p, nil
	}
	kind := s.cfg.Transport
	if kind == "" && strings.HasSuffix(strings.TrimRight(urlPath(s.cfg.URL), "/"), "/sse") {
		kind = "sse"
	}
	sess, err := connectWithin(ctx, client, s.c.httpTransport(s.cfg, kind))
	if err != nil && s.cfg.Transport == "" && kind != "sse" && ctx.Err() == nil {
		// The MCP specification's advice for servers that predate
		// streamable HTTP: try the legacy SSE transport at the same URL.
		client2 := sdk.NewClient(&sdk.Implementation{Name: "nb", Version: s.c.version()}, &sdk.ClientOptions{
			Capabilities: &sdk.ClientCapabilities{}, ProgressNotificationHandler: s.onProgress,
		})
		if sess2, err2 := connectWithin(ctx, client2, s.c.httpTransport(s.cfg, "sse")); err2 == nil {
			s.mu.Lock()
			s.kind = "SSE"
			s.mu.Unlock()
			return sess2, nil, nil
		}
	}
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %v", s.cfg.URL, err)
	}
	if kind == "sse" {
		s.mu.Lock()
		s.kind = "SSE"
		s.mu.Unlock()
	}
	return sess, nil, nil
}

// connectWithin runs the handshake, giving up when ctx ends even if the
// transport does not watch ctx (a program that never answers).
func connectWithin(ctx context.Context, client *sdk.Client, t sdk.Transport) (*sdk.ClientSession, error) {
	type result struct {
		sess *sdk.ClientSession
		err  error
	}
	done := make(chan result, 1)
	go func() {
		sess, err := client.Connect(ctx, t, nil)
		done <- result{sess, err}
	}()
	select {
	case r := <-done:
		return r.sess, r.err
	case <-ctx.Done():
		go func() {
			if r := <-done; r.sess != nil {
				r.sess.Close()
			}
		}()
		return nil, ctx.Err()
	}
}

func (c *Clients) version() string {
	if c.cfg.Version == "" {
		return "dev"
	}
	return c.cfg.Version
}

// list reads the server's tools (keeping those the allow-list names),
// resources and prompts.
func (s *server) list(ctx context.Context, sess *sdk.ClientSession) error {
	caps := &sdk.ServerCapabilities{}
	info := ""
	if r := sess.InitializeResult(); r != nil {
		if r.Capabilities != nil {
			caps = r.Capabilities
		}
		if r.ServerInfo != nil {
			info = strings.TrimSpace(r.ServerInfo.Name + " " + r.ServerInfo.Version)
		}
	}
	var tools []remoteTool
	var all, hidden []string
	allowed := map[string]bool{}
	for _, name := range s.cfg.Tools {
		allowed[name] = true
	}
	if caps.Tools != nil {
		for t, err := range sess.Tools(ctx, nil) {
			if err != nil {
				return fmt.Errorf("listing its tools: %w", err)
			}
			all = append(all, t.Name)
			if s.cfg.Tools != nil && !allowed[t.Name] {
				hidden = append(hidden, t.Name)
				continue
			}
			tools = append(tools, remoteTool{name: t.Name, description: t.Description, schema: Schema(t.InputSchema)})
		}
	}
	for _, name := range s.cfg.Tools {
		found := false
		for _, t := range all {
			found = found || t == name
		}
		if !found {
			sort.Strings(all)
			s.c.logf("%s: mcp.%s.tools names %q, which the server does not offer (its tools: %s)", s.cfg.Where(), s.cfg.Name, name, strings.Join(all, ", "))
		}
	}
	var res []ResourceInfo
	var prompts []PromptInfo
	// Resources and prompts are listed for the user only: a server that
	// fails to list them keeps its tools.
	if caps.Resources != nil {
		for r, err := range sess.Resources(ctx, nil) {
			if err != nil {
				break
			}
			res = append(res, ResourceInfo{URI: r.URI, Name: r.Name, Description: r.Description, MIMEType: r.MIMEType})
		}
	}
	if caps.Prompts != nil {
		for p, err := range sess.Prompts(ctx, nil) {
			if err != nil {
				break
			}
			pi := PromptInfo{Name: p.Name, Description: p.Description}
			for _, a := range p.Arguments {
				pi.Arguments = append(pi.Arguments, a.Name)
			}
			prompts = append(prompts, pi)
		}
	}
	s.mu.Lock()
	s.tools, s.hidden, s.res, s.prompts, s.info = tools, hidden, res, prompts, info
	s.mu.Unlock()
	return nil
}

// watch waits for the session to end; one that ends while nb still needs
// it (the program died, the remote server went away) is restarted once.
func (s *server) watch(sess *sdk.ClientSession, p *process) {
	sess.Wait()
	if s.detach(sess) {
		s.recover(p)
	}
}

// detach forgets a session that ended, so that calls wait for its
// replacement; it reports whether sess was the live session (the
// watcher and a failed call may both notice its end).
func (s *server) detach(sess *sdk.ClientSession) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopping || s.sess != sess {
		return false
	}
	s.sess, s.proc = nil, nil
	s.ready = make(chan struct{})
	s.state = Restarting
	return true
}

// recover restarts a server whose session ended, once; after that the
// server is failed.
func (s *server) recover(p *process) {
	why := "its session ended"
	if p != nil {
		why = "it exited"
		if exit := p.exitStatus(proc3s); exit != "" {
			why += " (" + exit + ")"
		}
		p.stop()
	}
	s.mu.Lock()
	if s.stopping { // stop marked the new ready channel
		s.mu.Unlock()
		return
	}
	if s.restarts >= maxRestarts {
		s.state = Failed
		s.err = why + " again after a restart"
		if p != nil {
			if tail := p.stderr.Tail(); tail != "" {
				s.err += "; its standard error ends with:\n" + indent(tail)
			}
		}
		s.c.logf("MCP server %q (%s, %s) stopped: %s; its tools are unavailable until the bot is restarted", s.cfg.Name, s.cfg.Display, s.cfg.Where(), s.err)
		s.markReady()
		s.mu.Unlock()
		return
	}
	s.restarts++
	s.mu.Unlock()
	s.c.logf("MCP server %q (%s) stopped: %s; restarting it", s.cfg.Name, s.cfg.Display, why)
	s.start(s.c.ctx, true)
}

// proc3s is how long a report waits for a dying program's exit status.
const proc3s = 3 * time.Second

// session returns the live session, waiting for a start or restart in
// progress.
func (s *server) session(ctx context.Context) (*sdk.ClientSession, error) {
	s.mu.Lock()
	ready := s.ready
	s.mu.Unlock()
	select {
	case <-ready:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sess != nil {
		return s.sess, nil
	}
	if s.state == Stopped {
		return nil, fmt.Errorf("MCP server %q is stopped (the bot was closed)", s.cfg.Name)
	}
	return nil, fmt.Errorf("MCP server %q is not running: %s", s.cfg.Name, s.err)
}

// ended says why a call failed because its connection closed, waiting
// briefly for a dying program's exit status.
func (s *server) ended(p *process) string {
	if p != nil {
		if exit := p.exitStatus(proc3s); exit != "" {
			msg := "it exited (" + exit + ")"
			if tail := p.stderr.Tail(); tail != "" {
				msg += "; its standard error ends with:\n" + indent(tail)
			}
			return msg
		}
	}
	return "the connection closed"
}

func (s *server) status() Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := Status{
		Name: s.cfg.Name, Transport: s.kind, Target: s.cfg.Display, Where: s.cfg.Where(),
		State: s.state, Error: s.err, Restarts: s.restarts, Server: s.info,
		Tools: append([]ToolInfo(nil), s.offered...), Hidden: append([]string(nil), s.hidden...),
		Resources: append([]ResourceInfo(nil), s.res...), Prompts: append([]PromptInfo(nil), s.prompts...),
	}
	return st
}

// stop ends the session and the program.
func (s *server) stop() {
	s.mu.Lock()
	s.stopping = true
	sess, p := s.sess, s.proc
	s.sess, s.proc = nil, nil
	if s.state != Disabled && s.state != Failed {
		s.state = Stopped
	}
	s.markReady()
	s.mu.Unlock()
	if sess != nil {
		closeSession(sess, p)
	}
}

// markReady wakes the calls waiting for a start; s.mu is held.
func (s *server) markReady() {
	select {
	case <-s.ready:
	default:
		close(s.ready)
	}
}

// closeSession ends a session and, for a program, stops its process
// group.
func closeSession(sess *sdk.ClientSession, p *process) {
	done := make(chan struct{})
	go func() {
		sess.Close()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		// An unresponsive remote peer cannot hold the bot's close.
	}
	if p != nil {
		p.stop()
	}
}

// onProgress extends the time of the call a progress notification is
// about.
func (s *server) onProgress(_ context.Context, req *sdk.ProgressNotificationClientRequest) {
	if req == nil || req.Params == nil {
		return
	}
	if f, ok := s.progress.Load(fmt.Sprint(req.Params.ProgressToken)); ok {
		f.(func())()
	}
}
