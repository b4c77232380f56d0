package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	neturl "net/url"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Timeouts used by DefaultHTTPClient and Post.
var (
	// ConnectTimeout bounds establishing a connection.
	ConnectTimeout = 10 * time.Second
	// IdleTimeout bounds the silence between two reads of a response:
	// a stream that stops sending for this long is reported as stalled.
	// Local models can take long before the first token, so it is generous.
	IdleTimeout = 300 * time.Second
)

var (
	defaultClientOnce sync.Once
	defaultClient     *http.Client
)

// DefaultHTTPClient is shared by providers built without a client. It
// honours HTTPS_PROXY, HTTP_PROXY and NO_PROXY; SSL_CERT_FILE and
// SSL_CERT_DIR are honoured by Go's certificate loading on Unix.
func DefaultHTTPClient() *http.Client {
	defaultClientOnce.Do(func() {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.Proxy = http.ProxyFromEnvironment
		t.DialContext = (&net.Dialer{Timeout: ConnectTimeout, KeepAlive: 30 * time.Second}).DialContext
		t.TLSHandshakeTimeout = ConnectTimeout
		t.ResponseHeaderTimeout = IdleTimeout
		// Streams arrive in many small frames: read them in large gulps.
		t.ReadBufferSize = 64 << 10
		defaultClient = &http.Client{Transport: t}
	})
	return defaultClient
}

// Post sends body as JSON to url with the given headers. A response with
// status >= 400 becomes an *Error with the provider's message; a network
// failure becomes a retryable *Error. On success the caller must close the
// returned body, which fails with a stall error after IdleTimeout of silence.
func Post(ctx context.Context, client *http.Client, providerID, url string, headers map[string]string, body any) (io.ReadCloser, *http.Response, error) {
	data, err := json.Marshal(body)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: encode request: %w", providerID, err)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(data))
	if err != nil {
		cancel(nil)
		var ue *neturl.Error
		if errors.As(err, &ue) {
			err = ue.Err // without the address, which may hold a password
		}
		return nil, nil, &Error{Provider: providerID, Message: fmt.Sprintf("invalid address %q: %v", redactURL(url), err)}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "nb (Nano Bots)")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := client.Do(req)
	if err != nil {
		cancel(nil)
		return nil, nil, networkError(ctx, providerID, url, err, false)
	}
	if resp.StatusCode >= 400 {
		cancel(nil)
		return nil, resp, ErrorFromResponse(providerID, resp)
	}
	return newIdleReader(resp.Body, cancel, providerID), resp, nil
}

// networkError describes a failure to reach or read from a provider.
func networkError(ctx context.Context, providerID, url string, err error, streamed bool) error {
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		err = cause
	}
	if errors.Is(err, context.Canceled) {
		return err
	}
	var stall *stallError
	if errors.As(err, &stall) {
		return &Error{Provider: providerID, Message: stall.Error(), Retryable: true, Streamed: streamed, Err: err}
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
	switch {
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
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return &Error{Provider: providerID, Message: "the connection was closed before the answer was complete", Retryable: true, Streamed: streamed, Err: err}
	}
	return networkError(ctx, providerID, "", err, streamed)
}

type stallError struct{ d time.Duration }

func (e *stallError) Error() string {
	return fmt.Sprintf("the stream stalled: no data for %s", e.d)
}

// idleReader cancels the request when no read completes within IdleTimeout.
type idleReader struct {
	rc      io.ReadCloser
	cancel  context.CancelCauseFunc
	timer   *time.Timer
	stalled atomic.Pointer[stallError]
}

func newIdleReader(rc io.ReadCloser, cancel context.CancelCauseFunc, providerID string) *idleReader {
	r := &idleReader{rc: rc, cancel: cancel}
	d := IdleTimeout
	r.timer = time.AfterFunc(d, func() {
		e := &stallError{d: d}
		r.stalled.Store(e)
		cancel(e)
	})
	return r
}

func (r *idleReader) Read(p []byte) (int, error) {
	n, err := r.rc.Read(p)
	if n > 0 {
		r.timer.Reset(IdleTimeout)
	}
	if err != nil && err != io.EOF {
		if e := r.stalled.Load(); e != nil {
			err = e
		}
	}
	return n, err
}

func (r *idleReader) Close() error {
	r.timer.Stop()
	err := r.rc.Close()
	r.cancel(nil)
	return err
}
