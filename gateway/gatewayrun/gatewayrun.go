// Package gatewayrun assembles a whole gateway from Go values: Open builds
// the assistant (its bot, sessions, access rules, memory, cron, heartbeat,
// budgets and skills), its channels and its web chat; Run runs them in one
// group; Close releases what Open opened. cmd/nb only turns argv, the
// environment and signals into Options.
//
// It is a package of its own, not package gateway, because it links what
// sits beside the turn loop and imports it: the web chat (gateway/web
// imports gateway), the channel registry (gateway/channels) and the
// features (gateway/memory, cron, heartbeat, budget, skills). Package
// gateway stays the loop those plug into, importing none of them.
package gatewayrun

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/nbots/nb/agent"
	"github.com/nbots/nb/bot"
	"github.com/nbots/nb/cartridge"
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
	"github.com/nbots/nb/gateway/webgate"
	"github.com/nbots/nb/internal/httpguard"
	"github.com/nbots/nb/internal/metric"
	"github.com/nbots/nb/internal/rungroup"
	"github.com/nbots/nb/provider"
	"github.com/nbots/nb/state/storeurl"
)

// Options are what a gateway is built from besides its configuration.
// Every field is a Go value: nothing below reads the process's
// environment, flags or signals.
type Options struct {
	// Host builds the assistant's bot. Its Builtins.RequireSandbox is the
	// sandbox policy, explicit: nb gateway and nb gateway chat set it, so
	// that exec with sandbox: auto refuses to run where bubblewrap cannot.
	// Its Environ resolves the configuration's ENV references and the
	// skills' requirements; its Warn receives the build's warnings.
	Host bot.Host
	// Store keeps the chat sessions when it is shared (a database the
	// replicas reach); nil, or a store of this machine's files, keeps
	// them in the workspace's sessions folder (nanobot's files).
	Store *storeurl.Store
	// Namespace names the gateway's sessions in a shared Store ("" is
	// "nb"; Replicas, when set, give their bus's).
	Namespace string
	// Bus carries the messages between the channels and the turn loop
	// (nil: the Replicas' bus, else an in-process bus holding
	// gateway.limits.queuedPerChat messages a chat). It stays the
	// caller's to close.
	Bus bus.Bus
	// Replicas are what the replicas of one gateway share (JoinReplicas):
	// the bus, the elections, claims, steering and the shared state. nil
	// is one gateway alone, on the in-process bus.
	Replicas *Replicas
	// Channels are the platforms the configuration's channels.<name>
	// sections may start (nil: every one of gateway/channels).
	Channels []channels.Factory
	// Listeners serve the web chat, /health, /ready and the channels'
	// webhooks (nil: none, and no web chat: nb gateway chat).
	Listeners []net.Listener
	// Tokens, when set, are required of the web chat's clients.
	Tokens []*httpguard.Token
	// Checks are what /ready checks besides the channels and the bus
	// (the store).
	Checks []httpguard.Check
	// StateDir is the gateway's state folder ($XDG_STATE_HOME/nb/gateway):
	// the pairing store, the budgets' ledger and the channels' receive
	// positions of each workspace (see StateFiles).
	StateDir string
	// NanobotDir is nanobot's data folder, where its WhatsApp bridge
	// keeps its token and media (see NanobotDir).
	NanobotDir string
	// Confirmer decides the tool calls that ask for a confirmation (nb
	// gateway chat --yes); nil denies them: nobody is asked in a chat.
	Confirmer agent.Confirmer
	// Log receives the gateway's events (nil: discarded).
	Log *slog.Logger
	// Metrics serves GET /metrics on the Listeners (package
	// internal/metric), behind their token and Host checks.
	Metrics bool
	// Control serves the control page at /control on the Listeners
	// (package internal/control).
	Control bool
}

// Gateway is an assembled gateway: Open builds it, Run runs it, Close
// releases it.
type Gateway struct {
	// Config is the configuration it was built from.
	Config *config.Config
	// Core is the turn loop.
	Core *gateway.Gateway
	// Sessions are the chat sessions.
	Sessions *gwsession.Manager
	// Access decides who may talk to the assistant.
	Access *access.Checker
	// State are the gateway's files in the state folder.
	State Files
	// Bot is the assistant's bot.
	Bot *bot.Bot

	log        *slog.Logger
	web        *web.Server
	listeners  []net.Listener
	dispatcher *dispatch.Dispatcher
	channels   []channel.Channel
	// accounts are the platform channels' accounts (channel -> account),
	// whose receive loops are elected among replicas.
	accounts map[string]string
	// background are run beside the loop until it stops (the scheduler,
	// the heartbeat, consolidations, the budgets' ledger).
	background []part
	replicas   *Replicas
	// storeURL is the PostgreSQL store's URL ("" for files), for the
	// channels that keep a session of their own there.
	storeURL string
	ownBus   bus.Bus // the in-process bus Open made, closed by Close
}

// part is a component of the run group.
type part struct {
	name string
	run  func(context.Context) error
	// chat runs in Chat too (the consolidations, which must end with
	// the run); the scheduler and the heartbeat are nb gateway's alone.
	chat bool
}

// Open builds the gateway of c: it makes the workspace's folders, builds
// the assistant's bot, opens the sessions and wires the features in this
// order: budgets, skills and memory, cron, the heartbeat; then, with
// replicas, the shared receive positions and pairing book; then the
// channels. ctx bounds the build (the bot's MCP servers, the bus). A
// failed Open leaves nothing open but the Options' own values.
func Open(ctx context.Context, c *config.Config, o Options) (_ *Gateway, err error) {
	log := o.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	for _, d := range gateway.Layout {
		if err := os.MkdirAll(filepath.Join(c.Workspace, d), 0o700); err != nil {
			return nil, fmt.Errorf("workspace %s: %w", c.Workspace, err)
		}
	}
	zone, err := Zone(c)
	if err != nil {
		return nil, err
	}
	rules, err := accessRules(c)
	if err != nil {
		return nil, err
	}
	host := o.Host
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
	if name := c.Agents.Defaults.Cartridge; name != "" {
		if cart, err = host.Load(name); err != nil {
			return nil, fmt.Errorf("agents.defaults.cartridge: %w", err)
		}
	} else {
		var warnings []string
		cart, warnings, err = c.Cartridge(cartridge.Default(host.LookupEnv), config.Env(host.Environ))
		if err != nil {
			return nil, err
		}
		for _, w := range warnings {
			if host.Warn != nil {
				host.Warn(w)
			}
		}
	}
	b, err := bot.New(ctx, cart, host)
	if err != nil {
		return nil, err
	}
	gw := &Gateway{Config: c, Bot: b, log: log, replicas: o.Replicas, accounts: map[string]string{}, storeURL: o.Store.PostgresURL()}
	defer func() {
		if err != nil {
			gw.Close()
		}
	}()
	ns := o.Namespace
	if o.Replicas != nil {
		ns = o.Replicas.namespace
	}
	if gw.Sessions, err = openSessions(ctx, c, o.Store, ns, log); err != nil {
		return nil, err
	}
	gw.State = StateFiles(o.StateDir, c.Workspace)
	gw.Access = &access.Checker{Channels: rules, Pairings: &access.FilePairings{Path: gw.State.Pairing, Warn: func(msg string) { log.Warn(msg) }}}
	g := &gateway.Gateway{
		Sessions: gw.Sessions, Access: gw.Access, Runner: gateway.BotRunner{Bot: b, Confirmer: o.Confirmer, Words: c.Words(), PromptTokens: c.PromptTokens()}, Words: c.Words(),
		Prompt: &gateway.Prompt{Workspace: c.Workspace, Location: zone, Log: log,
			MaxFileBytes: c.Agents.Defaults.Limits.PromptFileBytes, MaxMemoryBytes: c.Agents.Defaults.Limits.MemoryBytes}, Log: log,
		Guests: gateway.GuestPolicy{Tools: c.Gateway.Guests.Tools},
		// The state folder (pairing, usage, receive positions) is the
		// gateway's own, should the workspace hold it.
		ProtectedPaths: []string{gw.State.Dir},
	}
	gw.Core = g
	// The replica seams: the bus's, or those of a gateway alone.
	f := features{gw: gw, zone: zone, lookupEnv: host.LookupEnv, claims: &replica.Local{}}
	delivered := dispatch.Record(&replica.Local{})
	if r := o.Replicas; r != nil {
		g.Bus, g.Elector, g.Steer = bus.Metered(r.bus, "jetstream"), r.elector, r.steering
		if g.Others, err = r.bus.Stopper(r.id, g.StopHere); err != nil {
			return nil, err
		}
		f.claims, delivered = r.claims, r.delivered
	} else {
		g.Alone()
		local := bus.NewLocal()
		local.MaxQueued = c.Gateway.Limits.Queued()
		g.Bus, gw.ownBus = local, local
	}
	if o.Bus != nil {
		g.Bus = o.Bus
	}

	// The features, in this order: each may use what the ones before set.
	f.budgets()
	f.memory()
	f.cron()
	f.heartbeat()
	if err := gw.share(ctx); err != nil {
		return nil, err
	}

	// The channels: the web chat when there is a listener, then the
	// platforms of the enabled sections.
	var chs []channel.Channel
	if len(o.Listeners) > 0 {
		gw.web = &web.Server{Gateway: g, Sessions: gw.Sessions, Tokens: o.Tokens, Log: log, Checks: o.Checks,
			Limits: connlimit.Limits{MaxClientConns: c.Gateway.Limits.ClientConns, MaxConns: c.Gateway.Limits.Conns},
			Gates:  &webgate.Board{Dir: gw.State.WebGates}}
		if o.Replicas != nil {
			gw.web.Checks = append(gw.web.Checks, httpguard.Check{Name: "bus", Run: o.Replicas.bus.Check})
		}
		gw.web.Metrics = o.Metrics
		if o.Control {
			gw.web.Control = gw.controlPage(o.Tokens, f.ledger, f.cronJobs)
		}
		chs = append(chs, gw.web)
	}
	factories := o.Channels
	if factories == nil {
		factories = channels.Builtin()
	}
	for name := range c.Channels.Each {
		cc, _ := c.Channels.Channel(name)
		if !cc.Enabled {
			g.Disabled(name)
			continue
		}
		factory, ok := channels.Find(factories, name)
		if !ok {
			g.Expect(name)
			g.Connected(name, fmt.Errorf("channel %s is not supported by this nb", name))
			log.Error("channel not started: this nb has no such channel", "channel", name)
			continue
		}
		raw := c.Channels.Each[name]
		ch, err := factory.New(raw, gw.channelEnv(name, raw, o.NanobotDir))
		if err != nil {
			if _, ok := errors.AsType[*channels.KeyError](err); ok {
				return nil, err // it names channels.<name>.<key> already
			}
			return nil, fmt.Errorf("channels.%s: %w", name, err)
		}
		chs = append(chs, ch)
		if o.Replicas != nil {
			// Its receive loop runs on the replica elected for its account.
			gw.accounts[ch.Name()] = channelAccount(name, raw)
		}
	}
	gw.channels = chs
	for _, ch := range chs {
		name := ch.Name()
		metric.ChannelFunc(name, func() bool {
			for _, st := range g.Channels() {
				if st.Name == name {
					return st.Receiving()
				}
			}
			return false
		})
	}
	if gw.web != nil {
		gw.web.Webhooks = channelWebhooks(chs)
	}
	gw.dispatcher = &dispatch.Dispatcher{Bus: g.Bus, Channels: chs, Log: log, Progress: c.Channels.Progress(), ToolHints: c.Channels.SendToolHints, MaxRetries: c.Channels.MaxRetries(),
		Delivered: delivered}
	if r := o.Replicas; r != nil {
		gw.dispatcher.Fanout = r.bus.Fanout()
	}
	gw.listeners = o.Listeners // the gateway's from now on: Run serves them, Close closes them
	return gw, nil
}

// Run runs every part of the gateway in one group until ctx ends or a
// part fails: the turn loop, the dispatcher, each channel, the features'
// background work and the web chat's listeners. The first failure stops
// the others and is returned, named; when Run returns, every goroutine it
// started has ended (the steering offers and the consolidations
// included). A gateway runs once.
func (gw *Gateway) Run(ctx context.Context) error {
	group := rungroup.New(ctx)
	restart := make(chan struct{}, 1)
	gw.Core.Restart = func() {
		select {
		case restart <- struct{}{}:
		default:
		}
	}
	group.Go("/restart", func(ctx context.Context) error {
		select {
		case <-restart:
			return ErrRestart
		case <-ctx.Done():
			return nil
		}
	})
	gw.start(group)
	group.Go("the gateway", func(ctx context.Context) error { return gw.Core.KeepStatus(ctx, gw.State.Status) })
	if gw.web != nil {
		lns := gw.listeners
		group.Go("the web chat", func(ctx context.Context) error { return gw.web.Serve(ctx, lns...) })
		gw.listeners = nil // Serve closes them
		gw.log.Info("nb gateway started", "listen", lns[0].Addr().String(), "workspace", gw.Config.Workspace, "config", orDefaultName(gw.Config.Path), "model", gw.Core.Runner.Model())
		if gw.Config.RestrictToWorkspace() {
			if st := gw.Bot.Builtins(); st.Exec != nil {
				gw.log.Info("exec", "status", st.Exec.String())
			}
		}
	}
	<-group.Context().Done()
	if gw.web != nil {
		gw.log.Info("nb gateway stopping")
	}
	return group.Wait()
}

// start runs the loop, the dispatcher, the channels and the background
// work in group.
func (gw *Gateway) start(group *rungroup.Group) {
	g := gw.Core
	group.Go("the gateway", g.Run)
	group.Go("the dispatcher", gw.dispatcher.Run)
	for _, ch := range gw.channels {
		g.Expect(ch.Name())
		name := "channel " + ch.Name()
		if account, ok := gw.accounts[ch.Name()]; ok {
			group.Go(name, func(ctx context.Context) error { return g.RunAccount(ctx, ch, account) })
			continue
		}
		group.Go(name, func(ctx context.Context) error { return g.RunChannel(ctx, ch) })
	}
	for _, p := range gw.background {
		group.Go(p.name, p.run)
	}
}

// ErrRestart is what Run returns when the owner asked for /restart: the
// caller starts the gateway again once Close has released everything
// (nb gateway replaces its process, as nanobot's os.execv).
var ErrRestart = errors.New("restarting (/restart)")

// Close releases what Open opened: the sessions, the bot and its MCP
// servers, the in-process bus, and listeners Run did not serve. The
// Options' values (the store, the replicas' bus) stay their owner's.
func (gw *Gateway) Close() {
	for _, ln := range gw.listeners {
		ln.Close()
	}
	gw.listeners = nil
	if gw.ownBus != nil {
		gw.ownBus.Close()
	}
	if gw.Sessions != nil {
		gw.Sessions.Close()
	}
	gw.Bot.Close()
}

// Reply is a part of the assistant's answer to Chat: a progress note or
// a tool hint while it works (Final false), then the answer.
type Reply struct {
	Kind    bus.Kind
	Content string
	// Streamed is set on progress that repeats the streamed answer so far.
	Streamed bool
}

// Chat is the terminal's conversation with a gateway that is not Run (nb
// gateway chat): it runs the turn loop and the background work (not the
// channels) until ctx ends, and returns ask, which sends text on the
// session cli:direct (or sessionKey) and gives each reply to fn until the
// answer. wait ends the run and waits for every goroutine it started.
func (gw *Gateway) Chat(ctx context.Context, sessionKey string) (ask func(ctx context.Context, text string, fn func(Reply)) error, wait func() error) {
	runCtx, cancel := context.WithCancel(ctx)
	group := rungroup.New(runCtx)
	g := gw.Core
	group.Go("the gateway", g.Run)
	for _, p := range gw.background {
		if p.chat {
			group.Go(p.name, p.run)
		}
	}
	replies := make(chan bus.Outbound, 16)
	group.Go("the terminal", func(ctx context.Context) error {
		return g.Bus.Outbound(ctx, gateway.CLIChannel, func(ctx context.Context, m bus.Outbound) error {
			select {
			case replies <- m:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
	})
	override := ""
	if sessionKey != "cli:direct" {
		override = sessionKey
	}
	ask = func(ctx context.Context, text string, fn func(Reply)) error {
		m := bus.Inbound{Channel: gateway.CLIChannel, SenderID: "user", ChatID: "direct", Content: text, Timestamp: time.Now(), SessionKeyOverride: override}
		if err := g.Inbox(gateway.CLIChannel).Publish(ctx, m); err != nil {
			return err
		}
		for {
			select {
			case r := <-replies:
				streamed, _ := r.Metadata[channel.MetaStreamed].(bool)
				fn(Reply{Kind: r.Kind, Content: r.Content, Streamed: streamed})
				if r.Kind != bus.ToolHint && r.Kind != bus.Progress {
					return nil
				}
			case <-ctx.Done():
				return ctx.Err()
			case <-group.Context().Done():
				return group.Wait()
			}
		}
	}
	wait = func() error {
		cancel()
		return group.Wait()
	}
	return ask, wait
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

func orDefaultName(p string) string {
	if p == "" {
		return "(built-in default)"
	}
	return p
}
