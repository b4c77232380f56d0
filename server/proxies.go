package server

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// ParseProxies reads the --trusted-proxies list: addresses and networks
// (CIDR), comma-separated.
func ParseProxies(list string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, f := range strings.Split(list, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if strings.Contains(f, "/") {
			p, err := netip.ParsePrefix(f)
			if err != nil {
				return nil, fmt.Errorf("%q is not an address or a network (write 10.0.0.5, 10.0.0.0/8 or fd00::/8)", f)
			}
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(f)
		if err != nil {
			return nil, fmt.Errorf("%q is not an address or a network (write 10.0.0.5, 10.0.0.0/8 or fd00::/8)", f)
		}
		a = a.Unmap()
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	return out, nil
}

// trustedProxy reports whether a is one of Options.TrustedProxies.
func (s *Server) trustedProxy(a netip.Addr) bool {
	a = a.Unmap()
	for _, p := range s.opts.TrustedProxies {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// clientAddr is the address of the client of r: the connection's, or,
// when the connection comes from a trusted proxy, the last address of
// X-Forwarded-For that is not a trusted proxy (each proxy appends the
// address it was reached from; the entries before are the client's to
// write, and worth nothing).
func (s *Server) clientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	a, err := netip.ParseAddr(host)
	if err != nil || !s.trustedProxy(a) {
		return host
	}
	var hops []string
	for _, v := range r.Header.Values("X-Forwarded-For") {
		hops = append(hops, strings.Split(v, ",")...)
	}
	for i := len(hops) - 1; i >= 0; i-- {
		hop := strings.TrimSpace(hops[i])
		ha, err := netip.ParseAddr(hop)
		if err != nil {
			// Not an address: nothing to its left can be trusted.
			return host
		}
		host = ha.Unmap().String()
		if !s.trustedProxy(ha) {
			break
		}
	}
	return host
}
