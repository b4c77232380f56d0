package gatewaycmd

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/nbots/nb/cmd/nb/cliflag"
	"github.com/nbots/nb/gateway"
	"github.com/nbots/nb/gateway/access"
	"github.com/nbots/nb/gateway/bus"
	"github.com/nbots/nb/gateway/bus/jetstream"
	"github.com/nbots/nb/gateway/config"
	"github.com/nbots/nb/gateway/gatewayrun"
	"github.com/nbots/nb/internal/httpguard"
	"github.com/nbots/nb/internal/metric"
	"github.com/nbots/nb/server"
	"github.com/nbots/nb/term"
)

// gatewayFlags are the flags every nb gateway command takes.
type gatewayFlags struct {
	config, workspace *string
}

// gatewayFlagSet is the flag set of an nb gateway command, with the
// flags every one takes.
func (cl *cli) gatewayFlagSet(name, usage, about string) (*cliflag.Set, gatewayFlags) {
	fs := cl.flags(name, usage, about)
	// -c and -w as nanobot's commands have them, but in nb gateway cron,
	// whose -c is --cron (nanobot's cron add).
	c, w := "c", "w"
	if strings.HasPrefix(name, "nb gateway cron") {
		c, w = "", ""
	}
	f := gatewayFlags{
		config:    fs.StringP("config", c, "", "the configuration `file` (default: NB_GATEWAY_CONFIG, $XDG_CONFIG_HOME/nb/gateway.json, ~/.nanobot/config.json)"),
		workspace: fs.StringP("workspace", w, "", "the workspace `folder` (default: agents.defaults.workspace, else $XDG_DATA_HOME/nb/gateway)"),
	}
	return fs, f
}

// loadGatewayConfig finds and reads the configuration, printing its
// warnings.
func (cl *cli) loadGatewayConfig(f gatewayFlags) (*config.Config, error) {
	env := config.Env(cl.environ)
	path, err := config.Find(*f.config, env)
	if err != nil {
		return nil, err
	}
	c, err := config.Load(path, *f.workspace, env)
	if err != nil {
		return nil, err
	}
	for _, w := range c.Warnings {
		fmt.Fprintln(cl.stderr, "nb: warning: "+w)
	}
	return c, nil
}

// gatewayStateDir is the gateway's state folder: $XDG_STATE_HOME/nb/gateway,
// else ~/.local/state/nb/gateway.
func (cl *cli) gatewayStateDir() string { return StateDir(cl.getenv) }

// StateDir is the gateway's state folder in an environment:
// $XDG_STATE_HOME/nb/gateway, else ~/.local/state/nb/gateway. Other
// commands that share the gateway's state (nb pipeline's chat gates) use
// it too.
func StateDir(getenv func(string) string) string {
	base := getenv("XDG_STATE_HOME")
	if base == "" {
		base = filepath.Join(getenv("HOME"), ".local", "state")
	}
	return filepath.Join(base, "nb", "gateway")
}

// gatewayState derives the state files of workspace.
func (cl *cli) gatewayState(workspace string) gatewayrun.Files {
	return gatewayrun.StateFiles(cl.gatewayStateDir(), workspace)
}

// pairingStore is where a workspace's approvals live.
func (cl *cli) pairingStore(workspace string) string { return cl.gatewayState(workspace).Pairing }

// gatewayBusURL is the bus to use: --bus, else NB_BUS, else gateway.bus.
func (cl *cli) gatewayBusURL(flag string, c *config.Config) string {
	if flag != "" {
		return flag
	}
	if v := cl.getenv("NB_BUS"); v != "" {
		return v
	}
	return c.Gateway.Bus
}

// gatewayOptions are the options of the gateway of c that every command
// building one shares: the host under nb gateway's sandbox policy, the
// store, the state folder and nanobot's.
func (cl *cli) gatewayOptions(c *config.Config, log *slog.Logger) gatewayrun.Options {
	return gatewayrun.Options{
		Host:       cl.host(),
		Store:      cl.store,
		Namespace:  gatewayrun.Namespace(cl.gatewayBusURL("", c)),
		StateDir:   cl.gatewayStateDir(),
		NanobotDir: gatewayrun.NanobotDir(c.Path, cl.getenv("HOME")),
		Log:        log,
	}
}

// gatewayServe runs nb gateway: the assistant, its channels and its
// listener, until ctx ends.
func (cl *cli) gatewayServe(ctx context.Context, args []string) error {
	err := cl.serveGateway(ctx, args)
	if errors.Is(err, gatewayrun.ErrRestart) && cl.restart != nil {
		// Last, once everything is released: /restart starts it again.
		return cl.restart()
	}
	return err
}

// serveGateway is nb gateway until it stops.
func (cl *cli) serveGateway(ctx context.Context, args []string) error {
	fs, f := cl.gatewayFlagSet("nb gateway", "nb gateway [flags]\nnb gateway init | onboard | chat (agent) | pair | status | cron ... | sessions ... [flags]", "Runs the personal assistant: its chat channels, the web chat and /health on\nthe listener (see docs/gateway.md). nb gateway COMMAND --help tells more of each command.")
	listen := fs.String("listen", "", "`host:port` of the web chat and /health (default: gateway.host and gateway.port, 127.0.0.1:18790)")
	portFlag := fs.IntP("port", "p", 0, "the `port` of the web chat and /health, on gateway.host (nanobot's flag; --listen wins)")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	logFormat := fs.String("log-format", "text", "text or json (every line on standard error one JSON object)")
	verbose := fs.BoolP("verbose", "v", false, "log at debug level (nanobot's flag; --log-level=debug)")
	busURL := fs.String("bus", "", "the `URL` of the bus replicas share, nats://… (default: NB_BUS, gateway.bus, else in-process; docs/scale-out.md)")
	storeURL := fs.String("store", "", "the `URL` of the conversation store: "+cliflag.StoreDoc)
	tokenFlag := fs.String("token", "", "the `token` of the web chat and websocket (default NB_GATEWAY_TOKEN; prefer the variable: a flag shows in the process list)")
	metricsAddr := fs.String("metrics-listen", "", "serve GET /metrics on its own `host:port` instead of the web chat's listener (beyond loopback it needs a token too)")
	unsandboxed := fs.Bool("allow-unsandboxed-exec", false, "let exec with sandbox: auto run commands without a sandbox where bubblewrap cannot run (by default they are refused)")
	if help, err := fs.ParseOnly(args); help || err != nil {
		return err
	}
	if err := cliflag.CheckLogFormat(*logFormat); err != nil {
		return &usageError{msg: err.Error()}
	}
	if *logFormat == "json" {
		// Every line on standard error is then one JSON object.
		jl := cliflag.NewJSONLines(cl.stderr)
		cl.stderr = jl
		defer jl.Flush()
	}
	cl.requireSandbox = !*unsandboxed
	if err := cl.openStore(ctx, *storeURL); err != nil {
		return err
	}
	defer cl.closeStore()
	if *verbose {
		*logLevel = "debug"
	}
	if *portFlag < 0 || *portFlag > 65535 {
		return &usageError{msg: fmt.Sprintf("nb gateway: --port %d: not a port (1-65535)", *portFlag)}
	}
	log, err := cliflag.Logger(cl.stderr, *logLevel, *logFormat)
	if err != nil {
		return &usageError{msg: err.Error()}
	}
	stopTracing, err := cliflag.StartTracing(cl.getenv, cl.version, log)
	if err != nil {
		return err
	}
	defer stopTracing()
	if cl.getenv("GOGC") == "" && cl.getenv("GOMEMLIMIT") == "" {
		// The collector runs when the heap has grown by half of what was
		// live after the last collection (Go's default: all of it). A
		// goal relative to the live heap never falls below it, as the
		// fixed 24 MiB soft limit did: the collector then ran without
		// pause (nb's CPU 5-7 ms a turn instead of 1.5-1.9; p99 112 ms).
		// What stays live between turns is bounded by design (sessions
		// no turn holds leave memory, the duplicate windows have a
		// size); what turns in flight allocate is not held after them.
		// See bench/README.md, issue 36.
		debug.SetGCPercent(50)
	}
	c, err := cl.loadGatewayConfig(f)
	if err != nil {
		return err
	}
	log.Debug("configuration", "path", c.Path, "model", c.Agents.Defaults.Model, "provider", c.ProviderName())
	if err := cl.openStore(ctx, c.Gateway.Store); err != nil { // when neither --store nor NB_STORE names one
		return err
	}
	var tokens []*server.Token
	secret, from := *tokenFlag, "--token"
	if secret == "" {
		secret, from = cl.getenv("NB_GATEWAY_TOKEN"), "NB_GATEWAY_TOKEN"
	}
	if secret != "" {
		t, err := server.NewToken("", secret)
		if err != nil {
			return fmt.Errorf("%s: %w", from, err)
		}
		tokens = []*server.Token{t}
	}
	addr := *listen
	if addr == "" {
		host, port := c.Gateway.Host, c.Gateway.Port
		if *portFlag != 0 {
			port = *portFlag
		}
		if port == 0 {
			port = 18790
		}
		if host == "" || ((host == "0.0.0.0" || host == "::") && len(tokens) == 0) {
			if host != "" {
				fmt.Fprintf(cl.stderr, "nb: warning: gateway.host is %s, but without NB_GATEWAY_TOKEN the gateway listens on 127.0.0.1 only (nanobot bound no server there)\n", host)
			}
			host = "127.0.0.1"
		}
		addr = net.JoinHostPort(host, strconv.Itoa(port))
	}
	if err := httpguard.CheckListen(addr, len(tokens)); err != nil {
		return fmt.Errorf("refusing to listen on %s without a token: anyone who reaches it could talk to your assistant; set NB_GATEWAY_TOKEN (or --token) to a secret of %d or more random characters, or listen on 127.0.0.1", addr, httpguard.MinTokenLength)
	}
	// A second gateway on this workspace or a channel's account would
	// answer every message again: refused, unless both are replicas.
	lock, err := gatewayrun.AcquireLock(c, cl.gatewayStateDir(), cl.gatewayBusURL(*busURL, c) != "")
	if err != nil {
		return err
	}
	defer lock.Release() // last, once the gateway is closed
	lns, err := server.Listen(addr)
	if be := (*server.BindError)(nil); errors.As(err, &be) {
		return fmt.Errorf("%w; choose another address with --listen", err)
	} else if err != nil {
		return err
	}
	if len(lns) > 0 {
		if err := lock.SetAddress(lns[0].Addr().String()); err != nil {
			for _, ln := range lns {
				ln.Close()
			}
			return err
		}
	}
	reps, err := gatewayrun.JoinReplicas(ctx, cl.gatewayBusURL(*busURL, c), log)
	if err != nil {
		for _, ln := range lns {
			ln.Close()
		}
		return err
	}
	if reps != nil {
		defer reps.Close()
	}
	o := cl.gatewayOptions(c, log)
	o.Replicas, o.Listeners, o.Tokens, o.Checks = reps, lns, tokens, cl.storeChecks()
	o.Metrics, o.Control = *metricsAddr == "", true
	metric.Up(metric.Gateway)
	if *metricsAddr != "" {
		if _, err := metric.Listen(ctx, *metricsAddr, metric.Tokens(tokens), func(err error) { log.Error("metrics listener", "error", err) }); err != nil {
			for _, ln := range lns {
				ln.Close()
			}
			return fmt.Errorf("--metrics-listen: %w", err)
		}
	}
	gw, err := gatewayrun.Open(ctx, c, o)
	if err != nil {
		for _, ln := range lns {
			ln.Close()
		}
		return err
	}
	defer gw.Close()
	idleCtx, stopIdle := context.WithCancel(ctx)
	defer stopIdle()
	go newIdleRelease().run(idleCtx)
	return gw.Run(ctx)
}

// gatewayInit writes the starting configuration and the workspace
// templates, never overwriting a file.
func (cl *cli) gatewayInit(args []string) error {
	fs, f := cl.gatewayFlagSet("nb gateway init", "nb gateway init [--config FILE] [--workspace DIR]", "Writes a commented starting configuration (default NB_GATEWAY_CONFIG, else\n$XDG_CONFIG_HOME/nb/gateway.json: the file nb gateway then reads) and the\nworkspace's templates; an existing file is never overwritten.")
	if help, err := fs.ParseOnly(args); help || err != nil {
		return err
	}
	path, from := config.Target(*f.config, config.Env(cl.environ))
	if from == "" {
		if path == "" {
			return errors.New("nb gateway init: neither XDG_CONFIG_HOME nor HOME is set: pass --config FILE")
		}
		// A new file of nb's would be found before nanobot's, which
		// would then be read by nobody: say so instead.
		nanobot := filepath.Join(cl.getenv("HOME"), ".nanobot", "config.json")
		if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) && cl.getenv("HOME") != "" {
			if _, err := os.Stat(nanobot); err == nil {
				return fmt.Errorf("nb gateway init: %s exists, and nb gateway reads it: a new %s would shadow it (nb gateway would read the new one, nanobot the old one); run nb gateway onboard to refresh nanobot's in place, or nb gateway init --config %s to write a new one all the same", nanobot, path, path)
			}
		}
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	cf, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	switch {
	case errors.Is(err, os.ErrExist):
		fmt.Fprintf(cl.stdout, "kept      %s (it exists)\n", path)
	case err != nil:
		return err
	default:
		_, err = cf.Write(config.Starter)
		if cerr := cf.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
		fmt.Fprintf(cl.stdout, "wrote     %s\n", path)
	}
	c, err := config.Load(path, *f.workspace, config.Env(append(cl.environ, "ANTHROPIC_API_KEY=", "BRAVE_API_KEY=")))
	if err != nil {
		return err
	}
	written, err := gateway.InitWorkspace(c.Workspace)
	for _, w := range written {
		fmt.Fprintf(cl.stdout, "wrote     %s\n", w)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(cl.stdout, "workspace %s\nnext: edit %s, then run nb gateway and open http://127.0.0.1:18790/\n", c.Workspace, path)
	return nil
}

// gatewayPair approves a pairing code.
func (cl *cli) gatewayPair(ctx context.Context, args []string) error {
	fs, f := cl.gatewayFlagSet("nb gateway pair", "nb gateway pair [flags] CODE", "Lets the sender who was given CODE talk to the assistant.")
	busURL := fs.String("bus", "", "the `URL` of the bus the gateway's replicas share, whose pairing store to approve in (default: NB_BUS, gateway.bus, else the state folder's file)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return &usageError{msg: "nb gateway pair: give the pairing code (ABCD-EFGH)"}
	}
	c, err := cl.loadGatewayConfig(f)
	if err != nil {
		return err
	}
	checker, done, err := cl.pairingChecker(ctx, *busURL, c)
	if err != nil {
		return err
	}
	defer done()
	ap, err := checker.Approve(ctx, fs.Arg(0))
	if err != nil {
		return err
	}
	fmt.Fprintf(cl.stdout, "paired %s:%s: they can talk to the assistant now\n", ap.Channel, ap.SenderID)
	return nil
}

// pairingChecker is the checker nb gateway pair approves with: on the
// bus when the gateway runs on one (--bus, NB_BUS, gateway.bus), else
// the state folder's file. done closes the bus.
func (cl *cli) pairingChecker(ctx context.Context, busFlag string, c *config.Config) (checker *access.Checker, done func(), err error) {
	file := cl.pairingStore(c.Workspace)
	checker = &access.Checker{Pairings: &access.FilePairings{Path: file}}
	raw := cl.gatewayBusURL(busFlag, c)
	if raw == "" {
		return checker, func() {}, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	b, err := jetstream.Dial(ctx, raw, "nb gateway pair", jetstream.Options{})
	if err != nil {
		return nil, nil, err
	}
	var info []string
	if checker.Pairings, err = gatewayrun.SharedPairings(ctx, b, file, func(msg string, _ ...any) { info = append(info, msg) }); err != nil {
		b.Close()
		return nil, nil, err
	}
	if len(info) > 0 {
		fmt.Fprintln(cl.stderr, "nb: "+strings.Join(info, "; "))
	}
	return checker, func() { b.Close() }, nil
}

// gatewayChat talks to the assistant from the terminal, on the
// workspace's session cli:direct (or -s), locked against the running
// gateway's turns on it.
func (cl *cli) gatewayChat(ctx context.Context, name string, args []string) (err error) {
	about := "Talks to the assistant from the terminal: one message, or a conversation\n(exit, quit, /exit, /quit, :q or Ctrl-D to leave)."
	if name == "agent" {
		about += "\nnb gateway agent is nb gateway chat (nanobot agent's name)."
	}
	fs, f := cl.gatewayFlagSet("nb gateway "+name, "nb gateway "+name+" [flags]", about)
	message := fs.StringP("message", "m", "", "one `message`: print the answer and exit")
	sessionKey := fs.StringP("session", "s", "cli:direct", "the `session` key")
	yes := fs.BoolP("yes", "y", false, "run every tool call that asks for a confirmation, in this chat's turns (else they are denied: nobody is asked in a chat)")
	allowTools := fs.StringSlice("allow-tool", nil, "run the calls of the tool `name` without a confirmation (repeatable, or comma-separated)")
	if help, err := fs.ParseOnly(args); help || err != nil {
		return err
	}
	// The assistant's policy is nb gateway's (by default, exec with
	// sandbox: auto refuses to run where bubblewrap cannot), not the
	// terminal's: a chat must not exec what the gateway would refuse.
	cl.requireSandbox = true
	approval := &term.Approval{}
	if cl.approval != nil {
		approval = cl.approval.Clone()
	}
	approval.All = approval.All || *yes
	for _, t := range *allowTools {
		approval.Allow(t)
	}
	log, err := cliflag.Logger(cl.stderr, "warn", "text")
	if err != nil {
		return err
	}
	c, err := cl.loadGatewayConfig(f)
	if err != nil {
		return err
	}
	// The running gateway's sessions: NB_STORE, else gateway.store.
	if err := cl.openStore(ctx, c.Gateway.Store); err != nil {
		return err
	}
	defer cl.closeStore()
	o := cl.gatewayOptions(c, log)
	o.Confirmer = approvedTools{approval}
	gw, err := gatewayrun.Open(ctx, c, o)
	if err != nil {
		return err
	}
	defer gw.Close()
	send, wait := gw.Chat(ctx, *sessionKey)
	defer func() {
		if werr := wait(); err == nil {
			err = werr
		}
	}()
	var failed error // the -m turn's error
	ask := func(text string) error {
		return send(ctx, text, func(r gatewayrun.Reply) {
			switch r.Kind {
			case bus.ToolHint:
				fmt.Fprintf(cl.stderr, "  ⚙ %s\n", r.Content)
			case bus.Progress:
				if !r.Streamed {
					fmt.Fprintf(cl.stderr, "  %s\n", r.Content)
				}
			case bus.Error:
				if *message != "" {
					failed = errors.New(r.Content) // -m: the turn failed, exit 1 saying why
					return
				}
				fmt.Fprintln(cl.stdout, r.Content)
			default:
				fmt.Fprintln(cl.stdout, r.Content)
			}
		})
	}
	if *message != "" {
		if err := ask(*message); err != nil {
			return err
		}
		return failed
	}
	stdin := cl.stdin
	if stdin == nil {
		stdin = strings.NewReader("")
	}
	in := bufio.NewScanner(stdin)
	in.Buffer(nil, 1<<20)
	for {
		fmt.Fprint(cl.stdout, "🐈 > ")
		if !in.Scan() {
			fmt.Fprintln(cl.stdout)
			return in.Err()
		}
		line := strings.TrimSpace(in.Text())
		switch line {
		case "":
			continue
		case "exit", "quit", "/exit", "/quit", ":q":
			return nil
		}
		if err := ask(line); err != nil {
			if errors.Is(err, context.Canceled) {
				return nil
			}
			return err
		}
	}
}
