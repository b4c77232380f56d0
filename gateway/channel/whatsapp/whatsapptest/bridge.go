// Package whatsapptest is a fake of nanobot's WhatsApp bridge (the Node
// process of nanobot's bridge/ folder) on loopback, speaking its frames
// as bridge/src/server.ts does: the first frame must be
// {"type":"auth","token":…} (else close 4003, or 4001 after 5 s),
// connections with an Origin header are refused, inbound messages, status
// and QR events are broadcast to every authenticated client, and each
// command is answered {"type":"sent","to":…} or {"type":"error","error":…}.
package whatsapptest

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/nbots/nb/gateway/channel/channeltest"
)

// Message is an inbound message as the bridge broadcasts it (its
// InboundMessage, without "type").
type Message struct {
	ID           string   `json:"id"`
	Sender       string   `json:"sender"`
	PN           string   `json:"pn"`
	Participant  string   `json:"participant,omitempty"`
	Content      string   `json:"content"`
	Timestamp    int64    `json:"timestamp"`
	IsGroup      bool     `json:"isGroup"`
	WasMentioned bool     `json:"wasMentioned,omitempty"`
	IsReplyToBot bool     `json:"isReplyToBot,omitempty"`
	Media        []string `json:"media,omitempty"`
}

// Command is a command a client sent (send or send_media).
type Command struct {
	Type     string `json:"type"`
	To       string `json:"to"`
	Text     string `json:"text,omitempty"`
	FilePath string `json:"filePath,omitempty"`
	Mimetype string `json:"mimetype,omitempty"`
	Caption  string `json:"caption,omitempty"`
	FileName string `json:"fileName,omitempty"`
}

// Bridge is the fake. Faults are injected by command type ("send",
// "send_media"): Reset closes the connection without carrying the
// command out, LoseAnswer carries it out and closes the connection
// without answering, TooMany answers WhatsApp's rate-overlimit error,
// Hang never answers.
type Bridge struct {
	channeltest.Faults
	// Token is the BRIDGE_TOKEN clients must send.
	Token string
	// URL is the bridge's ws:// address.
	URL string

	srv *httptest.Server

	mu      sync.Mutex
	clients map[*websocket.Conn]bool
	sent    []Command
	auths   int
	changed chan struct{}
}

// New starts a bridge on loopback that accepts token; the test's cleanup
// stops it.
func New(t testing.TB, token string) *Bridge {
	t.Helper()
	b := &Bridge{Token: token, clients: map[*websocket.Conn]bool{}}
	b.srv = httptest.NewServer(http.HandlerFunc(b.serve))
	b.URL = "ws" + strings.TrimPrefix(b.srv.URL, "http")
	t.Cleanup(b.Close)
	return b
}

// Close stops the bridge and drops its clients.
func (b *Bridge) Close() {
	b.Drop()
	b.srv.CloseClientConnections()
	b.srv.Close()
}

func (b *Bridge) notify() {
	if b.changed != nil {
		close(b.changed)
		b.changed = nil
	}
}

func (b *Bridge) serve(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Origin") != "" {
		http.Error(w, "Browser-originated WebSocket connections are not allowed", http.StatusForbidden)
		return
	}
	ws, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	defer ws.CloseNow()        //nolint:errcheck // closed either way
	ws.SetReadLimit(100 << 20) // the ws package's maxPayload, the bridge's limit
	ctx := context.Background()
	actx, cancel := context.WithTimeout(ctx, 5*time.Second)
	_, data, err := ws.Read(actx)
	cancel()
	if err != nil {
		ws.Close(4001, "Auth timeout") //nolint:errcheck // going away
		return
	}
	var auth struct{ Type, Token string }
	if json.Unmarshal(data, &auth) != nil || auth.Type != "auth" || auth.Token != b.Token {
		ws.Close(4003, "Invalid token") //nolint:errcheck // going away
		return
	}
	b.mu.Lock()
	b.clients[ws] = true
	b.auths++
	b.notify()
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		delete(b.clients, ws)
		b.notify()
		b.mu.Unlock()
	}()
	for {
		_, data, err := ws.Read(ctx)
		if err != nil {
			return
		}
		var cmd Command
		if err := json.Unmarshal(data, &cmd); err != nil {
			b.answer(ws, map[string]any{"type": "error", "error": "SyntaxError: " + err.Error()})
			continue
		}
		switch b.Next(cmd.Type) {
		case channeltest.Reset:
			return
		case channeltest.LoseAnswer:
			b.record(cmd)
			return
		case channeltest.TooMany:
			b.answer(ws, map[string]any{"type": "error", "error": "Error: rate-overlimit"})
			continue
		case channeltest.Hang:
			continue
		}
		if cmd.Type != "send" && cmd.Type != "send_media" {
			// The bridge answers "sent" to a command it does not know.
			b.answer(ws, map[string]any{"type": "sent", "to": cmd.To})
			continue
		}
		b.record(cmd)
		b.answer(ws, map[string]any{"type": "sent", "to": cmd.To})
	}
}

func (b *Bridge) record(cmd Command) {
	b.mu.Lock()
	b.sent = append(b.sent, cmd)
	b.notify()
	b.mu.Unlock()
}

func (b *Bridge) answer(ws *websocket.Conn, v any) {
	data, _ := json.Marshal(v)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ws.Write(ctx, websocket.MessageText, data) //nolint:errcheck // a gone client misses it, as with the real bridge
}

// wait blocks until cond holds (checked under the lock) or fails the
// test after 20 s.
func (b *Bridge) wait(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		b.mu.Lock()
		ok := cond()
		if !ok && b.changed == nil {
			b.changed = make(chan struct{})
		}
		ch := b.changed
		b.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("whatsapptest: timed out waiting for %s", what)
		}
	}
}

// WaitClient waits until a client is authenticated.
func (b *Bridge) WaitClient(t testing.TB) {
	t.Helper()
	b.wait(t, "an authenticated client", func() bool { return len(b.clients) > 0 })
}

// Auths is how many connections authenticated so far.
func (b *Bridge) Auths() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.auths
}

// broadcast sends a frame to every authenticated client, as the bridge
// does: a client not connected misses it.
func (b *Bridge) broadcast(v any) int {
	data, _ := json.Marshal(v)
	b.mu.Lock()
	clients := make([]*websocket.Conn, 0, len(b.clients))
	for c := range b.clients {
		clients = append(clients, c)
	}
	b.mu.Unlock()
	for _, c := range clients {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		c.Write(ctx, websocket.MessageText, data) //nolint:errcheck // as the bridge: a gone client misses it
		cancel()
	}
	return len(clients)
}

// Deliver broadcasts an inbound message once a client is connected.
func (b *Bridge) Deliver(t testing.TB, m Message) {
	t.Helper()
	b.WaitClient(t)
	frame := map[string]any{}
	raw, _ := json.Marshal(m)
	json.Unmarshal(raw, &frame) //nolint:errcheck // our own encoding
	frame["type"] = "message"
	b.broadcast(frame)
}

// Status broadcasts a status event ("connected", "disconnected").
func (b *Bridge) Status(status string) {
	b.broadcast(map[string]any{"type": "status", "status": status})
}

// QR broadcasts a QR event.
func (b *Bridge) QR(qr string) { b.broadcast(map[string]any{"type": "qr", "qr": qr}) }

// Drop closes every client connection, as a bridge restart does.
func (b *Bridge) Drop() {
	b.mu.Lock()
	clients := make([]*websocket.Conn, 0, len(b.clients))
	for c := range b.clients {
		clients = append(clients, c)
		delete(b.clients, c) // gone now: nothing more is broadcast to it
	}
	b.notify()
	b.mu.Unlock()
	for _, c := range clients {
		c.CloseNow() //nolint:errcheck // dropped on purpose
	}
}

// Sent are the commands carried out, in order.
func (b *Bridge) Sent() []Command {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]Command(nil), b.sent...)
}

// WaitSent waits until n commands were carried out and returns them.
func (b *Bridge) WaitSent(t testing.TB, n int) []Command {
	t.Helper()
	b.wait(t, "sent commands", func() bool { return len(b.sent) >= n })
	return b.Sent()
}
