// Package netguard connects only to public addresses: the guard against
// server-side request forgery of web_fetch (a model chooses the URL) and
// of the providers of cartridges that clients send to nb serve (a client
// chooses the address). Names are resolved once and the connection goes
// to a checked address, so a DNS rebinding cannot slip past the check.
package netguard

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// Resolver resolves host names; *net.Resolver is one. Tests inject a
// fake so they need no network.
type Resolver interface {
	LookupIPAddr(ctx context.Context, host string) ([]net.IPAddr, error)
}

// Dialer opens connections; *net.Dialer is one.
type Dialer interface {
	DialContext(ctx context.Context, network, address string) (net.Conn, error)
}

// Guard connects only to public addresses. It resolves a host once,
// checks every address it got, and connects to a checked address (the
// connection is pinned: no second lookup that a DNS rebinding could
// answer differently). Every connection goes through it, so every
// redirect is checked too.
type Guard struct {
	Resolver Resolver
	Dialer   Dialer
	// AllowHosts are host names or addresses that may be reached even
	// when they are private or loopback (an intranet the cartridge
	// names). Lower case, without a trailing dot.
	AllowHosts []string
	// Hint says how to allow a refused host; it goes into BlockedError.
	Hint string
}

// BlockedError is a connection the guard refused.
type BlockedError struct {
	Host   string
	Addr   netip.Addr
	Reason string
	// Hint is the guard's Hint: how to allow the host, if one may.
	Hint string
}

func (e *BlockedError) Error() string {
	if e.Host == e.Addr.String() {
		return fmt.Sprintf("%s is %s: only public addresses may be reached", e.Host, e.Reason)
	}
	return fmt.Sprintf("%s resolves to %s, %s: only public addresses may be reached", e.Host, e.Addr, e.Reason)
}

func (g *Guard) allowed(host string) bool {
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	for _, h := range g.AllowHosts {
		if strings.TrimSuffix(strings.ToLower(h), ".") == host {
			return true
		}
	}
	return false
}

// Addrs resolves host (a name or an address in any notation) and checks
// every address; it returns them when all are allowed.
func (g *Guard) Addrs(ctx context.Context, host string) ([]netip.Addr, error) {
	host = strings.TrimSuffix(host, ".")
	if host == "" {
		return nil, errors.New("the URL has no host")
	}
	var addrs []netip.Addr
	if a, ok := ParseHostAddr(host); ok {
		addrs = []netip.Addr{a}
	} else {
		if looksNumeric(host) {
			return nil, fmt.Errorf("%s is not a valid address", host)
		}
		res := g.Resolver
		if res == nil {
			res = net.DefaultResolver
		}
		ips, err := res.LookupIPAddr(ctx, host)
		if err != nil {
			return nil, fmt.Errorf("cannot resolve %s: %v", host, err)
		}
		for _, ip := range ips {
			if a, ok := netip.AddrFromSlice(ip.IP); ok {
				addrs = append(addrs, a.Unmap())
			}
		}
		if len(addrs) == 0 {
			return nil, fmt.Errorf("%s has no address", host)
		}
	}
	if g.allowed(host) {
		return addrs, nil
	}
	for _, a := range addrs {
		if why := Blocked(a); why != "" {
			return nil, &BlockedError{Host: host, Addr: a, Reason: why, Hint: g.Hint}
		}
	}
	return addrs, nil
}

// DialContext connects to address (host:port) through the guard.
func (g *Guard) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return nil, err
	}
	addrs, err := g.Addrs(ctx, host)
	if err != nil {
		return nil, err
	}
	d := g.Dialer
	if d == nil {
		d = &net.Dialer{}
	}
	var firstErr error
	for _, a := range addrs {
		conn, err := d.DialContext(ctx, network, net.JoinHostPort(a.String(), port))
		if err == nil {
			return conn, nil
		}
		if firstErr == nil {
			firstErr = err
		}
	}
	return nil, firstErr
}

// Blocked returns why a connection to a may not be made, or "" when a is
// a public address.
func Blocked(a netip.Addr) string {
	a = a.Unmap()
	if a.Is4() {
		return blocked4(a)
	}
	switch {
	case a.IsUnspecified():
		return "the unspecified address"
	case a.IsLoopback():
		return "a loopback address (this machine)"
	case a.IsLinkLocalUnicast():
		return "a link-local address"
	case a.IsMulticast():
		return "a multicast address"
	case a.IsPrivate():
		return "a private address (fc00::/7; cloud metadata services live there too)"
	}
	b := a.As16()
	switch {
	case prefix6("64:ff9b::/96").Contains(a): // NAT64: the IPv4 address is the last 4 bytes
		return embedded(netip.AddrFrom4([4]byte(b[12:16])), "NAT64")
	case prefix6("::/96").Contains(a): // IPv4-compatible, deprecated
		return embedded(netip.AddrFrom4([4]byte(b[12:16])), "IPv4-compatible")
	case prefix6("2002::/16").Contains(a): // 6to4: the IPv4 address follows the prefix
		return embedded(netip.AddrFrom4([4]byte(b[2:6])), "6to4")
	case prefix6("2001::/32").Contains(a):
		return "a Teredo tunnel address"
	case prefix6("64:ff9b:1::/48").Contains(a):
		return "a local NAT64 address"
	case prefix6("100::/64").Contains(a):
		return "a discard address"
	case prefix6("2001:db8::/32").Contains(a):
		return "a documentation address"
	case prefix6("fec0::/10").Contains(a):
		return "a site-local address"
	case b[8]&^0x02 == 0 && b[9] == 0 && b[10] == 0x5e && b[11] == 0xfe:
		// ISATAP: the interface identifier embeds an IPv4 address.
		return embedded(netip.AddrFrom4([4]byte(b[12:16])), "ISATAP")
	}
	return ""
}

func embedded(v4 netip.Addr, kind string) string {
	if why := blocked4(v4); why != "" {
		return fmt.Sprintf("a %s address embedding %s, %s", kind, v4, why)
	}
	return ""
}

var blocked4Prefixes = []struct {
	p   netip.Prefix
	why string
}{
	{netip.MustParsePrefix("0.0.0.0/8"), "in 0.0.0.0/8 (this host)"},
	{netip.MustParsePrefix("10.0.0.0/8"), "a private address"},
	{netip.MustParsePrefix("100.64.0.0/10"), "a shared (carrier-grade NAT) address, where some cloud metadata services live"},
	{netip.MustParsePrefix("127.0.0.0/8"), "a loopback address (this machine)"},
	{netip.MustParsePrefix("169.254.0.0/16"), "a link-local address, where cloud metadata services live"},
	{netip.MustParsePrefix("172.16.0.0/12"), "a private address"},
	{netip.MustParsePrefix("192.0.0.0/24"), "an IETF protocol address"},
	{netip.MustParsePrefix("192.0.2.0/24"), "a documentation address"},
	{netip.MustParsePrefix("192.88.99.0/24"), "a 6to4 relay address"},
	{netip.MustParsePrefix("192.168.0.0/16"), "a private address"},
	{netip.MustParsePrefix("198.18.0.0/15"), "a benchmarking address"},
	{netip.MustParsePrefix("198.51.100.0/24"), "a documentation address"},
	{netip.MustParsePrefix("203.0.113.0/24"), "a documentation address"},
	{netip.MustParsePrefix("224.0.0.0/4"), "a multicast address"},
	{netip.MustParsePrefix("240.0.0.0/4"), "a reserved address"},
}

func blocked4(a netip.Addr) string {
	for _, b := range blocked4Prefixes {
		if b.p.Contains(a) {
			return b.why
		}
	}
	return ""
}

func prefix6(s string) netip.Prefix { return netip.MustParsePrefix(s) }

// ParseHostAddr parses a URL host that is an address: IPv6, dotted IPv4,
// and the other IPv4 notations that C resolvers (inet_aton) and browsers
// accept, which a guard must read the same way: 2130706433, 0x7f000001,
// 0177.0.0.1, 127.1.
func ParseHostAddr(host string) (netip.Addr, bool) {
	host = strings.TrimSuffix(strings.Trim(host, "[]"), ".")
	if a, err := netip.ParseAddr(host); err == nil {
		return a.Unmap(), true
	}
	parts := strings.Split(host, ".")
	if len(parts) > 4 {
		return netip.Addr{}, false
	}
	nums := make([]uint64, len(parts))
	for i, p := range parts {
		n, ok := parseAtonPart(p)
		if !ok {
			return netip.Addr{}, false
		}
		nums[i] = n
	}
	// The last part fills the remaining bytes.
	var v uint64
	last := nums[len(nums)-1]
	for i, n := range nums[:len(nums)-1] {
		if n > 0xff {
			return netip.Addr{}, false
		}
		v |= n << (8 * (3 - i))
	}
	if last >= 1<<(8*(4-(len(nums)-1))) {
		return netip.Addr{}, false
	}
	v |= last
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), true
}

func parseAtonPart(p string) (uint64, bool) {
	if p == "" {
		return 0, false
	}
	base := 10
	switch {
	case strings.HasPrefix(p, "0x") || strings.HasPrefix(p, "0X"):
		base, p = 16, p[2:]
		if p == "" {
			return 0, true
		}
	case len(p) > 1 && p[0] == '0':
		base, p = 8, p[1:]
	}
	n, err := strconv.ParseUint(p, base, 32)
	return n, err == nil
}

// looksNumeric reports whether a host is made of numbers and dots only
// (possibly hex): such a host that ParseHostAddr refused is malformed,
// and must not be handed to a resolver that might read it its own way.
func looksNumeric(host string) bool {
	for _, part := range strings.Split(host, ".") {
		p := strings.TrimPrefix(strings.TrimPrefix(part, "0x"), "0X")
		if p == "" {
			continue
		}
		for _, r := range p {
			if !strings.ContainsRune("0123456789abcdefABCDEF", r) {
				return false
			}
		}
		if part == p && strings.IndexFunc(p, func(r rune) bool { return r > '9' }) >= 0 {
			return false // a label like "cafe" or "deadbeef" without 0x is a name
		}
	}
	return true
}
