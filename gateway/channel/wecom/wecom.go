// Package wecom is the gateway's WeCom (企业微信) channel, as nanobot's:
// an intelligent robot (智能机器人, "AI Bot") connected by the platform's
// long connection, a websocket of JSON frames the bot opens itself (no
// public address needed). The bot subscribes with its Bot ID and Secret,
// pings every 30 seconds, receives messages (aibot_msg_callback) and
// events (aibot_event_callback), and answers a message on the message's
// own req_id as a stream (aibot_respond_msg: progress updates the stream,
// the answer finishes it); what has no message to answer, or comes late,
// is pushed (aibot_send_msg, Markdown). Files go both ways: those people
// send are fetched and decrypted; those the assistant sends are uploaded
// as temporary media over the same connection and pushed by media_id.
//
// Identity, as nanobot: Inbound.SenderID is the sender's userid; ChatID
// is the group's chatid, or the sender's userid in a direct chat.
package wecom

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/nbots/nb/gateway/bus"
	"github.com/nbots/nb/gateway/channel"
)

// Name is the channel's configuration name, channels.wecom.
const Name = "wecom"

// MaxMessageLength is where answers are split, in characters: a pushed
// Markdown message takes 4,096 bytes, and 1,300 characters of Chinese
// (three bytes each) stay within it.
const MaxMessageLength = 1300

// DefaultURL is the long connection's address.
const DefaultURL = "wss://openws.work.weixin.qq.com"

// Commands of the long connection.
const (
	CmdSubscribe = "aibot_subscribe"
	CmdPing      = "ping"
	CmdCallback  = "aibot_msg_callback"
	CmdEvent     = "aibot_event_callback"
	CmdRespond   = "aibot_respond_msg"
	CmdWelcome   = "aibot_respond_welcome_msg"
	CmdSend      = "aibot_send_msg"
	// A file the bot sends is uploaded first, in chunks.
	CmdUploadInit   = "aibot_upload_media_init"
	CmdUploadChunk  = "aibot_upload_media_chunk"
	CmdUploadFinish = "aibot_upload_media_finish"
)

// replyWindow is how long a message's req_id can carry its answer: past
// it the answer is pushed.
const replyWindow = 5 * time.Minute

// Config is channels.wecom: nanobot's keys, and nb's wsUrl and
// maxMediaBytes.
type Config struct {
	Enabled bool `json:"enabled"`
	// BotID and Secret are the intelligent robot's (its API mode page,
	// "long connection").
	BotID  string `json:"botId"`
	Secret string `json:"secret"`
	// AllowFrom lists userids; the gateway checks SenderID against it.
	AllowFrom []string `json:"allowFrom"`
	// WelcomeMessage answers a person who opens a chat with the bot.
	WelcomeMessage string `json:"welcomeMessage,omitempty"`
	// WSURL replaces the long connection's address (a test server).
	WSURL string `json:"wsUrl,omitempty"`
	// MaxMediaBytes bounds one file received (20 MB if 0).
	MaxMediaBytes int64 `json:"maxMediaBytes,omitempty"`
}

// Frame is one JSON message of the long connection, both ways.
type Frame struct {
	Cmd     string          `json:"cmd,omitempty"`
	Headers FrameHeaders    `json:"headers"`
	Body    json.RawMessage `json:"body,omitempty"`
	ErrCode *int            `json:"errcode,omitempty"`
	ErrMsg  string          `json:"errmsg,omitempty"`
}

// FrameHeaders carry the req_id that pairs a request with its answer.
type FrameHeaders struct {
	ReqID string `json:"req_id"`
}

// ReqID makes a request id as the SDKs do: the command, the time, and
// random hex.
func ReqID(cmd string) string {
	b := make([]byte, 4)
	rand.Read(b) //nolint:errcheck // never fails
	return fmt.Sprintf("%s_%d_%s", cmd, time.Now().UnixMilli(), hex.EncodeToString(b))
}

// Channel is one WeCom intelligent robot.
type Channel struct {
	// link is the receive loop's connection, for Status.
	link    channel.Conn
	cfg     Config
	env     channel.Env
	log     *slog.Logger
	media   *http.Client
	pacer   channel.Pacer
	turns   channel.Turns
	backoff time.Duration
	ping    time.Duration
	// answerWait bounds the wait for the platform's answer to a command.
	answerWait time.Duration

	mu      sync.Mutex
	conn    *wsConn
	replies map[string]*reply // by message id
	latest  map[string]*reply // by chat: its last message's
	streams map[string]*reply // by stream id
}

// Status implements channel.Reporter: where the receive loop's
// connection is.
func (c *Channel) Status() channel.Status { return c.link.Status() }

// reply is the answer channel of one received message.
type reply struct {
	reqID, chat, stream string
	at                  time.Time
	finished            bool
}

// New checks cfg and builds the channel; nothing connects before Run.
func New(cfg Config, env channel.Env) (*Channel, error) {
	if cfg.BotID == "" || cfg.Secret == "" {
		return nil, errors.New("channels.wecom.botId and secret are required (the intelligent robot's API settings, long connection mode)")
	}
	if cfg.WSURL == "" {
		cfg.WSURL = DefaultURL
	}
	u, err := url.Parse(cfg.WSURL)
	if err != nil || u.Host == "" || (u.Scheme != "ws" && u.Scheme != "wss") {
		return nil, fmt.Errorf("channels.wecom.wsUrl %q is not a ws or wss URL", cfg.WSURL)
	}
	if cfg.MaxMediaBytes <= 0 {
		cfg.MaxMediaBytes = 20 << 20
	}
	var hosts []string
	if cfg.WSURL != DefaultURL {
		hosts = append(hosts, u.Hostname()) // the operator's server: its files may be fetched
	}
	c := &Channel{
		cfg: cfg, env: env, log: env.Log().With("channel", Name), media: env.MediaClient(hosts...),
		backoff: time.Second, ping: 30 * time.Second, answerWait: 10 * time.Second,
		replies: map[string]*reply{}, latest: map[string]*reply{}, streams: map[string]*reply{},
	}
	return c, nil
}

// Name is "wecom".
func (c *Channel) Name() string { return Name }

// Capabilities: 1,300 characters, Markdown, progress by stream updates,
// files both ways.
func (c *Channel) Capabilities() channel.Capabilities {
	return channel.Capabilities{MaxMessageLength: MaxMessageLength, Markdown: channel.CommonMark, Edits: true, Media: true}
}

// errTakenOver ends Run: another connection for the same bot took over.
var errTakenOver = errors.New("wecom closed the long connection because another one opened for the same bot (another gateway or nanobot running with channels.wecom.botId?): stopping this one")

// Run connects and receives until ctx ends, connecting again after each
// failure.
func (c *Channel) Run(ctx context.Context, in channel.Inbox, ready func()) error {
	b := &channel.Backoff{Base: c.backoff, Max: 30 * time.Second, Conn: &c.link}
	readied := false
	for {
		err := c.connect(ctx, in, func() {
			b.Connected()
			if !readied {
				readied = true
				c.log.Info("wecom: connected by long connection")
				ready()
			}
		})
		if ctx.Err() != nil {
			return nil
		}
		var auth *authError
		if errors.As(err, &auth) || errors.Is(err, errTakenOver) {
			return err
		}
		d := b.Failed(err, 0)
		c.log.Warn("wecom: the long connection ended", "err", err, "retry_in", d)
		if !channel.Sleep(ctx, d) {
			return nil
		}
	}
}

// authError is the platform's refusal of the Bot ID and Secret.
type authError struct {
	code int
	msg  string
}

func (e *authError) Error() string {
	return fmt.Sprintf("wecom refused the bot's credentials (errcode %d: %s): check channels.wecom.botId and secret", e.code, e.msg)
}

// wsConn is one open connection: writes one at a time, and the answers
// awaited by req_id.
type wsConn struct {
	ws      *websocket.Conn
	wait    time.Duration
	wmu     sync.Mutex
	mu      sync.Mutex
	waiting map[string]chan Frame
	missed  int
}

func (k *wsConn) write(ctx context.Context, f Frame) error {
	k.wmu.Lock()
	defer k.wmu.Unlock()
	return channel.WriteFrame(ctx, k.ws, f)
}

// request writes f and waits for its answer (the frame with its req_id).
func (k *wsConn) request(ctx context.Context, f Frame) (Frame, error) {
	ch := make(chan Frame, 1)
	k.mu.Lock()
	k.waiting[f.Headers.ReqID] = ch
	k.mu.Unlock()
	defer func() {
		k.mu.Lock()
		delete(k.waiting, f.Headers.ReqID)
		k.mu.Unlock()
	}()
	if err := k.write(ctx, f); err != nil {
		return Frame{}, err
	}
	t := time.NewTimer(k.wait)
	defer t.Stop()
	select {
	case a := <-ch:
		return a, nil
	case <-t.C:
		return Frame{}, fmt.Errorf("no answer within %s", k.wait)
	case <-ctx.Done():
		return Frame{}, ctx.Err()
	}
}

// answered hands an answer frame to its waiting request; it reports
// whether one waited.
func (k *wsConn) answered(f Frame) bool {
	k.mu.Lock()
	ch, ok := k.waiting[f.Headers.ReqID]
	k.mu.Unlock()
	if ok {
		ch <- f
	}
	return ok
}

// connect opens one connection, subscribes and reads it until it fails.
func (c *Channel) connect(ctx context.Context, in channel.Inbox, connected func()) error {
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	ws, _, err := websocket.Dial(dctx, c.cfg.WSURL, nil)
	cancel()
	if err != nil {
		return err
	}
	ws.SetReadLimit(4 << 20)
	k := &wsConn{ws: ws, wait: c.answerWait, waiting: map[string]chan Frame{}}
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	defer ws.CloseNow() //nolint:errcheck // closing a connection being abandoned
	frames := make(chan Frame)
	readErr := make(chan error, 1)
	go func() {
		for {
			_, data, err := ws.Read(ctx)
			if err != nil {
				readErr <- err
				return
			}
			var f Frame
			if err := json.Unmarshal(data, &f); err != nil {
				c.log.Warn("wecom: an unreadable frame skipped", "err", err)
				continue
			}
			if f.Cmd == "" && k.answered(f) {
				continue
			}
			select {
			case frames <- f:
			case <-ctx.Done():
				return
			}
		}
	}()
	body, _ := json.Marshal(map[string]string{"bot_id": c.cfg.BotID, "secret": c.cfg.Secret})
	sub := Frame{Cmd: CmdSubscribe, Headers: FrameHeaders{ReqID: ReqID(CmdSubscribe)}, Body: body}
	answer := make(chan error, 1)
	go func() {
		a, err := k.request(ctx, sub)
		if err == nil && a.ErrCode != nil && *a.ErrCode != 0 {
			err = &authError{code: *a.ErrCode, msg: a.ErrMsg}
		}
		answer <- err
	}()
	// Frames that come before the subscription's answer are kept for
	// after it: nothing the platform sent once is dropped.
	var early []Frame
	for subscribed := false; !subscribed; {
		select {
		case err := <-answer:
			if err != nil {
				return err
			}
			subscribed = true
		case f := <-frames:
			early = append(early, f)
		case err := <-readErr:
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	c.mu.Lock()
	c.conn = k
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		if c.conn == k {
			c.conn = nil
		}
		c.mu.Unlock()
	}()
	connected()
	go c.heartbeat(ctx, k)
	for _, f := range early {
		if err := c.frame(ctx, in, k, f); err != nil {
			return err
		}
	}
	// The reader ends without a word when ctx ends while it hands over a
	// frame: ctx.Done is what stops this loop then.
	for {
		select {
		case err := <-readErr:
			return err
		case <-ctx.Done():
			return ctx.Err()
		case f := <-frames:
			if err := c.frame(ctx, in, k, f); err != nil {
				return err
			}
		}
	}
}

// heartbeat pings every 30 s; two pings unanswered end the connection.
func (c *Channel) heartbeat(ctx context.Context, k *wsConn) {
	t := time.NewTicker(c.ping)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			a, err := k.request(ctx, Frame{Cmd: CmdPing, Headers: FrameHeaders{ReqID: ReqID(CmdPing)}})
			if ctx.Err() != nil {
				return
			}
			if err != nil || (a.ErrCode != nil && *a.ErrCode != 0) {
				k.missed++
				if k.missed >= 2 {
					c.log.Warn("wecom: heartbeat unanswered twice: reconnecting")
					k.ws.CloseNow() //nolint:errcheck // the reader sees it and reconnects
					return
				}
				continue
			}
			k.missed = 0
		}
	}
}

// callback is the body of aibot_msg_callback and aibot_event_callback.
type callback struct {
	MsgID    string `json:"msgid"`
	AIBotID  string `json:"aibotid"`
	ChatID   string `json:"chatid"`
	ChatType string `json:"chattype"`
	From     struct {
		UserID string `json:"userid"`
	} `json:"from"`
	MsgType string `json:"msgtype"`
	Text    struct {
		Content string `json:"content"`
	} `json:"text"`
	Image media `json:"image"`
	File  media `json:"file"`
	Video media `json:"video"`
	Voice struct {
		Content string `json:"content"`
	} `json:"voice"`
	Mixed struct {
		Items []struct {
			MsgType string `json:"msgtype"`
			Text    struct {
				Content string `json:"content"`
			} `json:"text"`
			Image media `json:"image"`
		} `json:"msg_item"`
	} `json:"mixed"`
	Event struct {
		EventType string `json:"eventtype"`
	} `json:"event"`
}

type media struct {
	URL    string `json:"url"`
	AESKey string `json:"aeskey"`
	Name   string `json:"name"`
}

// frame handles one frame the platform pushed.
func (c *Channel) frame(ctx context.Context, in channel.Inbox, k *wsConn, f Frame) error {
	var cb callback
	if f.Cmd == CmdCallback || f.Cmd == CmdEvent {
		if err := json.Unmarshal(f.Body, &cb); err != nil {
			c.log.Warn("wecom: an unreadable callback skipped", "err", err)
			return nil
		}
	}
	switch f.Cmd {
	case CmdEvent:
		switch cb.Event.EventType {
		case "disconnected_event":
			return errTakenOver
		case "enter_chat":
			if c.cfg.WelcomeMessage != "" {
				body, _ := json.Marshal(map[string]any{"msgtype": "text", "text": map[string]string{"content": c.cfg.WelcomeMessage}})
				if err := k.write(ctx, Frame{Cmd: CmdWelcome, Headers: f.Headers, Body: body}); err != nil {
					return err
				}
			}
		}
	case CmdCallback:
		m, ok := c.inbound(ctx, in, cb)
		if !ok {
			return nil
		}
		c.remember(cb, m.ChatID, f.Headers.ReqID)
		// The platform sends a message once and takes no acknowledgement:
		// the next frame is read only once this one is durable.
		if !channel.PublishDurably(ctx, in, m, c.log, c.backoff) {
			return ctx.Err()
		}
	}
	return nil
}

// remember keeps a message's req_id, by which its answer goes.
func (c *Channel) remember(cb callback, chat, reqID string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	if len(c.replies) > 2000 {
		for id, r := range c.replies {
			if now.Sub(r.at) > replyWindow {
				delete(c.replies, id)
				delete(c.streams, r.stream)
				if c.latest[r.chat] == r {
					delete(c.latest, r.chat)
				}
			}
		}
	}
	r := &reply{reqID: reqID, chat: chat, at: now, stream: ReqID("stream")}
	c.replies[cb.MsgID] = r
	c.latest[chat] = r
	c.streams[r.stream] = r
}

var leadingMention = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^@\S+\s*`) })

// inbound turns a message callback into the bus's form.
func (c *Channel) inbound(ctx context.Context, in channel.Inbox, cb callback) (bus.Inbound, bool) {
	sender := cb.From.UserID
	if sender == "" {
		return bus.Inbound{}, false
	}
	chat := cb.ChatID
	if chat == "" {
		chat = sender
	}
	group := cb.ChatType == "group"
	id := cb.MsgID
	if id == "" {
		return bus.Inbound{}, false // nothing to tell a repeat by
	}
	m := bus.Inbound{
		Channel: Name, ID: id, SenderID: sender, ChatID: chat, Timestamp: time.Now().UTC(),
		// The platform hands the bot a group message only when it is
		// mentioned.
		Metadata: map[string]any{channel.MetaGroup: group, channel.MetaMentioned: true, "message_id": id, "msg_type": cb.MsgType, "chat_type": cb.ChatType},
	}
	fetch := channel.Admits(in, m)
	var parts []string
	file := func(kind string, md media) {
		name := md.Name
		if name == "" {
			name = kind
		}
		if !fetch || md.URL == "" {
			parts = append(parts, "["+kind+"]")
			return
		}
		path, err := c.fetch(ctx, id, md, kind)
		if err != nil {
			c.log.Warn("wecom: a file not stored", "message", id, "err", err)
			parts = append(parts, fmt.Sprintf("[%s: %s: download failed: %v]", kind, name, err))
			return
		}
		m.Media = append(m.Media, path)
		parts = append(parts, fmt.Sprintf("[%s: %s]", kind, path))
	}
	switch cb.MsgType {
	case "text":
		t := cb.Text.Content
		if group {
			t = leadingMention().ReplaceAllString(strings.TrimSpace(t), "") // the bot's mention
		}
		parts = append(parts, t)
	case "voice":
		// The platform transcribes voice itself.
		parts = append(parts, strings.TrimSpace("[voice] "+cb.Voice.Content))
	case "image":
		file("image", cb.Image)
	case "file":
		file("file", cb.File)
	case "video":
		file("video", cb.Video)
	case "mixed":
		for _, it := range cb.Mixed.Items {
			switch it.MsgType {
			case "text":
				parts = append(parts, it.Text.Content)
			case "image":
				file("image", it.Image)
			default:
				parts = append(parts, "["+it.MsgType+"]")
			}
		}
	default:
		parts = append(parts, "["+cb.MsgType+"]")
	}
	m.Content = strings.TrimSpace(strings.Join(parts, "\n"))
	if m.Content == "" && len(m.Media) == 0 {
		return bus.Inbound{}, false
	}
	return m, true
}

// fetch downloads a file the message carries, through the egress guard,
// and decrypts it with the message's aeskey.
func (c *Channel) fetch(ctx context.Context, id string, md media, kind string) (string, error) {
	key, err := base64.StdEncoding.DecodeString(md.AESKey)
	if err != nil {
		key, err = base64.RawStdEncoding.DecodeString(strings.TrimRight(md.AESKey, "="))
	}
	if err != nil || len(key) != 32 {
		return "", errors.New("the file's aeskey is not a 32-byte base64 key")
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, md.URL, nil)
	if err != nil {
		return "", err
	}
	dir, err := c.env.MediaDir(Name)
	if err != nil {
		return "", err
	}
	name := md.Name
	if name == "" {
		name = kind
	}
	// Saved encrypted first (size-limited by SaveMedia), then replaced by
	// its plain text.
	path, err := channel.SaveMedia(c.media, req, dir, id+"_"+name, c.cfg.MaxMediaBytes+32)
	if channel.IsTooLarge(err) {
		return "", fmt.Errorf("%w (channels.wecom.maxMediaBytes)", err)
	}
	if err != nil {
		return "", err
	}
	if err := decryptFile(path, key); err != nil {
		return "", err
	}
	return path, nil
}

// Decrypt opens a file the platform encrypted with a message's aeskey:
// AES-256-CBC, the key's first 16 bytes as the IV, PKCS#7 padding to 32
// bytes.
func Decrypt(data, key []byte) ([]byte, error) {
	if len(key) != 32 || len(data) == 0 || len(data)%aes.BlockSize != 0 {
		return nil, errors.New("the file does not decrypt: wrong length")
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	out := make([]byte, len(data))
	cipher.NewCBCDecrypter(block, key[:aes.BlockSize]).CryptBlocks(out, data)
	pad := int(out[len(out)-1])
	if pad < 1 || pad > 32 || pad > len(out) {
		return nil, errors.New("the file does not decrypt with its aeskey")
	}
	for _, b := range out[len(out)-pad:] {
		if int(b) != pad {
			return nil, errors.New("the file does not decrypt with its aeskey")
		}
	}
	return out[:len(out)-pad], nil
}
