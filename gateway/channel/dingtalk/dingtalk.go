// Package dingtalk is the gateway's DingTalk channel: an enterprise
// robot connected by Stream mode (no public URL needed). The channel asks
// the gateway endpoint for a connection ticket with the app's client id
// and secret, opens the websocket it names, answers the platform's SYSTEM
// pings, and acknowledges each robot message (a CALLBACK frame) only once
// the gateway has made it durable: DingTalk sends again what was not
// acknowledged, so a dropped socket or a restart loses nothing, and the
// bus drops the second copy by the message's msgId.
//
// Answers go through the message's session webhook while it is valid,
// else through the robot API (oToMessages/batchSend for a person,
// groupMessages/send for a group), as Markdown; files through the media
// upload and the robot API. DingTalk cannot edit a robot's message.
//
// Identity: Inbound.SenderID is the sender's staff id (senderStaffId, or
// senderId when the sender has none), as nanobot's; ChatID is the staff
// id for a one-to-one chat and "group:<openConversationId>" for a group.
package dingtalk

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime/multipart"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/nbots/nb/gateway/bus"
	"github.com/nbots/nb/gateway/channel"
)

// Name is the channel's configuration name, channels.dingtalk.
const Name = "dingtalk"

// MaxMessageLength is where answers are split: a robot's Markdown
// message holds a few thousand characters; 4,000 leaves room.
const MaxMessageLength = 4000

// MaxFileBytes bounds a file the robot sends: the media upload takes up
// to 20 MB for a file.
const MaxFileBytes = 20 << 20

// BotMessageTopic is the Stream mode topic of the messages people send
// the robot.
const BotMessageTopic = "/v1.0/im/bot/messages/get"

// Config is channels.dingtalk (nanobot's keys, plus apiBase and
// maxMediaBytes).
type Config struct {
	Enabled bool `json:"enabled"`
	// ClientID is the app's AppKey (Client ID); it is also the robot
	// code the robot API wants.
	ClientID string `json:"clientId"`
	// ClientSecret is the app's AppSecret (Client Secret).
	ClientSecret string `json:"clientSecret"`
	// AllowFrom lists staff ids; the gateway checks SenderID against it.
	AllowFrom []string `json:"allowFrom"`
	// APIBase replaces https://api.dingtalk.com and
	// https://oapi.dingtalk.com (the tests' fake, a proxy).
	APIBase string `json:"apiBase,omitempty"`
	// MaxMediaBytes bounds one file received (20 MB if 0).
	MaxMediaBytes int64 `json:"maxMediaBytes,omitempty"`
}

// Channel is one DingTalk robot.
type Channel struct {
	// link is the receive loop's connection, for Status.
	link  channel.Conn
	cfg   Config
	env   channel.Env
	log   *slog.Logger
	http  *http.Client
	media *http.Client
	api   string // https://api.dingtalk.com or apiBase
	oapi  string // https://oapi.dingtalk.com or apiBase
	// apiHost is apiBase's host: a session webhook may point there
	// besides DingTalk's own hosts.
	apiHost string
	pacer   channel.Pacer
	turns   channel.Turns

	retryBase time.Duration
	keepalive time.Duration
	// throttled is the wait after the gateway refused a connection
	// ticket for throttling (it names none).
	throttled time.Duration

	token channel.AccessToken // the app's, renewed five minutes before it expires

	mu       sync.Mutex
	webhooks map[string]webhook // chat -> its latest session webhook
}

// Status implements channel.Reporter: where the receive loop's
// connection is.
func (c *Channel) Status() channel.Status { return c.link.Status() }

type webhook struct {
	url     string
	expires time.Time
}

// New checks cfg and builds the channel; nothing connects before Run.
func New(cfg Config, env channel.Env) (*Channel, error) {
	cfg.ClientID = strings.TrimSpace(cfg.ClientID)
	cfg.ClientSecret = strings.TrimSpace(cfg.ClientSecret)
	if cfg.ClientID == "" || cfg.ClientSecret == "" {
		return nil, errors.New("channels.dingtalk needs clientId and clientSecret: the AppKey and AppSecret of your app (DingTalk developer console → your app → Credentials)")
	}
	if cfg.MaxMediaBytes <= 0 {
		cfg.MaxMediaBytes = 20 << 20
	}
	c := &Channel{
		cfg: cfg, env: env, log: env.Log().With("channel", Name),
		http: &http.Client{Timeout: 30 * time.Second},
		api:  "https://api.dingtalk.com", oapi: "https://oapi.dingtalk.com",
		retryBase: time.Second, keepalive: 20 * time.Second, throttled: time.Second,
		webhooks: map[string]webhook{},
	}
	c.token = channel.AccessToken{Fetch: c.fetchToken, Margin: 5 * time.Minute}
	var mediaHosts []string
	if cfg.APIBase != "" {
		u, err := url.Parse(cfg.APIBase)
		if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
			return nil, fmt.Errorf("channels.dingtalk.apiBase %q is not an http or https URL", cfg.APIBase)
		}
		base := strings.TrimRight(cfg.APIBase, "/")
		c.api, c.oapi, c.apiHost = base, base, u.Host
		mediaHosts = append(mediaHosts, u.Hostname()) // the operator's server: its files may be fetched
	}
	c.media = env.MediaClient(mediaHosts...)
	return c, nil
}

// Name is "dingtalk".
func (c *Channel) Name() string { return Name }

// Capabilities: 4,000 characters of Markdown, files; no edits.
func (c *Channel) Capabilities() channel.Capabilities {
	return channel.Capabilities{MaxMessageLength: MaxMessageLength, Markdown: channel.CommonMark, Media: true}
}

// apiError is the robot API's or the gateway's refusal.
type apiError struct {
	Status  int
	Code    string
	Message string
}

func (e *apiError) Error() string {
	if e.Code == "" && e.Message == "" {
		return fmt.Sprintf("HTTP %d", e.Status)
	}
	return fmt.Sprintf("HTTP %d %s: %s", e.Status, e.Code, e.Message)
}

// throttled reports whether DingTalk asked to slow down: HTTP 429, or
// its QPS-limit codes (Forbidden.AccessDenied.QpsLimitForApi, …).
func (e *apiError) throttled() bool {
	return e.Status == http.StatusTooManyRequests || strings.Contains(e.Code, "QpsLimit") || strings.Contains(e.Code, "Throttling")
}

// call POSTs body as JSON to url and decodes the answer into out. The
// request's URL is never quoted in the error: it may hold a token.
func (c *Channel) call(ctx context.Context, u string, header map[string]string, body, out any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(b))
	if err != nil {
		return errors.New("bad request URL")
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	return c.do(req, out)
}

func (c *Channel) do(req *http.Request, out any) error {
	resp, err := c.http.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // without the URL
		}
		return fmt.Errorf("%s %s: %w", req.Method, req.URL.Path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("%s: reading the answer: %w", req.URL.Path, err)
	}
	if resp.StatusCode != http.StatusOK {
		e := &apiError{Status: resp.StatusCode}
		var body struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		}
		if json.Unmarshal(raw, &body) == nil { // a body that is not JSON leaves the status alone
			e.Code, e.Message = body.Code, body.Message
		}
		return e
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			return fmt.Errorf("%s: the answer is not JSON: %w", req.URL.Path, err)
		}
	}
	return nil
}

// accessToken is the app's access token (it lives two hours).
func (c *Channel) accessToken(ctx context.Context) (string, error) {
	return c.token.Get(ctx)
}

// fetchToken asks DingTalk for an access token and its life.
func (c *Channel) fetchToken(ctx context.Context) (string, time.Duration, error) {
	var out struct {
		AccessToken string `json:"accessToken"`
		ExpireIn    int64  `json:"expireIn"`
	}
	err := c.call(ctx, c.api+"/v1.0/oauth2/accessToken", nil, map[string]string{"appKey": c.cfg.ClientID, "appSecret": c.cfg.ClientSecret}, &out)
	if err != nil {
		return "", 0, fmt.Errorf("dingtalk: access token: %w", err)
	}
	if out.AccessToken == "" {
		return "", 0, errors.New("dingtalk: access token: the answer holds none")
	}
	return out.AccessToken, time.Duration(max(out.ExpireIn, 600)) * time.Second, nil
}

// forgetToken drops a token DingTalk refused, so the next call fetches
// another.
func (c *Channel) forgetToken() { c.token.Forget("") }

// frame is one Stream mode message, both ways.
type frame struct {
	SpecVersion string            `json:"specVersion,omitempty"`
	Type        string            `json:"type,omitempty"`
	Code        int               `json:"code,omitempty"`
	Message     string            `json:"message,omitempty"`
	Headers     map[string]string `json:"headers"`
	Data        string            `json:"data"`
}

// errDisconnect is the gateway's SYSTEM disconnect: connect again.
var errDisconnect = errors.New("the gateway asked to reconnect")

// Run connects by Stream mode and receives until ctx ends.
func (c *Channel) Run(ctx context.Context, in channel.Inbox, ready func()) error {
	var once sync.Once
	b := channel.Backoff{Base: c.retryBase, Max: time.Minute, Conn: &c.link}
	for {
		err := c.session(ctx, in, func() { b.Connected(); once.Do(ready) })
		if ctx.Err() != nil {
			return nil
		}
		var ae *apiError
		if errors.As(err, &ae) && (ae.Status == http.StatusUnauthorized || ae.Status == http.StatusForbidden || ae.Status == http.StatusBadRequest) && !ae.throttled() {
			return fmt.Errorf("dingtalk refused the connection (%v): check channels.dingtalk.clientId and clientSecret, and that the robot receives messages in Stream mode", ae)
		}
		var after time.Duration
		if errors.Is(err, errDisconnect) {
			after = 10 * time.Millisecond
		} else if errors.As(err, &ae) && ae.throttled() {
			after = c.throttled
		}
		d := b.Failed(err, after)
		c.log.Warn("dingtalk: stream connection ended; reconnecting", "err", err, "retry_in", d)
		if !channel.Sleep(ctx, d) {
			return nil
		}
	}
}

// session opens one Stream connection and serves it until it ends.
func (c *Channel) session(ctx context.Context, in channel.Inbox, connected func()) error {
	var ticket struct {
		Endpoint string `json:"endpoint"`
		Ticket   string `json:"ticket"`
	}
	err := c.call(ctx, c.api+"/v1.0/gateway/connections/open", nil, map[string]any{
		"clientId": c.cfg.ClientID, "clientSecret": c.cfg.ClientSecret, "ua": "nb-gateway",
		"subscriptions": []map[string]string{{"type": "CALLBACK", "topic": BotMessageTopic}},
	}, &ticket)
	if err != nil {
		return err
	}
	if ticket.Endpoint == "" || ticket.Ticket == "" {
		return errors.New("the connection ticket answer has no endpoint or ticket")
	}
	u, err := url.Parse(ticket.Endpoint)
	if err != nil || (u.Scheme != "wss" && u.Scheme != "ws") {
		return errors.New("the connection ticket names no websocket endpoint")
	}
	q := u.Query()
	q.Set("ticket", ticket.Ticket)
	u.RawQuery = q.Encode()
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	conn, _, err := websocket.Dial(dctx, u.String(), nil)
	cancel()
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // the URL holds the ticket
		}
		return fmt.Errorf("websocket: %s", strings.ReplaceAll(err.Error(), ticket.Ticket, "…"))
	}
	defer conn.CloseNow() //nolint:errcheck // done with it
	conn.SetReadLimit(4 << 20)
	c.log.Info("dingtalk: connected by Stream mode")
	connected()

	sctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	callbacks := make(chan frame, 64)
	go c.read(sctx, stop, conn, callbacks)
	go c.keepAlive(sctx, stop, conn)
	for {
		select {
		case <-sctx.Done():
			return context.Cause(sctx)
		case f := <-callbacks:
			if m, ok := c.inbound(sctx, in, f); ok && !channel.PublishDurably(sctx, in, m, c.log, c.retryBase) {
				return context.Cause(sctx)
			}
			// Acknowledged only now that the gateway holds it: DingTalk
			// sends again what a dropped connection left unacknowledged.
			ack := frame{Code: 200, Message: "OK", Headers: map[string]string{"contentType": "application/json", "messageId": f.Headers["messageId"]}, Data: `{"response":null}`}
			if err := channel.WriteFrame(sctx, conn, ack); err != nil {
				stop(fmt.Errorf("acknowledging a message: %w", err))
			}
		}
	}
}

// read answers SYSTEM frames itself, so pings are answered while a
// message waits for the gateway, and hands CALLBACK frames on.
func (c *Channel) read(ctx context.Context, stop context.CancelCauseFunc, conn *websocket.Conn, callbacks chan<- frame) {
	for {
		_, b, err := conn.Read(ctx)
		if err != nil {
			stop(fmt.Errorf("websocket: %w", err))
			return
		}
		var f frame
		if err := json.Unmarshal(b, &f); err != nil {
			c.log.Warn("dingtalk: a frame that is not JSON ignored", "bytes", len(b))
			continue
		}
		switch f.Type {
		case "SYSTEM":
			switch f.Headers["topic"] {
			case "ping":
				if err := channel.WriteFrame(ctx, conn, frame{Code: 200, Message: "OK", Headers: f.Headers, Data: f.Data}); err != nil {
					stop(fmt.Errorf("answering a ping: %w", err))
					return
				}
			case "disconnect":
				stop(errDisconnect)
				return
			}
		case "EVENT":
			// Not subscribed to; acknowledged so that it is not sent again.
			ack := frame{Code: 200, Message: "OK", Headers: map[string]string{"contentType": "application/json", "messageId": f.Headers["messageId"]}, Data: `{"status":"SUCCESS","message":"success"}`}
			channel.WriteFrame(ctx, conn, ack) //nolint:errcheck // a failed write ends the read too
		case "CALLBACK":
			select {
			case callbacks <- f:
			case <-ctx.Done():
				return
			}
		}
	}
}

// keepAlive pings the socket: a connection that stopped answering (a
// dead NAT entry) is dropped and opened again.
func (c *Channel) keepAlive(ctx context.Context, stop context.CancelCauseFunc, conn *websocket.Conn) {
	t := time.NewTicker(c.keepalive)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			pctx, cancel := context.WithTimeout(ctx, c.keepalive)
			err := conn.Ping(pctx)
			cancel()
			if err != nil && ctx.Err() == nil {
				stop(fmt.Errorf("the connection stopped answering pings: %w", err))
				return
			}
		}
	}
}

// botMessage is a robot message's data (the CALLBACK frame's data).
type botMessage struct {
	ConversationID   string `json:"conversationId"`
	ConversationType string `json:"conversationType"` // "1" one-to-one, "2" group
	MsgID            string `json:"msgId"`
	MsgType          string `json:"msgtype"`
	SenderID         string `json:"senderId"`
	SenderStaffID    string `json:"senderStaffId"`
	SenderNick       string `json:"senderNick"`
	IsInAtList       bool   `json:"isInAtList"`
	CreateAt         int64  `json:"createAt"`
	SessionWebhook   string `json:"sessionWebhook"`
	WebhookExpires   int64  `json:"sessionWebhookExpiredTime"`
	Text             struct {
		Content string `json:"content"`
	} `json:"text"`
	Content struct {
		DownloadCode        string     `json:"downloadCode"`
		PictureDownloadCode string     `json:"pictureDownloadCode"`
		FileName            string     `json:"fileName"`
		Recognition         string     `json:"recognition"`
		RichText            []richItem `json:"richText"`
	} `json:"content"`
}

type richItem struct {
	Text         string `json:"text"`
	Type         string `json:"type"`
	DownloadCode string `json:"downloadCode"`
	FileName     string `json:"fileName"`
}

// file is something a message carries, by its download code.
type file struct{ code, name string }

// inbound turns a robot message into the bus's form.
func (c *Channel) inbound(ctx context.Context, in channel.Inbox, f frame) (bus.Inbound, bool) {
	if f.Headers["topic"] != BotMessageTopic {
		return bus.Inbound{}, false
	}
	var bm botMessage
	if err := json.Unmarshal([]byte(f.Data), &bm); err != nil {
		c.log.Warn("dingtalk: a robot message that is not readable dropped", "message", f.Headers["messageId"], "err", err)
		return bus.Inbound{}, false
	}
	sender := bm.SenderStaffID
	if sender == "" {
		sender = bm.SenderID
	}
	if sender == "" || bm.MsgID == "" {
		return bus.Inbound{}, false
	}
	text := strings.TrimSpace(bm.Text.Content)
	if text == "" {
		text = strings.TrimSpace(bm.Content.Recognition) // a voice message's transcript
	}
	var files []file
	switch bm.MsgType {
	case "picture":
		code := bm.Content.DownloadCode
		if code == "" {
			code = bm.Content.PictureDownloadCode
		}
		files = append(files, file{code, "image.jpg"})
	case "file", "audio", "video":
		name := bm.Content.FileName
		if name == "" {
			name = bm.MsgType
		}
		files = append(files, file{bm.Content.DownloadCode, name})
	case "richText":
		var parts []string
		for _, it := range bm.Content.RichText {
			if t := strings.TrimSpace(it.Text); t != "" {
				parts = append(parts, t)
			}
			if it.DownloadCode != "" {
				name := it.FileName
				if name == "" {
					name = "image.jpg"
				}
				files = append(files, file{it.DownloadCode, name})
			}
		}
		text = strings.TrimSpace(text + " " + strings.Join(parts, " "))
	}
	group := bm.ConversationType == "2"
	chatID := sender
	if group {
		chatID = "group:" + bm.ConversationID
	}
	if bm.SessionWebhook != "" {
		c.remember(chatID, bm.SessionWebhook, bm.WebhookExpires)
	}
	ts := time.UnixMilli(bm.CreateAt).UTC()
	if bm.CreateAt == 0 {
		ts = time.Now().UTC()
	}
	m := bus.Inbound{
		Channel: Name, ID: bm.MsgID, SenderID: sender, ChatID: chatID, Content: text, Timestamp: ts,
		Metadata: map[string]any{
			"group": group, "mentioned": !group || bm.IsInAtList, "sender_name": bm.SenderNick,
			"conversation_type": bm.ConversationType, "conversation_id": bm.ConversationID, "message_id": bm.MsgID,
		},
	}
	if len(files) > 0 {
		// A stranger's files never reach the disk; nor do the files of a
		// group message that does not call the robot.
		if !m.Metadata["mentioned"].(bool) || !channel.Admits(in, m) {
			c.log.Info("dingtalk: files of a message not admitted not downloaded", "message", bm.MsgID, "files", len(files))
		} else {
			var notes []string
			for _, fl := range files {
				path, err := c.fetch(ctx, bm.MsgID, fl)
				if err != nil {
					c.log.Warn("dingtalk: file not stored", "name", fl.name, "message", bm.MsgID, "err", err)
					notes = append(notes, fmt.Sprintf("[file %s not received: %v]", fl.name, err))
					continue
				}
				m.Media = append(m.Media, path)
				notes = append(notes, fmt.Sprintf("[file: %s]", path))
			}
			m.Content = strings.TrimSpace(m.Content + "\n" + strings.Join(notes, "\n"))
		}
	}
	if m.Content == "" && len(m.Media) == 0 {
		c.log.Debug("dingtalk: an empty message dropped", "message", bm.MsgID, "type", bm.MsgType)
		return bus.Inbound{}, false
	}
	return m, true
}

// remember keeps a chat's latest session webhook, if it is DingTalk's.
func (c *Channel) remember(chatID, hook string, expiresMs int64) {
	u, err := url.Parse(hook)
	if err != nil {
		return
	}
	host := strings.ToLower(u.Hostname())
	ours := u.Scheme == "https" && (host == "dingtalk.com" || strings.HasSuffix(host, ".dingtalk.com"))
	if !ours && !(c.apiHost != "" && strings.EqualFold(u.Host, c.apiHost)) {
		c.log.Warn("dingtalk: a session webhook outside DingTalk ignored", "host", u.Host)
		return
	}
	exp := time.UnixMilli(expiresMs)
	if expiresMs == 0 {
		exp = time.Now().Add(time.Hour)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.webhooks) > 10_000 {
		c.webhooks = map[string]webhook{} // chats long gone
	}
	c.webhooks[chatID] = webhook{url: hook, expires: exp}
}

// hook is the chat's session webhook while it has a minute left.
func (c *Channel) hook(chatID string) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	w, ok := c.webhooks[chatID]
	if !ok || time.Until(w.expires) < time.Minute {
		return "", false
	}
	return w.url, true
}

// fetch exchanges a download code for the file's URL and stores the file
// in the workspace, through the egress guard.
func (c *Channel) fetch(ctx context.Context, msgID string, f file) (string, error) {
	if f.code == "" {
		return "", errors.New("the message names no download code")
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	tok, err := c.accessToken(ctx)
	if err != nil {
		return "", err
	}
	var out struct {
		DownloadURL string `json:"downloadUrl"`
	}
	err = c.call(ctx, c.api+"/v1.0/robot/messageFiles/download", map[string]string{"x-acs-dingtalk-access-token": tok},
		map[string]string{"downloadCode": f.code, "robotCode": c.cfg.ClientID}, &out)
	if err != nil {
		return "", fmt.Errorf("download URL: %w", err)
	}
	u, err := url.Parse(out.DownloadURL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") {
		return "", errors.New("the download URL is not an http or https URL")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, out.DownloadURL, nil)
	if err != nil {
		return "", err
	}
	dir, err := c.env.MediaDir(Name)
	if err != nil {
		return "", err
	}
	path, err := channel.SaveMedia(c.media, req, dir, msgID+"_"+filepath.Base(f.name), c.cfg.MaxMediaBytes)
	if channel.IsTooLarge(err) {
		return "", fmt.Errorf("%w (channels.dingtalk.maxMediaBytes)", err)
	}
	if err != nil {
		// The download URL is signed: the error says what failed, not where.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return "", fmt.Errorf("download from %s: %s", u.Host, strings.ReplaceAll(err.Error(), out.DownloadURL, u.Host))
	}
	return path, nil
}

// deliveryError sorts a failed delivery: DingTalk's throttling waits the
// chat, a refusal no retry cures is undeliverable.
func (c *Channel) deliveryError(chatID string, err error) error {
	var ae *apiError
	if !errors.As(err, &ae) {
		return fmt.Errorf("dingtalk: %w", err)
	}
	switch {
	case ae.throttled():
		c.pacer.Defer(chatID, time.Second)
		return &channel.RetryAfter{After: time.Second, Err: fmt.Errorf("dingtalk: %w", err)}
	case ae.Status == http.StatusUnauthorized:
		c.forgetToken() // the retry fetches another
		return fmt.Errorf("dingtalk: the access token was refused (%w); it is fetched again", err)
	case ae.Status == http.StatusBadRequest || ae.Status == http.StatusForbidden || ae.Status == http.StatusNotFound:
		return &channel.Undeliverable{Reason: ae.Error()}
	}
	return fmt.Errorf("dingtalk: %w", err)
}

// Send delivers m to its chat: its text as Markdown pieces, then its
// files.
func (c *Channel) Send(ctx context.Context, m bus.Outbound) (string, error) {
	content, files := c.env.Outgoing(m, MaxFileBytes)
	pieces := channel.SplitFenced(content, MaxMessageLength)
	post := func(_ int, text string) (string, error) { return c.post(ctx, m.ChatID, text) }
	// DingTalk cannot edit a robot's message: progress goes as new ones.
	edit := func(_, text string) error { _, err := c.post(ctx, m.ChatID, text); return err }
	send := func(_ int, f *channel.Attachment) (string, error) { return c.sendFile(ctx, m.ChatID, f) }
	return channel.DeliverFiles(&c.turns, m, pieces, files, post, edit, send)
}

// title is the notification's title: the text's first line, short.
func title(text string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(text), "\n")
	line = strings.TrimLeft(line, "#>*-` ")
	if r := []rune(line); len(r) > 20 {
		line = string(r[:20]) + "…"
	}
	if line == "" {
		line = "reply"
	}
	return line
}

// post sends one piece of text: by the chat's session webhook when it
// has one, else by the robot API.
func (c *Channel) post(ctx context.Context, chatID, text string) (string, error) {
	if err := c.pacer.Wait(ctx, chatID); err != nil {
		return "", err
	}
	if hook, ok := c.hook(chatID); ok {
		var out struct {
			ErrCode int    `json:"errcode"`
			ErrMsg  string `json:"errmsg"`
		}
		err := c.call(ctx, hook, nil, map[string]any{"msgtype": "markdown", "markdown": map[string]string{"title": title(text), "text": text}}, &out)
		if err == nil && out.ErrCode == 0 {
			return "", nil
		}
		if err == nil && out.ErrCode == 130101 { // sending too fast
			c.pacer.Defer(chatID, 3*time.Second)
			return "", &channel.RetryAfter{After: 3 * time.Second, Err: fmt.Errorf("dingtalk: session webhook: %s", out.ErrMsg)}
		}
		if err == nil {
			err = fmt.Errorf("errcode %d: %s", out.ErrCode, out.ErrMsg)
		}
		// An expired or refused webhook: the robot API reaches the chat too.
		c.log.Info("dingtalk: session webhook failed; sending by the robot API", "chat", chatID, "err", err)
		c.mu.Lock()
		delete(c.webhooks, chatID)
		c.mu.Unlock()
	}
	return c.robotSend(ctx, chatID, "sampleMarkdown", map[string]string{"title": title(text), "text": text})
}

// robotSend sends one message by the robot API: a group's
// groupMessages/send, a person's oToMessages/batchSend. It returns the
// processQueryKey.
func (c *Channel) robotSend(ctx context.Context, chatID, key string, param any) (string, error) {
	tok, err := c.accessToken(ctx)
	if err != nil {
		return "", c.deliveryError(chatID, err)
	}
	p, err := json.Marshal(param)
	if err != nil {
		return "", err
	}
	body := map[string]any{"robotCode": c.cfg.ClientID, "msgKey": key, "msgParam": string(p)}
	endpoint := c.api + "/v1.0/robot/oToMessages/batchSend"
	if conv, ok := strings.CutPrefix(chatID, "group:"); ok {
		endpoint = c.api + "/v1.0/robot/groupMessages/send"
		body["openConversationId"] = conv
	} else {
		body["userIds"] = []string{chatID}
	}
	var out struct {
		ProcessQueryKey string `json:"processQueryKey"`
	}
	if err := c.call(ctx, endpoint, map[string]string{"x-acs-dingtalk-access-token": tok}, body, &out); err != nil {
		return "", c.deliveryError(chatID, err)
	}
	return out.ProcessQueryKey, nil
}

// sendFile uploads f and sends it: a picture as an image, the rest as a
// file.
func (c *Channel) sendFile(ctx context.Context, chatID string, f *channel.Attachment) (string, error) {
	if err := c.pacer.Wait(ctx, chatID); err != nil {
		return "", err
	}
	tok, err := c.accessToken(ctx)
	if err != nil {
		return "", c.deliveryError(chatID, err)
	}
	kind := "file"
	if strings.HasPrefix(f.Type, "image/") {
		kind = "image"
	}
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	part, err := mw.CreateFormFile("media", f.Name)
	if err == nil {
		_, err = part.Write(f.Data)
	}
	if err == nil {
		err = mw.Close()
	}
	if err != nil {
		return "", err
	}
	q := url.Values{"access_token": {tok}, "type": {kind}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.oapi+"/media/upload?"+q.Encode(), &buf)
	if err != nil {
		return "", errors.New("bad upload URL")
	}
	req.Header.Set("Content-Type", mw.FormDataContentType())
	var up struct {
		ErrCode int    `json:"errcode"`
		ErrMsg  string `json:"errmsg"`
		MediaID string `json:"media_id"`
	}
	if err := c.do(req, &up); err != nil {
		return "", c.deliveryError(chatID, fmt.Errorf("uploading %s: %w", f.Name, err))
	}
	if up.ErrCode != 0 || up.MediaID == "" {
		return "", &channel.Undeliverable{Reason: fmt.Sprintf("uploading %s: errcode %d: %s", f.Name, up.ErrCode, up.ErrMsg)}
	}
	if kind == "image" {
		return c.robotSend(ctx, chatID, "sampleImageMsg", map[string]string{"photoURL": up.MediaID})
	}
	ext := strings.TrimPrefix(strings.ToLower(filepath.Ext(f.Name)), ".")
	if ext == "" {
		ext = "bin"
	}
	return c.robotSend(ctx, chatID, "sampleFile", map[string]string{"mediaId": up.MediaID, "fileName": f.Name, "fileType": ext})
}

var _ channel.Channel = (*Channel)(nil)
