package server

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"time"

	"github.com/nbots/nb/connlimit"
)

// BodyGrace is how long a request body may take before BodyMinRate
// applies: its first bytes may be slow to come (a client's TLS, its
// first buffer).
const BodyGrace = connlimit.BodyGrace

// readBody reads the request's body whole and puts it back as a buffer:
// up to MaxBody, within BodyTimeout, and at BodyMinRate at least after
// BodyGrace. A body that breaks a limit is not read further: dropBody
// closes the connection after the answer.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) error {
	if r.Body == nil || r.Body == http.NoBody {
		return nil
	}
	if r.ContentLength > s.limits.MaxBody {
		return &Error{Status: http.StatusRequestEntityTooLarge, Message: named(fmt.Sprintf("the request body is %d bytes, more than the server's limit of %d bytes", r.ContentLength, s.limits.MaxBody), s.limits.Names.MaxBody)}
	}
	rc := http.NewResponseController(w)
	now := time.Now()
	br := &connlimit.Paced{R: http.MaxBytesReader(w, r.Body, s.limits.MaxBody), RC: rc, Start: now, End: now.Add(s.limits.BodyTimeout), Rate: s.limits.BodyMinRate}
	body, err := readAll(br, r.ContentLength)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			e := AsError(nil, err)
			e.Message = named(e.Message, s.limits.Names.MaxBody)
			return e
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return &Error{Status: http.StatusRequestTimeout, Message: "the request body did not arrive in time: " + named(fmt.Sprintf("a body must come at %d bytes a second at least", s.limits.BodyMinRate), s.limits.Names.BodyMinRate) + " and " + named(fmt.Sprintf("whole within %s", s.limits.BodyTimeout), s.limits.Names.BodyTimeout)}
		}
		return &Error{Status: http.StatusBadRequest, Message: "cannot read the request body: " + err.Error()}
	}
	// No deadline while the route runs: the connection's background read
	// would take a timeout for the client going away and cancel the run.
	rc.SetReadDeadline(time.Time{}) //nolint:errcheck // not every connection has deadlines
	r.Body.Close()                  //nolint:errcheck // read whole
	r.Body = &readBody{Reader: bytes.NewReader(body), b: body}
	r.ContentLength = int64(len(body))
	return nil
}

// readAll reads r to its end: into a buffer of the announced size n at
// once when it is known (most bodies), growing as io.ReadAll does
// otherwise.
func readAll(r io.Reader, n int64) ([]byte, error) {
	if n <= 0 {
		return io.ReadAll(r)
	}
	// One byte more than announced, so that the end is read in the same
	// call when the body keeps its word; at most 64 KiB before the bytes
	// come (a client announcing the largest body does not get it
	// allocated for nothing).
	b := make([]byte, 0, min(n+1, 64<<10))
	for {
		m, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+m]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)] // more than announced: grow
		}
	}
}

// readBody is a request body the server has read whole. Its Bytes let a
// front-end decode it without copying it again.
type readBody struct {
	*bytes.Reader
	b []byte
}

func (*readBody) Close() error { return nil }

// Bytes is the whole body, whatever was read of it already; the front-end
// must not change it.
func (b *readBody) Bytes() []byte { return b.b }

// closeIfUnread marks an answer given before the request's body was read
// whole as the connection's last.
func (w *statusWriter) closeIfUnread() {
	if w.unread {
		w.Header().Set("Connection", "close")
	}
}

// dropBody stops the reading of a body the server did not read whole (an
// answer came first, or the body broke a limit): net/http would otherwise
// read up to 256 KiB of it after the answer, with no deadline, to keep the
// connection. With a deadline in the past that read fails at once and the
// connection is closed.
func (w *statusWriter) dropBody() {
	if w.unread {
		http.NewResponseController(w.ResponseWriter).SetReadDeadline(time.Now()) //nolint:errcheck // not every connection has deadlines
	}
}

// connLimiter bounds the connections of the server's listeners: per
// client address (not a trusted proxy's) and in all.
func (s *Server) connLimiter() *connlimit.Limiter {
	return connlimit.New(s.limits.MaxClientConns, s.limits.MaxConns, func(a netip.Addr) bool { return s.trustedProxy(a) },
		s.limits.Names.Conns)
}
