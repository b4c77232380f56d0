// Package connlimit bounds the connections an HTTP server accepts and
// what it waits for on them, for every listener of nb (nb serve, nb
// gateway): the open connections of each client address (the excess is
// refused with 429 at once, before a byte of its request is read), the
// open connections in all (when they are all taken, the one idle the
// longest is closed for a new one; with none idle the new one waits in the
// listen queue instead of taking file descriptors the server needs), and
// the deadlines of headers, bodies and idle connections (Limits).
package connlimit

import (
	"net"
	"net/http"
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
	// idle are the connections that wait for a request (new ones, and
	// kept-alive ones between requests), since when: the first to close
	// when every slot is taken (see ConnState).
	idle map[*conn]time.Time
}

// evictPoll is how often an Accept that found every slot taken and no
// connection idle looks again for one that became idle.
const evictPoll = 50 * time.Millisecond

// New returns a limiter of perClient connections per client address and
// total in all. exempt, when set, names the addresses that only the total
// bounds (a reverse proxy, whose connections carry many clients). hint
// ends the answer to a refused connection: what to do about it.
func New(perClient, total int, exempt func(netip.Addr) bool, hint string) *Limiter {
	return &Limiter{perClient: perClient, slots: make(chan struct{}, total), exempt: exempt, hint: hint, open: map[string]int{}, idle: map[*conn]time.Time{}}
}

// ConnState is the http.Server's ConnState hook of the listeners l
// wraps: it tells l which connections wait for a request (new, or idle
// between two requests), so that when every slot is taken the one idle
// the longest is closed for the new connection. Without it a full
// limiter only waits: idle connections held open by a client that sends
// nothing would keep everyone else out until their deadlines.
func (l *Limiter) ConnState(c net.Conn, st http.ConnState) {
	cc, ok := c.(*conn)
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	switch st {
	case http.StateNew, http.StateIdle:
		if !cc.closed {
			l.idle[cc] = time.Now()
		}
	default: // active, hijacked (a websocket), closed: never taken
		delete(l.idle, cc)
	}
}

// take takes a slot: at once when one is free, else by closing the
// connection idle the longest, else when one is given back. It reports
// false when done closes first.
func (l *Limiter) take(done <-chan struct{}) bool {
	for {
		select {
		case l.slots <- struct{}{}:
			return true
		case <-done:
			return false
		default:
		}
		if l.evictIdle() {
			continue // its Close gave its slot back
		}
		t := time.NewTimer(evictPoll)
		select {
		case l.slots <- struct{}{}:
			t.Stop()
			return true
		case <-done:
			t.Stop()
			return false
		case <-t.C:
		}
	}
}

// evictIdle closes the connection idle the longest; false when none is.
func (l *Limiter) evictIdle() bool {
	l.mu.Lock()
	var oldest *conn
	var since time.Time
	for c, t := range l.idle {
		if oldest == nil || t.Before(since) {
			oldest, since = c, t
		}
	}
	if oldest != nil {
		delete(l.idle, oldest)
	}
	l.mu.Unlock()
	if oldest == nil {
		return false
	}
	oldest.Close() //nolint:errcheck // evicted: the server sees the read fail
	return true
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
		// A free slot is taken before accepting. When there is none,
		// the next connection is accepted all the same (one per
		// listener, the only sign that somebody waits) and the one idle
		// the longest is closed for it, or it waits for a slot.
		free := false
		select {
		case <-ln.done:
			return nil, net.ErrClosed
		case l.slots <- struct{}{}:
			free = true
		default:
		}
		c, err := ln.Listener.Accept()
		if err != nil {
			if free {
				<-l.slots
			}
			return nil, err
		}
		host := clientHost(c.RemoteAddr())
		counted := true
		if l.exempt != nil {
			if a, err := netip.ParseAddr(host); err == nil && l.exempt(a.Unmap()) {
				counted = false
			}
		}
		if counted {
			l.mu.Lock()
			over := l.open[host] >= l.perClient
			if !over {
				l.open[host]++
			}
			l.mu.Unlock()
			if over {
				if free {
					<-l.slots
				}
				go l.refuse(c)
				continue
			}
		}
		uncount := func() {
			if counted {
				l.mu.Lock()
				if l.open[host]--; l.open[host] <= 0 {
					delete(l.open, host)
				}
				l.mu.Unlock()
			}
		}
		if !free && !l.take(ln.done) {
			c.Close() //nolint:errcheck // the listener closed meanwhile
			uncount()
			return nil, net.ErrClosed
		}
		return l.track(&conn{Conn: c, release: func() { uncount(); <-l.slots }}), nil
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

// track makes c leave the idle connections when it closes.
func (l *Limiter) track(c *conn) *conn {
	release := c.release
	c.release = func() {
		l.mu.Lock()
		c.closed = true
		delete(l.idle, c)
		l.mu.Unlock()
		release()
	}
	return c
}

// conn gives its slot back when closed.
type conn struct {
	net.Conn
	once    sync.Once
	release func()
	closed  bool // guarded by the limiter's mu
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
