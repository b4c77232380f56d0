package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/nbots/nb/bot"
	"github.com/nbots/nb/cartridge"
	"github.com/nbots/nb/cmd/nb/cliflag"
	"github.com/nbots/nb/internal/httpguard"
	"github.com/nbots/nb/internal/metric"
	"github.com/nbots/nb/mcp"
	"github.com/nbots/nb/mcp/mcpserver"
)

// mcpStatus prints the cartridge's MCP servers (nb CART - mcp): each
// server's state, its tools under the names the model sees, its
// resources and prompts. It fails when a server could not start.
func (a *App) mcpStatus(cart *cartridge.Cartridge) error {
	servers, err := cart.MCP(a.host().LookupEnv)
	if err != nil {
		return err
	}
	if len(servers) == 0 {
		fmt.Fprintf(a.Stderr, "nb: %s has no mcp key: no MCP servers\n", displayPath(cart))
		return nil
	}
	ctx := a.context()
	b, err := bot.New(ctx, cart, a.host())
	if err != nil {
		return err
	}
	defer b.Close()
	failed := 0
	w := a.Stdout
	for i, st := range b.MCP() {
		if i > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "%s: %s (%s: %s, %s)\n", st.Name, st.State, st.Transport, st.Target, st.Where)
		if st.Server != "" {
			fmt.Fprintf(w, "  server: %s\n", st.Server)
		}
		if st.Restarts > 0 {
			fmt.Fprintf(w, "  restarts: %d\n", st.Restarts)
		}
		if st.Error != "" {
			failed++
			fmt.Fprintf(w, "  error: %s\n", strings.ReplaceAll(st.Error, "\n", "\n  "))
		}
		if st.State != mcp.Running {
			continue
		}
		fmt.Fprintf(w, "  tools (%d):\n", len(st.Tools))
		for _, t := range st.Tools {
			name := t.Name
			if name == "" {
				name = t.Remote + " (not offered: a cartridge tool has its name)"
			}
			fmt.Fprintf(w, "    %s%s\n", name, firstLine(t.Description))
		}
		if len(st.Hidden) > 0 {
			fmt.Fprintf(w, "  left out by the tools key: %s\n", strings.Join(st.Hidden, ", "))
		}
		if len(st.Resources) > 0 {
			fmt.Fprintf(w, "  resources (%d):\n", len(st.Resources))
			for _, r := range st.Resources {
				fmt.Fprintf(w, "    %s%s\n", r.URI, firstLine(r.Name))
			}
		}
		if len(st.Prompts) > 0 {
			fmt.Fprintf(w, "  prompts (%d):\n", len(st.Prompts))
			for _, p := range st.Prompts {
				args := ""
				if len(p.Arguments) > 0 {
					args = "(" + strings.Join(p.Arguments, ", ") + ")"
				}
				fmt.Fprintf(w, "    %s%s%s\n", p.Name, args, firstLine(p.Description))
			}
		}
	}
	if failed > 0 {
		return &reportedError{fmt.Sprintf("%d of the %d MCP servers did not start", failed, len(servers))}
	}
	return nil
}

// firstLine is " — " and the first line of s, cut to 100 characters; ""
// for an empty s.
func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if s == "" {
		return ""
	}
	if r := []rune(s); len(r) > 100 {
		s = string(r[:99]) + "…"
	}
	return " — " + s
}

// mcpCommand handles nb mcp ...
func (a *App) mcpCommand(args []string) error {
	if len(args) == 0 || args[0] != "serve" {
		fs := a.flags("nb mcp", "nb mcp serve [flags] [CARTRIDGE|DIR ...]", "MCP, the Model Context Protocol: nb mcp serve serves cartridges and robopages to\nMCP clients (see nb mcp serve --help and docs/mcp.md). A cartridge's own MCP\nservers are shown by nb CARTRIDGE - mcp.")
		if len(args) > 0 && args[0] == "help" {
			args[0] = "--help"
		}
		if err := fs.Parse(args); err != nil {
			return err
		}
		if fs.NArg() > 0 {
			return &usageError{fmt.Sprintf("unknown command nb mcp %s: nb mcp serve [--listen ADDR] [--yes] [CARTRIDGE|DIR ...]", fs.Arg(0))}
		}
		return &usageError{"nb mcp takes serve: nb mcp serve [--listen ADDR] [--yes] [CARTRIDGE|DIR ...]"}
	}
	fs := a.flags("nb mcp serve", "nb mcp serve [flags] [CARTRIDGE|DIR ...]", `Serves cartridges (each a tool: a message in, the bot's answer out) and
robopage functions (each a tool) to MCP clients, over standard input and
output, or over streamable HTTP at http://ADDR/mcp with --listen.
Without a path, the cartridges of the cartridge folders are served.
See docs/mcp.md.`)
	listen := fs.String("listen", "", "serve streamable HTTP on `host:port` (:port is 127.0.0.1:port); an address other than loopback needs a token")
	tokenFlag := fs.String("token", "", "the `token` HTTP clients must send as Authorization: Bearer (default NB_SERVE_TOKEN; prefer the variable: a flag shows in the process list)")
	origins := fs.String("cors-origins", "", "the `origins` of the browser pages answered over HTTP, comma-separated (* for any); by default none: a request with an Origin header gets 403")
	yes := fs.BoolP("yes", "y", false, "run the tools that need a confirmation without asking when the client cannot be asked (no MCP elicitation); else they are denied")
	allowTools := fs.StringSlice("allow-tool", nil, "the same for the tool `name` only (repeatable, or comma-separated)")
	storeURL := fs.String("store", "", "the `URL` of the store of the conversations continued by a state key: "+storeFlagDoc)
	metricsAddr := fs.String("metrics-listen", "", "with --listen, serve GET /metrics on its own `host:port` instead of beside /mcp (beyond loopback it needs a token too)")
	logFormat := fs.String("log-format", "text", "text or json (every line on standard error one JSON object)")
	fs.Old("allow-tools", "yes")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if err := cliflag.CheckLogFormat(*logFormat); err != nil {
		return &usageError{err.Error()}
	}
	if *logFormat == "json" {
		defer a.jsonStderr()()
	}
	log, _ := cliflag.Logger(a.stderr(), "info", *logFormat)
	stopTracing, err := cliflag.StartTracing(a.Getenv, Version, log)
	if err != nil {
		return err
	}
	defer stopTracing()

	token := *tokenFlag
	if token == "" {
		token = a.Getenv("NB_SERVE_TOKEN")
	}
	addr := ""
	if *listen != "" {
		var err error
		if addr, err = listenAddress(*listen, token); err != nil {
			return err
		}
	}

	ctx := a.context()
	if err := a.openStore(ctx, *storeURL); err != nil {
		return err
	}
	defer a.closeStore()
	host := a.host()
	srv, err := mcpserver.New(ctx, mcpserver.Config{Host: host, Paths: fs.Args(), AllowTools: *yes, AllowTool: *allowTools, Output: a.stderr(), Version: Version, AllowOrigins: splitList(*origins),
		OriginAdvice: "start nb mcp serve with --cors-origins %s to allow it"})
	if err != nil {
		return err
	}
	defer srv.Close()

	if addr == "" {
		fmt.Fprintf(a.stderr(), "nb: serving MCP on standard input and output: %s\n", strings.Join(srv.Tools(), ", "))
		return srv.ServeStdio(ctx, a.Stdin, a.Stdout)
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("--listen %s: %v", *listen, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", srv.Handler(token))
	metric.Up(metric.MCP)
	if *metricsAddr == "" {
		mux.Handle("GET /metrics", metric.Guard(metric.Secret(token), metric.Handler()))
	} else if _, err := metric.Listen(ctx, *metricsAddr, metric.Secret(token), func(err error) { fmt.Fprintf(a.stderr(), "nb: metrics listener: %v\n", err) }); err != nil {
		l.Close()
		return fmt.Errorf("--metrics-listen: %w", err)
	}
	hs := &http.Server{Handler: metric.Middleware(metric.MCP, mux), ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(a.stderr(), "nb: serving MCP on http://%s/mcp: %s\n", l.Addr(), strings.Join(srv.Tools(), ", "))
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(l) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		hs.Shutdown(shut) //nolint:errcheck // the process ends anyway
		return nil
	}
}

// listenAddress completes --listen (":8080" is loopback) and refuses an
// address other than loopback without NB_SERVE_TOKEN.
func listenAddress(listen, token string) (string, error) {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return "", &usageError{fmt.Sprintf("--listen %s: give host:port or :port (%v)", listen, err)}
	}
	if host == "" {
		host = "127.0.0.1"
	}
	loopback := httpguard.IsLoopbackListen(net.JoinHostPort(host, port))
	if !loopback && token == "" {
		return "", fmt.Errorf("--listen %s is reachable from other machines: set NB_SERVE_TOKEN (or --token) to a secret that clients send as Authorization: Bearer <token>, or listen on 127.0.0.1", listen)
	}
	return net.JoinHostPort(host, port), nil
}
