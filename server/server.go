// Package server is the HTTP core of nb serve: it serves the bots of a
// catalog (package catalog: the cartridges of its folders, one bot each,
// kept up to date as files change) within the limits of an admission
// (package admission), and puts every front-end (the Nano Bots API in
// server/nanobots, the OpenAI-compatible API in server/openaiapi, the agent
// protocol) behind the same tokens, limits, logs, CORS and graceful
// shutdown. It maps the catalog's and the admission's errors to HTTP.
//
// A front-end is an http.Handler mounted with Handle. It reaches the
// served bots through the catalog, which honours the request's token:
//
//	Models(ctx) []Model                      // the cartridges the token may use, sorted by id
//	Model(ctx, id) (Model, error)            // one of them, for listings
//	Bot(ctx, id) (*bot.Bot, error)           // its bot, held until the request ends
//	ClientBot(ctx, src) (*bot.Bot, error)    // a bot for a cartridge the client sent
//	Admit(ctx, detached) (ctx, done, error)  // one run: concurrency, rate, deadline
//	Handle(pattern, handler)                 // mount a front-end's route
//
// Errors of the catalog and of Admit are *Error and implement
// StatusCode() int (403, 404, 429, 500); WriteError answers with any
// error in the shape of the request's route family. Each exchange a
// front-end runs takes its EndUser and its Confirmer from the server.
package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nbots/nb/admission"
	"github.com/nbots/nb/agent"
	"github.com/nbots/nb/bot"
	"github.com/nbots/nb/catalog"
	"github.com/nbots/nb/connlimit"
	"github.com/nbots/nb/eventlog"
	"github.com/nbots/nb/internal/httpguard"
	"github.com/nbots/nb/internal/metric"
	"github.com/nbots/nb/internal/rungroup"
	"github.com/nbots/nb/proc"
	"github.com/nbots/nb/tool"
)

// Limits bound what clients may ask of the server. Zero values take the
// defaults (DefaultLimits).
type Limits struct {
	// Limits are the connections' limits, every listener's (nb gateway's
	// too): the header, idle and body deadlines, the body's size and pace,
	// the connections per address and in all (see connlimit.Limits). A new
	// connection past MaxConns closes the one idle the longest; a trusted
	// proxy's connections are bounded by MaxConns only.
	connlimit.Limits
	// MaxRuns bounds the runs in progress on the server.
	MaxRuns int
	// MaxRunsPerToken bounds the runs in progress per token (a token's
	// own MaxRuns wins), those waiting on their client included; 0 is
	// MaxRuns.
	MaxRunsPerToken int
	// MaxWaitingRuns bounds the runs waiting on their client (an agent
	// protocol run waiting for a tool result or a confirmation), which do
	// not count in MaxRuns; 0 is 4 × MaxRuns.
	MaxWaitingRuns int
	// RunTimeout bounds one run, tool calls included (504 beyond).
	RunTimeout time.Duration
	// Grace is how long runs in flight may finish after a shutdown
	// begins, before they are cancelled; negative is none.
	Grace time.Duration
	// Names are the names the operator sets these limits by, quoted in
	// the messages that report one reached.
	Names LimitNames
}

// LimitNames are the names the operator sets the limits by (the flags of
// the command that runs the server: the library knows none), quoted in
// the messages that report a limit reached; an empty name is left out.
type LimitNames struct {
	// RunTimeout names Limits.RunTimeout; MaxBody, BodyMinRate and
	// BodyTimeout the body's limits ("--max-body").
	RunTimeout, MaxBody, BodyMinRate, BodyTimeout string
	// Rate names Options.AnonymousRate ("--rate").
	Rate string
	// Conns says how to let a client open more connections (a
	// sentence, told to the refused client); ClientHosts names what
	// lets a client's cartridge reach another host (said after "the
	// operator may allow this host with"); AllowTool says how to let a
	// tool that asks for a confirmation run (after "or", in the log).
	Conns, ClientHosts, AllowTool string
}

// orName is ", or name" when the limit has a name.
func orName(name string) string {
	if name == "" {
		return ""
	}
	return ", or " + name
}

// named is text, with the limit's name after it when it has one.
func named(text, name string) string {
	if name == "" {
		return text
	}
	return text + " (" + name + ")"
}

// DefaultLimits are the limits of a server that sets none.
var DefaultLimits = Limits{
	Limits:     connlimit.DefaultLimits,
	MaxRuns:    64,
	RunTimeout: 10 * time.Minute,
	Grace:      30 * time.Second,
}

func (l Limits) withDefaults() Limits {
	d := DefaultLimits
	l.Limits = l.Limits.WithDefaults()
	if l.MaxRuns <= 0 {
		l.MaxRuns = d.MaxRuns
	}
	if l.MaxRunsPerToken <= 0 {
		l.MaxRunsPerToken = l.MaxRuns
	}
	if l.MaxWaitingRuns <= 0 {
		l.MaxWaitingRuns = 4 * l.MaxRuns
	}
	if l.RunTimeout <= 0 {
		l.RunTimeout = d.RunTimeout
	}
	switch {
	case l.Grace == 0:
		l.Grace = d.Grace
	case l.Grace < 0:
		l.Grace = 0
	}
	return l
}

// Options configure a Server.
type Options struct {
	// Dirs are the folders whose cartridges are served, in lookup order.
	Dirs []string
	// Host is what the operator's cartridges may use: Environ (their ENV
	// references, the NANO_BOTS_* settings), ForceSandbox, the Fennel
	// cache, the providers' HTTP client. The server sets
	// AllowHostCredentials for them, never for a client's cartridge, and
	// routes Warn to its log.
	Host bot.Host
	// Tokens are the credentials clients must send; none means no
	// authentication (only allowed on loopback, see CheckListen).
	Tokens []*Token
	// AnonymousRate bounds the runs started without a token.
	AnonymousRate Rate
	Limits        Limits
	// AllowUnconfirmed runs the tools that ask for a confirmation, which
	// HTTP clients cannot give; by default they are denied and the model
	// is told so.
	AllowUnconfirmed bool
	// AllowTools are the tools whose calls run without a confirmation
	// (nb serve --allow-tool), when AllowUnconfirmed is false.
	AllowTools []string
	// ClientCartridges accepts cartridges sent whole by clients (see
	// ClientBot).
	ClientCartridges bool
	// ClientHosts are the host names or addresses that the providers of
	// client cartridges may reach although they are loopback, private or
	// otherwise not public (a model server on the local network); every
	// other such address is refused (see ClientBot).
	ClientHosts []string
	// TrustedProxies are the reverse proxies in front of the server:
	// their connections' X-Forwarded-For names the client (see EndUser),
	// and only MaxConns bounds them. No other connection's is believed.
	TrustedProxies []netip.Prefix
	// AllowOrigins are the origins of the browser pages a server without
	// tokens answers (see Handler); nil is DefaultOrigins, "*" is any.
	AllowOrigins []string
	// OriginAdvice says how to allow a refused origin (%s is the origin)
	// and HostAdvice how to serve other host names, in the words of the
	// command that runs the server (its flags and variables); empty: a
	// neutral text.
	OriginAdvice, HostAdvice string
	// WatchInterval is how often the folders are checked for changes
	// (default 2 s; negative: never).
	WatchInterval time.Duration
	// Log receives the server's structured log; nil discards it.
	Log *slog.Logger
	// LogMessages puts the text of messages in the log (off by default).
	LogMessages bool
	// Shared, when set, is the store shared with the server's other
	// replicas (package eventlog/pglog): the front-ends keep their
	// streams, responses and runs there, and the server takes no work
	// while it cannot reach it (see GET /ready).
	Shared eventlog.Shared
	// Checks are what GET /ready checks besides the server's own state
	// (the stores it must reach).
	Checks []Check
	// Metrics serves GET /metrics (package internal/metric) behind the
	// server's tokens, as its other routes.
	Metrics bool
	// Control, when set, answers /control and the paths below it (the
	// control page, package internal/control), which checks tokens,
	// Origin and Host itself: it logs in with a cookie, not a bearer.
	Control http.Handler
}

// Server serves the bots of a set of cartridge folders over HTTP.
type Server struct {
	opts   Options
	limits Limits
	// runTimeout is the cause of a run stopped by its deadline:
	// ErrRunTimeout, with the limit's name.
	runTimeout error
	host       bot.Host
	log        *slog.Logger
	mux        *http.ServeMux
	anon       *Token
	cat        *catalog.Catalog
	adm        *admission.Controller

	// browser is the browser guard of a server without tokens (see
	// browserRefused), made once.
	browser httpguard.BrowserGuard

	base       context.Context // parent of every request and run
	cancelBase context.CancelCauseFunc
	// clientHTTP is the providers' client of client cartridges (see
	// ClientBot), made on first use.
	clientHTTP     *http.Client
	clientHTTPOnce sync.Once

	closeOnce sync.Once
}

// New loads the cartridges of opts.Dirs and the built-in default, and
// returns a server ready to Serve. Cartridges that fail to load are
// logged and listed with their error.
func New(ctx context.Context, opts Options) (*Server, error) {
	if opts.WatchInterval == 0 {
		opts.WatchInterval = 2 * time.Second
	}
	s := &Server{
		opts:   opts,
		limits: opts.Limits.withDefaults(),
		log:    loggerOr(opts.Log),
		mux:    http.NewServeMux(),
		anon:   &Token{Rate: opts.AnonymousRate},
	}
	s.browser = browserGuard(opts)
	s.runTimeout = ErrRunTimeout
	if n := s.limits.Names.RunTimeout; n != "" {
		s.runTimeout = fmt.Errorf("%w (%s)", ErrRunTimeout, n)
	}
	s.adm = admission.New(admission.Limits{MaxRuns: s.limits.MaxRuns, MaxRunsPerTenant: s.limits.MaxRunsPerToken, MaxWaiting: s.limits.MaxWaitingRuns})
	s.host = opts.Host
	s.host.AllowHostCredentials = true
	s.host.AllowMCP = true // the operator's cartridges start their MCP servers
	if s.host.EventLog == nil {
		// Every exchange's events, at debug level (--log-level debug).
		s.host.EventLog = s.log
	}
	// The end user of a served exchange is always the client's: an
	// ENV/NANO_BOTS_END_USER in a cartridge must not pin every client to
	// the operator's value (the reference sets it per request).
	environ := opts.Host.Environ
	lookup := func(name string) (string, bool) {
		if name == "NANO_BOTS_END_USER" {
			return "", false
		}
		return proc.Lookup(environ, name)
	}
	s.base, s.cancelBase = context.WithCancelCause(context.Background())
	s.cat = catalog.New(ctx, catalog.Options{Dirs: opts.Dirs, Host: s.host, Lookup: lookup, Log: s.log})
	s.mux.HandleFunc("GET /healthz", s.healthz)
	s.mux.HandleFunc("GET /ready", s.ready)
	if opts.Metrics {
		s.mux.Handle("GET /metrics", metric.Handler())
	}
	// Active counts the runs waiting on their client too.
	metric.RunsFunc(func() int { return s.adm.Active() - s.adm.Waiting() }, s.adm.Waiting)
	if opts.Shared != nil {
		s.opts.Checks = append(slices.Clip(opts.Checks), sharedCheck(opts.Shared))
	}
	return s, nil
}

// Dirs are the folders the server serves.
func (s *Server) Dirs() []string { return s.cat.Dirs() }

// Catalog is the server's catalog of cartridges, for front-ends that
// work without a request (the token filters of Models and Bot come from
// the request's context).
func (s *Server) Catalog() *catalog.Catalog { return s.cat }

// Admission is what admits the server's runs (see Admit).
func (s *Server) Admission() *admission.Controller { return s.adm }

// Logger is the server's log, with the request id of ctx when it has one.
func (s *Server) Logger(ctx context.Context) *slog.Logger {
	if info := infoFrom(ctx); info != nil {
		return s.log.With("request", info.id)
	}
	return s.log
}

// LogMessages reports whether the operator asked for the text of messages
// in the log.
func (s *Server) LogMessages() bool { return s.opts.LogMessages }

// Handle mounts a front-end's route (a net/http pattern such as
// "POST /v1/chat/completions") behind the server's authentication, body
// limit, request log, CORS and panic recovery.
func (s *Server) Handle(pattern string, h http.Handler) { s.mux.Handle(pattern, h) }

// HandleFunc is Handle for a function.
func (s *Server) HandleFunc(pattern string, h func(http.ResponseWriter, *http.Request)) {
	s.mux.HandleFunc(pattern, h)
}

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	Quiet(r.Context())
	if s.isDraining() {
		WriteJSON(w, http.StatusServiceUnavailable, map[string]any{"status": "stopping"})
		return
	}
	WriteJSON(w, http.StatusOK, map[string]any{"status": "ok"})
}

// EndUser is the end user of an exchange for r, as the reference builds
// it: the client's address, "-", and the NANO_BOTS_END_USER header (the
// editor plugins send "<editor>-<setting>"). The address is the
// connection's; X-Forwarded-For is read only on connections from
// Options.TrustedProxies (anyone else could write another user's address
// there and take their conversations). With a named token, the token's
// name comes first, so the clients of two tokens never share a
// conversation.
func (s *Server) EndUser(r *http.Request) string {
	host := s.clientAddr(r)
	user := host + "-" + strings.TrimSpace(r.Header.Get("NANO_BOTS_END_USER"))
	if tok := TokenFrom(r.Context()); tok != nil && tok.Name != "" {
		user = tok.Name + "/" + user
	}
	return user
}

// Confirmer decides the tool calls that ask for a confirmation: denied
// (the model receives the reference's denial text), unless the operator
// started the server with AllowUnconfirmed.
func (s *Server) Confirmer() agent.Confirmer {
	return confirmer{s}
}

type confirmer struct{ s *Server }

func (c confirmer) Confirm(ctx context.Context, call tool.Call, text string) (bool, error) {
	if c.s.opts.AllowUnconfirmed || slices.Contains(c.s.opts.AllowTools, call.Name) {
		c.s.Logger(ctx).Info("tool call allowed without confirmation", "tool", call.Name)
		return true, nil
	}
	how := "set safety.tools.confirmable: false in the cartridge"
	if a := c.s.limits.Names.AllowTool; a != "" {
		how += ", or " + a
	}
	c.s.Logger(ctx).Info("tool call denied: it needs a confirmation, which an HTTP client cannot give ("+how+")", "tool", call.Name)
	return false, nil
}

// Admit starts one run for the request of ctx: it counts against the
// server's and the token's concurrent runs and the token's rate (429 with
// Retry-After beyond them, 503 while the server stops). The run's context
// has the deadline of a run (504 beyond). A run that is not detached is
// the request's: the client going away cancels it, with its provider
// request, its tools and their processes. A detached run outlives its
// request (a stream that clients poll): only the deadline and the end of
// the shutdown's grace period stop it, and it holds the request's bots
// until it ends. done must be called when the run ends.
func (s *Server) Admit(ctx context.Context, detached bool) (context.Context, func(), error) {
	tok := TokenFrom(ctx)
	if tok == nil {
		tok = s.anon
	}
	run, err := s.adm.Admit(tok.Tenant(), admission.Policy{MaxRuns: tok.MaxRuns, Rate: tok.Rate})
	if err != nil {
		return nil, nil, s.admitError(err)
	}
	outcome := &runOutcome{}
	parent := context.WithValue(admission.NewContext(ctx, run), runOutcomeKey{}, outcome)
	var (
		l             *catalog.Leases
		stop          func() bool
		runCtx        context.Context
		cancel        context.CancelCauseFunc // a detached run's: it outlives the request
		cancelTimeout context.CancelFunc
	)
	if detached {
		l = &catalog.Leases{}
		l.Inherit(leasesFrom(ctx))
		parent = context.WithValue(context.WithoutCancel(parent), leasesKey{}, l)
		runCtx, cancel = context.WithCancelCause(parent)
		stop = context.AfterFunc(s.base, func() { cancel(context.Cause(s.base)) })
		runCtx, cancelTimeout = context.WithTimeoutCause(runCtx, s.limits.RunTimeout, s.runTimeout)
	} else {
		// A request's run ends with the request, when done is called, or
		// at the run's time limit: one context does all three (a layer
		// fewer, and its parent's list of children, at every request).
		runCtx, cancelTimeout = context.WithTimeoutCause(parent, s.limits.RunTimeout, s.runTimeout)
	}
	var once sync.Once
	// The label is read at each look: a front-end may name the run's
	// cartridge after its admission (the OpenAI routes read the body then).
	endRun := metric.StartRunFunc("run", func() string { return runLabel(ctx) })
	done := func() {
		once.Do(func() {
			endRun(outcome.failure())
			cancelTimeout()
			if cancel != nil {
				cancel(context.Canceled)
			}
			if stop != nil {
				stop()
			}
			l.Release()
			run.Done()
		})
	}
	return runCtx, done, nil
}

// admitError is a refusal of the admission in HTTP's terms: 429 with
// Retry-After, 503 while the server stops.
func (s *Server) admitError(err error) error {
	var ae *admission.Error
	if !errors.As(err, &ae) {
		return err
	}
	metric.Refused(refusalReason(ae.Reason))
	switch ae.Reason {
	case admission.Stopping:
		return &Error{Status: http.StatusServiceUnavailable, Message: ErrShutdown.Error() + ": no new runs", RetryAfter: s.limits.Grace, Err: err}
	case admission.Busy:
		return &Error{Status: http.StatusTooManyRequests, Code: "server_busy", RetryAfter: ae.RetryAfter, Err: err,
			Message: fmt.Sprintf("the server is running its maximum of %d runs at once: try again shortly", ae.Limit)}
	case admission.TenantBusy:
		return &Error{Status: http.StatusTooManyRequests, Code: "too_many_runs", RetryAfter: ae.RetryAfter, Err: err,
			Message: fmt.Sprintf("this token already has its maximum of %d runs in progress: try again when one ends", ae.Limit)}
	}
	return &Error{Status: http.StatusTooManyRequests, RetryAfter: ae.RetryAfter, Err: err,
		Message: fmt.Sprintf("runs are limited to %s for this client (its token's rate%s): try again in %s", ae.Rate, orName(s.limits.Names.Rate), max(ae.RetryAfter.Round(time.Second), time.Second))}
}

// refusalReason names an admission's refusal in metrics.
func refusalReason(r admission.Reason) string {
	switch r {
	case admission.Stopping:
		return "stopping"
	case admission.Busy:
		return "busy"
	case admission.TenantBusy:
		return "token_busy"
	case admission.RateLimited:
		return "rate"
	}
	return metric.Other
}

// runLabel is what the control page shows of a run: the route and the
// cartridge of its request, bounded as metric labels are.
func runLabel(ctx context.Context) string {
	info := infoFrom(ctx)
	if info == nil {
		return "-"
	}
	info.mu.Lock()
	defer info.mu.Unlock()
	return metric.Label("cartridge", info.cartridge)
}

// Active is the number of runs in progress, those waiting on their
// client included.
func (s *Server) Active() int { return s.adm.Active() }

func (s *Server) isDraining() bool { return s.adm.Draining() }

// Done is closed when the server has finished shutting down: front-ends
// stop their own background work with it.
func (s *Server) Done() <-chan struct{} { return s.base.Done() }

// Close cancels whatever still runs and closes every bot that nothing
// holds (the others when they are let go). Serve calls it when it ends.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.cancelBase(ErrShutdown)
		s.cat.Close() //nolint:errcheck // never fails
	})
	return nil
}

// Serve answers on the listeners until ctx ends, watching the folders
// for changes. Then it shuts down: new runs are refused (503) while the
// runs in flight get Limits.Grace to finish (and the clients polling a
// stream can still read it); when the grace period is over the remaining
// runs are cancelled, and Serve returns once their requests are answered.
// The listeners, the watcher and the shutdown run in one group (package
// internal/rungroup, as the gateway's parts do): a listener that fails
// shuts the server down and is what Serve returns; when Serve returns,
// every goroutine it started has ended.
func (s *Server) Serve(ctx context.Context, lns ...net.Listener) error {
	hs := &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: s.limits.HeaderTimeout,
		IdleTimeout:       s.limits.IdleTimeout,
		BaseContext:       func(net.Listener) context.Context { return s.base },
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
	conns := s.connLimiter()
	hs.ConnState = conns.ConnState
	g := rungroup.New(ctx)
	for _, ln := range lns {
		g.Go("listener "+ln.Addr().String(), func(context.Context) error {
			if err := hs.Serve(conns.Listen(ln)); !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		})
	}
	if s.opts.WatchInterval > 0 {
		g.Go("cartridge watcher", func(ctx context.Context) error {
			s.cat.Watch(ctx, s.opts.WatchInterval)
			return nil
		})
	}
	g.Go("shutdown", func(ctx context.Context) error {
		<-ctx.Done()
		s.shutdown(hs)
		return nil
	})
	err := g.Wait()
	s.Close()
	return err
}

func (s *Server) shutdown(hs *http.Server) {
	active := s.adm.Drain()
	s.log.Info("stopping: no new runs; runs in flight may finish", "runs", active, "grace", s.limits.Grace.String())
	finished := make(chan struct{})
	go func() { s.adm.Wait(); close(finished) }()
	grace := time.NewTimer(s.limits.Grace)
	defer grace.Stop()
	select {
	case <-finished:
		// Let the clients polling a stream that just ended read it.
		linger := time.NewTimer(time.Second)
		select {
		case <-linger.C:
		case <-grace.C:
		}
		linger.Stop()
	case <-grace.C:
		s.log.Warn("grace period over: cancelling the runs in flight", "runs", s.Active())
		s.cancelBase(ErrShutdown)
		select {
		case <-finished:
		case <-time.After(5 * time.Second):
			s.log.Warn("runs still running after cancellation", "runs", s.Active())
		}
	}
	sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		hs.Close() //nolint:errcheck // closing anyway
	}
	s.log.Info("stopped")
}

// Listen opens the listeners of addr (host:port). "localhost" listens on
// both loopback addresses, 127.0.0.1 and ::1 (on the same port), since
// clients differ on which one "localhost" means; ::1 is skipped when the
// machine has no IPv6. A port it cannot take is a *BindError.
func Listen(addr string) ([]net.Listener, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("address %q: %v; write host:port, for example 127.0.0.1:3048", addr, err)
	}
	if host != "localhost" {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return nil, &BindError{Addr: addr, Err: err}
		}
		return []net.Listener{ln}, nil
	}
	ln4, err := net.Listen("tcp4", net.JoinHostPort("127.0.0.1", port))
	if err != nil {
		return nil, &BindError{Addr: addr, Err: err}
	}
	p := strconv.Itoa(ln4.Addr().(*net.TCPAddr).Port)
	ln6, err := net.Listen("tcp6", net.JoinHostPort("::1", p))
	if err != nil {
		return []net.Listener{ln4}, nil //nolint:nilerr // no IPv6 loopback: IPv4 alone
	}
	return []net.Listener{ln4, ln6}, nil
}

// BindError is Listen's failure to take an address (in use, not this
// machine's). The command that chose the address says how to choose
// another: the library does not know its flags.
type BindError struct {
	// Addr is the address Listen was given.
	Addr string
	// Err is the operating system's refusal.
	Err error
}

func (e *BindError) Error() string { return fmt.Sprintf("listen on %s: %v", e.Addr, e.Err) }

func (e *BindError) Unwrap() error { return e.Err }

// newRequestID returns a random id for a request's log lines.
func newRequestID() string {
	var b [8]byte
	rand.Read(b[:]) //nolint:errcheck // never fails
	return hex.EncodeToString(b[:])
}
