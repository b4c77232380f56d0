package httpguard

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestCheckListen(t *testing.T) {
	for addr, ok := range map[string]bool{"127.0.0.1:3048": true, "localhost:3048": true, "[::1]:3048": true, "0.0.0.0:3048": false, ":3048": false, "192.168.1.2:80": false, "nonsense": false} {
		err := CheckListen(addr, 0)
		if (err == nil) != ok {
			t.Errorf("%s: %v", addr, err)
		}
		var le *ListenError
		if err != nil && (!errors.As(err, &le) || le.Addr != addr) {
			t.Errorf("%s: %v is not a *ListenError for the address", addr, err)
		}
		// The library names no flag or variable: each command words that.
		if err != nil && strings.Contains(err.Error(), "--") {
			t.Errorf("%s: the library's message names a flag: %v", addr, err)
		}
		if err := CheckListen(addr, 1); err != nil {
			t.Errorf("%s with a token: %v", addr, err)
		}
	}
}

func TestAuthenticate(t *testing.T) {
	a, err := NewToken("a", strings.Repeat("a", MinTokenLength))
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewToken("b", strings.Repeat("b", MinTokenLength))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewToken("short", "abc"); err == nil {
		t.Error("a 3-character secret was taken")
	}
	for header, want := range map[string]*Token{
		"Bearer " + strings.Repeat("b", MinTokenLength):  b,
		"bearer  " + strings.Repeat("a", MinTokenLength): a,
		"Bearer " + strings.Repeat("c", MinTokenLength):  nil,
		"Basic " + strings.Repeat("a", MinTokenLength):   nil,
		"": nil,
	} {
		r := httptest.NewRequest("GET", "/", nil)
		if header != "" {
			r.Header.Set("Authorization", header)
		}
		got, err := Authenticate([]*Token{a, b}, r)
		var ae *AuthError
		if got != want || (want == nil && !errors.As(err, &ae)) {
			t.Errorf("%q: %v, %v; want %v", header, got, err, want)
		}
	}
}

func TestBrowserGuard(t *testing.T) {
	g := BrowserGuard{Origins: []string{"https://ok.example"}, Why: "this server answers", Fix: "allow %s", HostFix: "use a token"}
	loopback := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 80}
	for _, tt := range []struct {
		host, origin string
		refused      bool
	}{
		{"localhost:80", "", false},
		{"127.0.0.1", "https://ok.example", false},
		{"evil.example", "", true}, // DNS rebinding to a loopback listener
		{"localhost", "https://evil.example", true},
		{"app.localhost", "", false},
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r = r.WithContext(context.WithValue(r.Context(), http.LocalAddrContextKey, net.Addr(loopback)))
		r.Host = tt.host
		if tt.origin != "" {
			r.Header.Set("Origin", tt.origin)
		}
		if msg := g.Refused(r); (msg != "") != tt.refused {
			t.Errorf("host %q origin %q: refused %q, want refused %v", tt.host, tt.origin, msg, tt.refused)
		}
	}
}

func TestRunChecks(t *testing.T) {
	ok, res := RunChecks(context.Background(), []Check{
		{Name: "store", Run: func(context.Context) error { return nil }},
		{Name: "bus", Run: func(context.Context) error { return errors.New("not connected") }},
	})
	if ok || res["store"] != "ok" || res["bus"] != "not connected" {
		t.Fatalf("RunChecks = %v, %v", ok, res)
	}
}
