// Package server is the HTTP core of nb serve: it finds the cartridges
// under its folders and keeps one bot per cartridge up to date as files
// change, and puts every front-end (the Nano Bots API in server/nanobots,
// the OpenAI-compatible API in server/openai, the agent protocol) behind
// the same tokens, limits, logs, CORS and graceful shutdown.
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
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nbots/nb/agent"
	"github.com/nbots/nb/bot"
	"github.com/nbots/nb/cartridge"
	"github.com/nbots/nb/proc"
	"github.com/nbots/nb/tool"
)

// Limits bound what clients may ask of the server. Zero values take the
// defaults (DefaultLimits).
type Limits struct {
	// MaxBody is the largest request body, in bytes (413 beyond).
	MaxBody int64
	// HeaderTimeout bounds the time to read a request's header.
	HeaderTimeout time.Duration
	// BodyTimeout bounds the time to read a request's whole body (408
	// beyond, and the connection is closed).
	BodyTimeout time.Duration
	// BodyMinRate is the slowest a request body may arrive, in bytes a
	// second on average, counted after its first BodyGrace: a body that
	// falls behind is cut (408) before BodyTimeout.
	BodyMinRate int64
	// MaxClientConns bounds the open connections of one client address
	// (a trusted proxy's are bounded by MaxConns only): the excess is
	// answered 429 and closed before its request is read.
	MaxClientConns int
	// MaxConns bounds the open connections in all: the excess waits to
	// be accepted. It is kept below half the process's limit of open
	// files, so that the server never runs out of them.
	MaxConns int
	// IdleTimeout is how long a kept-alive connection may wait for its
	// next request (clients such as node keep idle sockets 5 s: keep it
	// well above).
	IdleTimeout time.Duration
	// MaxRuns bounds the runs in progress on the server.
	MaxRuns int
	// MaxRunsPerToken bounds the runs in progress per token (a token's
	// own MaxRuns wins); 0 is MaxRuns.
	MaxRunsPerToken int
	// RunTimeout bounds one run, tool calls included (504 beyond).
	RunTimeout time.Duration
	// Grace is how long runs in flight may finish after a shutdown
	// begins, before they are cancelled; negative is none.
	Grace time.Duration
}

// DefaultLimits are the limits of a server that sets none.
var DefaultLimits = Limits{
	MaxBody:        4 << 20,
	HeaderTimeout:  10 * time.Second,
	BodyTimeout:    30 * time.Second,
	BodyMinRate:    4 << 10,
	MaxClientConns: 64,
	MaxConns:       1024,
	IdleTimeout:    2 * time.Minute,
	MaxRuns:        64,
	RunTimeout:     10 * time.Minute,
	Grace:          30 * time.Second,
}

func (l Limits) withDefaults() Limits {
	d := DefaultLimits
	if l.MaxBody <= 0 {
		l.MaxBody = d.MaxBody
	}
	if l.HeaderTimeout <= 0 {
		l.HeaderTimeout = d.HeaderTimeout
	}
	if l.IdleTimeout <= 0 {
		l.IdleTimeout = d.IdleTimeout
	}
	if l.BodyTimeout <= 0 {
		l.BodyTimeout = d.BodyTimeout
	}
	if l.BodyMinRate <= 0 {
		l.BodyMinRate = d.BodyMinRate
	}
	if l.MaxClientConns <= 0 {
		l.MaxClientConns = d.MaxClientConns
	}
	if l.MaxConns <= 0 {
		l.MaxConns = d.MaxConns
	}
	l.MaxConns = min(l.MaxConns, maxConnsForFiles())
	if l.MaxRuns <= 0 {
		l.MaxRuns = d.MaxRuns
	}
	if l.MaxRunsPerToken <= 0 {
		l.MaxRunsPerToken = l.MaxRuns
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
	// WatchInterval is how often the folders are checked for changes
	// (default 2 s; negative: never).
	WatchInterval time.Duration
	// Log receives the server's structured log; nil discards it.
	Log *slog.Logger
	// LogMessages puts the text of messages in the log (off by default).
	LogMessages bool
}

// Server serves the bots of a set of cartridge folders over HTTP.
type Server struct {
	opts   Options
	limits Limits
	host   bot.Host
	lookup cartridge.Lookup
	dirs   []string
	log    *slog.Logger
	mux    *http.ServeMux
	anon   *Token

	scanMu  sync.Mutex // one Rescan at a time
	scanned bool       // the first Rescan is done (under scanMu)
	catMu   sync.RWMutex
	entries map[string]*entry
	def     *entry

	base       context.Context // parent of every request and run
	cancelBase context.CancelCauseFunc
	// clientHTTP is the providers' client of client cartridges (see
	// ClientBot), made on first use.
	clientHTTP     *http.Client
	clientHTTPOnce sync.Once

	runsMu    sync.Mutex
	active    int
	runs      sync.WaitGroup
	draining  bool
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
		opts:    opts,
		limits:  opts.Limits.withDefaults(),
		log:     loggerOr(opts.Log),
		mux:     http.NewServeMux(),
		entries: map[string]*entry{},
		anon:    &Token{Rate: opts.AnonymousRate},
	}
	for _, d := range opts.Dirs {
		if d = strings.TrimSpace(d); d != "" {
			s.dirs = append(s.dirs, d)
		}
	}
	s.host = opts.Host
	s.host.AllowHostCredentials = true
	s.host.AllowMCP = true // the operator's cartridges start their MCP servers
	// The end user of a served exchange is always the client's: an
	// ENV/NANO_BOTS_END_USER in a cartridge must not pin every client to
	// the operator's value (the reference sets it per request).
	environ := opts.Host.Environ
	s.lookup = func(name string) (string, bool) {
		if name == "NANO_BOTS_END_USER" {
			return "", false
		}
		return proc.Lookup(environ, name)
	}
	s.base, s.cancelBase = context.WithCancelCause(context.Background())
	s.loadDefault(ctx)
	s.Rescan(ctx)
	s.mux.HandleFunc("GET /healthz", s.healthz)
	return s, nil
}

// Dirs are the folders the server serves.
func (s *Server) Dirs() []string { return append([]string(nil), s.dirs...) }

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
	if c.s.opts.AllowUnconfirmed {
		c.s.Logger(ctx).Info("tool call allowed without confirmation", "tool", call.Name)
		return true, nil
	}
	c.s.Logger(ctx).Info("tool call denied: it needs a confirmation, which an HTTP client cannot give (set safety.tools.confirmable: false in the cartridge, or start nb serve with --allow-unconfirmed-tools)", "tool", call.Name)
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
	limit := tok.MaxRuns
	if limit <= 0 {
		limit = s.limits.MaxRunsPerToken
	}
	s.runsMu.Lock()
	if s.draining {
		s.runsMu.Unlock()
		return nil, nil, &Error{Status: http.StatusServiceUnavailable, Message: ErrShutdown.Error() + ": no new runs", RetryAfter: s.limits.Grace}
	}
	if s.active >= s.limits.MaxRuns {
		s.runsMu.Unlock()
		return nil, nil, &Error{Status: http.StatusTooManyRequests, Code: "server_busy", RetryAfter: time.Second,
			Message: fmt.Sprintf("the server is running its maximum of %d runs at once: try again shortly", s.limits.MaxRuns)}
	}
	tok.mu.Lock()
	if tok.runs >= limit {
		tok.mu.Unlock()
		s.runsMu.Unlock()
		return nil, nil, &Error{Status: http.StatusTooManyRequests, Code: "too_many_runs", RetryAfter: time.Second,
			Message: fmt.Sprintf("this token already has its maximum of %d runs in progress: try again when one ends", limit)}
	}
	tok.runs++
	tok.mu.Unlock()
	if ok, wait := tok.take(time.Now()); !ok {
		tok.mu.Lock()
		tok.runs--
		tok.mu.Unlock()
		s.runsMu.Unlock()
		return nil, nil, &Error{Status: http.StatusTooManyRequests, RetryAfter: wait,
			Message: fmt.Sprintf("runs are limited to %s for this client (its token's rate, or --rate): try again in %s", tok.Rate, max(wait.Round(time.Second), time.Second))}
	}
	s.active++
	s.runs.Add(1)
	s.runsMu.Unlock()

	parent := ctx
	var l *leases
	var stop func() bool
	if detached {
		l = &leases{}
		l.inherit(leasesFrom(ctx))
		parent = context.WithValue(context.WithoutCancel(ctx), leasesKey{}, l)
	}
	runCtx, cancel := context.WithCancelCause(parent)
	if detached {
		stop = context.AfterFunc(s.base, func() { cancel(context.Cause(s.base)) })
	}
	runCtx, cancelTimeout := context.WithTimeoutCause(runCtx, s.limits.RunTimeout, ErrRunTimeout)
	var once sync.Once
	done := func() {
		once.Do(func() {
			cancelTimeout()
			cancel(context.Canceled)
			if stop != nil {
				stop()
			}
			l.release()
			tok.mu.Lock()
			tok.runs--
			tok.mu.Unlock()
			s.runsMu.Lock()
			s.active--
			s.runsMu.Unlock()
			s.runs.Done()
		})
	}
	return runCtx, done, nil
}

// Active is the number of runs in progress.
func (s *Server) Active() int {
	s.runsMu.Lock()
	defer s.runsMu.Unlock()
	return s.active
}

func (s *Server) isDraining() bool {
	s.runsMu.Lock()
	defer s.runsMu.Unlock()
	return s.draining
}

// Done is closed when the server has finished shutting down: front-ends
// stop their own background work with it.
func (s *Server) Done() <-chan struct{} { return s.base.Done() }

// Close cancels whatever still runs and closes every bot that nothing
// holds (the others when they are let go). Serve calls it when it ends.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.cancelBase(ErrShutdown)
		s.catMu.Lock()
		entries := s.entries
		s.entries = map[string]*entry{}
		s.catMu.Unlock()
		for _, e := range entries {
			if e.served != nil {
				e.served.retire()
			}
		}
		if s.def != nil && s.def.served != nil {
			s.def.served.retire()
		}
	})
	return nil
}

// Serve answers on the listeners until ctx ends, watching the folders
// for changes. Then it shuts down: new runs are refused (503) while the
// runs in flight get Limits.Grace to finish (and the clients polling a
// stream can still read it); when the grace period is over the remaining
// runs are cancelled, and Serve returns once their requests are answered.
func (s *Server) Serve(ctx context.Context, lns ...net.Listener) error {
	hs := &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: s.limits.HeaderTimeout,
		IdleTimeout:       s.limits.IdleTimeout,
		BaseContext:       func(net.Listener) context.Context { return s.base },
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
	errc := make(chan error, len(lns))
	conns := s.connLimiter()
	for _, ln := range lns {
		go func() { errc <- hs.Serve(conns.Listen(ln)) }()
	}
	watchCtx, stopWatch := context.WithCancel(context.Background())
	defer stopWatch()
	if s.opts.WatchInterval > 0 {
		go s.watch(watchCtx)
	}
	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-errc:
	}
	stopWatch()
	s.shutdown(hs)
	s.Close()
	return serveErr
}

func (s *Server) shutdown(hs *http.Server) {
	s.runsMu.Lock()
	s.draining = true
	active := s.active
	s.runsMu.Unlock()
	s.log.Info("stopping: no new runs; runs in flight may finish", "runs", active, "grace", s.limits.Grace.String())
	finished := make(chan struct{})
	go func() { s.runs.Wait(); close(finished) }()
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

func (s *Server) watch(ctx context.Context) {
	t := time.NewTicker(s.opts.WatchInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.Rescan(ctx)
		}
	}
}

// Listen opens the listeners of addr (host:port). "localhost" listens on
// both loopback addresses, 127.0.0.1 and ::1 (on the same port), since
// clients differ on which one "localhost" means; ::1 is skipped when the
// machine has no IPv6.
func Listen(addr string) ([]net.Listener, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("address %q: %v; write host:port, for example 127.0.0.1:3048", addr, err)
	}
	if host != "localhost" {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return nil, fmt.Errorf("listen on %s: %w; choose another address with --listen", addr, err)
		}
		return []net.Listener{ln}, nil
	}
	ln4, err := net.Listen("tcp4", net.JoinHostPort("127.0.0.1", port))
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w; choose another address with --listen", addr, err)
	}
	p := strconv.Itoa(ln4.Addr().(*net.TCPAddr).Port)
	ln6, err := net.Listen("tcp6", net.JoinHostPort("::1", p))
	if err != nil {
		return []net.Listener{ln4}, nil //nolint:nilerr // no IPv6 loopback: IPv4 alone
	}
	return []net.Listener{ln4, ln6}, nil
}

// IsLoopback reports whether addr (host:port) is reachable from this
// machine only.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// CheckListen refuses to listen where other machines can reach the server
// without a token.
func CheckListen(addr string, tokens int) error {
	if tokens > 0 || IsLoopback(addr) {
		return nil
	}
	return fmt.Errorf("refusing to listen on %s without a token: other machines could run your cartridges with your API keys; set NB_SERVE_TOKEN to a secret of %d or more random characters (or pass --tokens FILE), or listen on 127.0.0.1", addr, MinTokenLength)
}

// newRequestID returns a random id for a request's log lines.
func newRequestID() string {
	var b [8]byte
	rand.Read(b[:]) //nolint:errcheck // never fails
	return hex.EncodeToString(b[:])
}
