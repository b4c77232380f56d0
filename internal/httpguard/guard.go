// Package httpguard is what every HTTP front-end of nb checks before it
// answers: bearer tokens, the browser guard (Origin and Host, against
// cross-site use and DNS rebinding), the rule that a listener beyond
// loopback needs a token, and the readiness checks of GET /ready. nb
// serve, the gateway's web chat, nb mcp serve and the robopages API share
// it, so no front-end imports another.
package httpguard

import (
	"fmt"
	"net"
	"net/http"
	"strings"
)

// BrowserGuard keeps web pages away from a server on this machine: a
// request with an Origin header (a browser's) is answered only from an
// allowed origin, and a request that reaches a loopback listener only
// when it is addressed to a loopback name (a page whose name a DNS
// rebinding points at 127.0.0.1 would otherwise be same-origin). nb serve
// applies it without tokens, nb mcp serve always (the MCP specification
// asks servers to validate Origin).
type BrowserGuard struct {
	// Origins are the allowed origins; "*" is any.
	Origins []string
	// Why starts a refusal ("this server answers"); Fix says how to allow
	// an origin (%s is the origin); HostFix how to serve other host names.
	Why, Fix, HostFix string
}

// Refused says why g does not answer r, "" when it does.
func (g BrowserGuard) Refused(r *http.Request) string {
	if la, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok && IsLoopbackAddr(la.String()) && r.Host != "" && !IsLoopbackHost(r.Host) {
		return fmt.Sprintf("%s only requests addressed to localhost, 127.0.0.1 or ::1, not %q (a web page could reach it through DNS rebinding); %s", g.Why, r.Host, g.HostFix)
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return ""
	}
	for _, o := range g.Origins {
		if o == "*" || strings.EqualFold(strings.TrimSuffix(o, "/"), origin) {
			return ""
		}
	}
	return fmt.Sprintf("%s no web page of origin %q (any page the user opens could use it otherwise): %s", g.Why, origin, fmt.Sprintf(g.Fix, origin))
}

// Handler answers 403 to the requests g refuses, and passes the others
// to h.
func (g BrowserGuard) Handler(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if msg := g.Refused(r); msg != "" {
			http.Error(w, msg, http.StatusForbidden)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// IsLoopbackAddr reports whether addr (host:port) is a loopback address.
func IsLoopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// IsLoopbackHost reports whether a Host header names this machine:
// localhost (and its subdomains, which browsers never resolve elsewhere)
// or a loopback address. A request that reaches a loopback listener under
// another name comes through DNS rebinding.
func IsLoopbackHost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), ".")
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
