package server

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/nbots/nb/catalog"
	"github.com/nbots/nb/internal/httpguard"
	"github.com/nbots/nb/internal/metric"
	"github.com/nbots/nb/tracing"
)

// reqInfo is what the middleware and the handlers share about one request.
type reqInfo struct {
	id        string
	token     *Token
	mu        sync.Mutex
	route     string // the pattern the mux matched, for metrics and traces
	cartridge string
	quiet     bool
	err       *Error
}

type infoKey struct{}
type leasesKey struct{}

func infoFrom(ctx context.Context) *reqInfo {
	info, _ := ctx.Value(infoKey{}).(*reqInfo)
	return info
}

func leasesFrom(ctx context.Context) *catalog.Leases {
	l, _ := ctx.Value(leasesKey{}).(*catalog.Leases)
	return l
}

// TokenFrom returns the token the request of ctx was authenticated with;
// nil when the server has no tokens.
func TokenFrom(ctx context.Context) *Token {
	if info := infoFrom(ctx); info != nil {
		return info.token
	}
	return nil
}

// Owner names who the request of ctx comes from, for what a server
// keeps for it (streams, stored responses): its token, "" without
// tokens. What one owner kept is unknown to another.
func Owner(ctx context.Context) string {
	if t := TokenFrom(ctx); t != nil {
		return ownerOf(t)
	}
	return ""
}

// ownerOf is the Owner of the requests t authenticates.
func ownerOf(t *Token) string { return "token:" + t.Name }

// RequestID returns the id of the request of ctx (sent back as
// X-Request-Id and in every log line about it).
func RequestID(ctx context.Context) string {
	if info := infoFrom(ctx); info != nil {
		return info.id
	}
	return ""
}

// Quiet logs the request of ctx at debug level only: the Nano Bots
// stream polls come hundreds of times a second.
func Quiet(ctx context.Context) {
	if info := infoFrom(ctx); info != nil {
		info.mu.Lock()
		info.quiet = true
		info.mu.Unlock()
	}
}

// NameCartridge names id the cartridge the request of ctx runs, for its
// log line and the control page's runs in flight and errors (Bot does it
// for the bots it gives; a front-end that finds its cartridge otherwise,
// as the agent protocol does, calls it).
func NameCartridge(ctx context.Context, id string) { setCartridge(ctx, id) }

func setCartridge(ctx context.Context, id string) {
	if info := infoFrom(ctx); info != nil {
		info.mu.Lock()
		info.cartridge = id
		info.mu.Unlock()
	}
}

// statusWriter records the status and size of an answer.
type statusWriter struct {
	http.ResponseWriter
	status int
	bytes  int64
	// unread is set while the request has a body not read whole: an
	// answer then closes the connection (see dropBody).
	unread bool
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
		w.closeIfUnread()
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
		w.closeIfUnread()
	}
	n, err := w.ResponseWriter.Write(b)
	w.bytes += int64(n)
	return n, err
}

// Unwrap lets http.ResponseController reach the connection (Flush,
// deadlines).
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Flush sends what was written so far (server-sent events).
func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		if w.status == 0 {
			w.status = http.StatusOK
		}
		f.Flush()
	}
}

// Hijack hands the connection over (a websocket front-end); the log
// says 101.
func (w *statusWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, rw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err == nil && w.status == 0 {
		w.status = http.StatusSwitchingProtocols
	}
	return conn, rw, err
}

// corsMethods are the methods preflights allow, as the reference's.
const corsMethods = "GET, POST, OPTIONS, HEAD, DELETE"

// Handler is the server's HTTP handler: every request gets an id, CORS
// headers (any origin: the Obsidian plugin runs in a page of origin
// app://obsidian.md and sends custom headers, so even its GETs are
// preflighted), panic recovery and a log line; preflights, /healthz and
// /ready need no token, everything else does when the server has tokens
// (and is refused, 503, while a shared store is out of reach). A
// server without tokens answers browsers only from Options.AllowOrigins,
// and only requests addressed to a loopback name (see browserRefused). Request
// bodies are read whole (up to Limits.MaxBody, within BodyTimeout and at
// BodyMinRate at least) before the route runs, chunked ones included; an
// answer given before (401, 403, 413) closes the connection instead.
func (s *Server) Handler() http.Handler {
	return http.HandlerFunc(s.serveHTTP)
}

func (s *Server) serveHTTP(rw http.ResponseWriter, r *http.Request) {
	start := time.Now()
	info := &reqInfo{id: newRequestID()}
	w := &statusWriter{ResponseWriter: rw, unread: r.Body != nil && r.Body != http.NoBody}
	defer w.dropBody()
	if tracing.Enabled() && r.URL.Path != "/healthz" && r.URL.Path != "/ready" {
		// Health probes come every few seconds: they are not traced.
		ctx, span := tracing.StartServer(r)
		r = r.WithContext(ctx)
		defer func() {
			info.mu.Lock()
			route := info.route
			info.mu.Unlock()
			tracing.EndServer(span, r.Method, route, w.status)
		}()
	}
	h := w.Header()
	h.Set("X-Request-Id", info.id)
	if s.opts.Control != nil && (r.URL.Path == "/control" || strings.HasPrefix(r.URL.Path, "/control/")) {
		// The control page checks its tokens, Origin and Host itself,
		// and sends no CORS headers.
		info.route = "/control"
		defer func() { s.logRequest(r, info, w, time.Since(start)) }()
		s.opts.Control.ServeHTTP(w, r)
		return
	}
	if len(s.opts.Tokens) == 0 {
		if msg := s.browserRefused(r); msg != "" {
			// No CORS headers: the page must not read even this.
			info.quiet = r.Method == http.MethodOptions
			defer func() { s.logRequest(r, info, w, time.Since(start)) }()
			s.WriteError(w, r, &Error{Status: http.StatusForbidden, Message: msg})
			return
		}
	}
	// The same two values on every answer: shared, not made anew (a
	// header's values are replaced or appended to, never changed in place).
	h["Access-Control-Allow-Origin"] = corsAnyOrigin
	h["Access-Control-Expose-Headers"] = corsExposed
	l := &catalog.Leases{}
	ctx := context.WithValue(context.WithValue(r.Context(), infoKey{}, info), leasesKey{}, l)
	r = r.WithContext(ctx)
	defer func() {
		if p := recover(); p != nil {
			if p == http.ErrAbortHandler {
				panic(p)
			}
			s.log.Error("internal error (please report it)", "request", info.id, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			if w.status == 0 {
				s.WriteError(w, r, &Error{Status: http.StatusInternalServerError, Message: fmt.Sprintf("internal error in nb (please report it): %v", p)})
			}
		}
		l.Release()
		s.logRequest(r, info, w, time.Since(start))
	}()

	if r.Method == http.MethodOptions {
		// A preflight: never behind a token, always 2xx.
		h.Set("Access-Control-Allow-Methods", corsMethods)
		if req := r.Header.Get("Access-Control-Request-Headers"); req != "" {
			h.Set("Access-Control-Allow-Headers", req)
		} else {
			h.Set("Access-Control-Allow-Headers", "*")
		}
		h.Set("Access-Control-Max-Age", "86400")
		h.Add("Vary", "Access-Control-Request-Headers")
		info.quiet = true
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if r.URL.Path != "/healthz" && r.URL.Path != "/ready" && r.URL.Path != "/metrics" {
		if err := s.unshared(); err != nil {
			s.WriteError(w, r, err)
			return
		}
	}
	if r.URL.Path != "/healthz" && r.URL.Path != "/ready" && len(s.opts.Tokens) > 0 {
		tok, err := authenticate(s.opts.Tokens, r)
		if err != nil {
			s.WriteError(w, r, err)
			return
		}
		info.token = tok
	}
	if err := s.readBody(w, r); err != nil {
		s.WriteError(w, r, err)
		return
	}
	w.unread = false
	if p := cleanPath(r.URL.Path); p != r.URL.Path {
		// The mux would redirect (//cartridges, which the Obsidian plugin
		// sends for an address ending in /): a redirect breaks
		// preflighted clients, so the clean path is served directly.
		r.URL.Path, r.URL.RawPath = p, ""
	}
	handler, pattern := s.mux.Handler(r)
	info.mu.Lock()
	info.route = pattern
	info.mu.Unlock()
	if pattern == "" {
		s.noRoute(w, r, handler)
		return
	}
	s.mux.ServeHTTP(w, r) // sets the path's values, which Handler does not
}

// The values of the CORS headers every answer but a refusal carries.
var (
	corsAnyOrigin = []string{"*"}
	corsExposed   = []string{"Retry-After, X-Request-Id"}
)

// DefaultOrigins are the browser origins a server without tokens
// answers: the Obsidian plugin's page.
var DefaultOrigins = []string{"app://obsidian.md"}

// browserRefused says why a server without tokens does not answer r, ""
// when it does. Without a token anything that can reach the port may run
// the operator's cartridges, which is fine for the programs of the
// machine's user but not for the web pages their browser opens: CORS "*"
// would let any page read the answers, a "simple" POST needs no
// preflight, and a page whose name a DNS rebinding points at 127.0.0.1
// is same-origin. So requests from browsers (an Origin header) must come
// from an allowed origin, and requests that reach a loopback listener
// must be addressed to a loopback name.
func (s *Server) browserRefused(r *http.Request) string { return s.browser.Refused(r) }

// browserGuard is the guard of browserRefused, made once from opts.
func browserGuard(opts Options) httpguard.BrowserGuard {
	g := httpguard.BrowserGuard{Origins: opts.AllowOrigins, Why: "this server has no token, so it answers",
		Fix: cmp.Or(opts.OriginAdvice, "its operator may allow %s, or give it a token"), HostFix: cmp.Or(opts.HostAdvice, "give it a token to serve other names")}
	if g.Origins == nil {
		g.Origins = DefaultOrigins
	}
	return g
}

// noRoute answers a path or method no route has, in the family's shape.
func (s *Server) noRoute(w http.ResponseWriter, r *http.Request, muxHandler http.Handler) {
	rec := &headerRecorder{header: http.Header{}}
	muxHandler.ServeHTTP(rec, r)
	if allow := rec.header.Get("Allow"); allow != "" {
		w.Header().Set("Allow", allow)
	}
	if rec.status == http.StatusMethodNotAllowed {
		s.WriteError(w, r, &Error{Status: http.StatusMethodNotAllowed, Message: fmt.Sprintf("%s is not allowed on %s (allowed: %s)", r.Method, r.URL.Path, rec.header.Get("Allow"))})
		return
	}
	s.WriteError(w, r, &Error{Status: http.StatusNotFound, Message: fmt.Sprintf("there is no route %s %s on this server", r.Method, r.URL.Path)})
}

// cleanPath is p without repeated slashes or dot segments.
func cleanPath(p string) string {
	if p == "" {
		return "/"
	}
	c := path.Clean(p)
	if strings.HasSuffix(p, "/") && c != "/" {
		c += "/"
	}
	if !strings.HasPrefix(c, "/") {
		c = "/" + c
	}
	return c
}

// headerRecorder catches what the mux answers for an unknown route.
type headerRecorder struct {
	header http.Header
	status int
}

func (h *headerRecorder) Header() http.Header { return h.header }
func (h *headerRecorder) WriteHeader(code int) {
	if h.status == 0 {
		h.status = code
	}
}
func (h *headerRecorder) Write(b []byte) (int, error) {
	if h.status == 0 {
		h.status = http.StatusOK
	}
	return len(b), nil
}

// logRequest writes the request's line: quiet requests (stream polls,
// preflights) only at debug level, failures at warn or error.
func (s *Server) logRequest(r *http.Request, info *reqInfo, w *statusWriter, d time.Duration) {
	info.mu.Lock()
	quiet, cart, e, route := info.quiet, info.cartridge, info.err, info.route
	info.mu.Unlock()
	status := w.status
	if status == 0 {
		status = 499 // the client went away before an answer
	}
	metric.HTTP(metric.Serve, route, r.Method, status, d)
	level := slog.LevelInfo
	switch {
	case status >= 500:
		level = slog.LevelError
	case status >= 400:
		level = slog.LevelWarn
	case quiet:
		level = slog.LevelDebug
	}
	if e != nil && e.Status == 499 {
		level = slog.LevelInfo
	}
	// The request's context carries its span: the log line names it.
	ctx := r.Context()
	if !s.log.Enabled(ctx, level) {
		return
	}
	attrs := []slog.Attr{
		slog.String("request", info.id),
		slog.String("method", r.Method),
		slog.String("path", r.URL.Path),
		slog.Int("status", status),
		slog.Duration("duration", d),
		slog.Int64("bytes", w.bytes),
	}
	if cart != "" {
		attrs = append(attrs, slog.String("cartridge", cart))
	}
	if info.token != nil && info.token.Name != "" {
		attrs = append(attrs, slog.String("token", info.token.Name))
	}
	if e != nil {
		attrs = append(attrs, slog.String("error", e.Message))
		if e.Err != nil && e.Err.Error() != e.Message {
			attrs = append(attrs, slog.String("cause", e.Err.Error()))
		}
	}
	s.log.LogAttrs(ctx, level, "request", attrs...)
}

// OwnerContext is a context for work the server does for owner (a value
// of Owner) outside a request, such as a pipeline run that another
// replica started and this one took over: it carries owner's token, so
// that the token's cartridges and limits apply. Like a request, it holds
// the cartridges it uses until release (a run Admit detaches holds its
// own). It fails when no token of this server has that name.
func (s *Server) OwnerContext(ctx context.Context, owner string) (_ context.Context, release func(), _ error) {
	info := &reqInfo{id: newRequestID()}
	if owner != "" {
		for _, t := range s.opts.Tokens {
			if ownerOf(t) == owner {
				info.token = t
				break
			}
		}
		if info.token == nil {
			return nil, nil, fmt.Errorf("no token of this server is %s", owner)
		}
	}
	l := &catalog.Leases{}
	return context.WithValue(context.WithValue(ctx, infoKey{}, info), leasesKey{}, l), l.Release, nil
}
