//go:build whatsmeow

package native

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"go.mau.fi/whatsmeow"
	"go.mau.fi/whatsmeow/proto/waE2E"
	"go.mau.fi/whatsmeow/types"
	"go.mau.fi/whatsmeow/types/events"
	"google.golang.org/protobuf/proto"

	"github.com/nbots/nb/gateway/channel"
	"github.com/nbots/nb/gateway/channel/channeltest"
	"github.com/nbots/nb/gateway/channel/whatsapp"
)

// platform is WhatsApp as whatsmeow presents it to its client: events
// dispatched to the client's handler, and a message redelivered until a
// handler has returned true for it (whatsmeow's SynchronousAck: the ack
// goes after the handlers).
type platform struct {
	mu       sync.Mutex
	pending  []*events.Message
	sent     map[string][]*waE2E.Message
	throttle int
	cur      *fakeClient
	seq      int
	wake     chan struct{}
	me       identity
}

func newPlatform() *platform {
	return &platform{
		sent: map[string][]*waE2E.Message{}, wake: make(chan struct{}, 1),
		me: identity{PN: types.NewJID("15550000000", types.DefaultUserServer), LID: types.NewJID("99990000", types.HiddenUserServer)},
	}
}

// fakeClient is one connection of a channel to the platform.
type fakeClient struct {
	p       *platform
	mu      sync.Mutex
	handler whatsmeow.EventHandlerWithSuccessStatus
	stop    chan struct{}
	done    chan struct{}
	failing int // connections to refuse
	uploads []whatsmeow.MediaType
	files   map[string][]byte // direct path → content, for Download
}

func (c *fakeClient) AddEventHandlerWithSuccessStatus(h whatsmeow.EventHandlerWithSuccessStatus) uint32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.handler = h
	return 1
}

func (c *fakeClient) dispatch(evt any) bool {
	c.mu.Lock()
	h := c.handler
	c.mu.Unlock()
	return h(evt)
}

func (c *fakeClient) Connect() error {
	if c.failing > 0 {
		c.failing--
		return whatsmeow.ErrNotConnected
	}
	c.p.mu.Lock()
	c.p.cur = c
	c.p.mu.Unlock()
	c.stop, c.done = make(chan struct{}), make(chan struct{})
	go c.dispatch(&events.Connected{})
	go c.deliver()
	return nil
}

// deliver hands the platform's pending messages to the handler, in
// order, dropping each once acknowledged.
func (c *fakeClient) deliver() {
	defer close(c.done)
	for {
		c.p.mu.Lock()
		var next *events.Message
		if len(c.p.pending) > 0 && c.p.cur == c {
			next = c.p.pending[0]
		}
		c.p.mu.Unlock()
		if next != nil {
			acked := c.dispatch(next)
			select {
			case <-c.stop:
				acked = false // the socket is closed: the ack cannot go
			default:
			}
			if !acked {
				<-c.stop // not acknowledged: redelivered on the next connection
				return
			}
			c.p.mu.Lock()
			if len(c.p.pending) > 0 && c.p.pending[0] == next {
				c.p.pending = c.p.pending[1:]
			}
			c.p.mu.Unlock()
			continue
		}
		select {
		case <-c.stop:
			return
		case <-c.p.wake:
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (c *fakeClient) Disconnect() {
	if c.stop == nil {
		return
	}
	select {
	case <-c.stop:
	default:
		close(c.stop)
	}
	c.p.mu.Lock()
	if c.p.cur == c {
		c.p.cur = nil
	}
	c.p.mu.Unlock()
}

func (c *fakeClient) SendMessage(ctx context.Context, to types.JID, m *waE2E.Message, _ ...whatsmeow.SendRequestExtra) (whatsmeow.SendResponse, error) {
	if err := ctx.Err(); err != nil {
		return whatsmeow.SendResponse{}, err
	}
	c.p.mu.Lock()
	defer c.p.mu.Unlock()
	if c.p.throttle > 0 {
		c.p.throttle--
		return whatsmeow.SendResponse{}, whatsmeow.ErrIQRateOverLimit
	}
	c.p.seq++
	c.p.sent[to.String()] = append(c.p.sent[to.String()], m)
	return whatsmeow.SendResponse{ID: types.MessageID("3EB0" + strconv.Itoa(c.p.seq)), Timestamp: time.Now()}, nil
}

func (c *fakeClient) Upload(_ context.Context, data []byte, t whatsmeow.MediaType) (whatsmeow.UploadResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.uploads = append(c.uploads, t)
	return whatsmeow.UploadResponse{URL: "https://mmg.whatsapp.net/x", DirectPath: "/v/t62/x", MediaKey: []byte("k"), FileEncSHA256: []byte("e"), FileSHA256: []byte("s"), FileLength: uint64(len(data))}, nil
}

func (c *fakeClient) Download(_ context.Context, m whatsmeow.DownloadableMessage) ([]byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if b, ok := c.files[m.GetDirectPath()]; ok {
		return b, nil
	}
	return nil, whatsmeow.ErrMediaDownloadFailedWith404
}

// say queues a message from the person 15551234567 in their chat.
func (p *platform) say(text string) (chat string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.seq++
	sender := types.NewJID("15551234567", types.DefaultUserServer)
	p.pending = append(p.pending, &events.Message{
		Info: types.MessageInfo{
			MessageSource: types.MessageSource{Chat: sender, Sender: sender, SenderAlt: types.NewJID("4242", types.HiddenUserServer)},
			ID:            types.MessageID("IN" + strconv.Itoa(p.seq)), Timestamp: time.Unix(1_700_000_000, 0), PushName: "Ann",
		},
		Message: &waE2E.Message{Conversation: proto.String(text)},
	})
	select {
	case p.wake <- struct{}{}:
	default:
	}
	return sender.String()
}

func (p *platform) texts(chat string) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, m := range p.sent[chat] {
		out = append(out, m.GetConversation())
	}
	return out
}

// channelOn is a native channel on p with env, its sessions opening fake
// clients.
func (p *platform) channelOn(t testing.TB, cfg whatsapp.Config, env channel.Env, setup func(*fakeClient)) *Channel {
	t.Helper()
	c, err := newChannel(cfg, env)
	if err != nil {
		t.Fatal(err)
	}
	c.retryBase = 10 * time.Millisecond
	c.open = func(context.Context) (*session, error) {
		fc := &fakeClient{p: p}
		if setup != nil {
			setup(fc)
		}
		return &session{client: fc, me: p.me, close: func() {}}, nil
	}
	return c
}

// suite adapts the platform to the channel conformance kit.
type suite struct {
	t *testing.T
	p *platform
}

func (s suite) Channel(t *testing.T, env channel.Env) channel.Channel {
	return s.p.channelOn(t, whatsapp.Config{}, env, nil)
}
func (s suite) Say(t *testing.T, text string) string      { return s.p.say(text) }
func (s suite) Sent(t *testing.T, chatID string) []string { return s.p.texts(chatID) }
func (s suite) Throttle(t *testing.T) {
	s.p.mu.Lock()
	s.p.throttle = 1
	s.p.mu.Unlock()
}
func (s suite) Cut(t *testing.T) {
	s.p.mu.Lock()
	c := s.p.cur
	s.p.mu.Unlock()
	if c == nil {
		t.Fatal("no connection to cut")
	}
	c.dispatch(&events.Disconnected{})
}

func TestConformance(t *testing.T) {
	RateLimitWait = 50 * time.Millisecond
	channeltest.Conformance(t, func(t *testing.T) channeltest.Platform { return suite{t: t, p: newPlatform()} })
}
