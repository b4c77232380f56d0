package metric

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/nbots/nb/internal/httpguard"
)

// Guard is the token rule of GET /metrics on a listener of its own
// (--metrics-listen): with tokens, a bearer token; without, only
// requests addressed to a loopback name (DNS rebinding) and no web page
// of any origin.
func Guard(tokens []*httpguard.Token, next http.Handler) http.Handler {
	g := httpguard.BrowserGuard{Why: "the metrics listener answers", Fix: "no origin may read it (%s asked)", HostFix: "give the server a token to serve other names"}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(tokens) > 0 {
			if _, err := httpguard.Authenticate(tokens, r); err != nil {
				http.Error(w, err.Error(), http.StatusUnauthorized)
				return
			}
		} else if msg := g.Refused(r); msg != "" {
			http.Error(w, msg, http.StatusForbidden)
			return
		}
		if r.Header.Get("Origin") != "" {
			http.Error(w, "the metrics listener answers no web page", http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// Listen serves GET /metrics alone on addr (--metrics-listen) until ctx
// ends. An address beyond loopback needs a token, as the server's own.
// It returns once the listener is open; errors of Serve after that are
// reported to failed (may be nil).
func Listen(ctx context.Context, addr string, tokens []*httpguard.Token, failed func(error)) (net.Addr, error) {
	if err := httpguard.CheckListen(addr, len(tokens)); err != nil {
		return nil, fmt.Errorf("--metrics-listen %s: %w", addr, err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics-listen %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", Handler())
	hs := &http.Server{Handler: Guard(tokens, mux), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: time.Minute}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		hs.Shutdown(sctx) //nolint:errcheck // closing anyway
	}()
	go func() {
		if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) && failed != nil {
			failed(err)
		}
	}()
	return ln.Addr(), nil
}
