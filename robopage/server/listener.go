package server

import (
	"net"
	"strconv"
	"sync"
	"time"
)

// limitListener bounds the open connections of each client address
// (refusing the excess with 429) and in all (making the excess wait).
type limitListener struct {
	net.Listener
	perClient int
	slots     chan struct{}
	done      chan struct{}
	closeOnce sync.Once

	mu   sync.Mutex
	open map[string]int
}

func newLimitListener(ln net.Listener, perClient, total int) *limitListener {
	return &limitListener{Listener: ln, perClient: perClient, slots: make(chan struct{}, total), done: make(chan struct{}), open: map[string]int{}}
}

// tooMany is the whole answer to a connection over its address's limit.
const tooMany = "too many connections from this address: close some, or ask for a higher --max-client-conns"

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		select {
		case l.slots <- struct{}{}:
		case <-l.done:
			return nil, net.ErrClosed
		}
		c, err := l.Listener.Accept()
		if err != nil {
			<-l.slots
			return nil, err
		}
		host := clientHost(c.RemoteAddr())
		l.mu.Lock()
		if l.open[host] >= l.perClient {
			l.mu.Unlock()
			<-l.slots
			go refuse(c)
			continue
		}
		l.open[host]++
		l.mu.Unlock()
		return &limitConn{Conn: c, release: func() {
			l.mu.Lock()
			if l.open[host]--; l.open[host] <= 0 {
				delete(l.open, host)
			}
			l.mu.Unlock()
			<-l.slots
		}}, nil
	}
}

func (l *limitListener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// refuse answers 429 without reading the request, and closes.
func refuse(c net.Conn) {
	defer c.Close()
	_ = c.SetWriteDeadline(time.Now().Add(time.Second))
	_, _ = c.Write([]byte("HTTP/1.1 429 Too Many Requests\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\nContent-Length: " + strconv.Itoa(len(tooMany)) + "\r\n\r\n" + tooMany))
}

// clientHost is the address a connection comes from, without its port.
func clientHost(a net.Addr) string {
	host, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	return host
}

// limitConn gives its slot back when closed.
type limitConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// CloseWrite half-closes a TCP connection, as net/http does before it
// closes one after an answer.
func (c *limitConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
