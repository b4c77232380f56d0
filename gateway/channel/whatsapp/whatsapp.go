// Package whatsapp is the gateway's WhatsApp channel through nanobot's
// own bridge: the Node process of nanobot's bridge/ folder (Baileys),
// which holds the WhatsApp Web session and speaks JSON frames over a
// loopback websocket. nb speaks that protocol frame for frame, so the
// bridge a nanobot user already runs keeps working unchanged:
//
//	nb → bridge  {"type":"auth","token":…}            (first frame)
//	             {"type":"send","to":jid,"text":…}
//	             {"type":"send_media","to":jid,"filePath":…,"mimetype":…,"fileName":…}
//	bridge → nb  {"type":"message","id":…,"sender":jid,"pn":…,"participant":…,
//	              "content":…,"timestamp":…,"isGroup":…,"wasMentioned":…,"media":[paths]}
//	             {"type":"status","status":"connected"|"disconnected"}
//	             {"type":"qr","qr":…}
//	             {"type":"sent","to":jid} | {"type":"error","error":…}  (one per command)
//
// The bridge answers each command with "sent" or "error" but names
// neither the command nor a message id, so the channel has one command in
// flight at a time and matches each answer to it.
//
// Identity: Inbound.SenderID is the sender's phone number (or, when the
// bridge gives only that, the LID), as nanobot's allowFrom lists them;
// ChatID is the chat's JID (a person's or a group's, "…@g.us").
package whatsapp

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"mime"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/nbots/nb/gateway/bus"
	"github.com/nbots/nb/gateway/channel"
)

// Name is the channel's configuration name, channels.whatsapp.
const Name = "whatsapp"

// MaxMessageLength is where answers are split: WhatsApp takes up to
// 65,536 characters in one text message.
const MaxMessageLength = 65536

// MaxFileBytes bounds a file sent or received (WhatsApp's documents go to
// 100 MB; a chat answer needs far less).
const MaxFileBytes = 64 << 20

// DefaultBridgeURL is nanobot's default bridgeUrl.
const DefaultBridgeURL = "ws://localhost:3001"

// Config is channels.whatsapp: nanobot's keys, plus bridgeMediaDir.
type Config struct {
	Enabled bool `json:"enabled"`
	// BridgeURL is the bridge's websocket (default ws://localhost:3001).
	BridgeURL string `json:"bridgeUrl,omitempty"`
	// BridgeToken is the bridge's BRIDGE_TOKEN. Empty, it is read from
	// whatsapp-auth/bridge-token in NanobotDir, where nanobot keeps the
	// one it generates (and created there when missing, as nanobot does).
	BridgeToken string `json:"bridgeToken,omitempty"`
	// AllowFrom lists phone numbers (or LIDs); the gateway checks
	// SenderID against it.
	AllowFrom []string `json:"allowFrom"`
	// GroupPolicy is "open" (nanobot's default: answer every group
	// message) or "mention" (only when mentioned or replied to).
	GroupPolicy string `json:"groupPolicy,omitempty"`
	// LidMappings maps LIDs to phone numbers, so that a sender known by
	// LID alone matches allowFrom's phone number.
	LidMappings map[string]string `json:"lidMappings,omitempty"`
	// BridgeMediaDir is where the bridge stores what people send (nb
	// extension; default NanobotDir/media, the bridge's AUTH_DIR/../media):
	// the channel copies files from there, and from nowhere else, into
	// the workspace.
	BridgeMediaDir string `json:"bridgeMediaDir,omitempty"`
	// Native (nb extension) talks to WhatsApp itself, on whatsmeow, with
	// no bridge: gateway/channel/whatsapp/native, in an nb built with
	// -tags whatsmeow. The bridge's keys are then unused.
	Native bool `json:"native,omitempty"`
	// NanobotDir is nanobot's data folder (~/.nanobot), set by the
	// gateway, not by the configuration.
	NanobotDir string `json:"-"`
}

// Channel is one WhatsApp account behind one bridge.
type Channel struct {
	// link is the receive loop's connection, for Status.
	link  channel.Conn
	cfg   Config
	env   channel.Env
	log   *slog.Logger
	token string
	url   string
	media string // the bridge's media folder, symlinks resolved when it exists
	pacer channel.Pacer
	turns channel.Turns

	live Live[*conn]
	// notConnected is a send's error when no connection came within
	// ConnectWait.
	notConnected error
	lids         *LIDs

	// inflight holds the one command awaiting the bridge's answer.
	inflight chan struct{}
	seq      atomic.Int64

	retryBase  time.Duration
	ackTimeout time.Duration
}

// Status implements channel.Reporter: where the receive loop's
// connection is.
func (c *Channel) Status() channel.Status { return c.link.Status() }

// conn is one authenticated connection to the bridge.
type conn struct {
	ws   *websocket.Conn
	acks chan ack
	done chan struct{}
}

type ack struct {
	ok  bool
	err string
}

// New checks cfg and builds the channel; nothing connects before Run.
func New(cfg Config, env channel.Env) (*Channel, error) {
	if cfg.BridgeURL == "" {
		cfg.BridgeURL = DefaultBridgeURL
	}
	u, err := url.Parse(cfg.BridgeURL)
	if err != nil || (u.Scheme != "ws" && u.Scheme != "wss") || u.Host == "" {
		return nil, fmt.Errorf("channels.whatsapp.bridgeUrl %q is not a ws:// or wss:// URL (nanobot's default is %s)", cfg.BridgeURL, DefaultBridgeURL)
	}
	switch cfg.GroupPolicy {
	case "":
		cfg.GroupPolicy = "open"
	case "open", "mention":
	default:
		return nil, fmt.Errorf("channels.whatsapp.groupPolicy is %q: use \"open\" or \"mention\"", cfg.GroupPolicy)
	}
	token := strings.TrimSpace(cfg.BridgeToken)
	if token == "" {
		if token, err = bridgeToken(cfg.NanobotDir); err != nil {
			return nil, err
		}
	}
	media := cfg.BridgeMediaDir
	if media == "" && cfg.NanobotDir != "" {
		media = filepath.Join(cfg.NanobotDir, "media")
	}
	if media != "" {
		if real, err := filepath.EvalSymlinks(media); err == nil {
			media = real
		}
	}
	return &Channel{
		cfg: cfg, env: env, log: env.Log().With("channel", Name),
		token: token, url: cfg.BridgeURL, media: media, lids: NewLIDs(cfg.LidMappings),
		notConnected: fmt.Errorf("whatsapp: not connected to the bridge at %s (is it running and logged in?)", cfg.BridgeURL),
		pacer:        channel.Pacer{Interval: func(string) time.Duration { return 300 * time.Millisecond }},
		inflight:     make(chan struct{}, 1),
		retryBase:    time.Second,
		ackTimeout:   30 * time.Second,
	}, nil
}

// TokenPath is where nanobot keeps the bridge token it generates, under
// its data folder dir.
func TokenPath(dir string) string { return filepath.Join(dir, "whatsapp-auth", "bridge-token") }

// bridgeToken reads nanobot's generated token under dir, or creates one
// there (the bridge started by `nb gateway channels login whatsapp`, or
// by nanobot, is given the same file).
func bridgeToken(dir string) (string, error) {
	if dir == "" {
		return "", errors.New("channels.whatsapp.bridgeToken is empty: set it to the bridge's BRIDGE_TOKEN")
	}
	path := TokenPath(dir)
	if b, err := os.ReadFile(path); err == nil && strings.TrimSpace(string(b)) != "" {
		return strings.TrimSpace(string(b)), nil
	}
	raw := make([]byte, 32)
	rand.Read(raw) //nolint:errcheck // crypto/rand.Read does not fail
	token := base64.RawURLEncoding.EncodeToString(raw)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", fmt.Errorf("channels.whatsapp: creating the bridge token's folder: %w (or set bridgeToken)", err)
	}
	if err := os.WriteFile(path, []byte(token), 0o600); err != nil {
		return "", fmt.Errorf("channels.whatsapp: writing the bridge token %s: %w (or set bridgeToken)", path, err)
	}
	return token, nil
}

// Token is the token the channel authenticates to the bridge with: the
// one `nb gateway channels login whatsapp` gives the bridge it starts.
func (c *Channel) Token() string { return c.token }

// Name is "whatsapp".
func (c *Channel) Name() string { return Name }

// Capabilities: 65,536 characters, Markdown sent as written (WhatsApp
// shows *bold* and ``` itself), no edits, files both ways.
func (c *Channel) Capabilities() channel.Capabilities {
	return channel.Capabilities{MaxMessageLength: MaxMessageLength, Markdown: channel.Plain, Media: true}
}

// errRefused is the bridge's close of a connection whose token it refused.
var errRefused = errors.New("refused")

// Run connects to the bridge and receives until ctx ends, connecting
// again after each failure. The bridge keeps nothing for a client that is
// away, so there is no receive position to save.
func (c *Channel) Run(ctx context.Context, in channel.Inbox, ready func()) error {
	var once sync.Once
	b := channel.Backoff{Base: c.retryBase, Max: 30 * time.Second, Conn: &c.link}
	for {
		connected, err := c.session(ctx, in, func() { once.Do(ready) })
		if ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, errRefused) {
			return fmt.Errorf("the WhatsApp bridge at %s refused the token: set channels.whatsapp.bridgeToken to the bridge's BRIDGE_TOKEN (or leave it empty to use nanobot's whatsapp-auth/bridge-token)", c.url)
		}
		if connected {
			b.Reset()
		}
		d := b.Failed(err, 0)
		c.log.Warn("whatsapp: bridge connection lost", "url", c.url, "err", err, "retry_in", d)
		if !channel.Sleep(ctx, d) {
			return nil
		}
	}
}

// session is one connection: authenticate, then read frames until the
// connection ends. connected reports whether it got past the handshake.
func (c *Channel) session(ctx context.Context, in channel.Inbox, ready func()) (connected bool, err error) {
	dctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	ws, _, err := websocket.Dial(dctx, c.url, nil)
	cancel()
	if err != nil {
		return false, fmt.Errorf("connect to the bridge (is it running? `nb gateway channels login whatsapp` starts it): %w", err)
	}
	defer ws.CloseNow() //nolint:errcheck // closed either way
	ws.SetReadLimit(4 << 20)
	auth, _ := json.Marshal(map[string]string{"type": "auth", "token": c.token})
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	err = ws.Write(wctx, websocket.MessageText, auth)
	cancel()
	if err != nil {
		return false, fmt.Errorf("authenticate to the bridge: %w", err)
	}
	cn := &conn{ws: ws, acks: make(chan ack, 4), done: make(chan struct{})}
	c.live.Swap(nil, cn)
	defer func() {
		c.live.Swap(cn, nil)
		close(cn.done)
	}()
	c.log.Info("whatsapp: connected to the bridge", "url", c.url)
	c.link.Up()
	ready()
	for {
		_, data, err := ws.Read(ctx)
		if err != nil {
			switch websocket.CloseStatus(err) {
			case 4003:
				return true, errRefused
			}
			return true, err
		}
		if err := c.frame(ctx, in, cn, data); err != nil {
			return true, err
		}
	}
}

// ConnectWait is how long a send waits for the bridge while the channel
// connects again.
var ConnectWait = 5 * time.Second

// frame handles one frame from the bridge; an error ends the connection.
func (c *Channel) frame(ctx context.Context, in channel.Inbox, cn *conn, data []byte) error {
	var f frame
	if err := json.Unmarshal(data, &f); err != nil {
		c.log.Warn("whatsapp: unreadable frame from the bridge", "bytes", len(data))
		return nil
	}
	switch f.Type {
	case "message":
		m, ok := c.inbound(in, f)
		if ok && !channel.PublishDurably(ctx, in, m, c.log, c.retryBase) {
			return ctx.Err()
		}
	case "status":
		c.log.Info("whatsapp: bridge status", "status", f.Status)
		switch f.Status {
		case "connected":
			c.link.Up()
		case "disconnected":
			c.link.Down(errors.New("the bridge is connected, but not to WhatsApp: it reconnects"))
		}
	case "qr":
		c.link.Down(errors.New("the bridge is not logged in: scan its QR code (nb gateway channels login whatsapp)"))
		c.log.Warn("whatsapp: the bridge is not logged in: scan the QR code it shows (run `nb gateway channels login whatsapp`, or the bridge in a terminal), in WhatsApp under Linked Devices")
	case "sent", "error":
		a := ack{ok: f.Type == "sent", err: f.Error}
		select {
		case cn.acks <- a:
		default:
			// Nobody waits: an answer to a command that timed out.
		}
		if !a.ok {
			c.log.Warn("whatsapp: the bridge reported an error", "err", f.Error)
		}
	}
	return nil
}

// frame is any frame the bridge sends.
type frame struct {
	Type         string          `json:"type"`
	ID           string          `json:"id"`
	Sender       string          `json:"sender"`
	PN           string          `json:"pn"`
	Participant  string          `json:"participant"`
	Content      string          `json:"content"`
	Timestamp    json.Number     `json:"timestamp"`
	IsGroup      bool            `json:"isGroup"`
	IsForwarded  bool            `json:"isForwarded"`
	WasMentioned bool            `json:"wasMentioned"`
	IsReplyToBot bool            `json:"isReplyToBot"`
	Media        []string        `json:"media"`
	Status       string          `json:"status"`
	Error        string          `json:"error"`
	QR           json.RawMessage `json:"qr"`
}

// bare is a JID's user part ("15551234567@s.whatsapp.net" → "15551234567").
func bare(jid string) string {
	u, _, _ := strings.Cut(jid, "@")
	u, _, _ = strings.Cut(u, ":") // a device suffix
	return u
}

// senderID picks the phone number among the frame's JIDs, as nanobot
// does: "@s.whatsapp.net" is a phone, "@lid" a LID (then mapped to its
// phone when known), a bare value a phone.
func (c *Channel) senderID(f frame) string {
	a := f.PN
	b := f.Participant
	if b == "" {
		b = f.Sender
	}
	var phone, lid string
	for _, raw := range []string{a, b} {
		switch {
		case raw == "":
		case strings.Contains(raw, "@s.whatsapp.net"):
			phone = bare(raw)
		case strings.Contains(raw, "@lid"):
			lid = bare(raw)
		case !strings.Contains(raw, "@") && phone == "":
			phone = raw
		}
	}
	if id := c.lids.Sender(phone, lid); id != "" {
		return id
	}
	return bare(b)
}

// inbound turns a message frame into the bus's form; false drops it.
func (c *Channel) inbound(in channel.Inbox, f frame) (bus.Inbound, bool) {
	if f.Sender == "" {
		return bus.Inbound{}, false
	}
	mentioned := f.WasMentioned || f.IsReplyToBot
	if f.IsGroup && c.cfg.GroupPolicy == "mention" && !mentioned {
		c.log.Debug("whatsapp: group message without a mention dropped", "chat", f.Sender)
		return bus.Inbound{}, false
	}
	m := bus.Inbound{
		Channel:   Name,
		SenderID:  c.senderID(f),
		ChatID:    f.Sender,
		Content:   f.Content,
		Timestamp: time.Now(),
		Metadata: map[string]any{
			"message_id":          f.ID,
			"is_group":            f.IsGroup,
			"is_forwarded":        f.IsForwarded,
			"is_reply_to_bot":     f.IsReplyToBot,
			channel.MetaGroup:     f.IsGroup,
			channel.MetaMentioned: mentioned || (f.IsGroup && c.cfg.GroupPolicy == "open"),
		},
	}
	if f.ID != "" {
		m.ID = f.Sender + "/" + f.ID
	}
	if f.Participant != "" {
		m.Metadata["participant"] = f.Participant
	}
	if s, err := f.Timestamp.Int64(); err == nil && s > 0 {
		m.Timestamp = time.Unix(s, 0)
	}
	if len(f.Media) > 0 {
		c.attach(in, &m, f.Media)
	}
	return m, true
}

// attach copies the files the bridge stored for m into the workspace and
// names them in its text, as nanobot's "[image: path]" tags, when the
// sender is admitted; a stranger's files stay where the bridge put them.
func (c *Channel) attach(in channel.Inbox, m *bus.Inbound, paths []string) {
	if !channel.Admits(in, *m) {
		c.log.Debug("whatsapp: a stranger's files not taken", "sender", m.SenderID, "files", len(paths))
		return
	}
	dir, err := c.env.MediaDir(Name)
	if err != nil {
		c.log.Warn("whatsapp: files not stored", "err", err)
		return
	}
	for _, p := range paths {
		stored, err := c.copyMedia(p, dir)
		name := filepath.Base(p)
		if err != nil {
			c.log.Warn("whatsapp: file not stored", "name", name, "err", err)
			m.Content = strings.TrimSpace(m.Content + fmt.Sprintf("\n[file %s not received: %v]", name, err))
			continue
		}
		kind := "file"
		if strings.HasPrefix(mime.TypeByExtension(filepath.Ext(stored)), "image/") {
			kind = "image"
		}
		m.Media = append(m.Media, stored)
		m.Content = strings.TrimSpace(m.Content + fmt.Sprintf("\n[%s: %s]", kind, stored))
	}
}

// copyMedia copies one of the bridge's files into dir. Only files inside
// the bridge's media folder are taken: a frame naming any other path
// (~/.ssh/id_rsa) would otherwise put that file within the agent's reach.
func (c *Channel) copyMedia(p, dir string) (string, error) {
	if c.media == "" {
		return "", errors.New("the bridge's media folder is unknown: set channels.whatsapp.bridgeMediaDir")
	}
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return "", errors.New("no such file")
	}
	if rel, err := filepath.Rel(c.media, real); err != nil || !filepath.IsLocal(rel) {
		return "", fmt.Errorf("outside the bridge's media folder %s", c.media)
	}
	f, err := os.Open(real)
	if err != nil {
		return "", errors.New("unreadable")
	}
	defer f.Close()
	if info, err := f.Stat(); err != nil || !info.Mode().IsRegular() {
		return "", errors.New("not a regular file")
	}
	return channel.StoreMedia(f, dir, filepath.Base(real), MaxFileBytes)
}

// Piece is one message of an answer: a text or a file.
type Piece struct {
	Text string
	File string
}

// Pieces is an answer as both modes send it: its text in pieces of at
// most MaxMessageLength, then each file of its Media (a message's, not a
// progress's) that OutgoingFile lets out of workspace; a file refused is
// named at the end of the text instead.
func Pieces(workspace string, m bus.Outbound) []Piece {
	content := m.Content
	var files []Piece
	if m.Kind == bus.Message {
		for _, p := range m.Media {
			real, err := OutgoingFile(workspace, p)
			if err != nil {
				content += fmt.Sprintf("\n\n(%s not attached: %v)", filepath.Base(p), err)
				continue
			}
			files = append(files, Piece{File: real})
		}
	}
	var ps []Piece
	for _, t := range channel.SplitFenced(content, MaxMessageLength) {
		if strings.TrimSpace(t) != "" {
			ps = append(ps, Piece{Text: t})
		}
	}
	return append(ps, files...)
}

// Send delivers m (see Pieces) by the bridge's send and send_media. It
// returns the channel's own id of the last command the bridge confirmed
// (the bridge reports no WhatsApp message id).
func (c *Channel) Send(ctx context.Context, m bus.Outbound) (string, error) {
	ps := Pieces(c.env.Workspace, m)
	post := func(_ int, p Piece) (string, error) { return c.deliver(ctx, m.ChatID, p) }
	// No edits on WhatsApp: a turn's later progress, and the final answer
	// that would replace it, are new messages.
	edit := func(_ string, p Piece) error { _, err := c.deliver(ctx, m.ChatID, p); return err }
	return channel.Deliver(&c.turns, m, ps, post, edit)
}

// deliver sends one piece to chat, paced per chat.
func (c *Channel) deliver(ctx context.Context, chat string, p Piece) (string, error) {
	if err := c.pacer.Wait(ctx, chat); err != nil {
		return "", err
	}
	cmd := map[string]string{"type": "send", "to": chat, "text": p.Text}
	if p.File != "" {
		typ := mime.TypeByExtension(filepath.Ext(p.File))
		if typ == "" {
			typ = "application/octet-stream"
		}
		cmd = map[string]string{"type": "send_media", "to": chat, "filePath": p.File, "mimetype": typ, "fileName": filepath.Base(p.File)}
	}
	id, err := c.command(ctx, cmd)
	var ra *channel.RetryAfter
	if errors.As(err, &ra) {
		c.pacer.Defer(chat, ra.After)
	}
	return id, err
}

// RateLimitWait is how long a chat waits after WhatsApp's
// "rate-overlimit" (its 429), which names no wait of its own.
var RateLimitWait = 5 * time.Second

// command sends one command and waits for the bridge's answer. A command
// written whose answer never comes (the bridge went away, or took longer
// than ackTimeout) counts as sent: the bridge may have delivered it, and
// sending it again could answer twice.
func (c *Channel) command(ctx context.Context, cmd map[string]string) (string, error) {
	select {
	case c.inflight <- struct{}{}:
	case <-ctx.Done():
		return "", ctx.Err()
	}
	defer func() { <-c.inflight }()
	cn, err := c.live.Wait(ctx, ConnectWait, c.notConnected)
	if err != nil {
		return "", err
	}
	for drained := false; !drained; {
		select {
		case <-cn.acks: // answers to commands that timed out
		default:
			drained = true
		}
	}
	id := "nb-" + strconv.FormatInt(c.seq.Add(1), 10)
	cmd["msg_id"] = id // newer bridges echo it; older ones ignore it
	data, _ := json.Marshal(cmd)
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	err = cn.ws.Write(wctx, websocket.MessageText, data)
	cancel()
	if err != nil {
		return "", fmt.Errorf("whatsapp: sending to the bridge: %w", err)
	}
	t := time.NewTimer(c.ackTimeout)
	defer t.Stop()
	select {
	case a := <-cn.acks:
		if a.ok {
			return id, nil
		}
		return "", bridgeError(a.err)
	case <-cn.done:
		c.log.Warn("whatsapp: the bridge went away before confirming a message: not sent again, so that it cannot arrive twice", "to", cmd["to"], "id", id)
		return id, nil
	case <-t.C:
		// The answers are matched by order: after a lost one the
		// connection starts over rather than pair answers wrongly.
		c.log.Warn("whatsapp: the bridge did not confirm a message in time: not sent again; reconnecting", "to", cmd["to"], "id", id)
		cn.ws.Close(websocket.StatusGoingAway, "no answer") //nolint:errcheck // the read loop sees it
		return id, nil
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// bridgeError is the bridge's "error" answer as the channel's error:
// WhatsApp's rate-overlimit is a *RetryAfter.
func bridgeError(text string) error {
	err := fmt.Errorf("whatsapp bridge: %s", text)
	if strings.Contains(text, "rate-overlimit") || strings.Contains(text, "429") {
		return &channel.RetryAfter{After: RateLimitWait, Err: err}
	}
	return err
}
