package connlimit

import (
	"bufio"
	"net"
	"net/http"
	"net/netip"
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
