package provider

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	neturl "net/url"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	sjson "github.com/segmentio/encoding/json"
	"golang.org/x/net/http/httpproxy"

	"github.com/nbots/nb/netguard"
	"github.com/nbots/nb/tracing"
)

// clientKey is the proxy configuration a shared client was built for.
type clientKey struct{ httpProxy, httpsProxy, noProxy string }

var clients sync.Map // clientKey -> *http.Client

// ClientFor returns the shared client for the proxy settings getenv gives
// (HTTPS_PROXY, HTTP_PROXY, NO_PROXY, upper or lower case, as curl reads
// them); nil getenv means no proxy. Clients are shared so connections are
// reused across providers and cartridges. SSL_CERT_FILE and SSL_CERT_DIR
// are read by Go's certificate loading on Unix.
//
// Its transport bounds a dial and a TLS handshake by 2 minutes only: the
// per-request limits (Timeouts) are applied by Send, and a dial a request
// gave up on may go on in the background for a later request.
func ClientFor(getenv func(string) string) *http.Client {
	env := func(names ...string) string {
		if getenv == nil {
			return ""
		}
		for _, n := range names {
			if v := getenv(n); v != "" {
				return v
			}
		}
		return ""
	}
	key := clientKey{env("HTTP_PROXY", "http_proxy"), env("HTTPS_PROXY", "https_proxy"), env("NO_PROXY", "no_proxy")}
	if c, ok := clients.Load(key); ok {
		return c.(*http.Client)
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.Proxy = nil
	if key.httpProxy != "" || key.httpsProxy != "" {
		proxy := (&httpproxy.Config{HTTPProxy: key.httpProxy, HTTPSProxy: key.httpsProxy, NoProxy: key.noProxy}).ProxyFunc()
		t.Proxy = func(r *http.Request) (*neturl.URL, error) { return proxy(r.URL) }
	}
	t.DialContext = (&net.Dialer{Timeout: 2 * time.Minute, KeepAlive: 30 * time.Second}).DialContext
	t.TLSHandshakeTimeout = 2 * time.Minute
	// The connection's read buffer stays at the transport's 4 KiB: a
	// pooled connection holds it for as long as it lives, and a server
	// keeps one connection per request in flight (a gateway with 100
	// turns at once held 100 buffers of 64 KiB, a third of its live heap).
	// Larger buffers save nothing here: a TLS connection returns at most
	// one record (16 KiB) a read whatever the buffer; a stream's reader
	// (NewSSEReader) and io.ReadAll ask for 4 KiB or more at a time,
	// which bufio reads straight from the socket into the caller's
	// buffer when its own is empty.
	// A server sends many requests at once to one provider: keep their
	// connections for the next ones (the default keeps 2 per host, and
	// every other request would pay a new connection and TLS handshake).
	t.MaxIdleConns = 1024
	t.MaxIdleConnsPerHost = 256
	c, _ := clients.LoadOrStore(key, &http.Client{Transport: t})
	return c.(*http.Client)
}

// CloseIdleConnections closes the idle connections every shared client
// keeps (each holds its buffers and two goroutines until its idle
// timeout of 90 s): for a process about to idle for long, as nb gateway
// is after a burst (gatewaycmd's idle release).
func CloseIdleConnections() {
	clients.Range(func(_, c any) bool {
		c.(*http.Client).CloseIdleConnections()
		return true
	})
}

// DefaultHTTPClient is the shared client without a proxy: ClientFor(nil).
func DefaultHTTPClient() *http.Client { return ClientFor(nil) }

// HTTPRequest is one call to a provider's API.
type HTTPRequest struct {
	// Provider is the provider id errors are reported under.
	Provider string
	// Client sends the request; nil means DefaultHTTPClient.
	Client *http.Client
	// URL is the endpoint; Headers are set on the request.
	URL     string
	Headers map[string]string
	// Body is encoded as JSON.
	Body any
	// Stream says whether the answer is streamed, which sets the default
	// first-byte limit.
	Stream bool
	// Timeouts are the limits (zero fields: DefaultTimeouts(Stream)).
	Timeouts Timeouts
}

// Post sends body as JSON to url as a streamed request under the default
// time limits (see Send).
func Post(ctx context.Context, client *http.Client, providerID, url string, headers map[string]string, body any) (io.ReadCloser, *http.Response, error) {
	return Send(ctx, HTTPRequest{Provider: providerID, Client: client, URL: url, Headers: headers, Body: body, Stream: true})
}

// Send posts r.Body as JSON under r's time limits. A response with status
// >= 400 becomes an *Error with the provider's message; a network failure
// becomes an *Error (retryable unless the server refused the connection
// or its name is unknown); an expired limit becomes a retryable *Error
// wrapping a *TimeoutError. On success the caller must close the
// returned body, whose reads fail with a *TimeoutError after Idle of
// silence.
func Send(ctx context.Context, r HTTPRequest) (io.ReadCloser, *http.Response, error) {
	// segmentio's encoder writes encoding/json's bytes (keys sorted,
	// HTML escaped) in a third of its time: the tools' schemas, maps,
	// are most of a request, at every call.
	data, err := sjson.Marshal(r.Body)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: encode request: %w", r.Provider, err)
	}
	client := r.Client
	if client == nil {
		client = DefaultHTTPClient()
	}
	limits := r.Timeouts.Or(DefaultTimeouts(r.Stream))
	// The errors of the four limits, made together; the address is
	// written into the one that expires (see expiries).
	x := &expiries{url: r.URL,
		connect:   TimeoutError{Provider: r.Provider, Limit: LimitConnect, After: limits.Connect},
		sendIdle:  TimeoutError{Provider: r.Provider, Limit: LimitIdle, After: limits.Idle, Sending: true},
		firstByte: TimeoutError{Provider: r.Provider, Limit: LimitFirstByte, After: limits.FirstByte},
		readIdle:  TimeoutError{Provider: r.Provider, Limit: LimitIdle, After: limits.Idle},
	}
	ctx, cancel := context.WithCancelCause(ctx)
	w := &watch{cancel: cancel, x: x}
	// While the body is sent, each piece must follow the last within Idle.
	newBody := func() *sendBody {
		return &sendBody{r: bytes.NewReader(data), w: w, idle: limits.Idle, expired: &x.sendIdle}
	}
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(ctx, w.trace(limits)), http.MethodPost, r.URL, newBody())
	if err != nil {
		cancel(nil)
		var ue *neturl.Error
		if errors.As(err, &ue) {
			err = ue.Err // without the address, which may hold a password
		}
		return nil, nil, &Error{Provider: r.Provider, Message: fmt.Sprintf("invalid address %q: %v", redactURL(r.URL), err)}
	}
	req.ContentLength = int64(len(data))
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(newBody()), nil }
	// The same two values on every request: shared, not made anew (a
	// header's values are replaced or appended to, never changed in place).
	req.Header["Content-Type"] = jsonContentType
	req.Header["User-Agent"] = userAgent
	for k, v := range r.Headers {
		req.Header.Set(k, v)
	}
	tracing.Inject(ctx, req.Header)
	// The connection must be up within Connect.
	w.start(limits.Connect, &x.connect)
	resp, err := client.Do(req)
	if w.stop() && err == nil {
		// A limit expired as the headers arrived: the request is cancelled.
		resp.Body.Close()
		err = context.Cause(ctx)
	}
	if err != nil {
		cancel(nil)
		return nil, nil, networkError(ctx, r.Provider, r.URL, err, false)
	}
	if resp.StatusCode >= 400 {
		// The error body is read under the idle limit too.
		resp.Body = newIdleReader(resp.Body, cancel, limits.Idle, x, &x.readIdle)
		return nil, resp, ErrorFromResponse(r.Provider, resp)
	}
	body := newIdleReader(resp.Body, cancel, limits.Idle, x, &x.readIdle)
	// The answer is read up to its limit, streamed or not: a provider may
	// send without end, and nb keeps what it reads.
	limit := AnswerLimit(ctx)
	return &cappedBody{ReadCloser: body, left: limit, err: &AnswerCutError{Provider: r.Provider, Limit: limit}}, resp, nil
}

// The values of the headers every request to a provider carries.
var (
	jsonContentType = []string{"application/json"}
	userAgent       = []string{"nb (Nano Bots)"}
)

// expiries are the errors of one request's time limits. They are made
// with the request, in one piece, and the address (the URL without its
// secrets, which takes parsing) is written only into the one that
// expires: most requests meet no limit.
type expiries struct {
	url                                    string
	connect, sendIdle, firstByte, readIdle TimeoutError
}

// expired is e, the error of a limit that just expired, with its address.
// Each limit expires at most once.
func (x *expiries) expired(e *TimeoutError) *TimeoutError {
	e.Address = safeURL(x.url)
	return e
}

// watch runs the one time limit that applies before the response: first
// the connect limit, then the silence while the body is sent, then the
// first-byte limit. When it expires it cancels the request with a
// *TimeoutError as the cause. One timer serves them all, re-armed.
type watch struct {
	cancel   context.CancelCauseFunc
	x        *expiries
	mu       sync.Mutex
	timer    *time.Timer
	err      *TimeoutError // the error of the limit armed
	deadline time.Time     // when it expires
	done     bool          // the first byte arrived, or the request returned
	fired    bool
}

// start (re)arms the watch for d, reporting e when it expires.
func (w *watch) start(d time.Duration, e *TimeoutError) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done || w.fired {
		return
	}
	w.err, w.deadline = e, time.Now().Add(d)
	if w.timer == nil {
		w.timer = time.AfterFunc(d, w.expire)
		return
	}
	w.timer.Reset(d)
}

// expire is the timer's function: the armed limit has expired, unless it
// was re-armed since (then the timer runs it again at the new deadline).
func (w *watch) expire() {
	w.mu.Lock()
	if w.done || w.fired || time.Now().Before(w.deadline) {
		w.mu.Unlock()
		return
	}
	w.fired = true
	e := w.x.expired(w.err)
	w.mu.Unlock()
	w.cancel(e)
}

// stop ends the watch and reports whether a limit had expired.
func (w *watch) stop() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.done = true
	if w.timer != nil {
		w.timer.Stop()
	}
	return w.fired
}

func (w *watch) trace(limits Timeouts) *httptrace.ClientTrace {
	return &httptrace.ClientTrace{
		GotConn: func(httptrace.GotConnInfo) {
			w.start(limits.Idle, &w.x.sendIdle)
		},
		WroteRequest: func(httptrace.WroteRequestInfo) {
			w.start(limits.FirstByte, &w.x.firstByte)
		},
		GotFirstResponseByte: func() {
			w.stop()
		},
	}
}

// sendBody is the request body; each read (the transport sending a piece)
// re-arms the idle limit while the body is being sent.
type sendBody struct {
	r       *bytes.Reader
	w       *watch
	idle    time.Duration
	expired *TimeoutError
}

func (b *sendBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if n > 0 && b.idle > 0 {
		b.w.start(b.idle, b.expired)
	}
	return n, err
}

// networkError describes a failure to reach or read from a provider.
func networkError(ctx context.Context, providerID, url string, err error, streamed bool) error {
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		err = cause
	}
	if errors.Is(err, context.Canceled) {
		return err
	}
	var te *TimeoutError
	if errors.As(err, &te) {
		hint := "raise provider.timeouts." + te.Limit + " if the model is this slow"
		if te.Limit == LimitConnect {
			hint = "check provider.credentials.address and the network"
		}
		return &Error{Provider: providerID, Message: te.message(), Hint: hint, Retryable: true, Streamed: streamed, Err: te}
	}
	msg := err.Error()
	var ue *neturl.Error
	if url != "" && errors.As(err, &ue) {
		msg = ue.Err.Error() // the address is given below, without its password
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		msg = "timed out: " + msg
	}
	// A refused connection or an unknown host will not mend in a second:
	// say so at once instead of retrying (resets and timeouts are retried).
	retryable := true
	hint := ""
	var dnsErr *net.DNSError
	var blocked *netguard.BlockedError
	switch {
	case errors.As(err, &blocked):
		retryable, hint = false, blocked.Hint
	case errors.Is(err, syscall.ECONNREFUSED):
		retryable, hint = false, "is the server running? check provider.credentials.address"
	case errors.As(err, &dnsErr) && dnsErr.IsNotFound:
		retryable, hint = false, "check provider.credentials.address"
	}
	if url != "" {
		msg = "cannot reach " + redactURL(url) + ": " + msg
	}
	return &Error{Provider: providerID, Message: msg, Hint: hint, Retryable: retryable, Streamed: streamed, Err: err}
}

// redactURL hides the password of an address's user information.
func redactURL(raw string) string {
	if u, err := neturl.Parse(raw); err == nil {
		return u.Redacted()
	}
	// Unparsable: hide whatever sits between "user:" and "@" in the host part.
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return raw
	}
	host, path := rest, ""
	if i := strings.IndexByte(rest, '/'); i >= 0 {
		host, path = rest[:i], rest[i:]
	}
	at := strings.LastIndexByte(host, '@')
	if at < 0 {
		return raw
	}
	if user, _, hasPass := strings.Cut(host[:at], ":"); hasPass {
		return scheme + "://" + user + ":xxxxx" + host[at:] + path
	}
	return raw
}

// ReadError wraps an error met while reading a streamed response body.
func ReadError(ctx context.Context, providerID string, err error, streamed bool) error {
	var cut *AnswerCutError
	if errors.As(err, &cut) {
		return cut
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return &Error{Provider: providerID, Message: "the connection was closed before the answer was complete", Retryable: true, Streamed: streamed, Err: err}
	}
	return networkError(ctx, providerID, "", err, streamed)
}

// idleReader cancels the request when no read completes within its limit.
type idleReader struct {
	rc      io.ReadCloser
	cancel  context.CancelCauseFunc
	idle    time.Duration
	timer   *time.Timer
	once    sync.Once
	stalled atomic.Bool
	err     *TimeoutError
}

func newIdleReader(rc io.ReadCloser, cancel context.CancelCauseFunc, idle time.Duration, x *expiries, e *TimeoutError) *idleReader {
	r := &idleReader{rc: rc, cancel: cancel, idle: idle, err: e}
	r.timer = time.AfterFunc(idle, func() {
		// The address is written before stalled is set: Read returns e
		// once stalled is.
		r.once.Do(func() {
			x.expired(e)
			r.stalled.Store(true)
		})
		cancel(e)
	})
	return r
}

func (r *idleReader) Read(p []byte) (int, error) {
	n, err := r.rc.Read(p)
	if n > 0 {
		r.timer.Reset(r.idle)
	}
	if err != nil && err != io.EOF && r.stalled.Load() {
		err = r.err
	}
	return n, err
}

func (r *idleReader) Close() error {
	r.timer.Stop()
	err := r.rc.Close()
	r.cancel(nil)
	return err
}

// safeURL is an address fit for an error message: the password of its
// user information hidden, and the values of query parameters that look
// like secrets (key, token, signature ...) replaced.
func safeURL(raw string) string {
	u, err := neturl.Parse(raw)
	if err != nil {
		return redactURL(raw)
	}
	if q := u.Query(); len(q) > 0 {
		changed := false
		for k := range q {
			lk := strings.ToLower(k)
			for _, s := range []string{"key", "token", "secret", "sig", "auth", "password", "credential"} {
				if strings.Contains(lk, s) {
					q.Set(k, "xxxxx")
					changed = true
					break
				}
			}
		}
		if changed {
			u.RawQuery = q.Encode()
		}
	}
	return u.Redacted()
}
