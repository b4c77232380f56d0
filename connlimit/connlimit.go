// Package connlimit bounds the connections a server accepts: the open
// connections of each client address (the excess is refused with 429 at
// once, before a byte of its request is read) and the open connections
// in all (the excess waits in the listen queue instead of taking file
// descriptors the server needs).
package connlimit

import (
	"net"
	"net/netip"
	"strconv"
	"sync"
	"time"
)

// Limiter counts the connections of the listeners it wraps together.
type Limiter struct {
	perClient int
	slots     chan struct{}
	exempt    func(netip.Addr) bool
	hint      string

	mu   sync.Mutex
	open map[string]int
}

// New returns a limiter of perClient connections per client address and
// total in all. exempt, when set, names the addresses that only the total
// bounds (a reverse proxy, whose connections carry many clients). hint
// ends the answer to a refused connection: what to do about it.
func New(perClient, total int, exempt func(netip.Addr) bool, hint string) *Limiter {
	return &Limiter{perClient: perClient, slots: make(chan struct{}, total), exempt: exempt, hint: hint, open: map[string]int{}}
}

// Listen wraps ln: its connections count against l.
func (l *Limiter) Listen(ln net.Listener) net.Listener {
	return &listener{Listener: ln, l: l, done: make(chan struct{})}
}

type listener struct {
	net.Listener
	l         *Limiter
	done      chan struct{}
	closeOnce sync.Once
}

func (ln *listener) Accept() (net.Conn, error) {
	l := ln.l
	for {
		select {
		case l.slots <- struct{}{}:
		case <-ln.done:
			return nil, net.ErrClosed
		}
		c, err := ln.Listener.Accept()
		if err != nil {
			<-l.slots
			return nil, err
		}
		host := clientHost(c.RemoteAddr())
		if l.exempt != nil {
			if a, err := netip.ParseAddr(host); err == nil && l.exempt(a.Unmap()) {
				return &conn{Conn: c, release: func() { <-l.slots }}, nil
			}
		}
		l.mu.Lock()
		if l.open[host] >= l.perClient {
			l.mu.Unlock()
			<-l.slots
			go l.refuse(c)
			continue
		}
		l.open[host]++
		l.mu.Unlock()
		return &conn{Conn: c, release: func() {
			l.mu.Lock()
			if l.open[host]--; l.open[host] <= 0 {
				delete(l.open, host)
			}
			l.mu.Unlock()
			<-l.slots
		}}, nil
	}
}

func (ln *listener) Close() error {
	ln.closeOnce.Do(func() { close(ln.done) })
	return ln.Listener.Close()
}

// refuse answers 429 without reading the request, and closes.
func (l *Limiter) refuse(c net.Conn) {
	defer c.Close()
	msg := "too many connections from this address: close some"
	if l.hint != "" {
		msg += ", or " + l.hint
	}
	_ = c.SetWriteDeadline(time.Now().Add(time.Second))
	_, _ = c.Write([]byte("HTTP/1.1 429 Too Many Requests\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\nContent-Length: " + strconv.Itoa(len(msg)) + "\r\n\r\n" + msg))
}

// clientHost is the address a connection comes from, without its port.
func clientHost(a net.Addr) string {
	host, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	return host
}

// conn gives its slot back when closed.
type conn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *conn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// CloseWrite half-closes a TCP connection, as net/http does before it
// closes one after an answer.
func (c *conn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
