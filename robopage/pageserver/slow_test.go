package pageserver

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nbots/nb/robopage"
)

// serveLimited runs Serve with lim on a loopback port and returns its
// address.
func serveLimited(t *testing.T, token string, lim Limits) string {
	t.Helper()
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "tools.yml"), []byte(testPage), 0o644)
	lib, err := robopage.Load(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	h := &Server{Library: lib, Executor: &robopage.Executor{Environ: os.Environ()}, Token: token, Log: quietLog()}
	go func() { done <- Serve(ctx, ln, h, lim) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return ln.Addr().String()
}

// slowRequest opens a connection and sends the headers of a POST
// /process that announces a body of 1000 bytes, then the first byte.
func slowRequest(t *testing.T, addr string, header ...string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	req := "POST /process HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n"
	for _, h := range header {
		req += h + "\r\n"
	}
	if _, err := io.WriteString(c, req+"\r\n["); err != nil {
		t.Fatal(err)
	}
	return c
}

// trickle sends one byte every interval until the connection fails or
// stop is closed.
func trickle(c net.Conn, interval time.Duration, stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		case <-time.After(interval):
		}
		if _, err := c.Write([]byte(" ")); err != nil {
			return
		}
	}
}

// answer reads the status line the server sends within d; "" when none.
func answer(c net.Conn, d time.Duration) string {
	c.SetReadDeadline(time.Now().Add(d))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return ""
	}
	resp.Body.Close()
	return resp.Status
}

// closedWithin reports whether the server closes c within d.
func closedWithin(c net.Conn, d time.Duration) bool {
	c.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, c)
	var ne net.Error
	return !(errors.As(err, &ne) && ne.Timeout())
}

// A client without the token gets its 401 at once, however slowly it
// sends its body: the body is never read.
func TestSlowBodyUnauthorized(t *testing.T) {
	addr := serveLimited(t, "s3cret", Limits{})
	stop := make(chan struct{})
	defer close(stop)
	for _, hdr := range [][]string{nil, {"Authorization: Bearer wrong"}} {
		c := slowRequest(t, addr, hdr...)
		go trickle(c, 200*time.Millisecond, stop)
		if got := answer(c, 5*time.Second); got != "401 Unauthorized" {
			t.Errorf("%v: answer %q, want 401 at once", hdr, got)
		}
		if !closedWithin(c, 2*time.Second) {
			t.Errorf("%v: the connection stayed open after the 401", hdr)
		}
	}
}

// A body that trickles in is cut off after the read timeout, with the
// token too; so are headers that never end.
func TestSlowBodyTimeout(t *testing.T) {
	addr := serveLimited(t, "s3cret", Limits{ReadTimeout: 300 * time.Millisecond})
	stop := make(chan struct{})
	defer close(stop)
	c := slowRequest(t, addr, "Authorization: Bearer s3cret")
	go trickle(c, 100*time.Millisecond, stop)
	start := time.Now()
	if got := answer(c, 3*time.Second); got != "408 Request Timeout" {
		t.Errorf("answer %q after %v, want 408", got, time.Since(start))
	}
	if !closedWithin(c, 2*time.Second) {
		t.Error("the connection stayed open")
	}

	// Headers that never end are cut off too.
	addr = serveLimited(t, "", Limits{HeaderTimeout: 300 * time.Millisecond})
	h, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	io.WriteString(h, "POST /process HTTP/1.1\r\nHost: x\r\n")
	if !closedWithin(h, 3*time.Second) {
		t.Error("the header timeout did not close the connection")
	}
}

// Many slow clients: each is closed after the read timeout, and one
// address cannot hold more than its share of connections (the rest are
// refused with 429 at once) while others are still served.
func TestSlowClientsBounded(t *testing.T) {
	addr := serveLimited(t, "", Limits{ReadTimeout: 2 * time.Second, MaxClientConns: 10})
	stop := make(chan struct{})
	defer close(stop)
	var conns []net.Conn
	for i := 0; i < 10; i++ {
		c := slowRequest(t, addr)
		go trickle(c, 200*time.Millisecond, stop)
		conns = append(conns, c)
	}
	// The listen queue is first in, first out: the ten are accepted, and
	// counted, before the next ones.
	for i := 0; i < 5; i++ {
		c := slowRequest(t, addr)
		if got := answer(c, 5*time.Second); got != "429 Too Many Requests" {
			t.Errorf("connection %d over the limit: %q, want 429", 11+i, got)
		}
	}
	start := time.Now()
	var wg sync.WaitGroup
	var mu sync.Mutex
	open := 0
	for _, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if !closedWithin(c, 6*time.Second) {
				mu.Lock()
				open++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if open > 0 {
		t.Errorf("%d slow connections still open %v later", open, time.Since(start))
	}
	// Their slots are free again.
	resp, err := http.Get("http://" + addr + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("after the slow clients: %s", resp.Status)
	}
}

// Beyond MaxConns, connections wait for a free slot instead of taking
// more file descriptors.
func TestMaxConnsWait(t *testing.T) {
	addr := serveLimited(t, "", Limits{MaxConns: 2, IdleTimeout: time.Minute})
	var held []net.Conn
	for i := 0; i < 2; i++ {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		held = append(held, c)
	}
	time.Sleep(100 * time.Millisecond)
	c, err := net.Dial("tcp", addr) // queued in the listen backlog
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	if got := answer(c, 300*time.Millisecond); got != "" {
		t.Fatalf("a third connection was served at once: %q", got)
	}
	held[0].Close()
	if got := answer(c, 10*time.Second); !strings.HasPrefix(got, "200") {
		t.Errorf("the waiting connection got %q once a slot was free", got)
	}
}
