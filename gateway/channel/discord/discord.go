// Package discord is the gateway's Discord channel: a bot connected to
// Discord's Gateway (with discordgo, which heartbeats and resumes a
// dropped connection with its session id and sequence) that answers
// through the REST API, honouring the rate-limit headers of each
// channel's bucket. It remembers the last message it handed over in each
// channel, so that after a restart (a new session, which Discord does
// not replay) it fetches what was written meanwhile: no replay, no gap.
//
// Identity: Inbound.SenderID is the author's user id (a snowflake,
// "123456789012345678"); ChatID is the channel id.
package discord

import (
	"bytes"
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

	"github.com/bwmarrin/discordgo"
	"github.com/gorilla/websocket"

	"github.com/nbots/nb/gateway/bus"
	"github.com/nbots/nb/gateway/channel"
)

// Name is the channel's configuration name, channels.discord.
const Name = "discord"

// MaxMessageLength is Discord's limit on a message's content.
const MaxMessageLength = 2000

// DefaultIntents are nanobot's: guilds, guild messages, direct messages
// and message content (37377).
const DefaultIntents = discordgo.IntentsGuilds | discordgo.IntentsGuildMessages | discordgo.IntentsDirectMessages | discordgo.IntentsMessageContent

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
	env     channel.Env
	log     *slog.Logger
	s       *discordgo.Session
	media   *http.Client
	turns   channel.Turns
	timeout time.Duration

	mu     sync.Mutex
	me     string
	last   map[string]uint64 // channel -> last message handed over
	cursor channel.Cursor
}

// Status implements channel.Reporter: where the receive loop's
// connection is.
func (c *Channel) Status() channel.Status { return c.link.Status() }

// rewrite sends discord.com's requests to another server.
type rewrite struct {
	base *url.URL
	next http.RoundTripper
}

func (r rewrite) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Host == "discord.com" {
		req = req.Clone(req.Context())
		req.URL.Scheme, req.URL.Host = r.base.Scheme, r.base.Host
		req.Host = r.base.Host
	}
	return r.next.RoundTrip(req)
}

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
	s, err := discordgo.New("Bot " + tok)
	if err != nil {
		return nil, fmt.Errorf("discord: %w", err)
	}
	if cfg.MaxMediaBytes <= 0 {
		cfg.MaxMediaBytes = 20 << 20
	}
	var transport http.RoundTripper = http.DefaultTransport
	var mediaHosts []string
	if cfg.APIBase != "" {
		u, err := url.Parse(cfg.APIBase)
		if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
			return nil, fmt.Errorf("channels.discord.apiBase %q is not an http or https URL", cfg.APIBase)
		}
		transport = rewrite{base: u, next: http.DefaultTransport}
		mediaHosts = append(mediaHosts, u.Hostname()) // the operator's server: its files may be fetched
	}
	s.Client = &http.Client{Transport: transport, Timeout: 30 * time.Second}
	s.ShouldRetryOnRateLimit = false // the gateway waits, per destination
	s.SyncEvents = true              // in order, one at a time
	s.LogLevel = -1                  // its messages go through our logger
	s.Identify.Intents = DefaultIntents
	if cfg.Intents != 0 {
		s.Identify.Intents = discordgo.Intent(cfg.Intents)
	}
	return &Channel{cfg: cfg, env: env, log: env.Log().With("channel", Name), s: s, media: env.MediaClient(mediaHosts...), timeout: 30 * time.Second, last: map[string]uint64{}}, nil
}

// Name is "discord".
func (c *Channel) Name() string { return Name }

// Capabilities: 2,000 characters of Discord's Markdown, edits, typing,
// attachments.
func (c *Channel) Capabilities() channel.Capabilities {
	return channel.Capabilities{MaxMessageLength: MaxMessageLength, Markdown: channel.CommonMark, Edits: true, Typing: true, Media: true}
}

func status(err error) int {
	var re *discordgo.RESTError
	if errors.As(err, &re) && re.Response != nil {
		return re.Response.StatusCode
	}
	return 0
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
	me, err := c.s.User("@me", discordgo.WithContext(ctx))
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		if status(err) == http.StatusUnauthorized {
			return errors.New("discord refused the bot token (401 Unauthorized): check channels.discord.token")
		}
		return fmt.Errorf("discord: %w", err)
	}
	c.mu.Lock()
	c.me = me.ID
	c.mu.Unlock()
	var once sync.Once
	c.s.AddHandler(func(_ *discordgo.Session, r *discordgo.Ready) {
		// A new session (the first, or after an invalid one): Discord does
		// not replay what was written without us; fetch it.
		c.catchUp(ctx, in)
		c.link.Up()
		once.Do(ready)
	})
	c.s.AddHandler(func(_ *discordgo.Session, r *discordgo.Resumed) {
		c.log.Info("discord: session resumed")
		c.link.Up()
	})
	c.s.AddHandler(func(_ *discordgo.Session, m *discordgo.MessageCreate) {
		c.handle(ctx, in, m.Message)
	})
	c.s.AddHandler(func(_ *discordgo.Session, d *discordgo.Disconnect) {
		c.log.Warn("discord: gateway disconnected; reconnecting")
		c.link.Down(errors.New("the gateway's connection closed: reconnecting"))
	})
	wait := time.Second
	for {
		err := c.s.Open()
		if err == nil {
			break
		}
		var ce *websocket.CloseError
		if errors.As(err, &ce) && ce.Code == 4004 {
			return errors.New("discord closed the gateway: authentication failed (4004): check channels.discord.token")
		}
		c.log.Warn("discord: connecting to the gateway", "err", err)
		c.link.Down(err)
		if !channel.Sleep(ctx, wait) {
			return nil
		}
		wait = min(wait*2, time.Minute)
	}
	<-ctx.Done()
	c.s.Close() //nolint:errcheck // shutting down
	return nil
}

// handle publishes a message once, in order, and records its id.
func (c *Channel) handle(ctx context.Context, in channel.Inbox, m *discordgo.Message) {
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
	in2 := bus.Inbound{
		Channel: Name, ID: m.ID, SenderID: m.Author.ID, ChatID: m.ChannelID, Content: content,
		Timestamp: m.Timestamp.UTC(),
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
			ms, err := c.s.ChannelMessages(ch, 100, "", strconv.FormatUint(after, 10), "", discordgo.WithContext(ctx))
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
	var rl *discordgo.RateLimitError
	if errors.As(err, &rl) && rl.RateLimit != nil && rl.TooManyRequests != nil {
		return &channel.RetryAfter{After: max(rl.RetryAfter, 10*time.Millisecond), Err: errors.New("discord: 429 too many requests")}
	}
	var re *discordgo.RESTError
	if errors.As(err, &re) && re.Response != nil {
		reason := re.Response.Status
		if re.Message != nil && re.Message.Message != "" {
			reason = fmt.Sprintf("%d %s (code %d)", re.Response.StatusCode, re.Message.Message, re.Message.Code)
		}
		switch re.Response.StatusCode {
		case http.StatusForbidden, http.StatusNotFound, http.StatusBadRequest:
			return &channel.Undeliverable{Reason: reason}
		}
		return fmt.Errorf("discord: %s", reason)
	}
	return fmt.Errorf("discord: %w", err)
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
		send := &discordgo.MessageSend{Content: text, AllowedMentions: &discordgo.MessageAllowedMentions{Parse: []discordgo.AllowedMentionType{}}}
		described := text // what the piece's nonce is made of
		if i == len(pieces)-1 {
			// The files go with the last piece of the text.
			for _, f := range files {
				send.Files = append(send.Files, &discordgo.File{Name: f.Name, ContentType: f.Type, Reader: bytes.NewReader(f.Data)})
				described += fmt.Sprintf("\x00file\x00%s\x00%d", f.Name, len(f.Data))
			}
		}
		if i == 0 && m.ReplyTo != "" && m.Kind != bus.Progress {
			send.Reference = &discordgo.MessageReference{MessageID: m.ReplyTo, ChannelID: m.ChatID, FailIfNotExists: new(bool)}
		}
		nonce, _ := channel.PieceKey(m, i, described)
		rctx, cancel := context.WithTimeout(ctx, c.timeout)
		defer cancel()
		id, err := c.create(rctx, m.ChatID, send, nonce)
		if err != nil {
			return "", deliveryError(err)
		}
		return id, nil
	}
	edit := func(id, text string) error { return c.Edit(ctx, m.ChatID, id, text) }
	return channel.Deliver(&c.turns, m, pieces, post, edit)
}

// messageCreate is Create Message's body: discordgo's MessageSend and
// the nonce it has no field for. With enforce_nonce Discord checks the
// nonce against the bot's messages of the past few minutes and answers a
// repeated one with the message it created the first time, so a reply
// sent again (by the replica that took over a turn whose replica died
// right after sending it) is posted once.
type messageCreate struct {
	*discordgo.MessageSend
	Nonce        string `json:"nonce,omitempty"`
	EnforceNonce bool   `json:"enforce_nonce,omitempty"`
}

// create posts a message (as discordgo's ChannelMessageSendComplex does,
// with the nonce) and returns its id.
func (c *Channel) create(ctx context.Context, chatID string, send *discordgo.MessageSend, nonce string) (string, error) {
	body := messageCreate{MessageSend: send, Nonce: nonce, EnforceNonce: nonce != ""}
	endpoint := discordgo.EndpointChannelMessages(chatID)
	var (
		resp []byte
		err  error
	)
	if len(send.Files) > 0 {
		ct, b, merr := discordgo.MultipartBodyWithJSON(body, send.Files)
		if merr != nil {
			return "", merr
		}
		resp, err = c.s.RequestRaw(http.MethodPost, endpoint, ct, b, endpoint, 0, discordgo.WithContext(ctx))
	} else {
		resp, err = c.s.RequestWithBucketID(http.MethodPost, endpoint, body, endpoint, discordgo.WithContext(ctx))
	}
	if err != nil {
		return "", err
	}
	var msg discordgo.Message
	if err := json.Unmarshal(resp, &msg); err != nil {
		return "", fmt.Errorf("discord: the created message: %w", err)
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
	_, err := c.s.ChannelMessageEditComplex(&discordgo.MessageEdit{ID: id, Channel: chatID, Content: &ps[0],
		AllowedMentions: &discordgo.MessageAllowedMentions{Parse: []discordgo.AllowedMentionType{}}}, discordgo.WithContext(rctx))
	if err != nil {
		return deliveryError(err)
	}
	return nil
}

// Typing shows "typing…" for a few seconds.
func (c *Channel) Typing(ctx context.Context, chatID string) error {
	rctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	if err := c.s.ChannelTyping(chatID, discordgo.WithContext(rctx)); err != nil {
		return deliveryError(err)
	}
	return nil
}

// fetchAll downloads a message's attachments through the egress guard
// into the workspace and returns their paths and a note for each.
func (c *Channel) fetchAll(ctx context.Context, m *discordgo.Message) (paths, notes []string) {
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

func (c *Channel) fetch(ctx context.Context, m *discordgo.Message, a *discordgo.MessageAttachment) (string, error) {
	limit := c.cfg.MaxMediaBytes
	if int64(a.Size) > limit {
		return "", fmt.Errorf("%w (channels.discord.maxMediaBytes)", &channel.TooLarge{Size: int64(a.Size), Limit: limit})
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
	_ channel.Channel = (*Channel)(nil)
	_ channel.Editor  = (*Channel)(nil)
	_ channel.Typer   = (*Channel)(nil)
)
