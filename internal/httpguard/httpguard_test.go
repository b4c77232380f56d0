package httpguard

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/nbots/nb/admission"
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

// Bearer reads the header as Authenticate does (the scheme in any case,
// the spaces around the secret left out) for a secret of any length;
// an empty secret allows nothing.
func TestBearer(t *testing.T) {
	check, none := Bearer("abc"), Bearer("")
	for header, want := range map[string]bool{
		"Bearer abc":    true,
		"bearer abc":    true,
		"BEARER   abc ": true,
		"Bearer abd":    false,
		"Bearer ab":     false,
		"Bearer abcd":   false,
		"Basic abc":     false,
		"abc":           false,
		"Bearer":        false,
		"Bearer ":       false,
		"":              false,
	} {
		r := httptest.NewRequest("GET", "/", nil)
		if header != "" {
			r.Header.Set("Authorization", header)
		}
		if got := check(r); got != want {
			t.Errorf("%q: %v, want %v", header, got, want)
		}
		if none(r) {
			t.Errorf("%q passed the check of no secret", header)
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

// TestParseTokens: a tokens file is read with its secrets or their
// SHA-256, and every mistake is named without quoting a secret.
func TestParseTokens(t *testing.T) {
	good := `tokens:
  - name: editor
    token: 0123456789abcdef
    cartridges: [writer, "team/*"]
    rate: 60/minute
    concurrent: 2
  - name: ci
    sha256: 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08
`
	tokens, err := ParseTokens([]byte(good), "tokens.yml")
	if err != nil {
		t.Fatal(err)
	}
	if len(tokens) != 2 || tokens[0].Rate != (admission.Rate{N: 60, Per: time.Minute}) || tokens[0].MaxRuns != 2 || !tokens[0].Allows("team/x") || tokens[0].Allows("other") || !tokens[1].Allows("anything") {
		t.Fatalf("%+v", tokens)
	}
	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Set("Authorization", "Bearer test") // sha256("test") is the ci token
	if tok, err := Authenticate(tokens, r); err != nil || tok.Name != "ci" {
		t.Fatalf("sha256 token: %v %v", tok, err)
	}
	for _, tc := range []struct{ src, want string }{
		{"tokens:\n  - token: 0123456789abcdef\n", "tokens file t.yml: tokens[0]: name is missing"},
		{"tokens:\n  - name: a\n    token: short\n", "tokens[0] (a): token: the token is 5 characters long: use at least 16"},
		{"tokens:\n  - name: a\n    token: 0123456789abcdef\n    rate: 5/week\n", `tokens[0] (a): rate "5/week": the period must be second, minute or hour`},
		{"tokens:\n  - name: a\n    token: 0123456789abcdef\n  - name: a\n    token: 0123456789abcdeg\n", `the name "a" is used twice`},
		{"tokens:\n  - name: a\n    token: 0123456789abcdef\n  - name: b\n    token: 0123456789abcdef\n", "a and b have the same secret"},
		{"tokens:\n  - name: a\n    tokn: 0123456789abcdef\n", `line 3: unknown field "tokn"`},
		{"tokens:\n  - name: a\n    token: my-secret-value-1234\n    rate: [\n", "line 4: "},
		{"tokens: []\n", "no tokens"},
	} {
		_, err := ParseTokens([]byte(tc.src), "t.yml")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.src, err, tc.want)
		}
		if err != nil && (strings.Contains(err.Error(), "my-secret-value") || strings.Contains(err.Error(), "0123456789abcde")) {
			t.Errorf("the error quotes a secret: %v", err)
		}
	}
}
