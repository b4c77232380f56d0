package server

import (
	"context"
	"errors"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"
)

// brokenListener accepts nothing: its Accept fails as a listener whose
// descriptor was taken away does.
type brokenListener struct{ net.Listener }

func (l brokenListener) Accept() (net.Conn, error) {
	return nil, errors.New("accept: the listener's descriptor was closed")
}

// A listener that fails shuts the whole server down: Serve returns its
// failure, named, the other listener stops answering, and every
// goroutine Serve started (the listeners, the watcher, the shutdown)
// has ended.
func TestServeListenerFailure(t *testing.T) {
	f := newFixture(t, nil, func(o *Options) {
		o.WatchInterval = 10 * time.Millisecond
		o.Limits.Grace = 100 * time.Millisecond
	})
	good, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	other, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	before := runtime.NumGoroutine()
	// Called here, not in a goroutine of the test's: the goroutines are
	// counted the moment it returns (a hang is the test's timeout).
	err = f.srv.Serve(context.Background(), good, brokenListener{other})
	if err == nil || !strings.HasPrefix(err.Error(), "listener "+other.Addr().String()+": ") || !strings.Contains(err.Error(), "descriptor was closed") {
		t.Fatalf("Serve: %v, want the broken listener's failure, named", err)
	}
	if c, err := net.DialTimeout("tcp", good.Addr().String(), time.Second); err == nil {
		c.Close()
		t.Error("the good listener still accepts")
	}
	// Serve's goroutines have returned; the group's may still be
	// exiting, for a moment.
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		runtime.Gosched()
		time.Sleep(time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		buf := make([]byte, 1<<16)
		t.Errorf("%d goroutines after Serve returned, %d before it started:\n%s", n, before, buf[:runtime.Stack(buf, true)])
	}
}
