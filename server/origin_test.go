package server

import (
	"net/http"
	"strings"
	"testing"
)

// Without tokens (loopback only), any web page the user opens could drive
// the server: CORS "*" lets it read the answers, a "simple" POST needs no
// preflight, and DNS rebinding makes it look same-origin. So a server
// without tokens answers browsers only from the allowed origins (the
// Obsidian plugin's by default), and only requests addressed to a
// loopback name.
func TestBrowsersWithoutToken(t *testing.T) {
	f := newFixture(t, nil, nil)
	url := f.serve(map[string]http.HandlerFunc{"POST /echo": echoRoute, "GET /list": echoRoute})
	evil := "https://evil.example"

	// A page of another site: refused, before the route runs, with no
	// CORS header to let it read why.
	resp, body := get(t, "POST", url+"/echo", "run", "Origin", evil, "Content-Type", "text/plain")
	if resp.StatusCode != 403 || strings.Contains(body, "run") || resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("a foreign page's POST: %d %s %v", resp.StatusCode, body, resp.Header)
	}
	resp, _ = get(t, "OPTIONS", url+"/echo", "", "Origin", evil, "Access-Control-Request-Method", "POST", "Access-Control-Request-Headers", "content-type")
	if resp.StatusCode/100 == 2 || resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("a foreign page's preflight: %d %v", resp.StatusCode, resp.Header)
	}
	resp, _ = get(t, "OPTIONS", url+"/echo", "", "Origin", "null", "Access-Control-Request-Method", "POST")
	if resp.StatusCode/100 == 2 {
		t.Errorf("an opaque origin's preflight: %d", resp.StatusCode)
	}
	// DNS rebinding: the page's own name now points at 127.0.0.1, so its
	// GETs carry no Origin, only its Host.
	resp, _ = get(t, "GET", url+"/list", "", "Host", "evil.example:3048")
	if resp.StatusCode != 403 {
		t.Errorf("a request for another host: %d", resp.StatusCode)
	}

	// Obsidian, other programs (no Origin) and loopback names: served.
	resp, _ = get(t, "OPTIONS", url+"/echo", "", "Origin", "app://obsidian.md", "Access-Control-Request-Method", "POST", "Access-Control-Request-Headers", "content-type,nano_bots_end_user")
	if resp.StatusCode != 204 || resp.Header.Get("Access-Control-Allow-Origin") == "" {
		t.Errorf("obsidian's preflight: %d %v", resp.StatusCode, resp.Header)
	}
	for _, h := range [][]string{
		{"Origin", "app://obsidian.md"},
		nil,
		{"Host", "localhost:3048"},
		{"Host", "[::1]:3048"},
	} {
		resp, body = get(t, "POST", url+"/echo", "x", h...)
		if resp.StatusCode != 200 || body != `{"body":"x"}` {
			t.Errorf("%v: %d %s", h, resp.StatusCode, body)
		}
	}

	// The operator may allow other origins, or any.
	f2 := newFixture(t, nil, func(o *Options) { o.AllowOrigins = []string{"http://localhost:5173"} })
	url2 := f2.serve(map[string]http.HandlerFunc{"POST /echo": echoRoute})
	if resp, _ := get(t, "POST", url2+"/echo", "x", "Origin", "http://localhost:5173"); resp.StatusCode != 200 {
		t.Errorf("an allowed origin: %d", resp.StatusCode)
	}
	if resp, _ := get(t, "POST", url2+"/echo", "x", "Origin", "app://obsidian.md"); resp.StatusCode != 403 {
		t.Errorf("an origin no longer allowed: %d", resp.StatusCode)
	}
	f3 := newFixture(t, nil, func(o *Options) { o.AllowOrigins = []string{"*"} })
	url3 := f3.serve(map[string]http.HandlerFunc{"POST /echo": echoRoute})
	if resp, _ := get(t, "POST", url3+"/echo", "x", "Origin", evil); resp.StatusCode != 200 {
		t.Errorf("any origin allowed: %d", resp.StatusCode)
	}

	// With tokens, a page needs the token: every origin and host is served.
	tok, _ := NewToken("", "s3cret-token-0123456789")
	f4 := newFixture(t, nil, func(o *Options) { o.Tokens = []*Token{tok} })
	url4 := f4.serve(map[string]http.HandlerFunc{"POST /echo": echoRoute})
	resp, _ = get(t, "POST", url4+"/echo", "x", "Origin", evil, "Host", "nb.example", "Authorization", "Bearer s3cret-token-0123456789")
	if resp.StatusCode != 200 || resp.Header.Get("Access-Control-Allow-Origin") != "*" {
		t.Errorf("with a token: %d %v", resp.StatusCode, resp.Header)
	}
}
