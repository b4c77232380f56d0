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

// Auth says whether a request carries the server's token; nil is a
// server without one.
type Auth func(r *http.Request) bool

// Tokens is the Auth of a server with tokens (nil without).
func Tokens(tokens []*httpguard.Token) Auth {
	if len(tokens) == 0 {
		return nil
	}
	return func(r *http.Request) bool {
		_, err := httpguard.Authenticate(tokens, r)
		return err == nil
	}
}

// Secret is the Auth of a server with one secret of any length (nb mcp
// serve's, the robopages API's): httpguard.Bearer; nil for "".
func Secret(secret string) Auth {
	if secret == "" {
		return nil
	}
	return httpguard.Bearer(secret)
}

// Guard is the token rule of GET /metrics where the server's own checks
// do not already apply (a listener of its own, nb mcp serve): with a
// token, the bearer token; without, only requests addressed to a
// loopback name (DNS rebinding); and never a web page of any origin.
func Guard(auth Auth, next http.Handler) http.Handler {
	g := httpguard.BrowserGuard{Why: "the metrics listener answers", Fix: "no origin may read it (%s asked)", HostFix: "give the server a token to serve other names"}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if auth != nil {
			if !auth(r) {
				w.Header().Set("WWW-Authenticate", `Bearer realm="nb metrics"`)
				http.Error(w, "this server needs a token: send it as \"Authorization: Bearer <token>\"", http.StatusUnauthorized)
				return
			}
		} else if msg := g.Refused(r); msg != "" {
			http.Error(w, msg, http.StatusForbidden)
			return
		}
		if o := r.Header.Get("Origin"); o != "" {
			http.Error(w, fmt.Sprintf("GET /metrics answers no web page (origin %q)", o), http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// Listen serves GET /metrics alone on addr (--metrics-listen) until ctx
// ends. An address beyond loopback needs a token, as the server's own.
// It returns once the listener is open; errors of Serve after that are
// reported to failed (may be nil).
func Listen(ctx context.Context, addr string, auth Auth, failed func(error)) (net.Addr, error) {
	n := 0
	if auth != nil {
		n = 1
	}
	if err := httpguard.CheckListen(addr, n); err != nil {
		return nil, fmt.Errorf("metrics listener %s: %w", addr, err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics listener %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", Handler())
	hs := &http.Server{Handler: Guard(auth, mux), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: time.Minute}
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
