package connlimit

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// BodyGrace is how long a request body may take before its minimum rate
// applies: its first bytes may be slow to come (a client's TLS, its
// first buffer).
const BodyGrace = 2 * time.Second

// Limits are what a listener of nb waits for and holds: the deadlines of
// a request's header, of its body and of an idle connection, the largest
// body, and the connections of one address and in all. Zero fields take
// DefaultLimits' (see WithDefaults).
type Limits struct {
	// HeaderTimeout bounds the time to read a request's header.
	HeaderTimeout time.Duration
	// IdleTimeout is how long a kept-alive connection may wait for its
	// next request.
	IdleTimeout time.Duration
	// BodyTimeout bounds the time to read a request's whole body.
	BodyTimeout time.Duration
	// BodyMinRate is the slowest a body may arrive, in bytes a second on
	// average, counted after BodyGrace.
	BodyMinRate int64
	// MaxBody is the largest request body, in bytes (413 beyond).
	MaxBody int64
	// MaxClientConns bounds the open connections of one client address:
	// the excess is answered 429 and closed before its request is read.
	MaxClientConns int
	// MaxConns bounds the open connections in all; it is kept at half
	// the process's limit of open files at most (MaxConnsForFiles).
	MaxConns int
}

// DefaultLimits are nb serve's, which nb gateway shares.
var DefaultLimits = Limits{
	HeaderTimeout:  10 * time.Second,
	IdleTimeout:    2 * time.Minute,
	BodyTimeout:    30 * time.Second,
	BodyMinRate:    4 << 10,
	MaxBody:        4 << 20,
	MaxClientConns: 64,
	MaxConns:       1024,
}

// WithDefaults fills the zero fields of l from DefaultLimits and bounds
// MaxConns by the process's open files.
func (l Limits) WithDefaults() Limits {
	d := DefaultLimits
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
	if l.MaxBody <= 0 {
		l.MaxBody = d.MaxBody
	}
	if l.MaxClientConns <= 0 {
		l.MaxClientConns = d.MaxClientConns
	}
	if l.MaxConns <= 0 {
		l.MaxConns = d.MaxConns
	}
	l.MaxConns = min(l.MaxConns, MaxConnsForFiles())
	return l
}

// Server is an http.Server for h within lim (already WithDefaults): the
// header and idle deadlines on every connection, request bodies bounded
// and paced (Bodies), and the limiter told which connections are idle
// (ConnState). Serve it on listeners wrapped by l.Listen.
func (l *Limiter) Server(h http.Handler, lim Limits, log *slog.Logger) *http.Server {
	hs := &http.Server{
		Handler:           Bodies(h, lim),
		ReadHeaderTimeout: lim.HeaderTimeout,
		IdleTimeout:       lim.IdleTimeout,
		ConnState:         l.ConnState,
	}
	if log != nil {
		hs.ErrorLog = slog.NewLogLogger(log.Handler(), slog.LevelDebug)
	}
	return hs
}

// Bodies bounds the request bodies h reads: MaxBody bytes at most (the
// read fails with *http.MaxBytesError), whole within BodyTimeout and at
// BodyMinRate at least after BodyGrace (the read fails with a timeout).
// An answer given before the body was read whole (a 401, 403 or 413
// refused without reading it) says Connection: close, and the connection
// is closed after it instead of waiting for the rest of a body that may
// never come.
func Bodies(h http.Handler, lim Limits) http.Handler {
	lim = lim.WithDefaults()
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		w := &bodyWriter{ResponseWriter: rw}
		if r.Body != nil && r.Body != http.NoBody {
			if r.ContentLength > lim.MaxBody {
				w.unread = true
				defer w.drop()
				w.Header().Set("Connection", "close")
				http.Error(w, fmt.Sprintf("the request body is %d bytes, more than the limit of %d bytes", r.ContentLength, lim.MaxBody), http.StatusRequestEntityTooLarge)
				return
			}
			rc := http.NewResponseController(rw)
			now := time.Now()
			b := &body{w: w, rc: rc, rc0: r.Body, paced: Paced{R: http.MaxBytesReader(rw, r.Body, lim.MaxBody), RC: rc, Start: now, End: now.Add(lim.BodyTimeout), Rate: lim.BodyMinRate}}
			w.unread = true
			r.Body = b
			defer w.drop()
		}
		h.ServeHTTP(w, r)
	})
}

// body is a request body read through Paced that tells its writer when
// it was read whole.
type body struct {
	w     *bodyWriter
	rc    *http.ResponseController
	rc0   io.Closer
	paced Paced
}

func (b *body) Read(p []byte) (int, error) {
	n, err := b.paced.Read(p)
	if errors.Is(err, io.EOF) {
		b.w.unread = false
		// No deadline while the handler runs: the connection's
		// background read would take it for the client going away.
		b.rc.SetReadDeadline(time.Time{}) //nolint:errcheck // not every connection has deadlines
	}
	return n, err
}

func (b *body) Close() error { return b.rc0.Close() }

// bodyWriter closes the connection after an answer given before the
// request's body was read whole.
type bodyWriter struct {
	http.ResponseWriter
	unread, wrote bool
}

func (w *bodyWriter) header() {
	if !w.wrote {
		w.wrote = true
		if w.unread {
			w.Header().Set("Connection", "close")
		}
	}
}

func (w *bodyWriter) WriteHeader(code int) {
	if code >= 200 { // 1xx are not the answer
		w.header()
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *bodyWriter) Write(b []byte) (int, error) {
	w.header()
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection.
func (w *bodyWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Flush sends what was written so far.
func (w *bodyWriter) Flush() {
	w.header()
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Hijack hands the connection over (a websocket).
func (w *bodyWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return http.NewResponseController(w.ResponseWriter).Hijack()
}

// drop stops the reading of a body not read whole: net/http would
// otherwise read up to 256 KiB of it after the answer, with no deadline,
// to keep the connection. With a deadline in the past that read fails at
// once and the connection is closed.
func (w *bodyWriter) drop() {
	if w.unread {
		http.NewResponseController(w.ResponseWriter).SetReadDeadline(time.Now()) //nolint:errcheck // not every connection has deadlines
	}
}

// Paced reads a request body with a read deadline before each read: the
// body must be whole by End, and by Start+BodyGrace+n/Rate it must have
// sent more than its first n bytes.
type Paced struct {
	R          io.Reader
	RC         *http.ResponseController
	Start, End time.Time
	// Rate is in bytes a second.
	Rate int64
	n    int64
}

// Read implements io.Reader.
func (p *Paced) Read(b []byte) (int, error) {
	due := p.Start.Add(BodyGrace + time.Duration(float64(p.n)/float64(p.Rate)*float64(time.Second)))
	if due.After(p.End) {
		due = p.End
	}
	p.RC.SetReadDeadline(due) //nolint:errcheck // not every connection has deadlines
	n, err := p.R.Read(b)
	p.n += int64(n)
	return n, err
}
