// Package slack is the gateway's Slack channel: a Slack app connected by
// Socket Mode (no public URL needed), which acknowledges each event once
// the gateway has made it durable (Slack redelivers what was not
// acknowledged, so a restart or a dropped socket loses nothing) and
// answers with chat.postMessage in the thread of the message, Markdown
// turned into mrkdwn, progress by chat.update.
//
// Identity: Inbound.SenderID is the Slack user id ("U0123ABCD"); ChatID
// is the conversation id, followed by ":<thread ts>" when the answer goes
// into a thread ("C0123ABCD:1700000000.000100"), so a thread is its own
// session.
package slack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/nbots/nb/gateway/bus"
	"github.com/nbots/nb/gateway/channel"
)

// Name is the channel's configuration name, channels.slack.
const Name = "slack"

// MaxMessageLength is where answers are split: Slack truncates a message
// past 40,000 characters and advises 4,000.
const MaxMessageLength = 4000

// DMConfig is channels.slack.dm. The channel applies it, as nanobot's
// does: a direct message it refuses is acknowledged and dropped before
// anything is downloaded or a pairing code is handed out.
type DMConfig struct {
	// Enabled answers direct messages (default true); false drops them.
	Enabled *bool `json:"enabled,omitempty"`
	// Policy is "open" (the default: anyone the gateway's allowFrom or
	// pairing admits) or "allowlist" (only the user ids of AllowFrom).
	Policy string `json:"policy,omitempty"`
	// AllowFrom lists the user ids allowed in direct messages when
	// Policy is "allowlist".
	AllowFrom []string `json:"allowFrom,omitempty"`
}

// Config is channels.slack (nanobot's keys, plus apiBase).
type Config struct {
	Enabled bool `json:"enabled"`
	// Mode is "socket", the only one.
	Mode string `json:"mode,omitempty"`
	// BotToken is the xoxb- token; AppToken the xapp- token with
	// connections:write.
	BotToken string `json:"botToken"`
	AppToken string `json:"appToken"`
	// AllowFrom lists user ids; the gateway checks SenderID against it.
	AllowFrom []string `json:"allowFrom"`
	// GroupPolicy is "mention" (default: answer in channels when
	// mentioned), "open" (answer every message) or "allowlist" (answer
	// every message of the channels GroupAllowFrom lists by id, and
	// nothing elsewhere, mention or not: the channel drops the rest).
	GroupPolicy    string   `json:"groupPolicy,omitempty"`
	GroupAllowFrom []string `json:"groupAllowFrom,omitempty"`
	// ReplyInThread answers channel messages in their thread (default
	// true).
	ReplyInThread *bool    `json:"replyInThread,omitempty"`
	DM            DMConfig `json:"dm,omitempty"`
	// APIBase is the Web API's URL (default https://slack.com/api/).
	APIBase string `json:"apiBase,omitempty"`
	// MaxMediaBytes bounds one file received (20 MB if 0).
	MaxMediaBytes int64 `json:"maxMediaBytes,omitempty"`
}

// MaxFileBytes bounds a file the app sends (Slack takes up to 1 GB; a
// chat answer needs far less).
const MaxFileBytes = 50 << 20

// Channel is one Slack app.
type Channel struct {
	// link is the receive loop's connection, for Status.
	link  channel.Conn
	cfg   Config
	env   channel.Env
	log   *slog.Logger
	api   *api
	pacer channel.Pacer
	turns channel.Turns
	// media fetches people's files; apiHost is the configured API's host,
	// the one place besides Slack's own that may see the bot token.
	media   *http.Client
	apiHost string

	retryBase time.Duration
	// pingEvery is how often the Socket Mode connection is pinged.
	pingEvery time.Duration
}

// Status implements channel.Reporter: where the receive loop's
// connection is.
func (c *Channel) Status() channel.Status { return c.link.Status() }

// New checks cfg and builds the channel; nothing connects before Run.
func New(cfg Config, env channel.Env) (*Channel, error) {
	if !strings.HasPrefix(cfg.BotToken, "xoxb-") {
		return nil, errors.New("channels.slack.botToken must be the app's bot token (xoxb-…, OAuth & Permissions)")
	}
	if !strings.HasPrefix(cfg.AppToken, "xapp-") {
		return nil, errors.New("channels.slack.appToken must be an app-level token (xapp-…, Basic Information) with connections:write")
	}
	if cfg.Mode != "" && cfg.Mode != "socket" {
		return nil, fmt.Errorf("channels.slack.mode %q is not supported: only \"socket\" (Socket Mode)", cfg.Mode)
	}
	switch cfg.GroupPolicy {
	case "", "mention", "open", "allowlist":
	default:
		return nil, fmt.Errorf("channels.slack.groupPolicy is %q: use \"mention\", \"open\" or \"allowlist\"", cfg.GroupPolicy)
	}
	switch cfg.DM.Policy {
	case "", "open", "allowlist":
	default:
		return nil, fmt.Errorf("channels.slack.dm.policy is %q: use \"open\" or \"allowlist\"", cfg.DM.Policy)
	}
	a := &api{base: defaultAPIBase, bot: cfg.BotToken, app: cfg.AppToken, hc: &http.Client{Timeout: 30 * time.Second}}
	if cfg.MaxMediaBytes <= 0 {
		cfg.MaxMediaBytes = 20 << 20
	}
	var apiHost string
	var mediaHosts []string
	if cfg.APIBase != "" {
		u, err := url.Parse(cfg.APIBase)
		if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
			return nil, fmt.Errorf("channels.slack.apiBase %q is not an http or https URL", cfg.APIBase)
		}
		a.base = strings.TrimRight(cfg.APIBase, "/") + "/"
		apiHost = u.Host
		mediaHosts = append(mediaHosts, u.Hostname()) // the operator's server: its files may be fetched
	}
	return &Channel{
		cfg:       cfg,
		env:       env,
		log:       env.Log().With("channel", Name),
		api:       a,
		media:     env.MediaClient(mediaHosts...),
		apiHost:   apiHost,
		retryBase: 500 * time.Millisecond,
		pingEvery: 30 * time.Second,
	}, nil
}

// Name is "slack".
func (c *Channel) Name() string { return Name }

// Capabilities: 4,000 characters, mrkdwn, edits, files.
func (c *Channel) Capabilities() channel.Capabilities {
	return channel.Capabilities{MaxMessageLength: MaxMessageLength, Markdown: channel.Slack, Edits: true, Media: true}
}

// authFailures are the Web API errors no retry cures.
var authFailures = map[string]bool{"invalid_auth": true, "not_authed": true, "account_inactive": true, "token_revoked": true, "missing_scope": true, "not_allowed_token_type": true}

// final is the error that ends Run for err: Slack refusing a token, which
// no retry cures (nil for any other error). It names the token to check:
// apps.connections.open takes the app-level token, the other methods the
// bot token.
func final(err error) error {
	var e *apiError
	if !errors.As(err, &e) || !authFailures[e.Code] {
		return nil
	}
	if e.Method == "apps.connections.open" {
		return fmt.Errorf("slack refused the app's token (%s, apps.connections.open): check channels.slack.appToken (an xapp- token with connections:write)", e.Code)
	}
	return fmt.Errorf("slack refused the app's token (%s, %s): check channels.slack.botToken and appToken", e.Code, e.Method)
}

// Run connects by Socket Mode and receives until ctx ends.
func (c *Channel) Run(ctx context.Context, in channel.Inbox, ready func()) error {
	var me string
	b := channel.Backoff{Base: c.retryBase, Max: 30 * time.Second, Conn: &c.link}
	ok, err := channel.Retry(ctx, c.log, "slack: auth.test failed", &b, func(ctx context.Context) error {
		id, err := c.api.authTest(ctx)
		me = id
		return err
	}, func(err error) (error, time.Duration) {
		var rl *rateLimited
		if errors.As(err, &rl) {
			return nil, rl.After
		}
		return final(err), 0
	})
	if !ok {
		return err
	}
	readied := false
	s := &socket{
		api: c.api, log: c.log, link: &c.link, retry: c.retryBase,
		pingEvery: c.pingEvery, helloWait: 30 * time.Second,
		hello: func(n int) {
			c.link.Up()
			if !readied {
				readied = true
				c.log.Info("slack: connected", "bot_user", me, "connections", n)
				ready()
			}
		},
		handle: func(ctx context.Context, payload json.RawMessage) bool {
			m, ok := c.inbound(ctx, in, payload, me)
			// Acknowledged (on return) only once the gateway holds it: a
			// crash before makes Slack send it again.
			return !ok || channel.PublishDurably(ctx, in, m, c.log, c.retryBase)
		},
	}
	return s.run(ctx)
}

// eventCallback is an events_api envelope's payload, as the Events API
// wraps an event (https://api.slack.com/apis/events-api): the event
// itself is in Event.
type eventCallback struct {
	Type  string `json:"type"`
	Event event  `json:"event"`
}

// event is a message or app_mention event: the fields the channel reads.
// Files are a file_share's, at the top level as in a new message
// (an edit's message_changed carries its message in "message", and is
// dropped).
type event struct {
	Type        string `json:"type"`
	Subtype     string `json:"subtype"`
	User        string `json:"user"`
	BotID       string `json:"bot_id"`
	Text        string `json:"text"`
	TS          string `json:"ts"`
	ThreadTS    string `json:"thread_ts"`
	Channel     string `json:"channel"`
	ChannelType string `json:"channel_type"`
	Files       []file `json:"files"`
}

// file is a file object of an event: the fields the channel reads.
type file struct {
	ID                 string `json:"id"`
	Name               string `json:"name"`
	Size               int64  `json:"size"`
	URLPrivate         string `json:"url_private"`
	URLPrivateDownload string `json:"url_private_download"`
}

// inbound turns a message or app_mention event into the bus's form.
//
// A sender the gateway does not let in (a stranger under dm.policy
// "open", who gets a pairing code) has the text delivered but no file
// fetched: strangers must not fill the disk.
func (c *Channel) inbound(ctx context.Context, in channel.Inbox, payload json.RawMessage, me string) (bus.Inbound, bool) {
	var cb eventCallback
	if err := json.Unmarshal(payload, &cb); err != nil {
		c.log.Warn("slack: an event that is not the Events API's JSON dropped", "err", err)
		return bus.Inbound{}, false
	}
	if cb.Type != "event_callback" {
		return bus.Inbound{}, false
	}
	e := cb.Event
	mention := false
	switch e.Type {
	case "message":
	case "app_mention":
		e.ChannelType, e.Subtype, mention = "channel", "", true
	default:
		return bus.Inbound{}, false
	}
	user, text, ts, thread, ch := e.User, e.Text, e.TS, e.ThreadTS, e.Channel
	// Edits, deletions, joins and bots (the app itself among them) are
	// not people talking.
	if user == "" || user == me || e.BotID != "" || (e.Subtype != "" && e.Subtype != "file_share" && e.Subtype != "thread_broadcast") {
		return bus.Inbound{}, false
	}
	group := e.ChannelType != "im"
	if why := c.refused(user, ch, group); why != "" {
		// Dropped here, before any download: the gateway never sees it.
		c.log.Debug("slack: message dropped", "reason", why, "channel", ch, "user", user)
		return bus.Inbound{}, false
	}
	if group && c.cfg.GroupPolicy == "allowlist" {
		mention = true // a listed channel is answered without a mention, as in nanobot
	}
	tag := "<@" + me + ">"
	if strings.Contains(text, tag) {
		mention = true
		text = strings.TrimSpace(strings.ReplaceAll(text, tag, ""))
	}
	chatID := ch
	if thread != "" {
		chatID = ch + ":" + thread
	} else if group && (c.cfg.ReplyInThread == nil || *c.cfg.ReplyInThread) {
		chatID = ch + ":" + ts
	}
	m := bus.Inbound{
		Channel:   Name,
		ID:        ch + ":" + ts,
		SenderID:  user,
		ChatID:    chatID,
		Content:   text,
		Timestamp: tsTime(ts),
		Metadata: map[string]any{
			"group": group, "mentioned": mention || !group, "channel_type": e.ChannelType,
			"channel": ch, "ts": ts, "thread_ts": thread,
		},
	}
	if (mention || !group) && len(e.Files) > 0 && !channel.Admits(in, m) {
		c.log.Info("slack: files of a sender not allowed not downloaded", "message", ts, "files", len(e.Files))
		e.Files = nil
	}
	if mention || !group {
		// Files only from whom the app would answer: a channel's chatter
		// that does not mention it costs no download.
		for _, f := range e.Files {
			path, err := c.fetch(ctx, ch, ts, f)
			if err != nil {
				c.log.Warn("slack: file not stored", "name", f.Name, "message", ts, "err", err)
				m.Content = strings.TrimSpace(m.Content + fmt.Sprintf("\n[file %s not received: %v]", f.Name, err))
				continue
			}
			m.Media = append(m.Media, path)
			m.Content = strings.TrimSpace(m.Content + fmt.Sprintf("\n[file: %s]", path))
		}
	}
	return m, true
}

// refused says why the policies of channels.slack drop a message from
// user in conversation ch ("" when they admit it): dm.enabled, dm.policy
// with dm.allowFrom for direct messages, groupPolicy "allowlist" with
// groupAllowFrom for channels.
func (c *Channel) refused(user, ch string, group bool) string {
	if !group {
		dm := c.cfg.DM
		if dm.Enabled != nil && !*dm.Enabled {
			return "direct messages are off (channels.slack.dm.enabled)"
		}
		if dm.Policy == "allowlist" && !slices.Contains(dm.AllowFrom, user) {
			return "the user is not in channels.slack.dm.allowFrom"
		}
		return ""
	}
	if c.cfg.GroupPolicy == "allowlist" && !slices.Contains(c.cfg.GroupAllowFrom, ch) {
		return "the channel is not in channels.slack.groupAllowFrom"
	}
	return ""
}

func tsTime(ts string) time.Time {
	var sec, usec int64
	fmt.Sscanf(ts, "%d.%d", &sec, &usec) //nolint:errcheck // a malformed ts is time zero
	return time.Unix(sec, usec*1000).UTC()
}

// dest splits a ChatID into the conversation and the thread.
func dest(chatID string) (ch, thread string) {
	ch, thread, _ = strings.Cut(chatID, ":")
	return ch, thread
}

// undeliverable are the Web API errors that retrying cannot cure.
var undeliverable = map[string]bool{"channel_not_found": true, "not_in_channel": true, "is_archived": true, "msg_too_long": true, "no_text": true, "restricted_action": true, "cannot_reply_to_message": true, "user_not_found": true}

// deliveryError is what Send and Edit return for a Web API call's err:
// a 429 defers the conversation and is a *channel.RetryAfter, an error
// no retry cures is a *channel.Undeliverable naming Slack's error and
// the method, and any other is err.
func (c *Channel) deliveryError(chatID string, err error) error {
	var rl *rateLimited
	if errors.As(err, &rl) {
		c.pacer.Defer(chatID, rl.After)
		return &channel.RetryAfter{After: rl.After, Err: err}
	}
	var e *apiError
	if errors.As(err, &e) && undeliverable[e.Code] {
		return &channel.Undeliverable{Reason: e.Code + " (" + e.Method + ")"}
	}
	return fmt.Errorf("slack: %w", err)
}

// Send delivers m in its conversation (and thread): its text, then its
// files. Progress of a turn is posted once and then updated; the final
// answer replaces it.
func (c *Channel) Send(ctx context.Context, m bus.Outbound) (string, error) {
	ch, thread := dest(m.ChatID)
	content, files := c.env.Outgoing(m, MaxFileBytes)
	var ps []string
	for _, r := range channel.SplitRich(channel.ParseMarkdown(content), MaxMessageLength, nil) {
		ps = append(ps, mrkdwn(r))
	}
	post := func(_ int, text string) (string, error) { return c.post(ctx, m.ChatID, ch, thread, text) }
	edit := func(ts, text string) error { return c.update(ctx, m.ChatID, ch, ts, text) }
	send := func(_ int, f *channel.Attachment) (string, error) { return c.share(ctx, m.ChatID, ch, thread, f) }
	return channel.DeliverFiles(&c.turns, m, ps, files, post, edit, send)
}

// share uploads a file into the conversation (and thread) and returns
// its file id.
func (c *Channel) share(ctx context.Context, chatID, ch, thread string, f *channel.Attachment) (string, error) {
	if err := c.pacer.Wait(ctx, chatID); err != nil {
		return "", err
	}
	id, err := c.api.uploadFile(ctx, ch, thread, f.Name, f.Data)
	if err != nil {
		return "", c.deliveryError(chatID, err)
	}
	return id, nil
}

// fetch downloads a person's file with the bot token, through the egress
// guard, into the workspace. The token goes only to Slack's own https
// hosts or the configured apiBase.
func (c *Channel) fetch(ctx context.Context, ch, ts string, f file) (string, error) {
	limit := c.cfg.MaxMediaBytes
	if f.Size > limit {
		return "", fmt.Errorf("%w (channels.slack.maxMediaBytes)", &channel.TooLarge{Size: f.Size, Limit: limit})
	}
	src := f.URLPrivateDownload
	if src == "" {
		src = f.URLPrivate
	}
	u, err := url.Parse(src)
	if err != nil || u.Host == "" {
		return "", errors.New("the file has no download URL")
	}
	host := strings.ToLower(u.Hostname())
	slackHost := u.Scheme == "https" && (host == "slack.com" || strings.HasSuffix(host, ".slack.com") || host == "slack-files.com" || strings.HasSuffix(host, ".slack-files.com"))
	if !slackHost && !(c.apiHost != "" && strings.EqualFold(u.Host, c.apiHost)) {
		return "", fmt.Errorf("the file is on %s, not a Slack host: the bot token is not sent there", u.Host)
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, src, nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+c.cfg.BotToken)
	dir, err := c.env.MediaDir(Name)
	if err != nil {
		return "", err
	}
	path, err := channel.SaveMedia(c.media, req, dir, ch+"_"+ts+"_"+f.ID+"_"+f.Name, limit)
	if channel.IsTooLarge(err) {
		return "", fmt.Errorf("%w (channels.slack.maxMediaBytes)", err)
	}
	return path, err
}

func (c *Channel) post(ctx context.Context, chatID, ch, thread, text string) (string, error) {
	if err := c.pacer.Wait(ctx, chatID); err != nil {
		return "", err
	}
	ts, err := c.api.postMessage(ctx, ch, thread, text)
	if err != nil {
		return "", c.deliveryError(chatID, err)
	}
	return ts, nil
}

func (c *Channel) update(ctx context.Context, chatID, ch, ts, text string) error {
	if err := c.pacer.Wait(ctx, chatID); err != nil {
		return err
	}
	if err := c.api.update(ctx, ch, ts, text); err != nil {
		return c.deliveryError(chatID, err)
	}
	return nil
}

// Edit replaces the text of a message the app posted.
func (c *Channel) Edit(ctx context.Context, chatID, id, content string) error {
	ch, _ := dest(chatID)
	rs := channel.SplitRich(channel.ParseMarkdown(content), MaxMessageLength, nil)
	if len(rs) == 0 {
		return nil
	}
	return c.update(ctx, chatID, ch, id, mrkdwn(rs[0]))
}

var (
	_ channel.Channel = (*Channel)(nil)
	_ channel.Editor  = (*Channel)(nil)
)
