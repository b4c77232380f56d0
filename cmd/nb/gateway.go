package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nbots/nb/bot"
	"github.com/nbots/nb/cartridge"
	"github.com/nbots/nb/cmd/nb/cliflag"
	"github.com/nbots/nb/connlimit"
	"github.com/nbots/nb/gateway"
	"github.com/nbots/nb/gateway/access"
	"github.com/nbots/nb/gateway/bus"
	"github.com/nbots/nb/gateway/channel"
	"github.com/nbots/nb/gateway/channels"
	"github.com/nbots/nb/gateway/config"
	"github.com/nbots/nb/gateway/dispatch"
	"github.com/nbots/nb/gateway/replica"
	gwsession "github.com/nbots/nb/gateway/session"
	"github.com/nbots/nb/gateway/web"
	"github.com/nbots/nb/internal/httpguard"
	"github.com/nbots/nb/provider"
	"github.com/nbots/nb/server"
)

// gatewayRuntime is what nb gateway built: the features that plug in
// (memory, cron, heartbeat, budgets, skills, the platform channels) get
// it through the registries below.
type gatewayRuntime struct {
	App      *App
	Config   *config.Config
	Host     bot.Host
	Bot      *bot.Bot
	Gateway  *gateway.Gateway
	Sessions *gwsession.Manager
	Access   *access.Checker
	Log      *slog.Logger
	// State are the gateway's state files; Zone is
	// agents.defaults.timezone.
	State gatewayStateFiles
	Zone  *time.Location
	// Channels are the channels the dispatcher delivers through; a hook
	// may add its own.
	Channels []channel.Channel
	// Background are run beside the gateway until it stops (a
	// scheduler, the heartbeat).
	Background []func(ctx context.Context) error
	// Claims are the slots' claims shared by replicas (--bus); nil alone.
	Claims replica.Claims
	// Counters are the budgets' sums shared by replicas (--bus); nil alone.
	Counters replica.Counters
	// Scale is what replicas share (--bus); nil alone.
	Scale *scaleOut
}

// gatewaySubcommands are nb gateway NAME ... besides init, chat and pair.
var gatewaySubcommands = map[string]func(a *App, ctx context.Context, args []string) error{
	"cron":     (*App).gatewayCronCommand,
	"status":   (*App).gatewayStatus,
	"sessions": (*App).gatewaySessionsCommand,
	"channels": (*App).gatewayChannelsCommand,
}

// gatewayFeatures are wired into a built gateway in this order: the cron
// scheduler and tool; memory, budgets, skills and the heartbeat; then,
// with replicas, the shared receive positions and pairing book.
var gatewayFeatureOrder = []func(ctx context.Context, rt *gatewayRuntime) error{
	gatewayCronHook,
	gatewayFeatures,
	gatewayShared,
}

// isGatewayCommand tells nb gateway from a cartridge named gateway.
func isGatewayCommand(args []string) bool {
	if len(args) == 0 || args[0] != "gateway" {
		return false
	}
	if len(args) >= 3 {
		switch args[2] {
		case "eval", "repl", "state", "cartridge", "mcp":
			return false
		}
	}
	return true
}

// gatewayCommand runs nb gateway ... with SIGINT and SIGTERM as its stop.
func (a *App) gatewayCommand(args []string) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if len(args) > 0 {
		switch args[0] {
		case "init":
			return a.report(a.gatewayInit(args[1:]))
		case "pair":
			return a.report(a.gatewayPair(ctx, args[1:]))
		case "chat":
			return a.report(a.gatewayChat(ctx, args[1:]))
		}
		if fn, ok := gatewaySubcommands[args[0]]; ok {
			return a.report(fn(a, ctx, args[1:]))
		}
	}
	return a.report(a.gatewayServe(ctx, args))
}

// gatewayFlags are the flags every nb gateway command takes.
type gatewayFlags struct {
	config, workspace *string
}

// gatewayFlagSet is the flag set of an nb gateway command, with the
// flags every one takes.
func (a *App) gatewayFlagSet(name, usage, about string) (*cliflag.Set, gatewayFlags) {
	fs := a.flags(name, usage, about)
	f := gatewayFlags{
		config:    fs.String("config", "", "the configuration `file` (default: NB_GATEWAY_CONFIG, $XDG_CONFIG_HOME/nb/gateway.json, ~/.nanobot/config.json)"),
		workspace: fs.String("workspace", "", "the workspace `folder` (default: agents.defaults.workspace, else $XDG_DATA_HOME/nb/gateway)"),
	}
	return fs, f
}

// parseFlags reads the flags of a command that takes no other words; help
// is true when the help was printed.
func parseFlags(fs *cliflag.Set, args []string) (help bool, err error) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, cliflag.ErrHelp) {
			return true, nil
		}
		return false, err
	}
	if fs.NArg() > 0 {
		return false, &usageError{msg: fmt.Sprintf("%s: unexpected argument %q", fs.Name, fs.Arg(0))}
	}
	return false, nil
}

// loadGatewayConfig finds and reads the configuration, printing its
// warnings.
func (a *App) loadGatewayConfig(f gatewayFlags) (*config.Config, error) {
	env := config.Env(a.Environ)
	path, err := config.Find(*f.config, env)
	if err != nil {
		return nil, err
	}
	c, err := config.Load(path, *f.workspace, env)
	if err != nil {
		return nil, err
	}
	for _, w := range c.Warnings {
		fmt.Fprintln(a.Stderr, "nb: warning: "+w)
	}
	return c, nil
}

// gatewayStateFiles are the gateway's own files for one workspace, in
// its state folder outside the workspace (which the assistant's tools
// can write), each named after the workspace.
type gatewayStateFiles struct {
	Dir      string // $XDG_STATE_HOME/nb/gateway
	Pairing  string // the pairing codes and approvals
	Usage    string // the budgets' ledger
	Channels string // the folder of the channels' receive positions
}

// gatewayState derives the state files of workspace: the one place
// their names are made.
func (a *App) gatewayState(workspace string) gatewayStateFiles {
	base := a.Getenv("XDG_STATE_HOME")
	if base == "" {
		base = filepath.Join(a.Getenv("HOME"), ".local", "state")
	}
	dir := filepath.Join(base, "nb", "gateway")
	sum := sha256.Sum256([]byte(workspace))
	id := hex.EncodeToString(sum[:6])
	return gatewayStateFiles{
		Dir:      dir,
		Pairing:  filepath.Join(dir, "pairing-"+id+".json"),
		Usage:    filepath.Join(dir, "usage-"+id+".json"),
		Channels: filepath.Join(dir, "channels-"+id),
	}
}

// pairingStore is where a workspace's approvals live.
func (a *App) pairingStore(workspace string) string { return a.gatewayState(workspace).Pairing }

// gatewayZone is agents.defaults.timezone, UTC when unset (nanobot's
// default).
func gatewayZone(c *config.Config) (*time.Location, error) {
	tz := c.Agents.Defaults.Timezone
	if tz == "" {
		return time.UTC, nil
	}
	loc, err := time.LoadLocation(tz)
	if err != nil {
		return nil, fmt.Errorf("agents.defaults.timezone: unknown time zone %q", tz)
	}
	return loc, nil
}

// accessRules are the channels' access settings.
func accessRules(c *config.Config) (map[string]access.ChannelRules, error) {
	rules := map[string]access.ChannelRules{}
	for name := range c.Channels.Each {
		cc, err := c.Channels.Channel(name)
		if err != nil {
			return nil, err
		}
		if !cc.Enabled {
			continue
		}
		rules[name] = access.ChannelRules{AllowFrom: cc.AllowFrom, GroupPolicy: cc.GroupPolicy, NoPairing: name == "email"}
	}
	return rules, nil
}

// headerTransport adds providers.<name>.extraHeaders to the provider's
// requests.
type headerTransport struct {
	base    http.RoundTripper
	headers map[string]string
}

func (t headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range t.headers {
		r.Header.Set(k, v)
	}
	return t.base.RoundTrip(r)
}

// buildGateway builds the assistant and the gateway around it.
func (a *App) buildGateway(ctx context.Context, c *config.Config, log *slog.Logger, sc *scaleOut) (*gatewayRuntime, error) {
	for _, d := range gateway.Layout {
		if err := os.MkdirAll(filepath.Join(c.Workspace, d), 0o700); err != nil {
			return nil, fmt.Errorf("workspace %s: %w", c.Workspace, err)
		}
	}
	host := a.host()
	if h := c.ExtraHeaders(); len(h) > 0 {
		base := *provider.DefaultHTTPClient()
		rt := base.Transport
		if rt == nil {
			rt = http.DefaultTransport
		}
		base.Transport = headerTransport{base: rt, headers: h}
		host.HTTPClient = &base
	}
	var cart *cartridge.Cartridge
	var err error
	if name := c.Agents.Defaults.Cartridge; name != "" {
		if cart, err = host.Load(name); err != nil {
			return nil, fmt.Errorf("agents.defaults.cartridge: %w", err)
		}
	} else {
		var warnings []string
		cart, warnings, err = c.Cartridge(cartridge.Default(host.LookupEnv), config.Env(a.Environ))
		if err != nil {
			return nil, err
		}
		for _, w := range warnings {
			fmt.Fprintln(a.Stderr, "nb: warning: "+w)
		}
	}
	b, err := bot.New(ctx, cart, host)
	if err != nil {
		return nil, err
	}
	sessions, err := a.gatewaySessions(c, sc, log)
	if err != nil {
		b.Close()
		return nil, err
	}
	rules, err := accessRules(c)
	if err != nil {
		b.Close()
		return nil, err
	}
	st := a.gatewayState(c.Workspace)
	checker := &access.Checker{Channels: rules, Store: st.Pairing, Warn: func(msg string) { log.Warn(msg) }}
	loc, err := gatewayZone(c)
	if err != nil {
		b.Close()
		return nil, err
	}
	local := bus.NewLocal()
	local.MaxQueued = c.Gateway.Limits.Queued()
	g := &gateway.Gateway{
		Bus: local, Sessions: sessions, Access: checker, Runner: gateway.BotRunner{Bot: b, Words: c.Words(), PromptTokens: c.PromptTokens()}, Words: c.Words(),
		Prompt: &gateway.Prompt{Workspace: c.Workspace, Location: loc, Log: log,
			MaxFileBytes: c.Agents.Defaults.Limits.PromptFileBytes, MaxMemoryBytes: c.Agents.Defaults.Limits.MemoryBytes}, Log: log,
		Guests: gateway.GuestPolicy{Tools: c.Gateway.Guests.Tools},
		// The state folder (pairing, usage, receive positions) is the
		// gateway's own, should the workspace hold it.
		ProtectedPaths: []string{st.Dir},
	}
	rt := &gatewayRuntime{App: a, Config: c, Host: host, Bot: b, Gateway: g, Sessions: sessions, Access: checker, Log: log, State: st, Zone: loc}
	if sc != nil {
		g.Bus, g.Elector, g.Steer, rt.Claims, rt.Counters, rt.Scale = sc.bus, sc.elector, sc.steering, sc.claims, sc.counters, sc
		stops, err := sc.bus.Stopper(sc.id, g.StopHere)
		if err != nil {
			rt.close()
			return nil, err
		}
		g.Others = stops
	}
	for _, hook := range gatewayFeatureOrder {
		if err := hook(ctx, rt); err != nil {
			rt.close()
			return nil, err
		}
	}
	return rt, nil
}

func (rt *gatewayRuntime) close() {
	rt.Gateway.Bus.Close()
	rt.Sessions.Close()
	rt.Bot.Close()
}

// errRestart stops nb gateway for /restart.
var errRestart = errors.New("restarting (/restart)")

// gatewayServe runs nb gateway: the assistant, its channels and its
// listener, until ctx ends.
func (a *App) gatewayServe(ctx context.Context, args []string) (err error) {
	defer func() {
		// Last, once everything is released: /restart starts it again.
		if errors.Is(err, errRestart) {
			err = a.reexec()
		}
	}()
	fs, f := a.gatewayFlagSet("nb gateway", "nb gateway [flags]\nnb gateway init | chat | pair | status | cron ... | sessions ... [flags]", "Runs the personal assistant: its chat channels, the web chat and /health on\nthe listener (see docs/gateway.md). nb gateway COMMAND --help tells more of each command.")
	listen := fs.String("listen", "", "`host:port` of the web chat and /health (default: gateway.host and gateway.port, 127.0.0.1:18790)")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	busURL := fs.String("bus", "", "the `URL` of the bus replicas share, nats://… (default: NB_BUS, gateway.bus, else in-process; docs/scale-out.md)")
	storeURL := fs.String("store", "", "the `URL` of the conversation store: "+storeFlagDoc)
	tokenFlag := fs.String("token", "", "the `token` of the web chat and websocket (default NB_GATEWAY_TOKEN; prefer the variable: a flag shows in the process list)")
	unsandboxed := fs.Bool("allow-unsandboxed-exec", false, "let exec with sandbox: auto run commands without a sandbox where bubblewrap cannot run (by default they are refused)")
	if help, err := parseFlags(fs, args); help || err != nil {
		return err
	}
	a.requireSandbox = !*unsandboxed
	if err := a.openStore(ctx, *storeURL); err != nil {
		return err
	}
	defer a.closeStore()
	log, err := newLogger(a.Stderr, *logLevel, "text")
	if err != nil {
		return &usageError{err.Error()}
	}
	if a.Getenv("GOMEMLIMIT") == "" {
		// An always-on assistant should stay small: the collector works
		// harder as the heap nears 24 MiB (a soft limit, never a failure).
		debug.SetMemoryLimit(24 << 20)
	}
	c, err := a.loadGatewayConfig(f)
	if err != nil {
		return err
	}
	if err := a.openStore(ctx, c.Gateway.Store); err != nil { // when neither --store nor NB_STORE names one
		return err
	}
	var tokens []*server.Token
	secret, from := *tokenFlag, "--token"
	if secret == "" {
		secret, from = a.Getenv("NB_GATEWAY_TOKEN"), "NB_GATEWAY_TOKEN"
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
		if port == 0 {
			port = 18790
		}
		if host == "" || ((host == "0.0.0.0" || host == "::") && len(tokens) == 0) {
			if host != "" {
				fmt.Fprintf(a.Stderr, "nb: warning: gateway.host is %s, but without NB_GATEWAY_TOKEN the gateway listens on 127.0.0.1 only (nanobot bound no server there)\n", host)
			}
			host = "127.0.0.1"
		}
		addr = net.JoinHostPort(host, strconv.Itoa(port))
	}
	if err := httpguard.CheckListen(addr, len(tokens)); err != nil {
		return fmt.Errorf("refusing to listen on %s without a token: anyone who reaches it could talk to your assistant; set NB_GATEWAY_TOKEN (or --token) to a secret of %d or more random characters, or listen on 127.0.0.1", addr, httpguard.MinTokenLength)
	}
	lns, err := server.Listen(addr)
	if err != nil {
		return err
	}
	var rt *gatewayRuntime
	sc, err := openScaleOut(ctx, a.gatewayBusURL(*busURL, c), log)
	if err == nil {
		if rt, err = a.buildGateway(ctx, c, log, sc); err != nil && sc != nil {
			sc.bus.Close()
		}
	}
	if err != nil {
		for _, ln := range lns {
			ln.Close()
		}
		return err
	}
	defer rt.close()
	g := rt.Gateway
	ws := &web.Server{Gateway: g, Sessions: rt.Sessions, Tokens: tokens, Log: log, Checks: a.storeChecks(),
		Limits: connlimit.Limits{MaxClientConns: c.Gateway.Limits.ClientConns, MaxConns: c.Gateway.Limits.Conns}}
	if sc != nil {
		ws.Checks = append(ws.Checks, server.Check{Name: "bus", Run: sc.bus.Check})
	}
	rt.Channels = append([]channel.Channel{ws}, rt.Channels...)
	accounts := map[string]string{} // channel -> account, elected among replicas
	for name := range c.Channels.Each {
		cc, _ := c.Channels.Channel(name)
		if !cc.Enabled {
			continue
		}
		factory, ok := channels.Find(channels.Builtin(), name)
		if !ok {
			g.Expect(name)
			g.Connected(name, fmt.Errorf("channel %s is not supported by this nb", name))
			log.Error("channel not started: this nb has no such channel", "channel", name)
			continue
		}
		ch, err := factory.New(c.Channels.Each[name], rt.channelEnv(name, c.Channels.Each[name]))
		if err != nil {
			return fmt.Errorf("channels.%s: %w", name, err)
		}
		rt.Channels = append(rt.Channels, ch)
		accounts[ch.Name()] = channelAccount(name, c.Channels.Each[name])
	}
	ws.Webhooks = channelWebhooks(rt.Channels)
	d := &dispatch.Dispatcher{Bus: g.Bus, Channels: rt.Channels, Log: log, Progress: c.Channels.Progress(), ToolHints: c.Channels.SendToolHints, MaxRetries: c.Channels.MaxRetries()}
	if sc != nil {
		d.Delivered, d.Fanout = sc.delivered, sc.bus.Fanout()
	}
	// Every part runs in one group: the first to fail stops the others
	// and is what nb gateway reports; when the group is done, every
	// goroutine it started has ended.
	restart := make(chan struct{}, 1)
	g.Restart = func() {
		select {
		case restart <- struct{}{}:
		default:
		}
	}
	group := gateway.NewGroup(ctx)
	run := group.Go
	run("the gateway", g.Run)
	run("the dispatcher", d.Run)
	for _, ch := range rt.Channels {
		g.Expect(ch.Name())
		name := "channel " + ch.Name()
		if account, ok := accounts[ch.Name()]; ok {
			run(name, func(ctx context.Context) error { return g.RunAccount(ctx, ch, account) })
			continue
		}
		run(name, func(ctx context.Context) error { return g.RunChannel(ctx, ch) })
	}
	for _, bg := range rt.Background {
		run("the gateway", bg)
	}
	run("the web chat", func(ctx context.Context) error { return ws.Serve(ctx, lns...) })
	run("/restart", func(ctx context.Context) error {
		select {
		case <-restart:
			return errRestart
		case <-ctx.Done():
			return nil
		}
	})
	log.Info("nb gateway started", "listen", lns[0].Addr().String(), "workspace", c.Workspace, "config", orDefaultName(c.Path), "model", g.Runner.Model())
	if c.RestrictToWorkspace() {
		if st := rt.Bot.Builtins(); st.Exec != nil {
			log.Info("exec", "status", st.Exec.String())
		}
	}
	<-group.Context().Done()
	log.Info("nb gateway stopping")
	return group.Wait()
}

func orDefaultName(p string) string {
	if p == "" {
		return "(built-in default)"
	}
	return p
}

// gatewayInit writes the starting configuration and the workspace
// templates, never overwriting a file.
func (a *App) gatewayInit(args []string) error {
	fs, f := a.gatewayFlagSet("nb gateway init", "nb gateway init [--config FILE] [--workspace DIR]", "Writes a commented starting configuration (default $XDG_CONFIG_HOME/nb/gateway.json)\nand the workspace's templates; an existing file is never overwritten.")
	if help, err := parseFlags(fs, args); help || err != nil {
		return err
	}
	path := *f.config
	if path == "" {
		path = config.NBPath(config.Env(a.Environ))
	}
	if path == "" {
		return errors.New("nb gateway init: neither XDG_CONFIG_HOME nor HOME is set: pass --config FILE")
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	cf, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	switch {
	case errors.Is(err, os.ErrExist):
		fmt.Fprintf(a.Stdout, "kept      %s (it exists)\n", path)
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
		fmt.Fprintf(a.Stdout, "wrote     %s\n", path)
	}
	c, err := config.Load(path, *f.workspace, config.Env(append(a.Environ, "ANTHROPIC_API_KEY=", "BRAVE_API_KEY=")))
	if err != nil {
		return err
	}
	written, err := gateway.InitWorkspace(c.Workspace)
	for _, w := range written {
		fmt.Fprintf(a.Stdout, "wrote     %s\n", w)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(a.Stdout, "workspace %s\nnext: edit %s, then run nb gateway and open http://127.0.0.1:18790/\n", c.Workspace, path)
	return nil
}

// gatewayPair approves a pairing code.
func (a *App) gatewayPair(ctx context.Context, args []string) error {
	fs, f := a.gatewayFlagSet("nb gateway pair", "nb gateway pair [flags] CODE", "Lets the sender who was given CODE talk to the assistant.")
	busURL := fs.String("bus", "", "the `URL` of the bus the gateway's replicas share, whose pairing store to approve in (default: NB_BUS, gateway.bus, else the state folder's file)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return &usageError{msg: "nb gateway pair: give the pairing code (ABCD-EFGH)"}
	}
	c, err := a.loadGatewayConfig(f)
	if err != nil {
		return err
	}
	checker, done, err := a.pairingChecker(ctx, *busURL, c)
	if err != nil {
		return err
	}
	defer done()
	ap, err := checker.Approve(fs.Arg(0))
	if err != nil {
		return err
	}
	fmt.Fprintf(a.Stdout, "paired %s:%s: they can talk to the assistant now\n", ap.Channel, ap.SenderID)
	return nil
}

// gatewayChat talks to the assistant from the terminal, on the
// workspace's session cli:direct (or -s), locked against the running
// gateway's turns on it.
func (a *App) gatewayChat(ctx context.Context, args []string) error {
	fs, f := a.gatewayFlagSet("nb gateway chat", "nb gateway chat [flags]", "Talks to the assistant from the terminal: one message, or a conversation\n(exit, quit, /exit, /quit, :q or Ctrl-D to leave).")
	message := fs.StringP("message", "m", "", "one `message`: print the answer and exit")
	sessionKey := fs.StringP("session", "s", "cli:direct", "the `session` key")
	yes := fs.BoolP("yes", "y", false, "run every tool call that asks for a confirmation, in this chat's turns (else they are denied: nobody is asked in a chat)")
	allowTools := fs.StringSlice("allow-tool", nil, "run the calls of the tool `name` without a confirmation (repeatable, or comma-separated)")
	if help, err := parseFlags(fs, args); help || err != nil {
		return err
	}
	// The assistant's policy is nb gateway's (by default, exec with
	// sandbox: auto refuses to run where bubblewrap cannot), not the
	// terminal's: a chat must not exec what the gateway would refuse.
	a.requireSandbox = true
	approval := a.approve.Clone()
	approval.All = approval.All || *yes
	for _, t := range *allowTools {
		approval.Allow(t)
	}
	log, err := newLogger(a.Stderr, "warn", "text")
	if err != nil {
		return err
	}
	c, err := a.loadGatewayConfig(f)
	if err != nil {
		return err
	}
	// The running gateway's sessions: NB_STORE, else gateway.store.
	if err := a.openStore(ctx, c.Gateway.Store); err != nil {
		return err
	}
	defer a.closeStore()
	rt, err := a.buildGateway(ctx, c, log, nil)
	if err != nil {
		return err
	}
	defer rt.close()
	g := rt.Gateway
	if r, ok := g.Runner.(gateway.BotRunner); ok {
		r.Confirmer = approvedTools{approval}
		g.Runner = r
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	go g.Run(runCtx) //nolint:errcheck // ends with runCtx
	replies := make(chan bus.Outbound, 16)
	go g.Bus.Outbound(runCtx, gateway.CLIChannel, func(ctx context.Context, m bus.Outbound) error { //nolint:errcheck // same
		select {
		case replies <- m:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	chat := "direct"
	override := ""
	if *sessionKey != "cli:direct" {
		override = *sessionKey
	}
	ask := func(text string) error {
		m := bus.Inbound{Channel: gateway.CLIChannel, SenderID: "user", ChatID: chat, Content: text, Timestamp: time.Now(), SessionKeyOverride: override}
		if err := g.Inbox(gateway.CLIChannel).Publish(ctx, m); err != nil {
			return err
		}
		for {
			select {
			case r := <-replies:
				switch r.Kind {
				case bus.ToolHint:
					fmt.Fprintf(a.Stderr, "  ⚙ %s\n", r.Content)
				case bus.Progress:
					if s, _ := r.Metadata[channel.MetaStreamed].(bool); !s {
						fmt.Fprintf(a.Stderr, "  %s\n", r.Content)
					}
				case bus.Error:
					if *message != "" {
						return errors.New(r.Content) // -m: the turn failed, exit 1 saying why
					}
					fmt.Fprintln(a.Stdout, r.Content)
					return nil
				default:
					fmt.Fprintln(a.Stdout, r.Content)
					return nil
				}
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	if *message != "" {
		return ask(*message)
	}
	in := bufio.NewScanner(a.Stdin)
	in.Buffer(nil, 1<<20)
	for {
		fmt.Fprint(a.Stdout, "🐈 > ")
		if !in.Scan() {
			fmt.Fprintln(a.Stdout)
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
