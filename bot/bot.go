// Package bot builds a runnable bot from a cartridge: the provider with
// its retries, the script runtime, the tool set (the cartridge's
// functions, robopages and MCP servers' tools), where its conversations are kept and who is
// asked before a tool runs. Every front-end (the terminal, nb serve, the
// MCP server, the chat gateway) builds and runs bots through it the same
// way. A Bot is safe to share: many exchanges, for many end users and
// state keys, run on it at once, each with its own sandboxed scripts,
// events and confirmations; an exchange on a state key holds the key.
//
// Nothing here reads the process environment, writes to the terminal or
// exits: the Host says what the process lends, and each Exchange where
// its events, confirmations and script output go.
package bot

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/nbots/nb/agent"
	"github.com/nbots/nb/builtin"
	"github.com/nbots/nb/cartridge"
	"github.com/nbots/nb/internal/metric"
	"github.com/nbots/nb/mcp"
	"github.com/nbots/nb/media"
	"github.com/nbots/nb/provider"
	"github.com/nbots/nb/provider/instrument"
	"github.com/nbots/nb/robopage"
	"github.com/nbots/nb/script"
	"github.com/nbots/nb/state"
	"github.com/nbots/nb/tool"
	"github.com/nbots/nb/tool/function"
)

// Bot is a cartridge made runnable.
type Bot struct {
	Cartridge *cartridge.Cartridge

	host     Host
	provider provider.Provider
	// config, labels and retry made provider; models are the providers
	// of the other models managed sub-agents were given (providerFor).
	config  provider.Config
	labels  metric.ProviderLabels
	retry   provider.RetryPolicy
	models  map[string]provider.Provider
	tools   *tool.Set
	scripts *script.Runtime
	store   state.Store
	budget  int
	// limits are the cartridge's bounds of an exchange (rounds, tokens,
	// loop window, tools' output), read once: the cartridge does not
	// change.
	limits  exchangeLimits
	mcp     *mcp.Clients
	closers []func() error
	// ready is Ready's answer for each mode, found once: the cartridge
	// does not change, and a server asks before every exchange.
	ready map[cartridge.Mode]error

	// own are the cartridge's functions and robopages; builtins says how
	// its built-in tools run; spawns is set when they include spawn.
	own      []tool.Tool
	builtins builtin.Status
	// context is the cartridge's context key (see projectContext).
	context cartridge.ContextSettings
	spawns  bool
	// spawnDepth is builtins.spawn.max-depth (0 without sub-agents);
	// agentModels are the models a managed sub-agent may be given
	// (builtins.spawn.models and the cartridge's own; nil: any).
	spawnDepth  int
	agentModels []string
	mu          sync.Mutex
	depths      map[int]*tool.Set // sub-agents' tool sets
}

// New builds the bot of c: its provider (with retries), scripts and
// tools (functions, robopages, MCP servers' tools, built-in tools). It
// fails, before anything is sent, on what would stop every exchange: no
// usable provider, a missing credential (naming the variable to set), a
// robopages folder that cannot be read, a mistake in the mcp key, a
// built-in tools' workspace that does not exist. It starts the
// cartridge's MCP servers (those that fail are reported through the
// host's Warn and left out); ctx bounds their start (an interrupted build
// stops them and returns ctx's error), and they run until Close.
func New(ctx context.Context, c *cartridge.Cartridge, h Host) (*Bot, error) {
	if err := c.RequireProvider(); err != nil {
		return nil, err
	}
	p := c.Provider()
	limits, err := c.Timeouts()
	if err != nil {
		return nil, err
	}
	cfg := provider.Config{ID: p.ID, Credentials: p.Credentials, Options: p.Options, Settings: p.Settings, HTTPClient: h.HTTPClient,
		Timeouts: provider.Timeouts(limits), Getenv: h.Getenv, AllowHostCredentials: h.AllowHostCredentials}
	prov, err := provider.New(cfg)
	if err != nil {
		return nil, credentialError(c, err)
	}
	policy := provider.DefaultRetryPolicy()
	if h.Retry != nil {
		policy = *h.Retry
	}
	ml := h.Metrics
	if ml.Model == "" {
		ml.Model = p.Model()
	}
	policy.OnRetry = metric.OnRetry(policy.OnRetry, p.ID, ml.Cartridge)
	b := &Bot{
		Cartridge: c,
		host:      h,
		provider:  instrumented(prov, cfg, ml, policy),
		labels:    ml,
		config:    cfg,
		retry:     policy,
		tools:     &tool.Set{},
		store:     h.StateStore(c),
		budget:    agent.Budget(c, h.historyBudget()),
		limits:    exchangeLimits{rounds: agent.MaxRounds(c), tokens: agent.MaxTokens(c), loops: agent.LoopWindow(c), tools: agent.ToolLimits(c)},
	}
	b.scripts = script.New(script.Options{
		Sandboxed: c.Sandboxed() || h.ForceSandbox, FennelCacheDir: h.FennelCacheDir, Environ: h.Environ,
		Limits: functionLimits(c, h),
	})
	if err := checkScripts(c, b.scripts); err != nil {
		return nil, err
	}
	b.own = function.FromCartridge(c, b.scripts)
	robo, err := robopageTools(ctx, c, h)
	if err != nil {
		return nil, err
	}
	b.own = append(b.own, robo...)
	for _, t := range b.own {
		b.tools.Add(t)
	}
	if err := b.startMCP(ctx); err != nil {
		return nil, err
	}
	if err := b.addBuiltins(); err != nil {
		b.Close()
		return nil, err
	}
	if b.context, err = contextSettings(c); err != nil {
		b.Close()
		return nil, err
	}
	b.ready = map[cartridge.Mode]error{cartridge.Eval: b.check(cartridge.Eval), cartridge.REPL: b.check(cartridge.REPL)}
	return b, nil
}

// ToolsOf builds the tools of a cartridge (its functions and robopages)
// without a provider: the tools a client lends to a remote agent.
func ToolsOf(ctx context.Context, c *cartridge.Cartridge, h Host) (*tool.Set, error) {
	set := &tool.Set{}
	scripts := script.New(script.Options{
		Sandboxed: c.Sandboxed() || h.ForceSandbox, FennelCacheDir: h.FennelCacheDir, Environ: h.Environ,
		Limits: functionLimits(c, h),
	})
	if err := checkScripts(c, scripts); err != nil {
		return nil, err
	}
	for _, t := range function.FromCartridge(c, scripts) {
		set.Add(t)
	}
	robo, err := robopageTools(ctx, c, h)
	if err != nil {
		return nil, err
	}
	for _, t := range robo {
		set.Add(t)
	}
	return set, nil
}

// startMCP starts the servers of the cartridge's mcp key and adds their
// tools, after the cartridge's functions and robopages (which keep their
// names on a clash) and before the built-in tools (which give way to
// them, as to the cartridge's other tools).
func (b *Bot) startMCP(ctx context.Context) error {
	c, h := b.Cartridge, b.host
	servers, err := c.MCP(h.LookupEnv)
	if err != nil || len(servers) == 0 {
		return err
	}
	if !h.AllowMCP {
		return fmt.Errorf("%s:%d: mcp: this host does not start MCP servers for this cartridge (they run programs on its machine)", DisplayPath(c), c.Line("mcp"))
	}
	dir := ""
	if c.Path != "" {
		dir = filepath.Dir(c.Path)
	}
	clients, err := mcp.Start(ctx, mcp.Options{Servers: servers, Environ: h.Environ, Dir: dir, Warn: h.Warn, Stderr: h.MCPStderr})
	if err != nil {
		return err
	}
	b.mcp = clients
	b.closers = append(b.closers, clients.Close)
	for _, t := range clients.Tools() {
		// A tool set lets a later tool replace an earlier one of the same
		// name: the cartridge's own tool keeps it.
		if _, taken := b.tools.Lookup(t.Spec().Name); taken {
			h.warn(fmt.Sprintf("%s: the MCP tool %s is not offered: the cartridge has a tool of the same name", DisplayPath(c), t.Spec().Name))
			continue
		}
		b.tools.Add(t)
		// Sub-agents get them too, as the cartridge's other tools.
		b.own = append(b.own, t)
	}
	return nil
}

// MCP describes the cartridge's MCP servers (for nb CART - mcp), each
// tool under the name the model sees in this bot's tool set.
func (b *Bot) MCP() []mcp.Status {
	st := b.mcp.Status()
	wire := map[tool.Tool]string{}
	specs := b.tools.Specs()
	for i, t := range b.tools.Tools() {
		if _, ok := t.(*mcp.Tool); ok {
			wire[t] = specs[i].Name
		}
	}
	for _, t := range b.mcp.Tools() {
		mt := t.(*mcp.Tool)
		for i := range st {
			for j := range st[i].Tools {
				if st[i].Name == mt.Server() && st[i].Tools[j].Remote == mt.Remote() {
					if name, ok := wire[t]; ok {
						st[i].Tools[j].Name = name
					} else {
						st[i].Tools[j].Name = "" // not offered: a cartridge tool has its name
					}
				}
			}
		}
	}
	return st
}

// functionLimits are the limits of the cartridge's functions: its own
// (safety.functions.limits) where it sets them. A host that forces the
// sandbox (a server running a cartridge a client sent) lets a cartridge
// lower the sandbox's defaults, never raise them.
func functionLimits(c *cartridge.Cartridge, h Host) script.Limits {
	fl := c.FunctionLimits()
	l := script.Limits{CPU: script.CPUUnits(fl.CPUSeconds), Memory: fl.Memory, Timeout: fl.Timeout}
	if h.ForceSandbox {
		d := script.DefaultLimits()
		l.CPU, l.Memory, l.Timeout = lowest(l.CPU, d.CPU), lowest(l.Memory, d.Memory), lowest(l.Timeout, d.Timeout)
	}
	return l
}

// lowest is the smaller of a set limit and a default; 0 is "not set".
func lowest[T uint64 | time.Duration](set, def T) T {
	if set == 0 || def < set {
		return def
	}
	return set
}

// feedbackParams are the names in scope of a tool feedback adapter.
var feedbackParams = []string{"id", "name", "parameters", "parameters-as-json", "output"}

// checkScripts compiles every function and adapter of the cartridge, so a
// mistake is reported when the cartridge loads, at its line in the file,
// rather than when the model first calls the tool.
func checkScripts(c *cartridge.Cartridge, rt *script.Runtime) error {
	var errs []error
	seen := map[string]bool{}
	check := func(src *cartridge.Source, names ...string) {
		if src == nil || src.Lang == "" {
			return
		}
		key := fmt.Sprint(src.File, src.Line, src.Lang, src.Code)
		if seen[key] {
			return
		}
		seen[key] = true
		if err := rt.Check(function.Source(*src), names...); err != nil {
			errs = append(errs, err)
		}
	}
	for _, def := range c.Tools() {
		check(&def.Source, "parameters")
	}
	for _, mode := range []cartridge.Mode{cartridge.Eval, cartridge.REPL} {
		for _, dir := range []string{"input", "output"} {
			src, _ := c.Adapter(mode, dir) // a conflict is reported by Ready
			check(src, "content")
		}
		for _, action := range []cartridge.ToolAction{cartridge.Confirming, cartridge.Executing, cartridge.Responding} {
			src, _ := c.FeedbackAdapter(mode, action)
			check(src, feedbackParams...)
		}
	}
	return errors.Join(errs...)
}

// Close stops what the bot started (tool servers); exchanges in progress
// fail.
func (b *Bot) Close() error {
	var errs []error
	for _, c := range b.closers {
		errs = append(errs, c())
	}
	b.closers = nil
	return errors.Join(errs...)
}

// Tools are the tools the bot offers its model.
func (b *Bot) Tools() *tool.Set { return b.tools }

// Provider is the bot's provider, with its retries.
func (b *Bot) Provider() provider.Provider { return b.provider }

// Host is what the bot was built with.
func (b *Bot) Host() Host { return b.host }

// Ready reports, before anything is sent, what would stop an exchange in
// mode: adapters the cartridge defines twice.
func (b *Bot) Ready(mode cartridge.Mode) error {
	if err, ok := b.ready[mode]; ok {
		return err
	}
	return b.check(mode)
}

func (b *Bot) check(mode cartridge.Mode) error {
	for _, dir := range []string{"input", "output"} {
		if _, err := b.Cartridge.Adapter(mode, dir); err != nil {
			return err
		}
	}
	for _, action := range []cartridge.ToolAction{cartridge.Confirming, cartridge.Executing, cartridge.Responding} {
		if _, err := b.Cartridge.FeedbackAdapter(mode, action); err != nil {
			return err
		}
	}
	return nil
}

// Exchange is one exchange, all a front-end says about it: for whom, on
// which conversation, where it reports, what the client adds to the
// bot's tools and settings, and how the model works towards the answer.
// Every front-end runs one through Ask, Boot or Continue, the one path
// that opens its conversation, builds its agent and contains its panics.
type Exchange struct {
	// Mode is eval or repl (the cartridge's interfaces differ by mode).
	Mode cartridge.Mode
	// Key is the state key: the conversation is kept in the state store
	// and the exchange holds the key while it runs. "" is stateless.
	Key string
	// Conversation, when set, is used instead of Key: a stateless REPL's
	// memory, or the whole conversation a client sent.
	Conversation agent.Conversation
	// EndUser is who the exchange is for (a server's client); "" takes
	// the host's. A cartridge's provider.settings.user wins.
	EndUser string
	// Wait says whether an exchange on a busy key waits for it (with a
	// Waiting event) or fails at once with a *BusyError.
	Wait bool
	// OnEvent receives the exchange's events; nil drops them.
	OnEvent func(agent.Event)
	// Confirmer decides whether a tool may run; nil denies every call
	// that needs a confirmation.
	Confirmer agent.Confirmer
	// Output receives what the cartridge's scripts print; nil discards it.
	Output io.Writer
	// ToolFilter, when set, keeps the bot's tools it says yes to (the
	// tool_names of a minion file's agent); the exchange's own Tools are
	// all kept.
	ToolFilter func(tool.Tool) bool
	// Tools are added, for this exchange only, to the bot's (a websocket
	// client's own tools); External are offered but run by the client
	// (see agent.Agent.External).
	Tools    []tool.Tool
	External []tool.Spec
	// Start, when set, is called once the exchange is ready to run, with
	// the tools its model is offered, before anything is sent: an error
	// stops the exchange (an agent that lacks a tool it requires).
	Start func(tools *tool.Set) error
	// System is the client's system text, sent after the cartridge's
	// directive and instruction (see agent.Agent.System).
	System string
	// Override changes the cartridge's provider settings for this
	// exchange: a client's sampling settings, or an agent client's
	// parameters (see provider.Override).
	Override *provider.Override
	// Stop are stop sequences (see agent.Agent.Stop).
	Stop []string
	// Whole asks for the answer in one piece (see agent.Agent.Whole).
	Whole bool
	// Steering is asked after each round of tool calls for messages to
	// inject (see agent.Agent.Steering).
	Steering func() []string
	// SteerFirst asks Steering before the first request too (see
	// agent.Agent.SteerFirst).
	SteerFirst bool
	// Budget, when positive, is this exchange's history budget
	// (estimated tokens) instead of the cartridge's (state.budget).
	Budget int
	// Structured asks for an answer that is one JSON value following a
	// schema (see agent.Agent.Structured); Check reads the answer and may
	// have the model answer once more (see agent.Agent.Check).
	Structured *provider.OutputSchema
	Check      func(answer string) (complaint string)
	// Loop is how the model works towards the answer: functions (the
	// default), react or plan (see agent.Loop). MaxTasks and OnPlan are
	// a planner's budget and observer (see agent.Agent).
	Loop     agent.Loop
	MaxTasks int
	OnPlan   func(agent.Plan)

	// agents runs the managed sub-agents the exchange starts; workspace
	// is the folder its tools work in ("" for the cartridge's), model
	// the model it asks ("" for the cartridge's) and rounds its round
	// limit (0 for the cartridge's): a managed sub-agent's.
	agents    *agentManager
	workspace string
	model     string
	rounds    int

	// project is the exchange's project context (environment block and
	// instructions), gathered once for the exchange and its sub-agents:
	// the git summary runs git twice.
	project func() string
}

// exchangeLimits are a cartridge's bounds of one exchange (see agent.Agent's
// MaxRounds, MaxTokens, LoopWindow and ToolLimits; shared read-only).
type exchangeLimits struct {
	rounds, tokens, loops int
	tools                 map[string]cartridge.ToolLimit
}

// BusyError says a state key is held by another exchange.
type BusyError struct{ Key string }

func (e *BusyError) Error() string {
	return fmt.Sprintf("state key %q is busy: another exchange is running on it; try again when it has finished", e.Key)
}

// PanicError is a failure of nb itself inside one exchange: the exchange
// fails, the process and the other exchanges go on.
type PanicError struct {
	Value any
	Stack []byte
}

func (e *PanicError) Error() string {
	return fmt.Sprintf("internal error in nb (please report it): %v", e.Value)
}

// Ask runs one exchange: input (with images, for providers that take
// them), then the model's rounds until it answers.
func (b *Bot) Ask(ctx context.Context, x Exchange, input string, images ...media.Image) (*agent.Result, error) {
	return b.run(ctx, x, func(a *agent.Agent) (*agent.Result, error) { return a.Ask(ctx, input, images...) })
}

// Boot runs the cartridge's boot exchange (a REPL's start); it returns
// nil, nil when the cartridge has none.
func (b *Bot) Boot(ctx context.Context, x Exchange) (*agent.Result, error) {
	return b.run(ctx, x, func(a *agent.Agent) (*agent.Result, error) { return a.Boot(ctx) })
}

// Continue runs the model's rounds on the conversation as it is: a
// client recorded the results of the calls an exchange left pending.
func (b *Bot) Continue(ctx context.Context, x Exchange) (*agent.Result, error) {
	return b.run(ctx, x, func(a *agent.Agent) (*agent.Result, error) { return a.Continue(ctx) })
}

// HasBoot reports whether the cartridge has a boot exchange.
func (b *Bot) HasBoot() bool {
	return strings.TrimSpace(b.Cartridge.Behavior("boot").Instruction) != ""
}

// toolsFor is the tool set of exchange x: the bot's (those x's
// ToolFilter keeps), its spawn tool bound to x, and x's own tools.
func (b *Bot) toolsFor(x Exchange) *tool.Set {
	tools := b.tools
	if x.ToolFilter != nil {
		tools = &tool.Set{}
		for _, t := range b.tools.Tools() {
			if x.ToolFilter(t) {
				tools.Add(t)
			}
		}
	}
	if b.spawns {
		tools = b.bindSpawn(tools, x, 0)
	}
	if len(x.Tools) > 0 {
		set := tools.Clone()
		for _, t := range x.Tools {
			set.Add(t)
		}
		tools = set
	}
	return tools
}

// agent is the agent of exchange x on conv with tools: the bot's shared
// parts and the exchange's own.
func (b *Bot) agent(x Exchange, conv agent.Conversation, tools *tool.Set) (*agent.Agent, error) {
	prov, err := b.providerFor(x.model)
	if err != nil {
		return nil, err
	}
	onEvent := x.OnEvent
	if b.host.EventLog != nil {
		onEvent = func(ev agent.Event) {
			b.host.logEvent(ev)
			if x.OnEvent != nil {
				x.OnEvent(ev)
			}
		}
	}
	a := &agent.Agent{
		Cartridge: b.Cartridge, Mode: x.Mode, Provider: prov, Tools: tools, External: x.External, System: x.System, Override: x.Override, Stop: x.Stop, Whole: x.Whole,
		Scripts: b.scripts, Confirmer: warned(x.Confirmer, tools), Conversation: conv, OnEvent: onEvent, Output: x.Output,
		Steering: x.Steering, SteerFirst: x.SteerFirst, MaxRounds: b.limits.rounds, MaxTokens: b.limits.tokens, LoopWindow: b.limits.loops, Budget: b.budget, Limits: agent.DefaultTruncation(), ToolLimits: b.limits.tools,
		Structured: x.Structured, Check: x.Check, Loop: x.Loop, MaxTasks: x.MaxTasks, OnPlan: x.OnPlan,
	}
	if x.Budget > 0 {
		a.Budget = x.Budget
	}
	if x.rounds > 0 && x.rounds < a.MaxRounds {
		a.MaxRounds = x.rounds
	}
	a.Context = b.projectContext(x, tools)
	if _, ok := b.Cartridge.Get("provider", "settings", "user"); ok {
		// OpenAI's user field carries an opaque identifier, never the name.
		a.User = state.NewCipher(b.host.Password()).Soft(b.host.EndUser(b.Cartridge, x.EndUser))
	}
	if prov != b.provider {
		a.Model = x.model
	}
	return a, nil
}

// run prepares the conversation of x, runs fn on the exchange's agent,
// and contains a panic as the exchange's error, with its stack.
func (b *Bot) run(ctx context.Context, x Exchange, fn func(*agent.Agent) (*agent.Result, error)) (res *agent.Result, err error) {
	defer func() {
		if p := recover(); p != nil {
			res, err = nil, &PanicError{Value: p, Stack: debug.Stack()}
		}
	}()
	if err := b.Ready(x.Mode); err != nil {
		return nil, err
	}
	conv := x.Conversation
	if conv == nil && x.Key != "" {
		stored, err := b.Conversation(x.EndUser, x.Key)
		if err != nil {
			return nil, err
		}
		var onBusy func()
		if x.Wait {
			onBusy = func() {
				if x.OnEvent != nil {
					x.OnEvent(agent.Event{Kind: agent.Waiting, Text: fmt.Sprintf("another exchange is running on state key %q: waiting for it to finish", x.Key)})
				}
			}
		}
		turn, err := stored.Begin(ctx, onBusy)
		if errors.Is(err, state.ErrBusy) {
			return nil, &BusyError{Key: x.Key}
		}
		if err != nil {
			return nil, err
		}
		defer turn.End()
		conv = turn
	}
	if conv == nil {
		conv = agent.NewMemory()
	}
	x.project = sync.OnceValue(func() string { return gather(b.Cartridge, b.context, b.builtins).Text() })
	if b.spawns {
		// Managed sub-agents live as long as the exchange: aborting it
		// stops them; when it ends, the ones still running are closed.
		// They and the exchange ask the same user, one question at a time.
		x.Confirmer = serial(x.Confirmer)
		x.agents = newAgentManager(ctx, b, x, 0)
		defer x.agents.close()
	}
	a, err := b.agent(x, conv, b.toolsFor(x))
	if err != nil {
		return nil, err
	}
	if x.Start != nil {
		if err := x.Start(a.Tools); err != nil {
			return nil, err
		}
	}
	return fn(a)
}

// providerFor is the provider of the cartridge for model: its own for
// "" or the cartridge's model, else (a managed sub-agent's model, and
// its own sub-agents') the same provider, configuration and retries,
// built once per model.
func (b *Bot) providerFor(model string) (provider.Provider, error) {
	if model == "" || model == agent.Model(b.Cartridge) {
		return b.provider, nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if p, ok := b.models[model]; ok {
		return p, nil
	}
	cfg := b.config
	cfg.Settings, cfg.Options = maps.Clone(cfg.Settings), maps.Clone(cfg.Options)
	if _, ok := cfg.Options["model"]; ok && cfg.Settings["model"] == nil {
		cfg.Options["model"] = model
	} else {
		if cfg.Settings == nil {
			cfg.Settings = map[string]any{}
		}
		cfg.Settings["model"] = model
	}
	p, err := provider.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("the model %q: %w", model, err)
	}
	if b.models == nil {
		b.models = map[string]provider.Provider{}
	}
	ml := b.labels
	ml.Model = model
	b.models[model] = instrumented(p, cfg, ml, b.retry)
	return b.models[model], nil
}

// instrumented is every provider a bot calls (the cartridge's, and the
// model a sub-agent is given): counted in nb's metrics, traced, retried.
func instrumented(p provider.Provider, cfg provider.Config, ml metric.ProviderLabels, policy provider.RetryPolicy) provider.Provider {
	return provider.WithRetry(instrument.Provider(p, cfg, ml), policy)
}

// StateStore keeps the bot's conversations.
func (b *Bot) StateStore() state.Store { return b.store }

// Conversation is the stored conversation of one key for an end user
// ("" for the host's).
func (b *Bot) Conversation(endUser, key string) (state.Conversation, error) {
	return b.store.Open(StateBot(b.Cartridge), b.host.EndUser(b.Cartridge, endUser), key)
}

// robopageTools loads the tools a cartridge's robopages key names
// (paths relative to the cartridge's folder; ~ and $VAR expanded with the
// host's environment), run by the host's executor. Broken pages are
// skipped; their problems are warnings.
func robopageTools(ctx context.Context, c *cartridge.Cartridge, h Host) ([]tool.Tool, error) {
	refs := c.Robopages()
	if len(refs) == 0 {
		return nil, nil
	}
	var out []tool.Tool
	base := ""
	if c.Path != "" {
		base = filepath.Dir(c.Path)
	}
	ex := h.Robopages
	if ex == nil {
		ex = robopage.NewExecutor(h.Environ)
	}
	for _, ref := range refs {
		tools, problems, err := robopage.LoadTools(ctx, robopage.ResolvePath(ref.Path, base, h.Environ), ref.Filter, ex)
		if errors.Is(err, robopage.ErrNoPages) {
			return nil, fmt.Errorf("%s:%d: robopages: %w: fix its `path` in the cartridge (a relative path starts at the cartridge's folder)", DisplayPath(c), ref.Line, err)
		}
		if err != nil {
			return nil, fmt.Errorf("%s:%d: robopages: %w", DisplayPath(c), ref.Line, err)
		}
		for _, p := range problems {
			if p.Severity == robopage.Error {
				h.warn(fmt.Sprintf("robopage skipped: %v", p))
			} else {
				h.warn(fmt.Sprintf("robopage: %v", p))
			}
		}
		out = append(out, tools...)
	}
	return out, nil
}

// DisplayPath names a cartridge in messages.
func DisplayPath(c *cartridge.Cartridge) string {
	if c.Path == "" {
		return "default cartridge (-)"
	}
	return c.Path
}

// credentialError names the variable behind a missing credential.
func credentialError(cart *cartridge.Cartridge, err error) error {
	var me *provider.MissingCredentialError
	if !errors.As(err, &me) {
		return fmt.Errorf("%s: %w", DisplayPath(cart), err)
	}
	key := "provider.credentials." + me.Key
	line := cart.Line(key)
	if line == 0 {
		line = cart.Line("provider")
	}
	if cart.Path == "" {
		line = 0 // a line of the built-in default cartridge means nothing to the user
	}
	loc := DisplayPath(cart)
	if line > 0 {
		loc = fmt.Sprintf("%s:%d", loc, line)
	}
	raw := cart.RawString("provider", "credentials", me.Key)
	if v, ok := cart.MissingFor(key); ok {
		return fmt.Errorf("%s: %s is %s, but the environment variable %s is not set: export it, or put it in a .env file", loc, key, raw, v)
	}
	if v, ok := cartridge.EnvVar(raw); ok {
		return fmt.Errorf("%s: %s is %s, but the environment variable %s is empty: export it, or put it in a .env file", loc, key, raw, v)
	}
	return fmt.Errorf("%s: %s is needed by the %s provider but is not set in the cartridge", loc, key, me.Provider)
}
