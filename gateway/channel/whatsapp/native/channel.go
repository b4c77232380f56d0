//go:build whatsmeow

package native

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"mime"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"go.mau.fi/whatsmeow"
	"go.mau.fi/whatsmeow/proto/waE2E"
	"go.mau.fi/whatsmeow/types"
	"go.mau.fi/whatsmeow/types/events"
	waLog "go.mau.fi/whatsmeow/util/log"

	"github.com/nbots/nb/gateway/bus"
	"github.com/nbots/nb/gateway/channel"
	"github.com/nbots/nb/gateway/channel/whatsapp"
)

// Built reports whether this nb has the native mode.
const Built = true

// client is what the channel uses of *whatsmeow.Client (tests give a
// fake that feeds it whatsmeow's own events).
type client interface {
	AddEventHandlerWithSuccessStatus(whatsmeow.EventHandlerWithSuccessStatus) uint32
	Connect() error
	Disconnect()
	SendMessage(ctx context.Context, to types.JID, m *waE2E.Message, extra ...whatsmeow.SendRequestExtra) (whatsmeow.SendResponse, error)
	Upload(ctx context.Context, data []byte, t whatsmeow.MediaType) (whatsmeow.UploadResponse, error)
	Download(ctx context.Context, m whatsmeow.DownloadableMessage) ([]byte, error)
}

// session is an opened device: its client, the account's addresses
// (empty when the device is not linked), and what closes the store.
type session struct {
	client client
	me     identity
	close  func()
}

// Channel is one WhatsApp account, linked as a device of the phone.
type Channel struct {
	link  channel.Conn
	cfg   whatsapp.Config
	env   channel.Env
	log   *slog.Logger
	pacer channel.Pacer
	turns channel.Turns
	open  func(ctx context.Context) (*session, error)

	live whatsapp.Live[client]
	lids *whatsapp.LIDs

	retryBase time.Duration
}

// Status implements channel.Reporter.
func (c *Channel) Status() channel.Status { return c.link.Status() }

// Name implements channel.Channel.
func (c *Channel) Name() string { return whatsapp.Name }

// Capabilities implements channel.Channel: WhatsApp's 65,536 characters
// a message, its own Markdown-like marks, no edits (as the bridge mode:
// progress comes as new messages).
func (c *Channel) Capabilities() channel.Capabilities {
	return channel.Capabilities{MaxMessageLength: whatsapp.MaxMessageLength, Markdown: channel.Plain, Media: true}
}

// New checks cfg and builds the channel; nothing connects before Run.
func New(cfg whatsapp.Config, env channel.Env) (channel.Channel, error) {
	c, err := newChannel(cfg, env)
	if err != nil {
		return nil, err
	}
	c.open = func(ctx context.Context) (*session, error) { return openSession(ctx, env, c.log) }
	return c, nil
}

func newChannel(cfg whatsapp.Config, env channel.Env) (*Channel, error) {
	switch cfg.GroupPolicy {
	case "":
		cfg.GroupPolicy = "open"
	case "open", "mention":
	default:
		return nil, fmt.Errorf("channels.whatsapp.groupPolicy is %q: use \"open\" or \"mention\"", cfg.GroupPolicy)
	}
	return &Channel{
		cfg: cfg, env: env, log: env.Log().With("channel", whatsapp.Name), lids: whatsapp.NewLIDs(cfg.LidMappings),
		pacer:     channel.Pacer{Interval: func(string) time.Duration { return 300 * time.Millisecond }},
		retryBase: time.Second,
	}, nil
}

// openSession opens the device store and a whatsmeow client on its
// device. Acknowledgements wait for the event handler (SynchronousAck),
// and decrypted messages are kept in the store until it returns
// (EnableDecryptedEventBuffer): a message the gateway has not made
// durable is not acknowledged, and WhatsApp's redelivery of it after a
// restart can still be decrypted.
func openSession(ctx context.Context, env channel.Env, log *slog.Logger) (*session, error) {
	wl := logger{log}
	st, err := OpenStore(ctx, env, wl.Sub("store"))
	if err != nil {
		return nil, err
	}
	dev, err := st.Device(ctx)
	if err != nil {
		st.Close()
		return nil, err
	}
	if dev.ID == nil {
		st.Close()
		return nil, fmt.Errorf("WhatsApp is not linked (no device in %s): run `nb gateway channels login whatsapp` and scan the QR code in WhatsApp under Linked Devices", st.Name)
	}
	cl := whatsmeow.NewClient(dev, wl.Sub("client"))
	cl.SynchronousAck = true
	cl.EnableDecryptedEventBuffer = true
	return &session{client: cl, me: identity{PN: dev.ID.ToNonAD(), LID: dev.LID.ToNonAD()}, close: func() { st.Close() }}, nil
}

// Run connects as the linked device and receives until ctx ends.
// whatsmeow reconnects by itself after a lost connection (the link goes
// down, then up with events.Connected); Run retries the first connection
// with a backoff, and stops for good when WhatsApp logs the device out or
// another client takes the session over.
func (c *Channel) Run(ctx context.Context, in channel.Inbox, ready func()) error {
	if ctx.Err() != nil {
		return nil
	}
	s, err := c.open(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	defer s.close()
	// hctx ends after the socket is closed: a message whose publishing is
	// cut short is never acknowledged, so WhatsApp delivers it again.
	hctx, hcancel := context.WithCancel(context.WithoutCancel(ctx))
	defer hcancel()
	var once sync.Once
	fatal := make(chan error, 1)
	s.client.AddEventHandlerWithSuccessStatus(func(evt any) bool {
		if m, ok := evt.(*events.Message); ok {
			return c.message(hctx, in, s, m)
		}
		if err := c.event(evt, func() { once.Do(ready) }); err != nil {
			select {
			case fatal <- err:
			default:
			}
		}
		return true
	})
	b := channel.Backoff{Base: c.retryBase, Max: 30 * time.Second, Conn: &c.link}
	for {
		err := s.client.Connect()
		if err == nil {
			break
		}
		d := b.Failed(fmt.Errorf("connect to WhatsApp: %w", err), 0)
		c.log.Warn("whatsapp: connection failed", "err", err, "retry_in", d)
		if !channel.Sleep(ctx, d) {
			return nil
		}
	}
	c.live.Swap(nil, s.client)
	defer func() {
		c.live.Swap(s.client, nil)
		s.client.Disconnect()
		hcancel()
	}()
	select {
	case <-ctx.Done():
		return nil
	case err := <-fatal:
		c.link.Down(err)
		return err
	}
}

// event follows the connection's state from whatsmeow's events: up when
// connected, down (whatsmeow reconnecting) when the socket or its
// keepalive is lost; an error is final.
func (c *Channel) event(evt any, ready func()) error {
	switch e := evt.(type) {
	case *events.Connected:
		c.log.Info("whatsapp: connected")
		c.link.Up()
		ready()
	case *events.KeepAliveRestored:
		c.link.Up()
	case *events.Disconnected:
		c.log.Warn("whatsapp: disconnected: reconnecting")
		c.link.Down(errors.New("disconnected from WhatsApp: reconnecting"))
	case *events.KeepAliveTimeout:
		c.link.Down(fmt.Errorf("WhatsApp did not answer %d keepalives: reconnecting", e.ErrorCount))
	case *events.ConnectFailure:
		c.link.Down(fmt.Errorf("WhatsApp refused the connection: %s %s", e.Reason, e.Message))
	case *events.TemporaryBan:
		c.log.Error("whatsapp: the account is temporarily banned", "ban", e.String())
		c.link.Down(fmt.Errorf("WhatsApp has banned the account for now: %s", e))
	case *events.LoggedOut:
		return fmt.Errorf("WhatsApp logged this device out (%s): link it again with `nb gateway channels login whatsapp`", e.Reason)
	case *events.StreamReplaced:
		return errors.New("another client connected with this WhatsApp device (stream replaced): is a second gateway running on the same store? Stop it, then restart this one")
	case *events.ClientOutdated:
		return errors.New("WhatsApp refuses this client as outdated: update nb (its whatsmeow)")
	}
	return nil
}

// message publishes one message; false leaves it unacknowledged (the
// gateway could not make it durable before the channel stopped).
func (c *Channel) message(ctx context.Context, in channel.Inbox, s *session, evt *events.Message) bool {
	m, files, ok := c.inbound(evt, s.me)
	if !ok {
		return true
	}
	if len(files) > 0 {
		c.attach(ctx, in, s.client, &m, files)
	}
	return channel.PublishDurably(ctx, in, m, c.log, c.retryBase)
}

// attach downloads the message's files into the workspace and names them
// in its text as nanobot's "[image: path]" tags, when the sender is let
// in; a stranger's files are not downloaded.
func (c *Channel) attach(ctx context.Context, in channel.Inbox, cl client, m *bus.Inbound, files []attachment) {
	if !channel.Admits(in, *m) {
		c.log.Debug("whatsapp: a stranger's files not taken", "sender", m.SenderID, "files", len(files))
		return
	}
	dir, err := c.env.MediaDir(whatsapp.Name)
	if err != nil {
		c.log.Warn("whatsapp: files not stored", "err", err)
		return
	}
	for _, f := range files {
		stored, err := c.download(ctx, cl, f, dir)
		if err != nil {
			c.log.Warn("whatsapp: file not stored", "name", f.name, "err", err)
			m.Content = strings.TrimSpace(m.Content + fmt.Sprintf("\n[file %s not received: %v]", f.name, err))
			continue
		}
		m.Media = append(m.Media, stored)
		m.Content = strings.TrimSpace(m.Content + fmt.Sprintf("\n[%s: %s]", f.kind, stored))
	}
}

func (c *Channel) download(ctx context.Context, cl client, f attachment, dir string) (string, error) {
	if f.size > whatsapp.MaxFileBytes {
		return "", fmt.Errorf("%d bytes, over %d", f.size, int64(whatsapp.MaxFileBytes))
	}
	dctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	data, err := cl.Download(dctx, f.msg)
	if err != nil {
		return "", err
	}
	return channel.StoreMedia(bytes.NewReader(data), dir, f.name, whatsapp.MaxFileBytes)
}

// errNotConnected is a send's error when no client connected within
// ConnectWait.
var errNotConnected = errors.New("whatsapp: not connected (the receive loop connects, or this replica does not receive)")

// ConnectWait is how long a send waits for the connection while the
// channel connects.
var ConnectWait = 5 * time.Second

// RateLimitWait is how long a chat waits after WhatsApp's
// rate-overlimit (its 429), which names no wait.
var RateLimitWait = 5 * time.Second

// Send delivers m (see whatsapp.Pieces): its texts, then its files,
// uploaded and sent as an image, video, audio or document. It returns
// WhatsApp's id of the last message.
func (c *Channel) Send(ctx context.Context, m bus.Outbound) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	to, err := parseChat(m.ChatID)
	if err != nil {
		return "", err
	}
	ps := whatsapp.Pieces(c.env.Workspace, m)
	post := func(_ int, p whatsapp.Piece) (string, error) { return c.deliver(ctx, to, p) }
	edit := func(_ string, p whatsapp.Piece) error { _, err := c.deliver(ctx, to, p); return err }
	return channel.Deliver(&c.turns, m, ps, post, edit)
}

// deliver sends one piece, paced per chat.
func (c *Channel) deliver(ctx context.Context, to types.JID, p whatsapp.Piece) (string, error) {
	chat := to.String()
	if err := c.pacer.Wait(ctx, chat); err != nil {
		return "", err
	}
	cl, err := c.live.Wait(ctx, ConnectWait, errNotConnected)
	if err != nil {
		return "", err
	}
	msg := textMessage(p.Text)
	if p.File != "" {
		if msg, err = c.upload(ctx, cl, p.File); err != nil {
			return "", err
		}
	}
	resp, err := cl.SendMessage(ctx, to, msg)
	if err != nil {
		err = sendError(err)
		var ra *channel.RetryAfter
		if errors.As(err, &ra) {
			c.pacer.Defer(chat, ra.After)
		}
		return "", err
	}
	return string(resp.ID), nil
}

// upload sends a file to WhatsApp's media servers and builds its message.
func (c *Channel) upload(ctx context.Context, cl client, path string) (*waE2E.Message, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("whatsapp: reading %s: %w", filepath.Base(path), err)
	}
	typ := mime.TypeByExtension(filepath.Ext(path))
	if typ == "" {
		typ = "application/octet-stream"
	}
	mt := mediaType(typ)
	up, err := cl.Upload(ctx, data, mt)
	if err != nil {
		return nil, fmt.Errorf("whatsapp: uploading %s: %w", filepath.Base(path), sendError(err))
	}
	return fileMessage(mt, up, typ, filepath.Base(path)), nil
}

// sendError is whatsmeow's send error as the channel's: rate-overlimit
// (429) is a *RetryAfter, a recipient WhatsApp cannot send to an
// *Undeliverable.
func sendError(err error) error {
	var iq *whatsmeow.IQError
	switch {
	case errors.As(err, &iq) && iq.Code == 429, strings.Contains(err.Error(), "rate-overlimit"):
		return &channel.RetryAfter{After: RateLimitWait, Err: err}
	case errors.Is(err, whatsmeow.ErrBroadcastListUnsupported), errors.Is(err, whatsmeow.ErrUnknownServer), errors.Is(err, whatsmeow.ErrRecipientADJID):
		return &channel.Undeliverable{Reason: err.Error()}
	}
	return fmt.Errorf("whatsapp: %w", err)
}

// logger is whatsmeow's logger on the gateway's: its warnings and errors
// as warnings, the rest as debug.
type logger struct{ l *slog.Logger }

func (w logger) Warnf(msg string, args ...any)  { w.l.Warn("whatsmeow: " + fmt.Sprintf(msg, args...)) }
func (w logger) Errorf(msg string, args ...any) { w.l.Warn("whatsmeow: " + fmt.Sprintf(msg, args...)) }
func (w logger) Infof(msg string, args ...any)  { w.l.Debug("whatsmeow: " + fmt.Sprintf(msg, args...)) }
func (w logger) Debugf(msg string, args ...any) {
	if w.l.Enabled(context.Background(), slog.LevelDebug) {
		w.l.Debug("whatsmeow: " + fmt.Sprintf(msg, args...))
	}
}

// Sub names a part of whatsmeow.
func (w logger) Sub(module string) waLog.Logger { return logger{w.l.With("module", module)} }
