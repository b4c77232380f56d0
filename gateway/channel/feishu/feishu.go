// Package feishu is the gateway's Feishu (飞书) and Lark channel: one
// custom app with the bot ability. It receives by the open platform's
// long connection (a websocket of protobuf frames the app opens itself,
// so no public address is needed), or by the HTTP event callback for a
// gateway that has an address; each event is acknowledged only once the
// gateway holds it (the platform sends an unacknowledged event again, and
// the bus drops the repeat). Answers go as rich text (post) or as an
// interactive card with Markdown, as nanobot sends them; progress is a
// card updated in place. It speaks the platform's server API with a
// tenant access token that it refreshes before it expires.
//
// Identity, as nanobot: Inbound.SenderID is the sender's open_id
// ("ou_…"); ChatID is the group's chat_id ("oc_…") for a group, the
// sender's open_id for a direct chat.
package feishu

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/nbots/nb/gateway/channel"
)

// Name is the channel's configuration name, channels.feishu.
const Name = "feishu"

// MaxMessageLength is where answers are split, in characters: a card or
// a post takes 30 KB of JSON, and 4,000 characters of Chinese text (three
// bytes each) with their escaping stay well within it.
const MaxMessageLength = 4000

// MaxFileBytes bounds a file the bot sends (the platform takes 30 MB).
const MaxFileBytes = 30 << 20

// Config is channels.feishu: nanobot's keys, and nb's mode, webhookPath
// and apiBase.
type Config struct {
	Enabled bool `json:"enabled"`
	// AppID and AppSecret are the app's credentials (Credentials & Basic
	// Info in the developer console).
	AppID     string `json:"appId"`
	AppSecret string `json:"appSecret"`
	// EncryptKey and VerificationToken are the event subscription's
	// (Events & Callbacks > Encryption Strategy): the HTTP callback checks
	// and decrypts events with them; the long connection needs neither.
	EncryptKey        string `json:"encryptKey"`
	VerificationToken string `json:"verificationToken"`
	// AllowFrom lists open_ids; the gateway checks SenderID against it.
	AllowFrom []string `json:"allowFrom"`
	// GroupPolicy is "mention" (default: answer in groups when the bot is
	// mentioned) or "open" (every group message); the gateway applies it.
	GroupPolicy string `json:"groupPolicy,omitempty"`
	// ReactEmoji is nanobot's acknowledgement reaction (THUMBSUP); nb
	// adds it to each message it takes, "" for none.
	ReactEmoji *string `json:"reactEmoji,omitempty"`
	// Domain is "feishu" (open.feishu.cn, the default) or "lark"
	// (open.larksuite.com).
	Domain string `json:"domain,omitempty"`
	// Mode is "websocket" (default: the long connection) or "webhook"
	// (the HTTP event callback, served at WebhookPath on the gateway's
	// listener).
	Mode        string `json:"mode,omitempty"`
	WebhookPath string `json:"webhookPath,omitempty"`
	// APIBase replaces the domain's address (a proxy, a test server).
	APIBase string `json:"apiBase,omitempty"`
	// MaxMediaBytes bounds one file received (20 MB if 0).
	MaxMediaBytes int64 `json:"maxMediaBytes,omitempty"`
}

// Channel is one Feishu or Lark app.
type Channel struct {
	// link is the receive loop's connection, for Status.
	link    channel.Conn
	cfg     Config
	env     channel.Env
	log     *slog.Logger
	api     *client
	media   *http.Client
	pacer   channel.Pacer
	turns   channel.Turns
	hook    string
	emoji   string
	backoff time.Duration

	mu    sync.Mutex
	me    string        // the bot's open_id
	inbox channel.Inbox // set while Run receives by webhook
}

// Status implements channel.Reporter: where the receive loop's
// connection is.
func (c *Channel) Status() channel.Status { return c.link.Status() }

var pathRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^(/[A-Za-z0-9._~-]+)+$`) })

// New checks cfg and builds the channel; nothing connects before Run.
func New(cfg Config, env channel.Env) (*Channel, error) {
	if cfg.AppID == "" || cfg.AppSecret == "" {
		return nil, errors.New("channels.feishu.appId and appSecret are required (the app's Credentials & Basic Info page)")
	}
	switch cfg.GroupPolicy {
	case "", "mention", "open":
	default:
		return nil, fmt.Errorf("channels.feishu.groupPolicy is %q: use \"mention\" or \"open\"", cfg.GroupPolicy)
	}
	base := "https://open.feishu.cn"
	switch cfg.Domain {
	case "", "feishu":
	case "lark":
		base = "https://open.larksuite.com"
	default:
		return nil, fmt.Errorf("channels.feishu.domain is %q: use \"feishu\" or \"lark\"", cfg.Domain)
	}
	var hosts []string
	if cfg.APIBase != "" {
		u, err := url.Parse(cfg.APIBase)
		if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
			return nil, fmt.Errorf("channels.feishu.apiBase %q is not an http or https URL", cfg.APIBase)
		}
		base = strings.TrimRight(cfg.APIBase, "/")
		hosts = append(hosts, u.Hostname())
	} else {
		u, _ := url.Parse(base)
		hosts = append(hosts, u.Hostname())
	}
	hook := ""
	switch cfg.Mode {
	case "", "websocket":
	case "webhook":
		hook = cfg.WebhookPath
		if hook == "" {
			hook = "/feishu/events"
		}
		if !pathRE().MatchString(hook) || hook == "/ws" || hook == "/health" || hook == "/ready" {
			return nil, fmt.Errorf("channels.feishu.webhookPath %q must be a path of its own, such as /feishu/events", hook)
		}
		if cfg.VerificationToken == "" {
			return nil, errors.New("channels.feishu.verificationToken is required in webhook mode: it tells the platform's requests from anyone else's")
		}
	default:
		return nil, fmt.Errorf("channels.feishu.mode is %q: use \"websocket\" (the long connection) or \"webhook\"", cfg.Mode)
	}
	if cfg.MaxMediaBytes <= 0 {
		cfg.MaxMediaBytes = 20 << 20
	}
	emoji := "THUMBSUP"
	if cfg.ReactEmoji != nil {
		emoji = *cfg.ReactEmoji
	}
	c := &Channel{
		cfg:     cfg,
		env:     env,
		log:     env.Log().With("channel", Name),
		api:     newClient(base, cfg.AppID, cfg.AppSecret, &http.Client{Timeout: 30 * time.Second}),
		media:   env.MediaClient(hosts...),
		hook:    hook,
		emoji:   emoji,
		backoff: time.Second,
	}
	// The platform allows five messages a second to one chat: spaced by
	// a quarter second, a sixth never lands within the first's second,
	// whatever the network's jitter.
	c.pacer.Interval = func(string) time.Duration { return 250 * time.Millisecond }
	return c, nil
}

// Name is "feishu".
func (c *Channel) Name() string { return Name }

// Capabilities: 4,000 characters, CommonMark in cards, edits, files.
func (c *Channel) Capabilities() channel.Capabilities {
	return channel.Capabilities{MaxMessageLength: MaxMessageLength, Markdown: channel.CommonMark, Edits: true, Media: true}
}

// WebhookPath is where the gateway serves the event callback: "" in
// websocket mode.
func (c *Channel) WebhookPath() string { return c.hook }

// final turns the platform's refusals of the app's credentials into the
// error that ends Run; other failures are retried (nil).
func final(err error) error {
	var e *apiError
	if !errors.As(err, &e) {
		return nil
	}
	switch {
	case e.Op == "tenant_access_token" && (e.Code == 10003 || e.Code == 10014):
		return fmt.Errorf("feishu refused the app's credentials (code %d: %s): check channels.feishu.appId and appSecret", e.Code, e.Msg)
	case e.Op == "callback/ws/endpoint" && (e.Code == 514 || e.Code == 403):
		return fmt.Errorf("feishu refused the long connection (code %d: %s): check channels.feishu.appId and appSecret, and that the app subscribes to events by long connection", e.Code, e.Msg)
	}
	return nil
}

// Run receives until ctx ends: by the long connection, or by the event
// callback in webhook mode.
func (c *Channel) Run(ctx context.Context, in channel.Inbox, ready func()) error {
	b := &channel.Backoff{Base: c.backoff, Max: time.Minute, Conn: &c.link}
	ok, err := channel.Retry(ctx, c.log, "feishu: reading the bot's identity", b, func(ctx context.Context) error {
		me, err := c.api.botInfo(ctx)
		if err == nil {
			c.mu.Lock()
			c.me = me
			c.mu.Unlock()
		}
		return err
	}, classify)
	if !ok {
		return err
	}
	if c.hook != "" {
		c.mu.Lock()
		c.inbox = in
		c.mu.Unlock()
		c.log.Info("feishu: receiving by event callback", "path", c.hook)
		c.link.Up()
		ready()
		<-ctx.Done()
		c.mu.Lock()
		c.inbox = nil
		c.mu.Unlock()
		return nil
	}
	return c.runSocket(ctx, in, ready, b)
}

// classify is channel.Retry's: credentials refused end Run; a rate
// limit waits as long as the platform says.
func classify(err error) (error, time.Duration) {
	if f := final(err); f != nil {
		return f, 0
	}
	var e *apiError
	if errors.As(err, &e) && e.RetryAfter > 0 {
		return nil, e.RetryAfter
	}
	return nil, 0
}

func (c *Channel) botID() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.me
}

var (
	_ channel.Channel = (*Channel)(nil)
	_ channel.Editor  = (*Channel)(nil)
	_ channel.Webhook = (*Channel)(nil)
)
