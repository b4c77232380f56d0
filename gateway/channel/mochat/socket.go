package mochat

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/nbots/nb/gateway/channel"
)

// sock is one Socket.IO connection (Engine.IO 4 over a websocket, JSON
// packets): "0{open}", "40{auth}" / "40{sid}" or "44{error}", events
// "42[name,payload]", calls "42<id>[name,payload]" answered "43<id>[ack]",
// pings "2" answered "3".
type sock struct {
	ws   *websocket.Conn
	mu   sync.Mutex
	next int
	acks map[int]chan json.RawMessage
}

// errRefusedSocket is the server's connect_error to the token.
var errRefusedSocket = errors.New("refused")

// socketURL is the websocket address of the Socket.IO endpoint.
func (c *Channel) socketURL() (string, error) {
	raw := strings.TrimSpace(c.cfg.SocketURL)
	if raw == "" {
		raw = c.cfg.BaseURL
	}
	u, err := url.Parse(strings.TrimRight(raw, "/"))
	if err != nil {
		return "", err
	}
	switch u.Scheme {
	case "https":
		u.Scheme = "wss"
	default:
		u.Scheme = "ws"
	}
	path := strings.Trim(c.cfg.SocketPath, "/")
	if path == "" {
		path = "socket.io"
	}
	u.Path = strings.TrimRight(u.Path, "/") + "/" + path + "/"
	u.RawQuery = "EIO=4&transport=websocket"
	return u.String(), nil
}

// socketLoop keeps a socket subscribed, connecting again after each
// failure; while it is down the polls carry the messages.
func (c *Channel) socketLoop(ctx context.Context) {
	b := channel.Backoff{Base: ms(c.cfg.SocketReconnectDelayMs, 1000), Max: ms(c.cfg.SocketMaxReconnectDelayMs, 10000)}
	for {
		subscribed, err := c.socketSession(ctx)
		c.setSocket(false, nil)
		if ctx.Err() != nil {
			return
		}
		if subscribed {
			b.Reset()
		}
		d := b.Next(0)
		if errors.Is(err, errRefusedSocket) {
			// The HTTP API answers for the token: the polls carry on.
			d = max(d, ms(c.cfg.SocketMaxReconnectDelayMs, 10000))
		}
		c.log.Warn("mochat: socket down, polling meanwhile", "err", err, "retry_in", d)
		c.link.Down(fmt.Errorf("the socket is down (%v): polling meanwhile", err))
		if !channel.Sleep(ctx, d) {
			return
		}
	}
}

func (c *Channel) socketSession(ctx context.Context) (subscribed bool, err error) {
	addr, err := c.socketURL()
	if err != nil {
		return false, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	dctx, dcancel := context.WithTimeout(ctx, ms(c.cfg.SocketConnectTimeoutMs, 10000))
	defer dcancel()
	ws, _, err := websocket.Dial(dctx, addr, nil)
	if err != nil {
		return false, fmt.Errorf("connect %s: %w", redact(addr), err)
	}
	defer ws.CloseNow() //nolint:errcheck // closed either way
	ws.SetReadLimit(16 << 20)
	_, open, err := ws.Read(dctx)
	if err != nil || len(open) == 0 || open[0] != '0' {
		return false, fmt.Errorf("socket.io open packet: %v", err)
	}
	var hs struct {
		PingInterval int `json:"pingInterval"`
		PingTimeout  int `json:"pingTimeout"`
	}
	json.Unmarshal(open[1:], &hs) //nolint:errcheck // defaults below
	idle := ms(hs.PingInterval, 25000) + ms(hs.PingTimeout, 20000)
	auth, _ := json.Marshal(map[string]string{"token": c.cfg.ClawToken})
	if err := ws.Write(dctx, websocket.MessageText, append([]byte("40"), auth...)); err != nil {
		return false, fmt.Errorf("socket.io connect: %w", err)
	}
	for {
		_, p, err := ws.Read(dctx)
		if err != nil {
			return false, fmt.Errorf("socket.io connect: %w", err)
		}
		s := string(p)
		if s == "2" {
			ws.Write(dctx, websocket.MessageText, []byte("3")) //nolint:errcheck // the read fails next if gone
			continue
		}
		if strings.HasPrefix(s, "44") {
			return false, fmt.Errorf("%w: %s", errRefusedSocket, s[2:])
		}
		if strings.HasPrefix(s, "40") {
			break
		}
	}
	dcancel()
	so := &sock{ws: ws, acks: map[int]chan json.RawMessage{}}
	readErr := make(chan error, 1)
	go func() {
		err := c.readSocket(ctx, so, idle)
		cancel() // a call waiting for its ack ends with the connection
		readErr <- err
	}()
	c.mu.Lock()
	sess, panels := sorted(c.sessions), sorted(c.panels)
	c.mu.Unlock()
	if err := c.subscribe(ctx, so, sess, panels); err != nil {
		cancel()
		<-readErr
		return false, err
	}
	c.setSocket(true, so)
	c.log.Info("mochat: socket connected and subscribed", "sessions", len(sess), "panels", len(panels))
	c.ready()
	return true, <-readErr
}

// redact drops a URL's query and credentials for messages.
func redact(addr string) string {
	u, err := url.Parse(addr)
	if err != nil {
		return "the socket URL"
	}
	u.User, u.RawQuery = nil, ""
	return u.String()
}

// readSocket reads packets until the connection ends or stays silent
// past the server's ping interval and timeout.
func (c *Channel) readSocket(ctx context.Context, so *sock, idle time.Duration) error {
	for {
		rctx, cancel := context.WithTimeout(ctx, idle)
		_, p, err := so.ws.Read(rctx)
		cancel()
		if err != nil {
			return err
		}
		s := string(p)
		switch {
		case s == "2":
			wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			so.ws.Write(wctx, websocket.MessageText, []byte("3")) //nolint:errcheck // the read fails next if gone
			cancel()
		case s == "1" || strings.HasPrefix(s, "41"):
			return errors.New("the server closed the socket")
		case strings.HasPrefix(s, "43"):
			id, rest := packetID(s[2:])
			so.mu.Lock()
			ch := so.acks[id]
			delete(so.acks, id)
			so.mu.Unlock()
			if ch != nil {
				ch <- json.RawMessage(rest)
			}
		case strings.HasPrefix(s, "42"):
			_, rest := packetID(s[2:])
			var args []json.RawMessage
			if json.Unmarshal([]byte(rest), &args) != nil || len(args) < 2 {
				continue
			}
			var name string
			json.Unmarshal(args[0], &name) //nolint:errcheck // an unknown event is ignored
			if !c.socketEvent(ctx, name, args[1]) {
				return ctx.Err()
			}
		}
	}
}

// packetID splits a packet's leading ack id from its JSON.
func packetID(s string) (int, string) {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	id, _ := strconv.Atoi(s[:i])
	return id, s[i:]
}

// socketEvent hands an event to the receive loop; false when ctx ended.
func (c *Channel) socketEvent(ctx context.Context, name string, payload json.RawMessage) bool {
	switch name {
	case "claw.session.events", "claw.panel.events":
		var p watchPayload
		if json.Unmarshal(payload, &p) != nil || p.SessionID == "" {
			return true
		}
		if name == "claw.panel.events" {
			var msgs []msgPayload
			for _, e := range p.Events {
				if e.Type == "message.add" {
					if e.Payload.CreatedAt == "" {
						e.Payload.CreatedAt = e.Timestamp
					}
					msgs = append(msgs, e.Payload)
				}
			}
			return c.submit(ctx, event{panel: p.SessionID, messages: msgs})
		}
		return c.submit(ctx, event{session: &p})
	case "notify:chat.message.add":
		var m msgPayload
		if json.Unmarshal(payload, &m) != nil {
			return true
		}
		panel := m.ConverseID
		if panel == "" {
			panel = m.PanelID
		}
		c.mu.Lock()
		known := len(c.panels) == 0 || c.panels[panel]
		c.mu.Unlock()
		if m.GroupID == "" || panel == "" || !known {
			return true
		}
		return c.submit(ctx, event{panel: panel, messages: []msgPayload{m}})
	}
	return true
}

// call emits name with payload and waits for the server's ack.
func (so *sock) call(ctx context.Context, name string, payload any) (json.RawMessage, error) {
	so.mu.Lock()
	so.next++
	id := so.next
	ch := make(chan json.RawMessage, 1)
	so.acks[id] = ch
	so.mu.Unlock()
	data, _ := json.Marshal([]any{name, payload})
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := so.ws.Write(ctx, websocket.MessageText, append([]byte("42"+strconv.Itoa(id)), data...)); err != nil {
		return nil, err
	}
	select {
	case raw := <-ch:
		var args []json.RawMessage
		if json.Unmarshal(raw, &args) != nil || len(args) == 0 {
			return nil, fmt.Errorf("%s: unreadable ack", name)
		}
		return args[0], nil
	case <-ctx.Done():
		so.mu.Lock()
		delete(so.acks, id)
		so.mu.Unlock()
		return nil, fmt.Errorf("%s: no ack: %w", name, ctx.Err())
	}
}

// subscribe subscribes sessions (from their cursors) and panels; the
// sessions' pending events come in the acknowledgement.
func (c *Channel) subscribe(ctx context.Context, so *sock, sessions, panels []string) error {
	type ack struct {
		Result  bool            `json:"result"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	}
	if len(sessions) > 0 {
		c.mu.Lock()
		cur := make(map[string]int64, len(c.cursors))
		for k, v := range c.cursors {
			cur[k] = v
		}
		c.mu.Unlock()
		raw, err := so.call(ctx, "com.claw.im.subscribeSessions", map[string]any{"sessionIds": sessions, "cursors": cur, "limit": c.limit()})
		if err != nil {
			return fmt.Errorf("subscribeSessions: %w", err)
		}
		var a ack
		if json.Unmarshal(raw, &a) != nil || !a.Result {
			return fmt.Errorf("subscribeSessions refused: %s", a.Message)
		}
		var items []watchPayload
		if json.Unmarshal(a.Data, &items) != nil {
			var obj struct {
				Sessions []watchPayload `json:"sessions"`
			}
			if json.Unmarshal(a.Data, &obj) == nil && obj.Sessions != nil {
				items = obj.Sessions
			} else {
				var one watchPayload
				if json.Unmarshal(a.Data, &one) == nil && one.SessionID != "" {
					items = []watchPayload{one}
				}
			}
		}
		for i := range items {
			if !c.submit(ctx, event{session: &items[i]}) {
				return ctx.Err()
			}
		}
	}
	if c.allPanel || len(panels) > 0 {
		raw, err := so.call(ctx, "com.claw.im.subscribePanels", map[string]any{"panelIds": panels})
		if err != nil {
			return fmt.Errorf("subscribePanels: %w", err)
		}
		var a ack
		if json.Unmarshal(raw, &a) != nil || !a.Result {
			return fmt.Errorf("subscribePanels refused: %s", a.Message)
		}
	}
	return nil
}
