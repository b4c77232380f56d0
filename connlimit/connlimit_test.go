package connlimit

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"
)

// accepted runs Accept on ln until it fails, keeping the connections.
func accepted(ln net.Listener) chan net.Conn {
	out := make(chan net.Conn, 16)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				close(out)
				return
			}
			out <- c
		}
	}()
	return out
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// The two listeners of one limiter share its count per address; the
// excess is answered 429 with the hint and closed; a closed connection
// gives its place back; an exempt address is not counted.
func TestLimiter(t *testing.T) {
	for _, exempt := range []bool{false, true} {
		var ex func(netip.Addr) bool
		if exempt {
			ex = func(a netip.Addr) bool { return a.IsLoopback() }
		}
		l := New(2, 100, ex, "ask for more")
		var addrs []string
		var got []chan net.Conn
		for range 2 {
			inner, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			ln := l.Listen(inner)
			defer ln.Close()
			addrs = append(addrs, ln.Addr().String())
			got = append(got, accepted(ln))
		}
		dial(t, addrs[0])
		first := <-got[0]
		dial(t, addrs[1])
		<-got[1]
		third := dial(t, addrs[1])
		if exempt {
			<-got[1]
			continue
		}
		third.SetReadDeadline(time.Now().Add(2 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(third), nil)
		if err != nil || resp.StatusCode != 429 {
			t.Fatalf("a third connection: %v %v", resp, err)
		}
		body := make([]byte, 100)
		n, _ := resp.Body.Read(body)
		if want := "too many connections from this address: close some, or ask for more"; string(body[:n]) != want {
			t.Errorf("429 body %q", body[:n])
		}
		first.Close()
		dial(t, addrs[0])
		select {
		case <-got[0]:
		case <-time.After(2 * time.Second):
			t.Error("a closed connection did not give its place back")
		}
	}
}

// When every slot is taken, a new connection closes the one idle the
// longest (never one in a request or handed over): a client holding
// silent connections cannot keep the others out.
func TestEvictsTheLongestIdle(t *testing.T) {
	l := New(10, 2, nil, "")
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	busy := make(chan struct{})
	hs := l.Server(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/busy" {
			<-busy
		}
	}), DefaultLimits.WithDefaults(), nil)
	go hs.Serve(l.Listen(inner))
	defer hs.Close()
	defer close(busy)
	addr := inner.Addr().String()
	silent := dial(t, addr) // idle from the start
	time.Sleep(50 * time.Millisecond)
	working := dial(t, addr)
	working.Write([]byte("GET /busy HTTP/1.1\r\nHost: x\r\n\r\n"))
	time.Sleep(50 * time.Millisecond)
	late := dial(t, addr)
	late.SetDeadline(time.Now().Add(5 * time.Second))
	late.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
	resp, err := http.ReadResponse(bufio.NewReader(late), nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("the new connection: %v %v", resp, err)
	}
	silent.SetReadDeadline(time.Now().Add(time.Second))
	if _, err := silent.Read(make([]byte, 1)); err == nil || isTimeout(err) {
		t.Fatalf("the silent connection was not closed: %v", err)
	}
	working.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	if _, err := working.Read(make([]byte, 1)); !isTimeout(err) {
		t.Fatalf("the connection in a request was closed: %v", err)
	}
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

// Bodies: a body over MaxBody is refused 413 unread, a body that
// trickles is cut, and any answer given before the body was read whole
// closes the connection.
func TestBodies(t *testing.T) {
	lim := Limits{MaxBody: 10, BodyTimeout: 3 * time.Second}.WithDefaults()
	h := Bodies(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/refuse" {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		if _, err := io.ReadAll(r.Body); err != nil {
			http.Error(w, err.Error(), http.StatusRequestTimeout)
			return
		}
		w.Write([]byte("read"))
	}), lim)
	srv := httptest.NewServer(h)
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	for _, tc := range []struct {
		req    string
		status int
		close  bool
	}{
		{"POST /read HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\nabcd", 200, false},
		{"POST /refuse HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\nab", 401, true},
		{"POST /read HTTP/1.1\r\nHost: x\r\nContent-Length: 40\r\n\r\nab", 413, true},
		{"POST /read HTTP/1.1\r\nHost: x\r\nContent-Length: 8\r\n\r\nab", 408, true},
	} {
		c := dial(t, addr)
		c.SetDeadline(time.Now().Add(10 * time.Second))
		c.Write([]byte(tc.req))
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("%q: %v", tc.req, err)
		}
		io.Copy(io.Discard, resp.Body)
		if resp.StatusCode != tc.status || resp.Close != tc.close {
			t.Errorf("%q: %s, close %v", tc.req, resp.Status, resp.Close)
		}
		if tc.close {
			if _, err := br.ReadByte(); err != io.EOF {
				t.Errorf("%q: the connection stays open: %v", tc.req, err)
			}
		}
	}
}
