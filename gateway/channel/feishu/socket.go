package feishu

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/nbots/nb/gateway/channel"
	"github.com/nbots/nb/gateway/channel/feishu/pbbp2"
)

var queryRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\?[^\s"]*`) })

// defaultPing is the ping interval until the platform names one.
const defaultPing = 120 * time.Second

// runSocket keeps the long connection open until ctx ends, opening a new
// one (a new address from the endpoint) after each failure.
func (c *Channel) runSocket(ctx context.Context, in channel.Inbox, ready func(), b *channel.Backoff) error {
	readied := false
	for {
		var ep endpoint
		ok, err := channel.Retry(ctx, c.log, "feishu: asking for the long connection's address", b, func(ctx context.Context) error {
			var err error
			ep, err = c.api.wsEndpoint(ctx)
			return err
		}, classify)
		if !ok {
			return err
		}
		err = c.connect(ctx, in, ep, func() {
			b.Connected()
			if !readied {
				readied = true
				c.log.Info("feishu: connected by long connection")
				ready()
			}
		})
		if ctx.Err() != nil {
			return nil
		}
		wait := b.Failed(err, 0)
		if ri := ep.ClientConfig.ReconnectInterval; ri > 0 && time.Duration(ri)*time.Second < wait {
			wait = time.Duration(ri) * time.Second
		}
		c.log.Warn("feishu: the long connection ended", "err", err, "retry_in", wait)
		if !channel.Sleep(ctx, wait) {
			return nil
		}
	}
}

// conn is one open long connection: writes go one at a time.
type conn struct {
	ws      *websocket.Conn
	service int32
	wmu     sync.Mutex
	ping    chan time.Duration // a new ping interval from a pong
}

func (k *conn) write(ctx context.Context, f *pbbp2.Frame) error {
	k.wmu.Lock()
	defer k.wmu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return k.ws.Write(ctx, websocket.MessageBinary, f.Marshal())
}

// connect opens the websocket at ep and reads it until it fails or ctx
// ends; connected is called once the socket is open.
func (c *Channel) connect(ctx context.Context, in channel.Inbox, ep endpoint, connected func()) error {
	u, err := url.Parse(ep.URL)
	if err != nil {
		return fmt.Errorf("the long connection's address is not a URL")
	}
	service, _ := strconv.ParseInt(u.Query().Get("service_id"), 10, 32)
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	ws, resp, err := websocket.Dial(dctx, ep.URL, nil)
	cancel()
	if err != nil {
		if resp != nil && resp.Header.Get("Handshake-Status") != "" {
			return fmt.Errorf("handshake refused: status %s: %s", resp.Header.Get("Handshake-Status"), resp.Header.Get("Handshake-Msg"))
		}
		// The address's query carries the connection's ticket: the
		// error says where without it.
		return fmt.Errorf("connecting to %s: %s", u.Host, queryRE().ReplaceAllString(err.Error(), "?…"))
	}
	ws.SetReadLimit(8 << 20)
	k := &conn{ws: ws, service: int32(service), ping: make(chan time.Duration, 1)}
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	defer ws.CloseNow() //nolint:errcheck // closing a connection being abandoned
	connected()
	interval := defaultPing
	if p := ep.ClientConfig.PingInterval; p > 0 {
		interval = time.Duration(p) * time.Second
	}
	go c.pinger(ctx, k, interval)
	parts := map[string]*partial{}
	for {
		typ, data, err := ws.Read(ctx)
		if err != nil {
			return err
		}
		if typ != websocket.MessageBinary {
			continue
		}
		f, err := pbbp2.Unmarshal(data)
		if err != nil {
			c.log.Warn("feishu: an unreadable frame skipped", "err", err)
			continue
		}
		switch f.Method {
		case pbbp2.MethodControl:
			if f.Header("type") == pbbp2.TypePong && len(f.Payload) > 0 {
				var cc clientConfig
				if json.Unmarshal(f.Payload, &cc) == nil && cc.PingInterval > 0 {
					select {
					case k.ping <- time.Duration(cc.PingInterval) * time.Second:
					default:
					}
				}
			}
		case pbbp2.MethodData:
			payload, whole := assemble(parts, f)
			if !whole {
				continue
			}
			start := time.Now()
			code, taken := 200, ""
			if f.Header("type") == pbbp2.TypeEvent {
				id, ok := c.event(ctx, in, payload)
				if !ok {
					return ctx.Err()
				}
				taken = id
			}
			// The acknowledgement is the frame itself, its payload
			// replaced by the answer: sent only now that the gateway
			// holds the message, so a connection lost before this makes
			// the platform send the event again.
			ack := *f
			ack.Headers = append(append([]pbbp2.Header(nil), f.Headers...), pbbp2.Header{Key: "biz_rt", Value: strconv.FormatInt(time.Since(start).Milliseconds(), 10)})
			ack.Payload, _ = json.Marshal(map[string]any{"code": code})
			if err := k.write(ctx, &ack); err != nil {
				return fmt.Errorf("acknowledging an event: %w", err)
			}
			if taken != "" {
				// After the acknowledgement: the platform waits 3 s for it.
				c.react(ctx, taken)
			}
		}
	}
}

// pinger pings every interval (changed by the pongs' settings); a ping
// that cannot be written ends the connection.
func (c *Channel) pinger(ctx context.Context, k *conn, interval time.Duration) {
	ping := func() bool {
		err := k.write(ctx, &pbbp2.Frame{Method: pbbp2.MethodControl, Service: k.service, Headers: []pbbp2.Header{{Key: "type", Value: pbbp2.TypePing}}})
		if err != nil && ctx.Err() == nil {
			c.log.Warn("feishu: ping failed", "err", err)
			k.ws.CloseNow() //nolint:errcheck // the reader sees the failure and reconnects
			return false
		}
		return err == nil
	}
	if !ping() {
		return
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case d := <-k.ping:
			t.Reset(d)
		case <-t.C:
			if !ping() {
				return
			}
		}
	}
}

// partial collects the pieces of an event the platform split over
// several frames.
type partial struct {
	pieces [][]byte
	at     time.Time
}

// assemble returns the frame's payload when it is whole, joining the
// pieces of a split one (headers sum and seq, 0-based) by message_id;
// pieces older than 5 seconds are dropped, as the SDKs do.
func assemble(parts map[string]*partial, f *pbbp2.Frame) ([]byte, bool) {
	sum, _ := strconv.Atoi(f.Header("sum"))
	if sum <= 1 {
		return f.Payload, true
	}
	seq, err := strconv.Atoi(f.Header("seq"))
	if err != nil || seq < 0 || seq >= sum || sum > 64 {
		return nil, false
	}
	now := time.Now()
	for id, p := range parts {
		if now.Sub(p.at) > 5*time.Second {
			delete(parts, id)
		}
	}
	id := f.Header("message_id")
	p := parts[id]
	if p == nil || len(p.pieces) != sum {
		p = &partial{pieces: make([][]byte, sum), at: now}
		parts[id] = p
	}
	p.pieces[seq] = f.Payload
	var whole []byte
	for _, piece := range p.pieces {
		if piece == nil {
			return nil, false
		}
		whole = append(whole, piece...)
	}
	delete(parts, id)
	return whole, true
}
