package web

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nbots/nb/gateway"
	"github.com/nbots/nb/gateway/access"
	"github.com/nbots/nb/gateway/bus"
	"github.com/nbots/nb/gateway/session"
)

// failingListener accepts nothing: its Accept fails at once.
type failingListener struct{ net.Listener }

func (failingListener) Accept() (net.Conn, error) {
	return nil, errors.New("accept: too many open files")
}

func serveTestServer(t *testing.T) *Server {
	t.Helper()
	dir := t.TempDir()
	sm, err := session.NewManager(dir + "/sessions")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sm.Close() })
	b := bus.NewLocal()
	t.Cleanup(func() { b.Close() })
	log := slog.New(slog.DiscardHandler)
	g := &gateway.Gateway{Bus: b, Sessions: sm, Runner: fakeRunner{}, Prompt: &gateway.Prompt{Workspace: dir}, Log: log,
		Access: &access.Checker{Pairings: &access.FilePairings{Path: dir + "/pairing.json"}}}
	g.Alone()
	return &Server{Gateway: g, Sessions: sm, Log: log}
}

// TestServeReturnsTheListenersFailure: a listener that fails ends Serve
// with its error (nb gateway dropped it before), and the other listener
// is closed.
func TestServeReturnsTheListenersFailure(t *testing.T) {
	s := serveTestServer(t)
	good, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	bad, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(context.Background(), good, failingListener{bad}) }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "too many open files") || !strings.Contains(err.Error(), bad.Addr().String()) {
			t.Errorf("Serve: %v, want the failing listener's error naming its address", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return when its listener failed")
	}
	if _, err := http.Get("http://" + good.Addr().String() + "/health"); err == nil {
		t.Error("the other listener still serves after Serve returned")
	}
}

// TestServeEndsWithItsContext: Serve serves until its context ends, then
// returns nil.
func TestServeEndsWithItsContext(t *testing.T) {
	s := serveTestServer(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	resp, err := http.Get("http://" + ln.Addr().String() + "/health")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Serve: %v", err)
	}
}
