// Package mcp gives a bot the tools of MCP (Model Context Protocol)
// servers: programs nb runs that speak MCP on their standard input and
// output, and remote servers over streamable HTTP or the legacy HTTP+SSE
// transport. Start connects to the servers a cartridge's mcp key lists,
// Tools offers their tools as tool.Tool values named <server>__<tool>,
// Status describes them (for `nb CART - mcp`) and Close stops them.
package mcp

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/nbots/nb/cartridge"
	"github.com/nbots/nb/tool"
)

// DefaultStartTimeout bounds a server's start (the program's start, the
// MCP handshake and the listing of its tools) unless Options says
// otherwise. It is generous because `npx -y` may download the server.
const DefaultStartTimeout = 60 * time.Second

// Options says which servers to start and how.
type Options struct {
	// Servers are the cartridge's servers (cartridge.Cartridge.MCP).
	Servers []cartridge.MCPServer
	// Environ is nb's environment (NAME=value entries, as os.Environ
	// gives). A program gets only proc.BaseNames from it (PATH, HOME,
	// LANG...) and the variables its env key sets: never nb's secrets.
	// Commands are looked up in its PATH.
	Environ []string
	// Dir is the folder relative commands and cwd keys are resolved
	// against (the cartridge's folder), and the folder programs run in;
	// "" is nb's working folder.
	Dir string
	// Warn receives one message for each event a user should know of: a
	// server that cannot start (with the tail of its standard error),
	// one that exits and is restarted, an allow-list entry that names no
	// tool. nil discards them.
	Warn func(msg string)
	// Stderr, when set, receives what programs write on their standard
	// error, each line prefixed with "[name] ". Without it only the last
	// lines are kept, for reports.
	Stderr io.Writer
	// StartTimeout bounds each server's start; DefaultStartTimeout when 0.
	StartTimeout time.Duration
	// HTTPClient is used for remote servers; nil uses a client without an
	// overall timeout (each call has its own).
	HTTPClient *http.Client
	// Version is nb's version, sent to servers in the handshake.
	Version string
}

// State is where a server stands.
type State string

// States of a server.
const (
	Starting   State = "starting"
	Running    State = "running"
	Restarting State = "restarting"
	Failed     State = "failed"
	Disabled   State = "disabled"
	Stopped    State = "stopped"
)

// Status describes one server, for `nb CART - mcp`.
type Status struct {
	// Name is the server's key in the cartridge.
	Name string
	// Transport is "stdio", "streamable HTTP" or "SSE".
	Transport string
	// Target is the command line or the URL, ENV references by name.
	Target string
	// Where is the file:line of the server's key.
	Where string
	State State
	// Error says why a failed server failed.
	Error string
	// Restarts counts the restarts after the server died.
	Restarts int
	// Server is the name and version the server reports.
	Server string
	// Tools are the tools offered to the model; Hidden the server's tools
	// that the allow-list leaves out.
	Tools  []ToolInfo
	Hidden []string
	// Resources and Prompts are what the server also offers (listed for
	// the user; the model does not see them).
	Resources []ResourceInfo
	Prompts   []PromptInfo
}

// ToolInfo is one tool of a server.
type ToolInfo struct {
	// Name is the name the model sees (<server>__<tool>, made valid for
	// every provider).
	Name string
	// Remote is the name the server gives it.
	Remote      string
	Description string
}

// ResourceInfo is one resource of a server.
type ResourceInfo struct {
	URI, Name, Description, MIMEType string
}

// PromptInfo is one prompt of a server.
type PromptInfo struct {
	Name, Description string
	Arguments         []string
}

// Clients are the connections to a cartridge's servers.
type Clients struct {
	cfg     Options
	ctx     context.Context // ends when the clients close
	cancel  context.CancelFunc
	servers []*server
	tools   []tool.Tool
	closed  sync.Once
}

// Start starts every server of cfg in parallel and waits until each is
// running or has failed (each within cfg.StartTimeout). A server that
// fails is reported once on cfg.Warn and the others go on: the bot runs
// without its tools. ctx bounds the start: when it ends first (Ctrl-C
// while servers start), the servers started so far are stopped and its
// error returned. Once started, servers run until Close, which their
// owner calls when it is done (a REPL's Ctrl-C stops an answer, not the
// bot).
func Start(ctx context.Context, cfg Options) (*Clients, error) {
	if cfg.StartTimeout <= 0 {
		cfg.StartTimeout = DefaultStartTimeout
	}
	life, cancel := context.WithCancel(context.WithoutCancel(ctx))
	c := &Clients{cfg: cfg, ctx: life, cancel: cancel}
	var wg sync.WaitGroup
	for _, sc := range cfg.Servers {
		s := newServer(c, sc)
		c.servers = append(c.servers, s)
		if sc.Disabled {
			s.state = Disabled
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.start(ctx, false)
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		c.Close()
		return nil, err
	}
	c.tools = c.buildTools()
	return c, nil
}

// buildTools makes the tools of the running servers, in the order of the
// cartridge, each name unique even as tool.MatchName sees it (a tool set
// would let a later tool replace an earlier one of the same match name).
func (c *Clients) buildTools() []tool.Tool {
	var out []tool.Tool
	seen := map[string]bool{}
	for _, s := range c.servers {
		s.mu.Lock()
		remote := s.tools
		s.mu.Unlock()
		start := s.cfg.ToolPrefix
		if start == "" {
			start = cmp.Or(s.cfg.Prefix, s.cfg.Name) + "__"
		}
		for _, rt := range remote {
			name := start + rt.name
			for n := 2; seen[tool.MatchName(name)]; n++ {
				name = fmt.Sprintf("%s%s_%d", start, rt.name, n)
			}
			seen[tool.MatchName(name)] = true
			t := &Tool{server: s, remote: rt.name, spec: tool.Spec{Name: name, Description: rt.description, Parameters: rt.schema}}
			s.mu.Lock()
			s.offered = append(s.offered, ToolInfo{Name: tool.ProviderName(name), Remote: rt.name, Description: rt.description})
			s.mu.Unlock()
			out = append(out, t)
		}
	}
	return out
}

// Tools returns the tools of the servers that started, in the order of
// the cartridge's servers and of each server's listing.
func (c *Clients) Tools() []tool.Tool {
	if c == nil {
		return nil
	}
	return append([]tool.Tool(nil), c.tools...)
}

// Status describes every server of the configuration, in its order.
func (c *Clients) Status() []Status {
	if c == nil {
		return nil
	}
	out := make([]Status, len(c.servers))
	for i, s := range c.servers {
		out[i] = s.status()
	}
	return out
}

// Close stops every server: programs and their children are stopped
// (closing their input, then SIGTERM and SIGKILL to their process
// group), remote sessions are ended. It waits for them and is safe to
// call more than once.
func (c *Clients) Close() error {
	if c == nil {
		return nil
	}
	c.closed.Do(func() {
		var wg sync.WaitGroup
		for _, s := range c.servers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s.stop()
			}()
		}
		wg.Wait()
		c.cancel()
	})
	return nil
}

// logf gives a warning to the configured Warn.
func (c *Clients) logf(format string, args ...any) {
	if c.cfg.Warn != nil {
		c.cfg.Warn(fmt.Sprintf(format, args...))
	}
}
