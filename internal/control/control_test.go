package control

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/nbots/nb/internal/httpguard"
)

const secret = "0123456789abcdef0123"

func newPage(t *testing.T, tokens bool) *httptest.Server {
	t.Helper()
	o := Options{Server: "nb test", Tables: func(context.Context) []Table {
		return []Table{{ID: "things", Title: "Things", Columns: []string{"a"}, Rows: [][]any{{"x"}}}}
	}}
	if tokens {
		tok, _ := httpguard.NewToken("", secret)
		o.Tokens = []*httpguard.Token{tok}
	}
	srv := httptest.NewServer(New(o))
	t.Cleanup(srv.Close)
	return srv
}

// noRedirect is a client that shows redirects instead of following them.
var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

func send(t *testing.T, method, u, body string, header ...string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(method, u, strings.NewReader(body))
	for i := 0; i+1 < len(header); i += 2 {
		if header[i] == "Host" {
			req.Host = header[i+1]
			continue
		}
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// With a token: the page loads, the state needs the login, the login
// takes the token from the body and answers with a strict cookie, and
// the cookie opens the state.
func TestLoginWithToken(t *testing.T) {
	srv := newPage(t, true)
	if resp, body := send(t, "GET", srv.URL+"/control", ""); resp.StatusCode != 200 || !strings.Contains(body, `action="/control/login"`) {
		t.Fatalf("page: %d", resp.StatusCode)
	}
	if resp, _ := send(t, "GET", srv.URL+"/control/api/state", ""); resp.StatusCode != 401 {
		t.Errorf("state without login: %d", resp.StatusCode)
	}
	form := "application/x-www-form-urlencoded"
	if resp, _ := send(t, "POST", srv.URL+"/control/login", "token=wrong-token-wrong-token", "Content-Type", form); resp.StatusCode != 401 {
		t.Errorf("wrong token: %d", resp.StatusCode)
	}
	if resp, _ := send(t, "POST", srv.URL+"/control/login", "token="+secret, "Content-Type", form, "Origin", "http://evil.example"); resp.StatusCode != 403 {
		t.Errorf("foreign origin: %d", resp.StatusCode)
	}
	resp, _ := send(t, "POST", srv.URL+"/control/login", "token="+url.QueryEscape(secret), "Content-Type", form, "Origin", srv.URL)
	if resp.StatusCode != http.StatusSeeOther || strings.Contains(resp.Header.Get("Location"), secret) {
		t.Fatalf("login: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	cookie := resp.Header.Get("Set-Cookie")
	for _, want := range []string{CookieName + "=", "HttpOnly", "SameSite=Strict", "Path=/control"} {
		if !strings.Contains(cookie, want) {
			t.Errorf("cookie %q lacks %s", cookie, want)
		}
	}
	if strings.Contains(cookie, secret) {
		t.Error("the cookie holds the token")
	}
	c := resp.Cookies()[0]
	resp, body := send(t, "GET", srv.URL+"/control/api/state", "", "Cookie", c.Name+"="+c.Value)
	if resp.StatusCode != 200 {
		t.Fatalf("state with the cookie: %d %s", resp.StatusCode, body)
	}
	var st State
	if err := json.Unmarshal([]byte(body), &st); err != nil || st.Server != "nb test" || len(st.Minutes) != 60 || len(st.Days) != 30 || len(st.Tables) != 1 {
		t.Errorf("state: %v %+v", err, st)
	}
	if resp, _ := send(t, "GET", srv.URL+"/control/api/state", "", "Cookie", c.Name+"=forged"); resp.StatusCode != 401 {
		t.Errorf("a forged cookie: %d", resp.StatusCode)
	}
	if resp, _ := send(t, "GET", srv.URL+"/control/api/state", "", "Cookie", c.Name+"="+c.Value, "Origin", "http://evil.example"); resp.StatusCode != 403 {
		t.Errorf("the cookie from a foreign origin: %d", resp.StatusCode)
	}
}

// Without a token: loopback names only, the page's own origin only.
func TestWithoutTokenLoopbackOnly(t *testing.T) {
	srv := newPage(t, false)
	if resp, _ := send(t, "GET", srv.URL+"/control/api/state", ""); resp.StatusCode != 200 {
		t.Errorf("loopback: %d", resp.StatusCode)
	}
	if resp, _ := send(t, "GET", srv.URL+"/control/api/state", "", "Host", "rebound.example"); resp.StatusCode != 403 {
		t.Errorf("rebinding host: %d", resp.StatusCode)
	}
	if resp, _ := send(t, "GET", srv.URL+"/control", "", "Origin", "http://evil.example"); resp.StatusCode != 403 {
		t.Errorf("foreign origin: %d", resp.StatusCode)
	}
	if resp, _ := send(t, "GET", srv.URL+"/control/api/state", "", "Origin", srv.URL); resp.StatusCode != 200 {
		t.Errorf("own origin: %d", resp.StatusCode)
	}
	resp, _ := send(t, "GET", srv.URL+"/control", "")
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "http") {
		t.Errorf("CSP %q", csp)
	}
}
