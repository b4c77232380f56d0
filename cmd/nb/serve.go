package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/nbots/nb/bot"
	"github.com/nbots/nb/cmd/nb/cliflag"
	"github.com/nbots/nb/connlimit"
	"github.com/nbots/nb/eventlog/pglog"
	"github.com/nbots/nb/internal/bytesize"
	"github.com/nbots/nb/internal/httpguard"
	"github.com/nbots/nb/internal/metric"
	"github.com/nbots/nb/internal/rungroup"
	"github.com/nbots/nb/provider"
	"github.com/nbots/nb/server"
	"github.com/nbots/nb/server/nanobots"
	"github.com/nbots/nb/server/openaiapi"
)

// isServeCommand tells nb serve from a cartridge named serve
// (nb serve - eval hi).
func isServeCommand(args []string) bool {
	if len(args) == 0 || args[0] != "serve" {
		return false
	}
	if len(args) >= 3 {
		switch args[2] {
		case "eval", "repl", "state", "cartridge":
			return false
		}
	}
	return true
}

// serve runs nb serve [flags] [DIR...] until SIGINT or SIGTERM.
func (a *App) serve(ctx context.Context, args []string) error {
	fs := a.flags("nb serve", "nb serve [flags] [DIR...]", `Serves the cartridges of the folders (default: NANO_BOTS_CARTRIDGES_PATH, else
the cartridges of the current folder) over the Nano Bots API, the
OpenAI-compatible API (/v1: see docs/openai.md) and the agent protocol
(docs/agent-protocol.md). See docs/serve.md.`)
	d := server.DefaultLimits
	var (
		listen      = fs.String("listen", "localhost:3048", "`host:port` to listen on (localhost: both 127.0.0.1 and ::1)")
		token       = fs.String("token", "", "the `token` clients must send as Authorization: Bearer (default NB_SERVE_TOKEN; prefer the variable: a flag shows in the process list)")
		tokensFile  = fs.String("tokens", "", "a tokens `file`: per token, the cartridges it may use and its limits (see docs/serve.md)")
		sandbox     = fs.Bool("force-sandboxed", false, "run every function sandboxed, whatever the cartridges say")
		unsandboxed = fs.Bool("allow-unsandboxed-exec", false, "let cartridges whose exec has sandbox: auto run commands without a sandbox where bubblewrap is missing (by default they fail)")
		yes         = fs.BoolP("yes", "y", false, "run every tool call that asks for a confirmation (an HTTP client cannot give one; by default they are denied)")
		allowTools  = fs.StringSlice("allow-tool", nil, "run the calls of the tool `name` without a confirmation (repeatable, or comma-separated)")
		clientCarts = fs.Bool("client-cartridges", true, "accept whole cartridges sent by clients (they never see the server's environment)")
		clientHosts = fs.StringSlice("client-hosts", nil, "`hosts` (names or addresses; repeatable, or comma-separated) that the providers of cartridges sent by clients may reach although they are not public: loopback, private, link-local")
		origins     = fs.String("cors-origins", strings.Join(server.DefaultOrigins, ","), "without tokens, the `origins` of the browser pages served, comma-separated (* for any page: any site the user visits could then use the server)")
		maxBody     = fs.String("max-body", "4MiB", "largest request `size` (bytes, KiB or MiB)")
		headerTO    = fs.Duration("header-timeout", d.HeaderTimeout, "time to read a request's header")
		bodyTO      = fs.Duration("body-timeout", d.BodyTimeout, "time to read a request's whole body (408 beyond)")
		bodyRate    = fs.String("body-min-rate", "4KiB", "slowest a request body may come, per second, after its first 2 s (`size`; 408 below)")
		clientConns = fs.Int("max-client-conns", d.MaxClientConns, "open connections one client address may hold; more are refused with 429")
		maxConns    = fs.Int("max-conns", d.MaxConns, "open connections in all (at most half the open-file limit); past it the one idle the longest is closed, or new ones wait")
		proxies     = fs.String("trusted-proxies", "", "`addresses` or networks (CIDR, comma-separated) of the reverse proxies in front of the server: only their X-Forwarded-For is believed, and --max-client-conns does not apply to them")
		idleTO      = fs.Duration("idle-timeout", d.IdleTimeout, "how long an idle kept-alive connection stays open")
		runTO       = fs.Duration("run-timeout", d.RunTimeout, "longest run (an evaluation with its tool calls)")
		grace       = fs.Duration("grace", d.Grace, "on SIGTERM, how long runs in flight may finish before they are cancelled")
		maxRuns     = fs.Int("max-runs", d.MaxRuns, "runs in progress at once, on the whole server")
		perToken    = fs.Int("max-runs-per-token", 0, "runs in progress at once per token, those waiting on their client included (0: --max-runs)")
		maxWaiting  = fs.Int("max-waiting-runs", 0, "agent runs waiting on their client (a tool result, a confirmation) at once, which --max-runs does not count (0: 4 × --max-runs)")
		rate        = fs.String("rate", "", "runs NB_SERVE_TOKEN, or clients without a token, may start: `N/second|minute|hour` (default unlimited)")
		watch       = fs.Duration("watch", 2*time.Second, "how often the cartridge folders are checked for changes (0: never)")
		pollHold    = fs.Duration("poll-hold", 250*time.Millisecond, "how long a stream poll waits for new output before answering unchanged (0: never)")
		streamTTL   = fs.Duration("stream-ttl", 10*time.Minute, "how long a finished stream can still be read")
		abandon     = fs.Duration("stream-abandon", 30*time.Second, "cancel a stream nobody has polled for this long (0: never)")
		maxAnswer   = fs.String("max-answer", "64MiB", "most read of one answer of a provider, streamed or not (`size`): a longer one is cut there, and says so")
		streamBytes = fs.String("max-stream-bytes", "256MiB", "most output kept of all the streams together (`size`): beyond it the oldest finished streams are forgotten, then the oldest running ones stopped")
		logLevel    = fs.String("log-level", "info", "debug (every request, polls included), info, warn or error")
		logFormat   = fs.String("log-format", "text", "text or json")
		logMessages = fs.Bool("log-messages", false, "put the text of the messages in the log")
		minionFile  = fs.String("agent-minions", "", "a minion `file` (clippy's format): its agents are served too, on the default cartridge's provider (see docs/agents.md)")
		agentHosts  = fs.StringSlice("agent-hosts", nil, "`hosts` (host or host:port; repeatable, or comma-separated) of remote agent servers that clients may name as minions; their tokens go in --agent-tokens (see docs/serve.md, Hosts)")
		agentTokens = fs.String("agent-tokens", "", "a `file` of remote agent servers' tokens, one `host[:port] token` (or ENV/NAME) per line; its hosts may be named as minions too")
		agentID     = fs.String("agent-id", "", "this server's `id` in the chains of runs across servers (default: random)")
		agentFrame  = fs.String("agent-max-frame", "1MiB", "largest frame a client may send on an agent run (`size`)")
		storeURL    = fs.String("store", "", "the `URL` of the conversation store: "+storeFlagDoc)
		replicaID   = fs.String("replica-id", "", "with a postgres:// --store: this replica's `name` among the replicas that share nb serve's streams, responses and runs (default: the host name and a random suffix)")
		pipeRuns    = fs.String("pipeline-runs", "", "the `folder` of the runs of POST /pipelines (default $XDG_STATE_HOME/nb/pipeline-runs; see docs/pipelines.md)")
		metricsAddr = fs.String("metrics-listen", "", "serve GET /metrics on its own `host:port` instead of the main listener (beyond loopback it needs a token too)")
		replicaDead = fs.Duration("replica-timeout", 10*time.Second, "with a postgres:// --store: how long a replica may go without reaching the database before the others take its running streams and agent runs for lost")
	)
	fs.Old("allow-unconfirmed-tools", "yes")
	if err := fs.Parse(args); err != nil {
		return err
	}
	dirs := fs.Args()
	limits := server.Limits{Limits: connlimit.Limits{HeaderTimeout: *headerTO, BodyTimeout: *bodyTO, IdleTimeout: *idleTO, MaxClientConns: *clientConns, MaxConns: *maxConns},
		RunTimeout: *runTO, Names: serveLimitNames, Grace: *grace, MaxRuns: *maxRuns, MaxRunsPerToken: *perToken, MaxWaitingRuns: *maxWaiting}
	if *grace == 0 {
		limits.Grace = -1
	}
	var err error
	if limits.MaxBody, err = bytesize.Parse(*maxBody); err != nil {
		return &usageError{"--max-body: " + err.Error()}
	}
	answerLimit, err := bytesize.Parse(*maxAnswer)
	if err != nil {
		return &usageError{"--max-answer: " + err.Error()}
	}
	streamLimit, err := bytesize.Parse(*streamBytes)
	if err != nil {
		return &usageError{"--max-stream-bytes: " + err.Error()}
	}
	if limits.BodyMinRate, err = bytesize.Parse(*bodyRate); err != nil {
		return &usageError{"--body-min-rate: " + err.Error()}
	}
	trusted, err := server.ParseProxies(*proxies)
	if err != nil {
		return &usageError{"--trusted-proxies: " + err.Error()}
	}
	anonRate, err := server.ParseRate(*rate)
	if err != nil {
		return &usageError{"--rate: " + err.Error()}
	}
	if *logFormat == "json" {
		// Every line on standard error is then one JSON object.
		defer a.jsonStderr()()
	}
	log, err := cliflag.Logger(a.stderr(), *logLevel, *logFormat)
	if err != nil {
		return &usageError{err.Error()}
	}
	stopTracing, err := cliflag.StartTracing(a.Getenv, Version, log)
	if err != nil {
		return err
	}
	defer stopTracing()

	var tokens []*server.Token
	if *tokensFile != "" {
		if tokens, err = server.LoadTokens(*tokensFile); err != nil {
			return err
		}
	}
	secret, from := *token, "--token"
	if secret == "" {
		secret, from = a.Getenv("NB_SERVE_TOKEN"), "NB_SERVE_TOKEN"
	}
	if secret != "" {
		t, err := server.NewToken("", secret)
		if err != nil {
			return fmt.Errorf("%s: %w", from, err)
		}
		t.Rate = anonRate
		tokens = append(tokens, t)
	}
	if err := httpguard.CheckListen(*listen, len(tokens)); err != nil {
		return fmt.Errorf("refusing to listen on %s without a token: other machines could run your cartridges with your API keys; set NB_SERVE_TOKEN to a secret of %d or more random characters (or pass --tokens FILE), or listen on 127.0.0.1", *listen, httpguard.MinTokenLength)
	}

	if err := a.openStore(ctx, *storeURL); err != nil {
		return err
	}
	defer a.closeStore()
	host := bot.Host{Environ: a.Environ, ForceSandbox: *sandbox, FennelCacheDir: a.fennelCacheDir(), Store: a.sharedStore()}
	host.Builtins.RequireSandbox, host.Builtins.RequireAdvice = !*unsandboxed, unsandboxedAdvice
	if len(dirs) == 0 {
		env := host.CartridgeEnv()
		if strings.TrimSpace(env.CartridgesPath) != "" || strings.TrimSpace(env.CartridgesDirectory) != "" {
			dirs = env.Directories()
			dirs = dirs[:len(dirs)-1] // the variables' folders, not the default one
		} else {
			// A user in a folder of cartridges serves that folder.
			wd, err := os.Getwd()
			if err != nil {
				return fmt.Errorf("the current folder: %w (name the folders to serve: nb serve DIR)", err)
			}
			dirs = []string{wd}
		}
	}
	for _, dir := range dirs {
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			log.Warn("cartridge folder not found: its cartridges appear when it is created", "folder", dir)
		}
	}
	shared, err := a.openServeStore(ctx, *storeURL, pglog.Options{Replica: *replicaID, DeadAfter: *replicaDead, Log: log})
	if err != nil {
		return err
	}
	if shared != nil {
		defer shared.Close()
	}
	var srv *server.Server
	page := &servePage{}
	srv, err = server.New(ctx, server.Options{
		Dirs: dirs, Host: host, Tokens: tokens, AnonymousRate: anonRate, Limits: limits,
		AllowUnconfirmed: *yes, AllowTools: *allowTools, ClientCartridges: *clientCarts, WatchInterval: watchInterval(*watch),
		AllowOrigins: splitList(*origins), OriginAdvice: "start nb serve with --cors-origins %s to allow it, or set NB_SERVE_TOKEN", HostAdvice: "set NB_SERVE_TOKEN to serve other names",
		ClientHosts: *clientHosts, TrustedProxies: trusted,
		Log: log, LogMessages: *logMessages, Checks: a.storeChecks(), Shared: sharedOrNil(shared),
		Metrics: *metricsAddr == "", Control: serveControl(page, tokens),
	})
	if err != nil {
		return err
	}
	page.setServer(srv)
	api := nanobots.New(srv, nanobots.Options{Version: Version, Specification: Specification,
		PollHold: holdOrNone(*pollHold), StreamTTL: *streamTTL, AbandonAfter: holdOrNone(*abandon),
		MaxOutput: answerLimit, StreamBytes: streamLimit})
	defer api.Close()
	responses := openaiapi.New(srv, openaiapi.Options{
		Logger: log, RequestLogger: srv.Logger, Confirmer: srv.Confirmer(), MaxBody: limits.MaxBody,
		Admit: func(ctx context.Context, detached bool) (context.Context, func(), error) {
			run, done, err := srv.Admit(ctx, detached)
			if err != nil {
				return nil, nil, err
			}
			return provider.WithAnswerLimit(run, answerLimit), done, nil
		},
		EndUser: srv.EndUser, Owner: tokenOwner, Shared: srv.Shared(),
	})
	responses.Register(srv)
	page.setResponses(responses)
	closeAgents, err := a.mountAgents(ctx, srv, host, agentOptions{minions: *minionFile, hosts: *agentHosts, tokens: *agentTokens, id: *agentID, maxFrame: *agentFrame, mounted: page.setAgents})
	if err != nil {
		srv.Close()
		return err
	}
	defer closeAgents()
	closePipelines, err := a.mountPipelines(ctx, srv, host, *storeURL, *pipeRuns, *replicaDead, log)
	if err != nil {
		srv.Close()
		return err
	}
	defer closePipelines()

	lns, err := server.Listen(*listen)
	if err != nil {
		srv.Close()
		return listenAdvice(err)
	}
	metric.Up(metric.Serve)
	metric.SetSource("serve")
	if *metricsAddr != "" {
		if _, err := metric.Listen(ctx, *metricsAddr, metric.Tokens(tokens), func(err error) { log.Error("metrics listener", "error", err) }); err != nil {
			srv.Close()
			return fmt.Errorf("--metrics-listen: %w", err)
		}
	}
	models := srv.Models(ctx)
	broken := 0
	for _, m := range models {
		if m.Err != nil {
			broken++
		}
	}
	addrs := make([]string, len(lns))
	for i, ln := range lns {
		addrs[i] = "http://" + ln.Addr().String()
	}
	log.Info("serving", "cartridges", len(models), "failed", broken, "folders", strings.Join(dirs, ":"),
		"listen", strings.Join(addrs, " "), "tokens", len(tokens), "store", a.storeName())
	fmt.Fprintf(a.stderr(), "nb: serving %s on %s (Ctrl-C stops)\n", served(models, dirs), strings.Join(addrs, " and "))
	// The server runs in the group of the shared store's heartbeat: a
	// failure of either stops the other, and serve returns once both
	// have (the server's own errors as they are: it names its parts).
	gctx, stop := context.WithCancel(ctx)
	defer stop()
	group := rungroup.New(gctx)
	if shared != nil {
		group.Go("the shared store's heartbeat", shared.Run)
	}
	err = srv.Serve(group.Context(), lns...)
	stop()
	if gerr := group.Wait(); err == nil {
		err = gerr
	}
	return err
}

// served says what nb serve serves: "2 cartridges of /srv/carts, and
// the default cartridge", "1 cartridge of ...", "no cartridges of ...
// (only the default cartridge)", with those that failed to load.
func served(models []server.Model, dirs []string) string {
	n, broken, def := 0, 0, false
	for _, m := range models {
		if m.ID == server.DefaultID {
			def = true
			continue
		}
		n++
		if m.Err != nil {
			broken++
		}
	}
	count := fmt.Sprintf("%d cartridges", n)
	switch n {
	case 0:
		count = "no cartridges"
	case 1:
		count = "1 cartridge"
	}
	s := count + " of " + strings.Join(dirs, ", ")
	if broken > 0 {
		s += fmt.Sprintf(" (%d failed to load: see the log)", broken)
	}
	switch {
	case def && n == 0:
		s += " (only the default cartridge)"
	case def:
		s += ", and the default cartridge,"
	}
	return s
}

// splitList reads a comma-separated flag; "" is an empty list.
func splitList(s string) []string {
	out := []string{}
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

// watchInterval maps --watch 0 to "never".
func watchInterval(d time.Duration) time.Duration {
	if d <= 0 {
		return -1
	}
	return d
}

// holdOrNone maps a flag's 0 to the option's "none" (negative).
func holdOrNone(d time.Duration) time.Duration {
	if d <= 0 {
		return -1
	}
	return d
}

// serveCommand runs nb serve with SIGINT and SIGTERM as its stop.
func (a *App) serveCommand(args []string) int {
	return a.report(a.serve(a.context(), args))
}

// tokenOwner is who owns what the OpenAI API keeps for a request (stored
// responses, the server's part of tool rounds): its token.
func tokenOwner(r *http.Request) string {
	return server.Owner(r.Context())
}

// listenAdvice words server.Listen's failure to take an address for
// nb serve: the address comes from --listen.
func listenAdvice(err error) error {
	if be := (*server.BindError)(nil); errors.As(err, &be) {
		return fmt.Errorf("%w; choose another address with --listen", err)
	}
	return err
}

// unsandboxedAdvice says how nb serve (and nb gateway) let exec run
// commands where bubblewrap cannot: the flag the library does not know.
const unsandboxedAdvice = "start the server with --allow-unsandboxed-exec"

// serveLimitNames are nb serve's flags for the server's limits, quoted in
// its refusals.
var serveLimitNames = server.LimitNames{RunTimeout: "--run-timeout", MaxBody: "--max-body", BodyMinRate: "--body-min-rate", BodyTimeout: "--body-timeout",
	Rate: "--rate", ClientHosts: "nb serve --client-hosts", AllowTool: "start nb serve with --allow-tool NAME or --yes",
	Conns: "start nb serve with a higher --max-client-conns (or name your proxy with --trusted-proxies)"}
