package channeltest

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"
)

// Loopback is a platform fake's HTTP server on a loopback port: the part
// every fake shares, so that a new platform's kit is only its API. It
// serves from the moment NewLoopback returns and keeps a log of the
// requests it received, with the secrets it was given blanked out.
type Loopback struct {
	// URL is "http://127.0.0.1:<port>", without a trailing slash.
	URL string

	srv     *http.Server
	secrets []string

	mu   sync.Mutex
	reqs []string
}

// NewLoopback serves h on a fresh port of 127.0.0.1. secrets (the bot
// tokens a fake's URLs carry, as Telegram's /bot<token>/ does) are
// replaced by "<secret>" in Requests.
func NewLoopback(h http.Handler, secrets ...string) (*Loopback, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	l := &Loopback{URL: "http://" + ln.Addr().String()}
	for _, s := range secrets {
		if s != "" {
			l.secrets = append(l.secrets, s)
		}
	}
	l.srv = &http.Server{Handler: l.logged(h), ReadHeaderTimeout: 10 * time.Second}
	go l.srv.Serve(ln) //nolint:errcheck // ends with Close
	return l, nil
}

func (l *Loopback) logged(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		line := r.Method + " " + r.URL.Path
		for _, s := range l.secrets {
			line = strings.ReplaceAll(line, s, "<secret>")
		}
		l.mu.Lock()
		l.reqs = append(l.reqs, line)
		l.mu.Unlock()
		h.ServeHTTP(w, r)
	})
}

// Requests are the requests received so far, in order, as "METHOD
// /path" (no query: it may hold a token), for a failing test to print.
func (l *Loopback) Requests() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.reqs...)
}

// Close stops serving and closes every connection, hijacked ones (web
// sockets) excepted: their fake closes those itself.
func (l *Loopback) Close() { l.srv.Close() }

// Answers are how a platform words two of the faults; the others (Reset,
// Hang, LoseAnswer) need no words. A nil answer is a plain-text status.
type Answers struct {
	// BadGateway writes the 502 a proxy in front of the platform gives.
	BadGateway func(w http.ResponseWriter)
	// TooMany writes the platform's 429 asking to wait one second.
	TooMany func(w http.ResponseWriter)
}

// Serve counts a request to endpoint and answers it: with the fault
// injected for it if there is one (in the platform's words from a),
// otherwise with serve. LoseAnswer carries the request out through serve
// and then resets the connection, so the client cannot know it
// succeeded. A fake calls Serve once its routing and authentication
// have named the endpoint.
func (f *Faults) Serve(w http.ResponseWriter, r *http.Request, endpoint string, a Answers, serve func(http.ResponseWriter)) {
	switch f.Next(endpoint) {
	case Reset:
		a.reset(w)
	case BadGateway:
		a.badGateway(w)
	case Hang:
		<-r.Context().Done()
	case TooMany:
		if a.TooMany != nil {
			a.TooMany(w)
			return
		}
		w.Header().Set("Retry-After", "1")
		http.Error(w, "Too Many Requests", http.StatusTooManyRequests)
	case LoseAnswer:
		serve(httptest.NewRecorder())
		a.reset(w)
	default:
		serve(w)
	}
}

func (a Answers) reset(w http.ResponseWriter) {
	if !ResetConnection(w) {
		// A connection that cannot be taken over (HTTP/2) fails as a
		// proxy would.
		a.badGateway(w)
	}
}

func (a Answers) badGateway(w http.ResponseWriter) {
	if a.BadGateway != nil {
		a.BadGateway(w)
		return
	}
	http.Error(w, "Bad Gateway", http.StatusBadGateway)
}
