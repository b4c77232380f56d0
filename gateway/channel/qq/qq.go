// Package qq is the gateway's QQ channel: a bot of the QQ bot platform
// (q.qq.com) that receives one-to-one (C2C) messages and the group
// messages that @ it through the platform's websocket gateway, and
// answers through its REST API.
//
// The channel trades the app id and secret for an app access token
// (renewed before it expires), asks /gateway for the websocket's address,
// identifies with the token and its intents, heartbeats at the interval
// the gateway's Hello names, and resumes a dropped session with its id and
// the sequence number of the last event the gateway made durable: the
// platform replays what came after. That session id and sequence are the
// channel's receive position, saved after each message is durable, so a
// restart resumes too.
//
// QQ answers a message only "passively": a reply names the message's
// msg_id (valid 60 minutes in a one-to-one chat, 5 in a group, for at most
// five replies) and a msg_seq that differs for each reply to it. A message
// without msg_id is "active" and counted against a small monthly quota.
//
// Identity: Inbound.SenderID is the user's openid for this bot
// (user_openid in one-to-one chats, member_openid in groups); ChatID is
// the user's openid, or "group:<group_openid>".
package qq

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/nbots/nb/gateway/bus"
	"github.com/nbots/nb/gateway/channel"
)

// Name is the channel's configuration name, channels.qq.
const Name = "qq"

// MaxMessageLength is where answers are split.
const MaxMessageLength = 2000

// MaxFileBytes bounds a file the bot sends (uploaded in the request, as
// base64).
const MaxFileBytes = 10 << 20

// Intents are nanobot's: group and one-to-one messages (1<<25) and
// direct messages (1<<12).
const Intents = 1<<25 | 1<<12

// Passive reply windows and the replies each message allows.
const (
	C2CWindow   = 60 * time.Minute
	GroupWindow = 5 * time.Minute
	MaxReplies  = 5
)

// Config is channels.qq (nanobot's keys, plus apiBase and maxMediaBytes).
type Config struct {
	Enabled bool `json:"enabled"`
	// AppID is the bot's AppID (q.qq.com → development → settings).
	AppID string `json:"appId"`
	// Secret is its AppSecret.
	Secret string `json:"secret"`
	// AllowFrom lists openids; the gateway checks SenderID against it.
	AllowFrom []string `json:"allowFrom"`
	// MsgFormat is "plain" (the default) or "markdown" (the bot needs
	// QQ's permission for Markdown messages).
	MsgFormat string `json:"msgFormat,omitempty"`
	// APIBase replaces https://api.sgroup.qq.com and https://bots.qq.com
	// (the tests' fake, the sandbox).
	APIBase string `json:"apiBase,omitempty"`
	// MaxMediaBytes bounds one attachment received (20 MB if 0).
	MaxMediaBytes int64 `json:"maxMediaBytes,omitempty"`
}

// Channel is one QQ bot.
type Channel struct {
	// link is the receive loop's connection, for Status.
	link  channel.Conn
	cfg   Config
	env   channel.Env
	log   *slog.Logger
	http  *http.Client
	media *http.Client
	api   string
	auth  string
	pacer channel.Pacer
	turns channel.Turns

	retryBase time.Duration

	token channel.AccessToken // the app's, renewed a minute before it expires

	mu      sync.Mutex
	sources map[string]*source // chat -> the latest message to reply to
	byID    map[string]*source // msg_id -> its source
}

// Status implements channel.Reporter: where the receive loop's
// connection is.
func (c *Channel) Status() channel.Status { return c.link.Status() }

// source is a message replies may name, and the replies made to it.
type source struct {
	id      string
	at      time.Time
	group   bool
	replies int
}

// New checks cfg and builds the channel; nothing connects before Run.
func New(cfg Config, env channel.Env) (*Channel, error) {
	cfg.AppID, cfg.Secret = strings.TrimSpace(cfg.AppID), strings.TrimSpace(cfg.Secret)
	if cfg.AppID == "" || cfg.Secret == "" {
		return nil, errors.New("channels.qq needs appId and secret: the bot's AppID and AppSecret (q.qq.com → your bot → development → settings)")
	}
	switch cfg.MsgFormat {
	case "", "plain", "markdown":
	default:
		return nil, fmt.Errorf("channels.qq.msgFormat is %q: use \"plain\" or \"markdown\"", cfg.MsgFormat)
	}
	if cfg.MaxMediaBytes <= 0 {
		cfg.MaxMediaBytes = 20 << 20
	}
	c := &Channel{
		cfg: cfg, env: env, log: env.Log().With("channel", Name),
		http: &http.Client{Timeout: 30 * time.Second},
		api:  "https://api.sgroup.qq.com", auth: "https://bots.qq.com",
		retryBase: time.Second,
		sources:   map[string]*source{}, byID: map[string]*source{},
	}
	c.token = channel.AccessToken{Fetch: c.fetchToken, Margin: time.Minute}
	var mediaHosts []string
	if cfg.APIBase != "" {
		u, err := url.Parse(cfg.APIBase)
		if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
			return nil, fmt.Errorf("channels.qq.apiBase %q is not an http or https URL", cfg.APIBase)
		}
		c.api = strings.TrimRight(cfg.APIBase, "/")
		c.auth = c.api
		mediaHosts = append(mediaHosts, u.Hostname()) // the operator's server: its files may be fetched
	}
	c.media = env.MediaClient(mediaHosts...)
	return c, nil
}

// Name is "qq".
func (c *Channel) Name() string { return Name }

// Capabilities: 2,000 characters, plain text or Markdown, files; QQ
// cannot edit a bot's message.
func (c *Channel) Capabilities() channel.Capabilities {
	md := channel.Plain
	if c.cfg.MsgFormat == "markdown" {
		md = channel.CommonMark
	}
	return channel.Capabilities{MaxMessageLength: MaxMessageLength, Markdown: md, Media: true}
}

// apiError is a refusal of the REST API: its HTTP status and QQ's code.
type apiError struct {
	Status  int
	Code    int
	Message string
}

func (e *apiError) Error() string {
	return fmt.Sprintf("HTTP %d, code %d: %s", e.Status, e.Code, e.Message)
}

// Codes the channel acts on.
const (
	codeDuplicate   = 40054005 // the msg_id and msg_seq were used already: the reply went
	codeRateLimited = 22009    // messages sent too often
	codeBadSecret   = 100016   // the app id or secret is wrong
)

func (e *apiError) throttled() bool {
	return e.Status == http.StatusTooManyRequests || e.Code == codeRateLimited
}

// call sends a JSON request and decodes the answer into out. Errors never
// quote the URL or the token.
func (c *Channel) call(ctx context.Context, method, u, token string, body, out any) error {
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, r)
	if err != nil {
		return errors.New("bad request URL")
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "QQBot "+token)
		req.Header.Set("X-Union-Appid", c.cfg.AppID)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return fmt.Errorf("%s %s: %w", method, req.URL.Path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("%s: reading the answer: %w", req.URL.Path, err)
	}
	var e struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}
	json.Unmarshal(raw, &e) //nolint:errcheck // an answer that is not JSON has no code
	if resp.StatusCode >= 300 || e.Code != 0 {
		return &apiError{Status: resp.StatusCode, Code: e.Code, Message: e.Message}
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			return fmt.Errorf("%s: the answer is not JSON: %w", req.URL.Path, err)
		}
	}
	return nil
}

// errCredentials is a refused app id or secret: final.
type errCredentials struct{ err error }

func (e errCredentials) Error() string {
	return fmt.Sprintf("QQ refused the bot's credentials (%v): check channels.qq.appId and secret", e.err)
}

// accessToken is the app access token.
func (c *Channel) accessToken(ctx context.Context) (string, error) {
	return c.token.Get(ctx)
}

// fetchToken asks QQ for an app access token and its life; a refused
// secret is errCredentials.
func (c *Channel) fetchToken(ctx context.Context) (string, time.Duration, error) {
	var out struct {
		AccessToken string          `json:"access_token"`
		ExpiresIn   json.RawMessage `json:"expires_in"` // a string of seconds
	}
	err := c.call(ctx, http.MethodPost, c.auth+"/app/getAppAccessToken", "", map[string]string{"appId": c.cfg.AppID, "clientSecret": c.cfg.Secret}, &out)
	var ae *apiError
	if errors.As(err, &ae) && (ae.Code == codeBadSecret || ae.Status == http.StatusUnauthorized || ae.Status == http.StatusBadRequest) {
		return "", 0, errCredentials{err}
	}
	if err != nil {
		return "", 0, fmt.Errorf("qq: app access token: %w", err)
	}
	if out.AccessToken == "" {
		return "", 0, errors.New("qq: app access token: the answer holds none")
	}
	secs, _ := strconv.Atoi(strings.Trim(string(out.ExpiresIn), `"`))
	return out.AccessToken, time.Duration(max(secs, 120)) * time.Second, nil
}

// forgetToken drops a token QQ refused, so the next call fetches another.
func (c *Channel) forgetToken() { c.token.Forget("") }

// payload is a gateway frame.
type payload struct {
	Op int             `json:"op"`
	D  json.RawMessage `json:"d,omitempty"`
	S  int64           `json:"s,omitempty"`
	T  string          `json:"t,omitempty"`
}

// Opcodes.
const (
	opDispatch       = 0
	opHeartbeat      = 1
	opIdentify       = 2
	opResume         = 6
	opReconnect      = 7
	opInvalidSession = 9
	opHello          = 10
	opHeartbeatAck   = 11
)

// position is the receive position: the session to resume and the
// sequence of the last event made durable.
type position struct {
	Session string `json:"session_id"`
	Seq     int64  `json:"seq"`
}

// finalClose are the gateway's close codes no reconnection cures.
var finalClose = map[websocket.StatusCode]string{
	4013: "invalid intents", 4014: "intents not allowed for this bot",
	4914: "the bot is offline (sandbox only)", 4915: "the bot is banned",
}

// Run connects to the gateway and receives until ctx ends.
func (c *Channel) Run(ctx context.Context, in channel.Inbox, ready func()) error {
	cursor, saved, err := c.env.Position(ctx, Name)
	if err != nil {
		return fmt.Errorf("qq: %w", err)
	}
	var pos position
	if saved != "" {
		if err := json.Unmarshal([]byte(saved), &pos); err != nil {
			return fmt.Errorf("qq: the saved position in %s is not readable: %v", cursor, err)
		}
	}
	var once sync.Once
	b := channel.Backoff{Base: c.retryBase, Max: time.Minute, Conn: &c.link}
	for {
		err := c.session(ctx, in, &pos, cursor, func() { b.Connected(); once.Do(ready) })
		if ctx.Err() != nil {
			return nil
		}
		var ec errCredentials
		if errors.As(err, &ec) {
			return ec
		}
		if why, ok := finalClose[websocket.CloseStatus(err)]; ok {
			return fmt.Errorf("the QQ gateway closed the connection: %s (%d): check the bot's settings on q.qq.com", why, websocket.CloseStatus(err))
		}
		switch websocket.CloseStatus(err) {
		case 4004: // the token expired or was refused: fetch another
			c.forgetToken()
		case 4006, 4007: // the session or the sequence is not resumable
			pos = position{}
		}
		d := b.Failed(err, 0)
		if errors.Is(err, errReconnect) {
			d = 10 * time.Millisecond
		}
		c.log.Warn("qq: gateway connection ended; reconnecting", "err", err, "retry_in", d)
		if !channel.Sleep(ctx, d) {
			return nil
		}
	}
}

var errReconnect = errors.New("the gateway asked to reconnect")

// session opens one gateway connection, identifies or resumes, and
// serves it until it ends.
func (c *Channel) session(ctx context.Context, in channel.Inbox, pos *position, cursor channel.Cursor, connected func()) error {
	tok, err := c.accessToken(ctx)
	if err != nil {
		return err
	}
	var gw struct {
		URL string `json:"url"`
	}
	if err := c.call(ctx, http.MethodGet, c.api+"/gateway", tok, nil, &gw); err != nil {
		var ae *apiError
		if errors.As(err, &ae) && ae.Status == http.StatusUnauthorized {
			c.forgetToken()
		}
		return fmt.Errorf("gateway address: %w", err)
	}
	if u, err := url.Parse(gw.URL); err != nil || (u.Scheme != "wss" && u.Scheme != "ws") {
		return errors.New("the gateway address is not a websocket URL")
	}
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	conn, _, err := websocket.Dial(dctx, gw.URL, nil)
	cancel()
	if err != nil {
		return fmt.Errorf("websocket: %w", err)
	}
	defer conn.CloseNow() //nolint:errcheck // done with it
	conn.SetReadLimit(4 << 20)

	sctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	hello, err := readPayload(sctx, conn)
	if err != nil {
		return fmt.Errorf("waiting for Hello: %w", err)
	}
	var h struct {
		Interval int64 `json:"heartbeat_interval"`
	}
	if hello.Op != opHello || json.Unmarshal(hello.D, &h) != nil || h.Interval <= 0 {
		return fmt.Errorf("the gateway did not say Hello (op %d)", hello.Op)
	}
	if pos.Session != "" {
		err = writePayload(sctx, conn, opResume, map[string]any{"token": "QQBot " + tok, "session_id": pos.Session, "seq": pos.Seq})
	} else {
		err = writePayload(sctx, conn, opIdentify, map[string]any{
			"token": "QQBot " + tok, "intents": Intents, "shard": []int{0, 1},
			"properties": map[string]string{"$os": "linux", "$browser": "nb", "$device": "nb"},
		})
	}
	if err != nil {
		return err
	}
	var seq sync.Mutex // guards pos.Seq against the heartbeat
	lastSeq := func() int64 { seq.Lock(); defer seq.Unlock(); return pos.Seq }
	dispatches := make(chan payload, 64)
	acked := make(chan struct{}, 1)
	go c.read(sctx, stop, conn, dispatches, acked)
	go heartbeat(sctx, stop, conn, time.Duration(h.Interval)*time.Millisecond, lastSeq, acked)
	save := func() {
		b, _ := json.Marshal(pos)
		if err := cursor.Save(ctx, string(b)); err != nil {
			c.log.Error("qq: saving the receive position", "err", err)
		}
	}
	for {
		select {
		case <-sctx.Done():
			err := context.Cause(sctx)
			if errors.Is(err, errInvalidSession) {
				// The session cannot be resumed: the next one identifies
				// anew (QQ does not replay into a new session).
				seq.Lock()
				*pos = position{}
				seq.Unlock()
				save()
			}
			return err
		case p := <-dispatches:
			switch p.T {
			case "READY":
				var r struct {
					SessionID string `json:"session_id"`
					User      struct {
						ID       string `json:"id"`
						Username string `json:"username"`
					} `json:"user"`
				}
				json.Unmarshal(p.D, &r) //nolint:errcheck // a READY without a session is resumed never
				seq.Lock()
				pos.Session, pos.Seq = r.SessionID, p.S
				seq.Unlock()
				save()
				c.log.Info("qq: connected", "bot", r.User.Username)
				connected()
				continue
			case "RESUMED":
				c.log.Info("qq: session resumed")
				connected()
				continue
			case "C2C_MESSAGE_CREATE", "GROUP_AT_MESSAGE_CREATE":
				if m, ok := c.inbound(sctx, in, p); ok && !channel.PublishDurably(sctx, in, m, c.log, c.retryBase) {
					return context.Cause(sctx)
				}
			}
			if p.S > 0 {
				// Moved only now that the gateway holds the message: a
				// resume from here replays nothing it already has.
				seq.Lock()
				pos.Seq = max(pos.Seq, p.S)
				seq.Unlock()
				save()
			}
		}
	}
}

var errInvalidSession = errors.New("the gateway invalidated the session")

func readPayload(ctx context.Context, conn *websocket.Conn) (payload, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	_, b, err := conn.Read(ctx)
	if err != nil {
		return payload{}, err
	}
	var p payload
	if err := json.Unmarshal(b, &p); err != nil {
		return payload{}, fmt.Errorf("a frame that is not JSON: %w", err)
	}
	return p, nil
}

func writePayload(ctx context.Context, conn *websocket.Conn, op int, d any) error {
	return channel.WriteFrame(ctx, conn, map[string]any{"op": op, "d": d})
}

// read hands dispatches on and notes heartbeat acknowledgements; it ends
// the session on a reconnect request or an invalid session.
func (c *Channel) read(ctx context.Context, stop context.CancelCauseFunc, conn *websocket.Conn, dispatches chan<- payload, acked chan<- struct{}) {
	for {
		_, b, err := conn.Read(ctx)
		if err != nil {
			stop(err)
			return
		}
		var p payload
		if err := json.Unmarshal(b, &p); err != nil {
			c.log.Warn("qq: a frame that is not JSON ignored", "bytes", len(b))
			continue
		}
		switch p.Op {
		case opDispatch:
			select {
			case dispatches <- p:
			case <-ctx.Done():
				return
			}
		case opHeartbeatAck:
			select {
			case acked <- struct{}{}:
			default:
			}
		case opReconnect:
			stop(errReconnect)
			return
		case opInvalidSession:
			stop(errInvalidSession)
			return
		}
	}
}

// heartbeat beats at the gateway's interval with the last durable
// sequence; a beat not acknowledged by the next one ends the session (a
// connection that died without closing).
func heartbeat(ctx context.Context, stop context.CancelCauseFunc, conn *websocket.Conn, every time.Duration, seq func() int64, acked <-chan struct{}) {
	t := time.NewTicker(every)
	defer t.Stop()
	waiting := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-acked:
			waiting = false
		case <-t.C:
			if waiting {
				stop(errors.New("the gateway did not acknowledge a heartbeat"))
				return
			}
			var d any
			if s := seq(); s > 0 {
				d = s
			}
			if err := writePayload(ctx, conn, opHeartbeat, d); err != nil {
				stop(fmt.Errorf("heartbeat: %w", err))
				return
			}
			waiting = true
		}
	}
}

// message is a C2C_MESSAGE_CREATE's or GROUP_AT_MESSAGE_CREATE's data.
type message struct {
	ID     string `json:"id"`
	Author struct {
		UserOpenID   string `json:"user_openid"`
		MemberOpenID string `json:"member_openid"`
		ID           string `json:"id"`
	} `json:"author"`
	Content     string       `json:"content"`
	Timestamp   string       `json:"timestamp"`
	GroupOpenID string       `json:"group_openid"`
	Attachments []attachment `json:"attachments"`
}

type attachment struct {
	ContentType string `json:"content_type"`
	Filename    string `json:"filename"`
	URL         string `json:"url"`
	Size        int64  `json:"size"`
}

// inbound turns a message event into the bus's form and remembers it as
// the chat's message to reply to.
func (c *Channel) inbound(ctx context.Context, in channel.Inbox, p payload) (bus.Inbound, bool) {
	var qm message
	if err := json.Unmarshal(p.D, &qm); err != nil || qm.ID == "" {
		c.log.Warn("qq: a message event that is not readable dropped", "seq", p.S)
		return bus.Inbound{}, false
	}
	group := p.T == "GROUP_AT_MESSAGE_CREATE"
	sender, chatID := qm.Author.UserOpenID, qm.Author.UserOpenID
	if sender == "" {
		sender, chatID = qm.Author.ID, qm.Author.ID
	}
	if group {
		sender, chatID = qm.Author.MemberOpenID, "group:"+qm.GroupOpenID
	}
	if sender == "" || chatID == "group:" {
		return bus.Inbound{}, false
	}
	ts, err := time.Parse(time.RFC3339, qm.Timestamp)
	if err != nil {
		ts = time.Now()
	}
	c.remember(chatID, qm.ID, ts, group)
	m := bus.Inbound{
		Channel: Name, ID: qm.ID, SenderID: sender, ChatID: chatID, Content: strings.TrimSpace(qm.Content), Timestamp: ts.UTC(),
		// QQ hands a bot only the group messages that @ it.
		Metadata: map[string]any{"group": group, "mentioned": true, "message_id": qm.ID},
	}
	if len(qm.Attachments) > 0 {
		if !channel.Admits(in, m) {
			c.log.Info("qq: files of a sender not allowed not downloaded", "message", qm.ID, "files", len(qm.Attachments))
		} else {
			var notes []string
			for i, a := range qm.Attachments {
				path, err := c.fetch(ctx, qm.ID, i, a)
				if err != nil {
					c.log.Warn("qq: attachment not stored", "name", a.Filename, "message", qm.ID, "err", err)
					notes = append(notes, fmt.Sprintf("[attachment %s not received: %v]", a.Filename, err))
					continue
				}
				m.Media = append(m.Media, path)
				notes = append(notes, fmt.Sprintf("[attachment: %s]", path))
			}
			m.Content = strings.TrimSpace(m.Content + "\n" + strings.Join(notes, "\n"))
		}
	}
	if m.Content == "" {
		return bus.Inbound{}, false
	}
	return m, true
}

func (c *Channel) remember(chatID, id string, at time.Time, group bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.byID) > 10_000 {
		c.byID, c.sources = map[string]*source{}, map[string]*source{} // long gone
	}
	if _, ok := c.byID[id]; ok {
		return // a replay: its replies are counted already
	}
	s := &source{id: id, at: at, group: group}
	c.byID[id] = s
	c.sources[chatID] = s
}

// fetch downloads an attachment through the egress guard into the
// workspace.
func (c *Channel) fetch(ctx context.Context, msgID string, i int, a attachment) (string, error) {
	limit := c.cfg.MaxMediaBytes
	if a.Size > limit {
		return "", fmt.Errorf("%w (channels.qq.maxMediaBytes)", &channel.TooLarge{Size: a.Size, Limit: limit})
	}
	src := a.URL
	if strings.HasPrefix(src, "//") {
		src = "https:" + src
	}
	u, err := url.Parse(src)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") {
		return "", errors.New("the attachment has no http or https URL")
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, src, nil)
	if err != nil {
		return "", err
	}
	dir, err := c.env.MediaDir(Name)
	if err != nil {
		return "", err
	}
	name := a.Filename
	if name == "" {
		name = "attachment"
	}
	path, err := channel.SaveMedia(c.media, req, dir, fmt.Sprintf("%s_%d_%s", msgID, i, name), limit)
	if channel.IsTooLarge(err) {
		return "", fmt.Errorf("%w (channels.qq.maxMediaBytes)", err)
	}
	if err != nil {
		return "", fmt.Errorf("download from %s: %s", u.Host, strings.ReplaceAll(err.Error(), src, u.Host))
	}
	return path, nil
}

// replyTo picks the message a reply names: m's own (ReplyTo) while QQ
// still takes replies to it, else the chat's latest that does; and the
// msg_seq to send. ok is false when none does: the message goes active.
func (c *Channel) replyTo(chatID, want string) (id string, seq int, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	usable := func(s *source) bool {
		window := C2CWindow
		if s.group {
			window = GroupWindow
		}
		return s != nil && s.replies < MaxReplies && time.Since(s.at) < window-10*time.Second
	}
	if s := c.byID[want]; usable(s) {
		return s.id, s.replies + 1, true
	}
	if want != "" && c.byID[want] == nil {
		// A message from before a restart: QQ itself says whether it
		// still takes replies.
		s := &source{id: want, at: time.Now()}
		c.byID[want] = s
		return want, 1, true
	}
	if s := c.sources[chatID]; usable(s) {
		return s.id, s.replies + 1, true
	}
	return "", 0, false
}

// replied counts a reply sent to msg id.
func (c *Channel) replied(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s := c.byID[id]; s != nil {
		s.replies++
	}
}

func (c *Channel) deliveryError(chatID string, err error) error {
	var ae *apiError
	var ec errCredentials
	switch {
	case errors.As(err, &ec):
		return &channel.Undeliverable{Reason: ec.Error()}
	case !errors.As(err, &ae):
		return fmt.Errorf("qq: %w", err)
	case ae.throttled():
		c.pacer.Defer(chatID, time.Second)
		return &channel.RetryAfter{After: time.Second, Err: fmt.Errorf("qq: %w", err)}
	case ae.Status == http.StatusUnauthorized:
		c.forgetToken()
		return fmt.Errorf("qq: the access token was refused (%w); it is fetched again", err)
	case ae.Status >= 400 && ae.Status < 500:
		return &channel.Undeliverable{Reason: ae.Error()}
	}
	return fmt.Errorf("qq: %w", err)
}

// path is the REST path of chat's messages or files.
func path(chatID, what string) string {
	if g, ok := strings.CutPrefix(chatID, "group:"); ok {
		return "/v2/groups/" + url.PathEscape(g) + "/" + what
	}
	return "/v2/users/" + url.PathEscape(chatID) + "/" + what
}

// post sends one message body, as a reply when it can, and returns the
// message's id. A reply QQ calls a duplicate (same msg_id and msg_seq)
// had gone already: a retry after a lost answer sends nothing twice.
func (c *Channel) post(ctx context.Context, chatID, replyTo string, body map[string]any) (string, error) {
	if err := c.pacer.Wait(ctx, chatID); err != nil {
		return "", err
	}
	tok, err := c.accessToken(ctx)
	if err != nil {
		return "", c.deliveryError(chatID, err)
	}
	id, seq, passive := c.replyTo(chatID, replyTo)
	if passive {
		body["msg_id"], body["msg_seq"] = id, seq
	}
	var out struct {
		ID string `json:"id"`
	}
	err = c.call(ctx, http.MethodPost, c.api+path(chatID, "messages"), tok, body, &out)
	var ae *apiError
	if errors.As(err, &ae) && ae.Code == codeDuplicate {
		err = nil
	}
	if err != nil {
		return "", c.deliveryError(chatID, err)
	}
	if passive {
		c.replied(id)
	}
	return out.ID, nil
}

// Send delivers m: its text in pieces, then its files.
func (c *Channel) Send(ctx context.Context, m bus.Outbound) (string, error) {
	content, files := c.env.Outgoing(m, MaxFileBytes)
	pieces := channel.SplitFenced(content, MaxMessageLength)
	post := func(_ int, text string) (string, error) {
		body := map[string]any{"msg_type": 0, "content": text}
		if c.cfg.MsgFormat == "markdown" {
			body = map[string]any{"msg_type": 2, "markdown": map[string]string{"content": text}}
		}
		return c.post(ctx, m.ChatID, m.ReplyTo, body)
	}
	// QQ cannot edit a bot's message: progress goes as new ones.
	edit := func(_, text string) error { _, err := post(0, text); return err }
	send := func(_ int, f *channel.Attachment) (string, error) { return c.sendFile(ctx, m.ChatID, m.ReplyTo, f) }
	return channel.DeliverFiles(&c.turns, m, pieces, files, post, edit, send)
}

// sendFile uploads f (as base64, no public URL needed) and sends it as a
// media message.
func (c *Channel) sendFile(ctx context.Context, chatID, replyTo string, f *channel.Attachment) (string, error) {
	tok, err := c.accessToken(ctx)
	if err != nil {
		return "", c.deliveryError(chatID, err)
	}
	kind := 4 // a file
	switch {
	case strings.HasPrefix(f.Type, "image/"):
		kind = 1
	case strings.HasPrefix(f.Type, "video/"):
		kind = 2
	case strings.HasPrefix(f.Type, "audio/"):
		kind = 3
	}
	var up struct {
		FileInfo string `json:"file_info"`
	}
	err = c.call(ctx, http.MethodPost, c.api+path(chatID, "files"), tok, map[string]any{
		"file_type": kind, "file_data": base64.StdEncoding.EncodeToString(f.Data), "srv_send_msg": false, "file_name": f.Name,
	}, &up)
	if err != nil {
		return "", c.deliveryError(chatID, fmt.Errorf("uploading %s: %w", f.Name, err))
	}
	return c.post(ctx, chatID, replyTo, map[string]any{"msg_type": 7, "content": " ", "media": map[string]string{"file_info": up.FileInfo}})
}

var _ channel.Channel = (*Channel)(nil)
