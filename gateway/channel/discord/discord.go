// Package discord is the gateway's Discord channel: a bot connected to
// Discord's Gateway (its own client, gateway.go: heartbeats, and a
// dropped connection resumed with its session id and sequence) that
// answers through the REST API (rest.go), honouring the rate-limit
// headers of each channel's bucket. It remembers the last message it
// handed over in each channel, so that after a restart (a new session,
// which Discord does not replay) it fetches what was written meanwhile:
// no replay, no gap.
//
// Identity: Inbound.SenderID is the author's user id (a snowflake,
// "123456789012345678"); ChatID is the channel id.
package discord

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nbots/nb/gateway/bus"
	"github.com/nbots/nb/gateway/channel"
)

// Name is the channel's configuration name, channels.discord.
const Name = "discord"

// MaxMessageLength is Discord's limit on a message's content.
const MaxMessageLength = 2000

// DefaultIntents are nanobot's: guilds, guild messages, direct messages
// and message content (37377).
const DefaultIntents = intentGuilds | intentGuildMessages | intentDirectMessages | intentMessageContent

// Config is channels.discord (nanobot's keys, plus apiBase).
type Config struct {
	Enabled bool `json:"enabled"`
	// Token is the bot's token (Developer Portal → Bot).
	Token string `json:"token"`
	// AllowFrom lists user ids; the gateway checks SenderID against it.
	AllowFrom []string `json:"allowFrom"`
	// GroupPolicy is "mention" (default: in servers, answer when
	// mentioned) or "open"; the gateway applies it.
	GroupPolicy string `json:"groupPolicy,omitempty"`
	// Intents overrides DefaultIntents.
	Intents int `json:"intents,omitempty"`
	// APIBase replaces https://discord.com (the tests' fake).
	APIBase string `json:"apiBase,omitempty"`
	// MaxMediaBytes bounds one attachment received (20 MB if 0).
	MaxMediaBytes int64 `json:"maxMediaBytes,omitempty"`
}

// MaxFileBytes bounds a file the bot sends: Discord's upload limit in a
// server without boosts (10 MiB); a message carries up to MaxFiles.
const (
	MaxFileBytes = 10 << 20
	MaxFiles     = 10
)

// Channel is one Discord bot.
type Channel struct {
	// link is the receive loop's connection, for Status.
	link    channel.Conn
	cfg     Config
	token   string // without "Bot "
	intents int
	env     channel.Env
	log     *slog.Logger
	api     *rest
	media   *http.Client
	turns   channel.Turns
	timeout time.Duration
	// retry is the gateway's first wait after a failed connection.
	retry time.Duration

	mu     sync.Mutex
	me     string
	last   map[string]uint64 // channel -> last message handed over
	cursor channel.Cursor
}

// Status implements channel.Reporter: where the receive loop's
// connection is.
func (c *Channel) Status() channel.Status { return c.link.Status() }

// New checks cfg and builds the channel; nothing connects before Run.
func New(cfg Config, env channel.Env) (*Channel, error) {
	tok := strings.TrimPrefix(strings.TrimSpace(cfg.Token), "Bot ")
	if tok == "" || strings.ContainsAny(tok, " \t\n") {
		return nil, errors.New("channels.discord.token is empty or not a bot token: copy it from the Developer Portal (your application → Bot → Reset Token)")
	}
	switch cfg.GroupPolicy {
	case "", "mention", "open":
	default:
		return nil, fmt.Errorf("channels.discord.groupPolicy is %q: use \"mention\" or \"open\"", cfg.GroupPolicy)
	}
	if cfg.Intents < 0 {
		return nil, fmt.Errorf("channels.discord.intents is %d: use a sum of Discord's intent bits (37377 by default)", cfg.Intents)
	}
	if cfg.MaxMediaBytes <= 0 {
		cfg.MaxMediaBytes = 20 << 20
	}
	base := "https://discord.com"
	var mediaHosts []string
	if cfg.APIBase != "" {
		u, err := url.Parse(cfg.APIBase)
		if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
			return nil, fmt.Errorf("channels.discord.apiBase %q is not an http or https URL", cfg.APIBase)
		}
		base = strings.TrimSuffix(cfg.APIBase, "/")
		mediaHosts = append(mediaHosts, u.Hostname()) // the operator's server: its files may be fetched
	}
	intents := DefaultIntents
	if cfg.Intents != 0 {
		intents = cfg.Intents
	}
	return &Channel{
		cfg: cfg, token: tok, intents: intents, env: env, log: env.Log().With("channel", Name),
		api:   &rest{base: base + "/api/v" + apiVersion, auth: "Bot " + tok, hc: &http.Client{Timeout: 30 * time.Second}},
		media: env.MediaClient(mediaHosts...), timeout: 30 * time.Second, retry: time.Second, last: map[string]uint64{},
	}, nil
}

// Name is "discord".
func (c *Channel) Name() string { return Name }

// Capabilities: 2,000 characters of Discord's Markdown, edits, typing,
// attachments.
func (c *Channel) Capabilities() channel.Capabilities {
	return channel.Capabilities{MaxMessageLength: MaxMessageLength, Markdown: channel.CommonMark, Edits: true, Typing: true, Media: true}
}

// user is a Discord user object (the fields the channel reads).
type user struct {
	ID       string `json:"id"`
	Username string `json:"username"`
	Bot      bool   `json:"bot"`
}

// message is a Discord message object (the fields the channel reads).
type message struct {
	ID                string       `json:"id"`
	ChannelID         string       `json:"channel_id"`
	GuildID           string       `json:"guild_id"`
	Author            *user        `json:"author"`
	Content           string       `json:"content"`
	Timestamp         string       `json:"timestamp"`
	Mentions          []user       `json:"mentions"`
	ReferencedMessage *message     `json:"referenced_message"`
	Attachments       []attachment `json:"attachments"`
}

// attachment is a file of a message.
type attachment struct {
	ID       string `json:"id"`
	Filename string `json:"filename"`
	Size     int64  `json:"size"`
	URL      string `json:"url"`
}

// Run connects to the Gateway and receives until ctx ends.
func (c *Channel) Run(ctx context.Context, in channel.Inbox, ready func()) error {
	cursor, saved, err := c.env.Position(ctx, Name)
	if err != nil {
		return fmt.Errorf("discord: %w", err)
	}
	last := map[string]string{}
	if saved != "" {
		if err := json.Unmarshal([]byte(saved), &last); err != nil {
			return fmt.Errorf("discord: the saved positions in %s are not readable: %v", cursor, err)
		}
	}
	c.mu.Lock()
	c.cursor = cursor
	for ch, id := range last {
		n, _ := strconv.ParseUint(id, 10, 64)
		c.last[ch] = n
	}
	c.mu.Unlock()
	var me user
	if err := c.api.do(ctx, request{method: http.MethodGet, path: "/users/@me", route: "GET /users/@me"}, &me); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		if errStatus(err) == http.StatusUnauthorized {
			return errors.New("discord refused the bot token (401 Unauthorized): check channels.discord.token")
		}
		return fmt.Errorf("discord: %w", err)
	}
	c.mu.Lock()
	c.me = me.ID
	c.mu.Unlock()

	gctx, cancel := context.WithCancel(ctx)
	defer cancel()
	g := &gateway{token: c.token, intents: c.intents, rest: c.api, log: c.log, link: &c.link, retry: c.retry, invalidWait: invalidWait}
	events := make(chan event)
	done := make(chan error, 1)
	go func() { done <- g.run(gctx, events) }()
	var once sync.Once
	for {
		select {
		case err := <-done:
			return err
		case e := <-events:
			switch e.T {
			case "READY":
				// A new session (the first, or after an invalid one):
				// Discord does not replay what was written without us;
				// fetch it.
				c.catchUp(gctx, in)
				once.Do(ready)
			case "MESSAGE_CREATE":
				var m message
				if err := json.Unmarshal(e.D, &m); err != nil {
					c.log.Warn("discord: a MESSAGE_CREATE that is not a message ignored", "err", err)
					continue
				}
				c.handle(gctx, in, &m)
			}
		}
	}
}

// handle publishes a message once, in order, and records its id.
func (c *Channel) handle(ctx context.Context, in channel.Inbox, m *message) {
	id, _ := strconv.ParseUint(m.ID, 10, 64)
	c.mu.Lock()
	last, known := c.last[m.ChannelID]
	me, done := c.me, id <= last
	c.mu.Unlock()
	if done || m.Author == nil || m.Author.ID == me || m.Author.Bot {
		c.advance(ctx, m.ChannelID, id)
		return
	}
	if !known && id > 0 {
		// The first message of a channel: remember the channel, just
		// before this message, so that a restart while the message is
		// not yet durable catches it up (catchUp fetches only the
		// channels it knows).
		c.advance(ctx, m.ChannelID, id-1)
	}
	group := m.GuildID != ""
	mentioned := !group
	for _, u := range m.Mentions {
		if u.ID == me {
			mentioned = true
		}
	}
	if m.ReferencedMessage != nil && m.ReferencedMessage.Author != nil && m.ReferencedMessage.Author.ID == me {
		mentioned = true
	}
	content := strings.TrimSpace(strings.NewReplacer("<@"+me+">", "", "<@!"+me+">", "").Replace(m.Content))
	at, _ := time.Parse(time.RFC3339Nano, m.Timestamp)
	in2 := bus.Inbound{
		Channel: Name, ID: m.ID, SenderID: m.Author.ID, ChatID: m.ChannelID, Content: content,
		Timestamp: at.UTC(),
		Metadata: map[string]any{
			"group": group, "mentioned": mentioned, "guild_id": m.GuildID,
			"username": m.Author.Username, "message_id": m.ID,
		},
	}
	// Files only from whom the bot would answer: a server's chatter that
	// does not mention it costs no download, nor does a stranger's
	// message (never its files on our disk).
	if mentioned && len(m.Attachments) > 0 {
		if !channel.Admits(in, in2) {
			c.log.Info("discord: files of a sender not allowed not downloaded", "message", m.ID, "files", len(m.Attachments))
		} else {
			media, notes := c.fetchAll(ctx, m)
			in2.Media = media
			if len(notes) > 0 {
				in2.Content = strings.TrimSpace(content + "\n" + strings.Join(notes, "\n"))
			}
		}
	}
	if !channel.PublishDurably(ctx, in, in2, c.log, 100*time.Millisecond) {
		return
	}
	c.advance(ctx, m.ChannelID, id)
}

// advance records the channel's last handed-over message and saves all.
func (c *Channel) advance(ctx context.Context, ch string, id uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if id <= c.last[ch] {
		return
	}
	c.last[ch] = id
	out := make(map[string]string, len(c.last))
	for k, v := range c.last {
		out[k] = strconv.FormatUint(v, 10)
	}
	b, _ := json.Marshal(out)
	if err := c.cursor.Save(ctx, string(b)); err != nil {
		c.log.Error("discord: saving positions", "err", err)
	}
}

// catchUp publishes, per known channel, what was written after its last
// handed-over message, oldest first.
func (c *Channel) catchUp(ctx context.Context, in channel.Inbox) {
	c.mu.Lock()
	chans := make(map[string]uint64, len(c.last))
	for k, v := range c.last {
		chans[k] = v
	}
	c.mu.Unlock()
	for ch, after := range chans {
		for {
			var ms []*message
			q := request{method: http.MethodGet, path: "/channels/" + url.PathEscape(ch) + "/messages", route: "GET /channels/{id}/messages", major: ch,
				query: url.Values{"after": {strconv.FormatUint(after, 10)}, "limit": {"100"}}.Encode()}
			err := c.api.do(ctx, q, &ms)
			var rl *rateLimited
			if errors.As(err, &rl) {
				if !channel.Sleep(ctx, max(rl.After, 10*time.Millisecond)) {
					return
				}
				continue
			}
			if err != nil {
				c.log.Warn("discord: fetching missed messages", "channel", ch, "err", err)
				break
			}
			sort.Slice(ms, func(i, j int) bool { return snowflake(ms[i].ID) < snowflake(ms[j].ID) })
			for _, m := range ms {
				c.handle(ctx, in, m)
				after = max(after, snowflake(m.ID))
			}
			if len(ms) < 100 {
				break
			}
		}
	}
}

func snowflake(id string) uint64 {
	n, _ := strconv.ParseUint(id, 10, 64)
	return n
}

// deliveryError sorts REST failures.
func deliveryError(err error) error {
	var rl *rateLimited
	if errors.As(err, &rl) {
		return &channel.RetryAfter{After: max(rl.After, 10*time.Millisecond), Err: errors.New("discord: 429 too many requests")}
	}
	var ae *apiError
	if errors.As(err, &ae) {
		switch ae.Status {
		case http.StatusForbidden, http.StatusNotFound, http.StatusBadRequest:
			return &channel.Undeliverable{Reason: ae.Error()}
		}
		return fmt.Errorf("discord: %w", ae)
	}
	return fmt.Errorf("discord: %w", err)
}

// noMentions is an allowed_mentions that pings nobody.
type noMentions struct{}

// MarshalJSON is {"parse":[]}: no kind of mention is parsed.
func (noMentions) MarshalJSON() ([]byte, error) { return []byte(`{"parse":[]}`), nil }

// reference is a message_reference: the message a reply answers.
type reference struct {
	MessageID       string `json:"message_id"`
	ChannelID       string `json:"channel_id,omitempty"`
	FailIfNotExists bool   `json:"fail_if_not_exists"`
}

// partialAttachment names an uploaded file (files[ID]) in payload_json.
type partialAttachment struct {
	ID       int    `json:"id"`
	Filename string `json:"filename"`
}

// messageCreate is Create Message's body. With enforce_nonce Discord
// checks the nonce against the bot's messages of the past few minutes
// and answers a repeated one with the message it created the first
// time, so a reply sent again (by the replica that took over a turn
// whose replica died right after sending it) is posted once.
type messageCreate struct {
	Content         string              `json:"content"`
	AllowedMentions noMentions          `json:"allowed_mentions"`
	Reference       *reference          `json:"message_reference,omitempty"`
	Attachments     []partialAttachment `json:"attachments,omitempty"`
	Nonce           string              `json:"nonce,omitempty"`
	EnforceNonce    bool                `json:"enforce_nonce,omitempty"`
}

// Send posts m's text, split at 2,000 characters on line boundaries with
// code fences closed and reopened across pieces. Mentions in the text
// ping nobody. Progress of a turn is posted once and then edited.
func (c *Channel) Send(ctx context.Context, m bus.Outbound) (string, error) {
	content, files := c.env.Outgoing(m, MaxFileBytes)
	if len(files) > MaxFiles {
		for _, f := range files[MaxFiles:] {
			content += fmt.Sprintf("\n(%s not attached: a message carries at most %d files)", f.Name, MaxFiles)
		}
		files = files[:MaxFiles]
	}
	pieces := channel.SplitFenced(content, MaxMessageLength)
	if len(pieces) == 0 && len(files) > 0 {
		pieces = []string{""} // the files alone
	}
	post := func(i int, text string) (string, error) {
		body := messageCreate{Content: text}
		var up []file
		described := text // what the piece's nonce is made of
		if i == len(pieces)-1 {
			// The files go with the last piece of the text.
			for n, f := range files {
				up = append(up, file{Name: f.Name, Type: f.Type, Data: f.Data})
				body.Attachments = append(body.Attachments, partialAttachment{ID: n, Filename: f.Name})
				described += fmt.Sprintf("\x00file\x00%s\x00%d", f.Name, len(f.Data))
			}
		}
		if i == 0 && m.ReplyTo != "" && m.Kind != bus.Progress {
			body.Reference = &reference{MessageID: m.ReplyTo, ChannelID: m.ChatID}
		}
		nonce, _ := channel.PieceKey(m, i, described)
		body.Nonce, body.EnforceNonce = nonce, nonce != ""
		rctx, cancel := context.WithTimeout(ctx, c.timeout)
		defer cancel()
		id, err := c.create(rctx, m.ChatID, body, up)
		if err != nil {
			return "", deliveryError(err)
		}
		return id, nil
	}
	edit := func(id, text string) error { return c.Edit(ctx, m.ChatID, id, text) }
	return channel.Deliver(&c.turns, m, pieces, post, edit)
}

// create posts a message, as JSON or, with files, as multipart/form-data,
// and returns its id.
func (c *Channel) create(ctx context.Context, chatID string, body messageCreate, files []file) (string, error) {
	q := request{method: http.MethodPost, path: "/channels/" + url.PathEscape(chatID) + "/messages", route: "POST /channels/{id}/messages", major: chatID}
	var err error
	if len(files) > 0 {
		q, err = multipartRequest(q, body, files)
	} else {
		q, err = jsonRequest(q, body)
	}
	if err != nil {
		return "", err
	}
	var msg message
	if err := c.api.do(ctx, q, &msg); err != nil {
		return "", err
	}
	if msg.ID == "" {
		return "", errors.New("discord: the created message has no id")
	}
	return msg.ID, nil
}

// Edit replaces the text of a message the bot sent.
func (c *Channel) Edit(ctx context.Context, chatID, id, content string) error {
	ps := channel.SplitFenced(content, MaxMessageLength)
	if len(ps) == 0 {
		return nil
	}
	rctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	q, err := jsonRequest(request{method: http.MethodPatch, path: "/channels/" + url.PathEscape(chatID) + "/messages/" + url.PathEscape(id),
		route: "PATCH /channels/{id}/messages/{id}", major: chatID},
		map[string]any{"content": ps[0], "allowed_mentions": noMentions{}})
	if err != nil {
		return err
	}
	if err := c.api.do(rctx, q, nil); err != nil {
		return deliveryError(err)
	}
	return nil
}

// Typing shows "typing…" for a few seconds.
func (c *Channel) Typing(ctx context.Context, chatID string) error {
	rctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	q := request{method: http.MethodPost, path: "/channels/" + url.PathEscape(chatID) + "/typing", route: "POST /channels/{id}/typing", major: chatID}
	if err := c.api.do(rctx, q, nil); err != nil {
		return deliveryError(err)
	}
	return nil
}

// fetchAll downloads a message's attachments through the egress guard
// into the workspace and returns their paths and a note for each.
func (c *Channel) fetchAll(ctx context.Context, m *message) (paths, notes []string) {
	for _, a := range m.Attachments {
		path, err := c.fetch(ctx, m, a)
		if err != nil {
			c.log.Warn("discord: attachment not stored", "name", a.Filename, "message", m.ID, "err", err)
			notes = append(notes, fmt.Sprintf("[attachment %s not received: %v]", a.Filename, err))
			continue
		}
		paths = append(paths, path)
		notes = append(notes, fmt.Sprintf("[attachment: %s]", path))
	}
	return paths, notes
}

func (c *Channel) fetch(ctx context.Context, m *message, a attachment) (string, error) {
	limit := c.cfg.MaxMediaBytes
	if a.Size > limit {
		return "", fmt.Errorf("%w (channels.discord.maxMediaBytes)", &channel.TooLarge{Size: a.Size, Limit: limit})
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.URL, nil)
	if err != nil {
		return "", err
	}
	dir, err := c.env.MediaDir(Name)
	if err != nil {
		return "", err
	}
	path, err := channel.SaveMedia(c.media, req, dir, m.ID+"_"+a.ID+"_"+a.Filename, limit)
	if channel.IsTooLarge(err) {
		return "", fmt.Errorf("%w (channels.discord.maxMediaBytes)", err)
	}
	return path, err
}

var (
	_ channel.Channel  = (*Channel)(nil)
	_ channel.Editor   = (*Channel)(nil)
	_ channel.Typer    = (*Channel)(nil)
	_ channel.Reporter = (*Channel)(nil)
)
