// Package telegram is the gateway's Telegram channel: a bot that receives
// by long polling getUpdates, its offset saved after every message the
// gateway has made durable (a restart neither replays nor skips), and
// answers with sendMessage, Markdown turned into entities, long answers
// split on line boundaries at Telegram's 4,096 characters, streamed
// progress by editMessageText. Photos, voice notes, audio and documents
// are fetched through the egress guard into the workspace.
//
// Identity: Inbound.SenderID is "<numeric user id>|<username>" (just the
// id when the person has no username), nanobot's form: an allowFrom
// entry of digits names the id, one that starts with a letter or "@" the
// username (access.Matches; the username is never split on "|").
package telegram

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nbots/nb/gateway/channel"
	"github.com/nbots/nb/gateway/channel/telegram/botapi"
)

// Name is the channel's configuration name, channels.telegram.
const Name = "telegram"

// MaxMessageLength is Telegram's limit on a message's text, in UTF-16
// code units after entities are parsed.
const MaxMessageLength = 4096

// DefaultMaxMediaBytes bounds one inbound file: the Bot API's own limit
// on getFile downloads (20 MB).
const DefaultMaxMediaBytes = 20 << 20

// Config is channels.telegram (nanobot's keys, plus apiBase and the
// media limit).
type Config struct {
	Enabled bool `json:"enabled"`
	// Token is the bot's token from @BotFather.
	Token string `json:"token"`
	// AllowFrom lists the owner's identities, as "<id>", "<username>"
	// or "<id>|<username>"; the gateway checks it against SenderID.
	AllowFrom []string `json:"allowFrom"`
	// GroupPolicy is "mention" (the default: in groups, answer only when
	// mentioned or replied to) or "open"; the gateway applies it to
	// Metadata["group"] and Metadata["mentioned"].
	GroupPolicy string `json:"groupPolicy,omitempty"`
	// Proxy is an http, https or socks5 proxy URL for the Bot API.
	Proxy string `json:"proxy,omitempty"`
	// ReplyToMessage makes an answer quote the message it answers.
	ReplyToMessage bool `json:"replyToMessage,omitempty"`
	// APIBase is a self-hosted Bot API server (default
	// https://api.telegram.org).
	APIBase string `json:"apiBase,omitempty"`
	// MaxMediaBytes bounds one inbound file (DefaultMaxMediaBytes if 0).
	MaxMediaBytes int64 `json:"maxMediaBytes,omitempty"`
	// PollTimeout is getUpdates's long-poll timeout in seconds (25 if 0).
	PollTimeout int `json:"pollTimeout,omitempty"`
	// WebhookURL, when set, receives by webhook instead of long polling:
	// the public https URL Telegram posts updates to, which must reach
	// the gateway's listener at the same path.
	WebhookURL string `json:"webhookUrl,omitempty"`
	// WebhookSecret is the secret_token Telegram sends back with every
	// update (16 to 256 of A-Z, a-z, 0-9, _ and -); required with
	// WebhookURL.
	WebhookSecret string `json:"webhookSecret,omitempty"`
}

// Channel is one Telegram bot.
type Channel struct {
	// link is the receive loop's connection, for Status.
	link  channel.Conn
	cfg   Config
	env   channel.Env
	log   *slog.Logger
	api   *botapi.Client
	media *http.Client
	pacer channel.Pacer

	// retryBase and retryMax bound the wait between failed polls.
	retryBase, retryMax time.Duration
	// requestTimeout bounds every call but getUpdates.
	requestTimeout time.Duration
	// pollDeadline bounds a getUpdates: past it the poll hangs.
	pollDeadline time.Duration

	// turns keeps the progress message and the pieces already sent of
	// each turn's answer.
	turns channel.Turns

	mu sync.Mutex
	me botapi.User

	// webhookPath is WebhookURL's path ("" when polling); hook holds what
	// the webhook's requests need while Run runs.
	webhookPath string
	hookMu      sync.Mutex
	hook        *hookState
}

// Status implements channel.Reporter: where the receive loop's
// connection is.
func (c *Channel) Status() channel.Status { return c.link.Status() }

// hookState is the receive position of a channel that receives by
// webhook.
type hookState struct {
	in     channel.Inbox
	cursor channel.Cursor
	offset int64
}

// New checks cfg and builds the channel; nothing connects before Run.
func New(cfg Config, env channel.Env) (*Channel, error) {
	if strings.TrimSpace(cfg.Token) == "" {
		return nil, errors.New("channels.telegram.token is empty: create a bot with @BotFather and put its token there")
	}
	if strings.ContainsAny(cfg.Token, "/?# \t\n") {
		return nil, errors.New("channels.telegram.token is not a bot token (it holds a slash, space or query character)")
	}
	switch cfg.GroupPolicy {
	case "", "mention", "open":
	default:
		return nil, fmt.Errorf("channels.telegram.groupPolicy is %q: use \"mention\" or \"open\"", cfg.GroupPolicy)
	}
	if cfg.MaxMediaBytes <= 0 {
		cfg.MaxMediaBytes = DefaultMaxMediaBytes
	}
	webhookPath, err := checkWebhook(cfg)
	if err != nil {
		return nil, err
	}
	if cfg.PollTimeout <= 0 {
		cfg.PollTimeout = 25
	}
	transport := &http.Transport{
		Proxy:                 nil,
		ForceAttemptHTTP2:     true,
		MaxIdleConnsPerHost:   64,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: time.Duration(cfg.PollTimeout+15) * time.Second,
	}
	if cfg.Proxy != "" {
		p, err := url.Parse(cfg.Proxy)
		if err != nil || p.Host == "" || (p.Scheme != "http" && p.Scheme != "https" && p.Scheme != "socks5") {
			return nil, fmt.Errorf("channels.telegram.proxy is not an http, https or socks5 URL")
		}
		transport.Proxy = http.ProxyURL(p)
	}
	var mediaHosts []string
	if cfg.APIBase != "" {
		u, err := url.Parse(cfg.APIBase)
		if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") || u.User != nil {
			return nil, fmt.Errorf("channels.telegram.apiBase %q is not an http or https URL", cfg.APIBase)
		}
		// The operator named this server: its files may be fetched even
		// when it is on a private or loopback address.
		mediaHosts = append(mediaHosts, u.Hostname())
	}
	c := &Channel{
		cfg:            cfg,
		env:            env,
		log:            env.Log().With("channel", Name),
		api:            &botapi.Client{Base: cfg.APIBase, Token: cfg.Token, HTTP: &http.Client{Transport: transport}},
		media:          env.MediaClient(mediaHosts...),
		pacer:          channel.Pacer{Interval: groupInterval},
		retryBase:      500 * time.Millisecond,
		retryMax:       30 * time.Second,
		requestTimeout: 30 * time.Second,
		pollDeadline:   time.Duration(cfg.PollTimeout+10) * time.Second,
		webhookPath:    webhookPath,
	}
	return c, nil
}

// groupInterval paces a group at Telegram's 20 messages a minute; a
// private chat is paced only by the 429s it gets.
func groupInterval(chat string) time.Duration {
	if strings.HasPrefix(chat, "-") {
		return 3 * time.Second
	}
	return 0
}

// Name is "telegram".
func (c *Channel) Name() string { return Name }

// Capabilities: 4,096 characters, entities, edits, typing, media.
func (c *Channel) Capabilities() channel.Capabilities {
	return channel.Capabilities{MaxMessageLength: MaxMessageLength, Markdown: channel.Telegram, Edits: true, Typing: true, Media: true}
}

// final tells the errors retrying cannot cure: the token was refused.
func final(err error) error {
	var e *botapi.Error
	if errors.As(err, &e) && (e.Code == http.StatusUnauthorized || e.Code == http.StatusNotFound) && e.Method != "" {
		return fmt.Errorf("telegram refused the bot token (%d %s): check channels.telegram.token", e.Code, e.Description)
	}
	return nil
}

// Menu is the command menu set at connection (setMyCommands), as
// nanobot's BOT_COMMANDS with nb's /status.
var Menu = []botapi.BotCommand{
	{Command: "start", Description: "Start the bot"},
	{Command: "new", Description: "Start a new conversation"},
	{Command: "stop", Description: "Stop the current task"},
	{Command: "status", Description: "Model, session and token use"},
	{Command: "help", Description: "Show available commands"},
	{Command: "restart", Description: "Restart the bot"},
}

// Run connects (getMe), sets the command menu, then long-polls (or
// serves the webhook) until ctx ends.
func (c *Channel) Run(ctx context.Context, in channel.Inbox, ready func()) error {
	cursor, saved, err := c.env.Position(ctx, Name)
	if err != nil {
		return fmt.Errorf("telegram: %w", err)
	}
	var offset int64
	if saved != "" {
		if offset, err = strconv.ParseInt(saved, 10, 64); err != nil {
			return fmt.Errorf("telegram: the saved update offset in %s is not a number: %q", cursor, saved)
		}
	}
	b := &channel.Backoff{Base: c.retryBase, Max: c.retryMax, Conn: &c.link}
	ok, err := channel.Retry(ctx, c.log, "telegram: connecting", b, func(ctx context.Context) error {
		rctx, cancel := context.WithTimeout(ctx, c.requestTimeout)
		defer cancel()
		me, err := c.api.GetMe(rctx)
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
	c.log.Info("telegram: connected", "bot", c.me.Username, "offset", offset)
	mctx, cancel := context.WithTimeout(ctx, c.requestTimeout)
	if err := c.api.SetMyCommands(mctx, Menu); err != nil && ctx.Err() == nil {
		c.log.Warn("telegram: the command menu was not set", "err", err)
	}
	cancel()
	if c.webhookPath != "" {
		return c.runWebhook(ctx, in, ready, b, cursor, offset)
	}
	ready()
	for {
		var updates []botapi.Update
		ok, err := channel.Retry(ctx, c.log, "telegram: getUpdates failed", b, func(ctx context.Context) error {
			pctx, cancel := context.WithTimeout(ctx, c.pollDeadline)
			defer cancel()
			var err error
			updates, err = c.api.GetUpdates(pctx, botapi.GetUpdates{Offset: offset, Timeout: c.cfg.PollTimeout, AllowedUpdates: []string{"message"}})
			if webhookActive(err) {
				// A webhook set earlier (webhookUrl removed since): back
				// to polling, the waiting updates kept.
				c.log.Info("telegram: a webhook is set: deleting it to poll")
				if derr := c.api.DeleteWebhook(pctx); derr != nil {
					return derr
				}
			}
			return err
		}, classify)
		if !ok {
			return err
		}
		c.link.Up()
		for _, u := range updates {
			if u.UpdateID < offset {
				continue // already published before a restart
			}
			if u.Message != nil {
				m, ok := c.inbound(ctx, in, u.Message)
				if ok && !channel.PublishDurably(ctx, in, m, c.log, c.retryBase) {
					return nil
				}
			}
			offset = u.UpdateID + 1
			if err := cursor.Save(ctx, strconv.FormatInt(offset, 10)); err != nil {
				// The bus drops the replay a stale offset would cause.
				c.log.Error("telegram: saving the update offset", "err", err)
			}
		}
	}
}

// webhookActive tells getUpdates's refusal while a webhook is set.
func webhookActive(err error) bool {
	var e *botapi.Error
	return errors.As(err, &e) && e.Code == http.StatusConflict && strings.Contains(e.Description, "webhook is active")
}

// classify sorts a failed call for channel.Retry: a refused token is
// final; a 429 waits its retry_after.
func classify(err error) (error, time.Duration) {
	var e *botapi.Error
	if errors.As(err, &e) && e.RetryAfter > 0 {
		return final(err), e.RetryAfter
	}
	return final(err), 0
}
