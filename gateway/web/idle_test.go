package web

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"

	"github.com/nbots/nb/gateway"
	"github.com/nbots/nb/gateway/access"
	"github.com/nbots/nb/gateway/bus"
	"github.com/nbots/nb/gateway/session"
	"github.com/nbots/nb/internal/httpguard"
)

// holderToken is the token holder's secret.
const holderToken = "a-secret-token-of-the-holder-0123456789"

// listener starts the gateway's listener as nb gateway does (Start), with
// a token and a webhook that refuses requests without its secret without
// reading them, as the Telegram channel does. It returns the listener's
// address and what stops it.
func listener(t testing.TB, dir string) (string, func()) {
	t.Helper()
	sm, _ := session.NewManager(dir + "/sessions")
	b := bus.NewLocal()
	log := slog.New(slog.DiscardHandler)
	g := &gateway.Gateway{Bus: b, Sessions: sm, Runner: fakeRunner{}, Prompt: &gateway.Prompt{Workspace: dir}, Log: log,
		Access: &access.Checker{Pairings: &access.FilePairings{Path: dir + "/pairing.json"}}}
	g.Alone()
	tok, err := httpguard.NewToken("owner", holderToken)
	if err != nil {
		t.Fatal(err)
	}
	hook := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Telegram-Bot-Api-Secret-Token") != "the-webhook-secret" {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		io.Copy(io.Discard, r.Body) //nolint:errcheck // a test
	})
	s := &Server{Gateway: g, Sessions: sm, Tokens: []*httpguard.Token{tok}, Log: log, Webhooks: map[string]http.Handler{"/telegram/hook": hook}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	stop := s.Start(ln)
	return ln.Addr().String(), func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		stop(ctx) //nolint:errcheck // a test
		sm.Close()
		b.Close()
	}
}

// attacked starts the listener in this process.
func attacked(t *testing.T) (addr, token string) {
	addr, stop := listener(t, t.TempDir())
	t.Cleanup(stop)
	return addr, holderToken
}

// dialFrom connects to addr from the loopback address from ("": any).
func dialFrom(from, addr string) (net.Conn, error) {
	d := net.Dialer{Timeout: 5 * time.Second}
	if from != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(from)}
	}
	return d.Dial("tcp", addr)
}

// idle opens a connection that holds the listener as the probe did: a
// GET /health answered then silence, a webhook POST without the secret
// and with a body that never comes, a 401 whose body is never sent, or
// nothing at all.
func idle(t *testing.T, kind int, from, addr string) net.Conn {
	c, err := dialFrom(from, addr)
	if err != nil {
		t.Fatalf("connection from %s: %v", from, err)
	}
	switch kind {
	case 0:
		fmt.Fprintf(c, "GET /health HTTP/1.1\r\nHost: %s\r\n\r\n", addr)
	case 1:
		fmt.Fprintf(c, "POST /telegram/hook HTTP/1.1\r\nHost: %s\r\nContent-Length: 100000\r\n\r\n{", addr)
	case 2:
		fmt.Fprintf(c, "POST /ready HTTP/1.1\r\nHost: %s\r\nContent-Length: 100000\r\n\r\n", addr)
	}
	return c
}

// holderServed checks that the token holder gets /ready and a working
// /ws promptly.
func holderServed(t *testing.T, addr, token string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+addr+"/ready", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, a string) (net.Conn, error) { return dialFrom("127.0.0.1", a) }}}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("the token holder's /ready: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable && resp.StatusCode != http.StatusOK {
		t.Fatalf("the token holder's /ready: %s", resp.Status)
	}
	ws, _, err := websocket.Dial(ctx, "ws://"+addr+"/ws", &websocket.DialOptions{HTTPClient: client, HTTPHeader: http.Header{"Authorization": {"Bearer " + token}}})
	if err != nil {
		t.Fatalf("the token holder's /ws: %v", err)
	}
	defer ws.CloseNow()
	var f Frame
	if err := wsjson.Read(ctx, ws, &f); err != nil || f.Type != "sessions" {
		t.Fatalf("the token holder's /ws: %+v %v", f, err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("the token holder waited %s", d)
	}
}

// TestEarlyAnswerCloses: a 401 given before the body was read says
// Connection: close and closes the connection, on the webhook and on the
// guarded routes; the body's sender is not waited for.
func TestEarlyAnswerCloses(t *testing.T) {
	addr, _ := attacked(t)
	for _, path := range []string{"/telegram/hook", "/ready"} {
		c := idle(t, map[string]int{"/telegram/hook": 1, "/ready": 2}[path], "", addr)
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		io.Copy(io.Discard, resp.Body) //nolint:errcheck // a test
		if resp.StatusCode != http.StatusUnauthorized || !resp.Close {
			t.Fatalf("%s: %s, close %v", path, resp.Status, resp.Close)
		}
		start := time.Now()
		if _, err := br.ReadByte(); err != io.EOF {
			t.Fatalf("%s: the connection stays open after the 401 (%v)", path, err)
		}
		if d := time.Since(start); d > time.Second {
			t.Fatalf("%s: closed after %s", path, d)
		}
	}
}
