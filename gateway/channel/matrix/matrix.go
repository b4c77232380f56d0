// Package matrix is the gateway's Matrix channel: a bot account on a
// homeserver that receives by the client-server API's /sync long poll, its
// since token saved after every batch the gateway has made durable (a
// restart neither replays nor skips; a gap the server left out of a
// limited timeline is filled from /messages), joins the rooms people in
// allowFrom invite it to, and answers with m.room.message (m.text, body
// and HTML formatted_body), streamed progress by m.replace edits.
// Attachments (m.image, m.file, m.audio, m.video) are fetched from the
// homeserver's authenticated media API into the workspace.
//
// End-to-end encryption is not supported: encrypted rooms are not read,
// which the channel says when it starts and when it sees one.
//
// Identity: Inbound.SenderID is the sender's MXID ("@alice:example.org");
// ChatID is the room id ("!abc:example.org").
package matrix

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nbots/nb/gateway/access"
	"github.com/nbots/nb/gateway/channel"
	"github.com/nbots/nb/internal/retryafter"
)

// Name is the channel's configuration name, channels.matrix.
const Name = "matrix"

// MaxMessageLength bounds one message's body in characters: an event may not
// exceed 65,536 bytes, and the HTML formatted_body travels beside the body.
const MaxMessageLength = 8000

// DefaultMaxMediaBytes bounds one inbound attachment (nanobot's 20 MB).
const DefaultMaxMediaBytes = 20 << 20

// timelineLimit is how many events per room one /sync returns; a room
// with more since the last sync is paged back through /messages.
const timelineLimit = 50

// Config is channels.matrix (nanobot's keys, plus pollTimeout).
type Config struct {
	Enabled bool `json:"enabled"`
	// Homeserver is the homeserver's base URL (default https://matrix.org).
	Homeserver string `json:"homeserver"`
	// AccessToken is the bot account's access token.
	AccessToken string `json:"accessToken"`
	// UserID is the bot's MXID; when set it must be the token's.
	UserID string `json:"userId"`
	// DeviceID is the token's device (informational).
	DeviceID string `json:"deviceId,omitempty"`
	// E2EEEnabled is nanobot's switch for end-to-end encryption, which nb
	// does not support: encrypted rooms are never read.
	E2EEEnabled *bool `json:"e2eeEnabled,omitempty"`
	// MaxMediaBytes bounds one inbound attachment (DefaultMaxMediaBytes if 0).
	MaxMediaBytes int64 `json:"maxMediaBytes,omitempty"`
	// AllowFrom lists the MXIDs that may talk to the bot and invite it
	// into rooms; the gateway checks it against SenderID.
	AllowFrom []string `json:"allowFrom"`
	// GroupPolicy is "mention" (the default: in rooms of more than two
	// members, answer only messages that mention the bot), "open", or
	// "allowlist" (every message of the rooms in GroupAllowFrom, none
	// elsewhere).
	GroupPolicy    string   `json:"groupPolicy,omitempty"`
	GroupAllowFrom []string `json:"groupAllowFrom,omitempty"`
	// AllowRoomMentions counts an @room mention as a mention of the bot.
	AllowRoomMentions bool `json:"allowRoomMentions,omitempty"`
	// PollTimeout is /sync's long-poll timeout in seconds (30 if 0).
	PollTimeout int `json:"pollTimeout,omitempty"`
}

// Channel is one Matrix bot account.
type Channel struct {
	// link is the receive loop's connection, for Status.
	link  channel.Conn
	cfg   Config
	env   channel.Env
	log   *slog.Logger
	cli   *client
	base  *url.URL
	media *http.Client
	pacer channel.Pacer
	turns channel.Turns

	// retryBase and retryMax bound the wait between failed syncs.
	retryBase, retryMax time.Duration
	// requestTimeout bounds every call but /sync.
	requestTimeout time.Duration
	// pollDeadline bounds a /sync: past it the long poll hangs.
	pollDeadline time.Duration

	mu        sync.Mutex
	me        string
	members   map[string]int // joined members per room
	encrypted map[string]bool
}

// Status implements channel.Reporter: where the receive loop's
// connection is.
func (c *Channel) Status() channel.Status { return c.link.Status() }

// New checks cfg and builds the channel; nothing connects before Run.
func New(cfg Config, env channel.Env) (*Channel, error) {
	if strings.TrimSpace(cfg.AccessToken) == "" {
		return nil, errors.New("channels.matrix.accessToken is empty: log the bot account in (POST /_matrix/client/v3/login) and put its access_token there")
	}
	if strings.ContainsAny(cfg.AccessToken, " \t\r\n") {
		return nil, errors.New("channels.matrix.accessToken is not an access token (it holds white space)")
	}
	if cfg.UserID != "" {
		if !validUserID(cfg.UserID) {
			return nil, fmt.Errorf("channels.matrix.userId %q is not a Matrix user id (@name:server)", cfg.UserID)
		}
	}
	switch cfg.GroupPolicy {
	case "", "mention", "open", "allowlist":
	default:
		return nil, fmt.Errorf("channels.matrix.groupPolicy is %q: use \"mention\", \"open\" or \"allowlist\"", cfg.GroupPolicy)
	}
	if cfg.Homeserver == "" {
		cfg.Homeserver = "https://matrix.org"
	}
	base, err := url.Parse(strings.TrimRight(cfg.Homeserver, "/"))
	if err != nil || base.Host == "" || (base.Scheme != "http" && base.Scheme != "https") || base.User != nil || base.RawQuery != "" {
		return nil, fmt.Errorf("channels.matrix.homeserver %q is not an http or https URL", cfg.Homeserver)
	}
	if cfg.MaxMediaBytes <= 0 {
		cfg.MaxMediaBytes = DefaultMaxMediaBytes
	}
	if cfg.PollTimeout <= 0 {
		cfg.PollTimeout = 30
	}
	cli := newClient(base, cfg.AccessToken, &http.Client{Transport: &http.Transport{
		Proxy:                 nil,
		ForceAttemptHTTP2:     true,
		MaxIdleConnsPerHost:   64,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: time.Duration(cfg.PollTimeout+15) * time.Second,
	}})

	c := &Channel{
		cfg:  cfg,
		env:  env,
		log:  env.Log().With("channel", Name),
		cli:  cli,
		base: base,
		// The operator named the homeserver: its media may be fetched even
		// from a private or loopback address; other hosts stay refused.
		media:          env.MediaClient(base.Hostname()),
		retryBase:      500 * time.Millisecond,
		retryMax:       30 * time.Second,
		requestTimeout: 30 * time.Second,
		pollDeadline:   time.Duration(cfg.PollTimeout+15) * time.Second,
		me:             cfg.UserID,
		members:        map[string]int{},
		encrypted:      map[string]bool{},
	}
	return c, nil
}

// validUserID tells whether s is a user id, @localpart:server: a
// localpart of printable ASCII but ':' (the spec's historical grammar), a
// server name of a host name, IPv4 or [IPv6] literal and an optional
// port, 255 bytes at most.
func validUserID(s string) bool {
	local, server, ok := strings.Cut(strings.TrimPrefix(s, "@"), ":")
	if !ok || !strings.HasPrefix(s, "@") || len(s) > 255 || local == "" {
		return false
	}
	for i := 0; i < len(local); i++ {
		if local[i] < 0x21 || local[i] > 0x7e {
			return false
		}
	}
	host := server
	if i := strings.LastIndexByte(server, ':'); i >= 0 && !strings.HasSuffix(server, "]") {
		port := server[i+1:]
		if port == "" || len(port) > 5 || strings.Trim(port, "0123456789") != "" {
			return false
		}
		host = server[:i]
	}
	if v6, ok := strings.CutPrefix(host, "["); ok {
		v6, ok = strings.CutSuffix(v6, "]")
		return ok && v6 != "" && strings.Trim(v6, "0123456789abcdefABCDEF:.") == ""
	}
	if host == "" {
		return false
	}
	for _, r := range host {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '.') {
			return false
		}
	}
	return true
}

// Name is "matrix".
func (c *Channel) Name() string { return Name }

// Capabilities: HTML from Markdown, edits, typing, media.
func (c *Channel) Capabilities() channel.Capabilities {
	return channel.Capabilities{MaxMessageLength: MaxMessageLength, Markdown: channel.CommonMark, Edits: true, Typing: true, Media: true}
}

// final tells the errors retrying cannot cure: the token was refused.
func final(err error) error {
	re := asAPIError(err)
	if re != nil && (re.Code == "M_UNKNOWN_TOKEN" || re.Code == "M_MISSING_TOKEN" || re.Code == "M_USER_DEACTIVATED") {
		return fmt.Errorf("matrix refused the access token (%d %s: %s): check channels.matrix.accessToken", re.Status, re.Code, re.Message)
	}
	return nil
}

// retryAfter is the wait a 429 M_LIMIT_EXCEEDED asks for: retry_after_ms,
// else the Retry-After header (seconds or an HTTP-date), else fallback;
// at most maxRetryAfter.
func retryAfter(err error, fallback time.Duration) (time.Duration, bool) {
	re := asAPIError(err)
	if re == nil || re.Status != http.StatusTooManyRequests {
		return 0, false
	}
	if re.RetryAfterMS > 0 {
		return retryafter.Seconds(float64(re.RetryAfterMS)/1000, fallback, maxRetryAfter), true
	}
	return retryafter.Header(re.RetryAfter, time.Now(), fallback, maxRetryAfter), true
}

// maxRetryAfter caps the wait a homeserver can ask for.
const maxRetryAfter = time.Hour

// Run checks the token (whoami), then syncs until ctx ends.
func (c *Channel) Run(ctx context.Context, in channel.Inbox, ready func()) error {
	cursor, since, err := c.env.Position(ctx, Name)
	if err != nil {
		return fmt.Errorf("matrix: %w", err)
	}
	b := &channel.Backoff{Base: c.retryBase, Max: c.retryMax, Conn: &c.link}
	var who string
	ok, err := channel.Retry(ctx, c.log, "matrix: connecting", b, func(ctx context.Context) error {
		rctx, cancel := context.WithTimeout(ctx, c.requestTimeout)
		defer cancel()
		var err error
		who, err = c.cli.whoami(rctx)
		return err
	}, classify)
	if !ok {
		return err
	}
	if c.cfg.UserID != "" && who != c.cfg.UserID {
		return fmt.Errorf("matrix: the access token is %s's, not channels.matrix.userId %s", who, c.cfg.UserID)
	}
	c.mu.Lock()
	c.me = who
	c.mu.Unlock()
	c.log.Info("matrix: connected", "user", c.me, "homeserver", c.base.Host, "resumed", since != "")
	c.log.Warn("matrix: end-to-end encryption is not supported: messages in encrypted rooms are not read or answered; talk to the bot in unencrypted rooms (channels.matrix.e2eeEnabled has no effect)")
	first := since == ""
	if !first {
		ready()
	}
	for {
		timeout := c.cfg.PollTimeout * 1000
		if first {
			timeout = 0
		}
		var resp *syncResponse
		ok, err := channel.Retry(ctx, c.log, "matrix: sync failed", b, func(ctx context.Context) error {
			pctx, cancel := context.WithTimeout(ctx, c.pollDeadline)
			defer cancel()
			var err error
			resp, err = c.cli.sync(pctx, since, timeout, syncFilter)
			return err
		}, classify)
		if !ok {
			return err
		}
		c.link.Up()
		if first {
			// A first start answers nothing written before it: the
			// rooms' history is not a queue of questions.
			c.log.Info("matrix: first start: earlier messages are not answered")
			c.handleInvites(ctx, resp)
			c.noteRooms(resp, false)
			// Ready once there is a position: what comes after is answered.
			ready()
		} else if !c.handle(ctx, in, resp, since) {
			return nil
		}
		first = false
		if resp.NextBatch != "" && resp.NextBatch != since {
			since = resp.NextBatch
			if err := cursor.Save(ctx, since); err != nil {
				// The bus drops the replay a stale token would cause.
				c.log.Error("matrix: saving the sync token", "err", err)
			}
		}
	}
}

// syncFilter is an inline filter: room timelines of up to timelineLimit
// events, no presence.
var syncFilter = fmt.Sprintf(`{"presence":{"not_types":["*"]},"room":{"timeline":{"limit":%d},"ephemeral":{"not_types":["*"]}}}`, timelineLimit)

// classify sorts a failed call for channel.Retry: a refused token is
// final; a 429 waits its retry_after_ms.
func classify(err error) (error, time.Duration) {
	d, _ := retryAfter(err, 0)
	return final(err), d
}

// allowed tells whether the MXID is in allowFrom (the gateway's own
// matching), so that its invitations are accepted.
func (c *Channel) allowed(user string) bool {
	return access.Matches(Name, c.cfg.AllowFrom, user)
}

// handleInvites joins the rooms allowed people invited the bot to.
func (c *Channel) handleInvites(ctx context.Context, resp *syncResponse) {
	rooms := make([]string, 0, len(resp.Rooms.Invite))
	for r := range resp.Rooms.Invite {
		rooms = append(rooms, r)
	}
	slices.Sort(rooms)
	for _, room := range rooms {
		inv := resp.Rooms.Invite[room]
		var inviter string
		encrypted := false
		for _, e := range inv.State.Events {
			switch {
			case e.Type == typeMember && e.StateKey != nil && *e.StateKey == c.me:
				inviter = e.Sender
			case e.Type == typeEncryption:
				encrypted = true
			}
		}
		if !c.allowed(inviter) {
			c.log.Info("matrix: invitation not accepted: the inviter is not in channels.matrix.allowFrom", "room", room, "inviter", inviter)
			continue
		}
		if encrypted {
			c.log.Warn("matrix: invited to an end-to-end encrypted room: its messages cannot be read (encryption is not supported)", "room", room, "inviter", inviter)
		}
		c.join(ctx, room)
	}
}

// join joins the room, retrying transient failures a few times.
func (c *Channel) join(ctx context.Context, room string) {
	tries := 0
	ok, err := channel.Retry(ctx, c.log, "matrix: joining a room", &channel.Backoff{Base: c.retryBase, Max: c.retryMax}, func(ctx context.Context) error {
		tries++
		rctx, cancel := context.WithTimeout(ctx, c.requestTimeout)
		defer cancel()
		return c.cli.join(rctx, room)
	}, func(err error) (error, time.Duration) {
		if re := asAPIError(err); tries >= 5 || (re != nil && re.Code == "M_FORBIDDEN") {
			return err, 0
		}
		return classify(err)
	})
	switch {
	case ok:
		c.log.Info("matrix: joined", "room", room)
	case err != nil:
		c.log.Error("matrix: joining a room", "room", room, "err", err)
	}
}

// noteRooms records each joined room's member count and encryption from
// the sync's summaries and timelines.
func (c *Channel) noteRooms(resp *syncResponse, warn bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for room, jr := range resp.Rooms.Join {
		if n := jr.Summary.JoinedMemberCount; n != nil {
			c.members[room] = *n
		}
		for _, list := range [][]*clientEvent{jr.State.Events, jr.Timeline.Events} {
			for _, e := range list {
				if e.Type == typeEncryption && e.StateKey != nil && !c.encrypted[room] {
					c.encrypted[room] = true
					if warn {
						c.log.Warn("matrix: a room turned on end-to-end encryption: its messages can no longer be read", "room", room)
					}
				}
			}
		}
	}
	for room := range resp.Rooms.Leave {
		delete(c.members, room)
	}
}

// handle publishes a sync's messages, room by room in timeline order,
// first filling any gap the server left out of a limited timeline. It
// reports false only when ctx ended.
func (c *Channel) handle(ctx context.Context, in channel.Inbox, resp *syncResponse, since string) bool {
	c.handleInvites(ctx, resp)
	c.noteRooms(resp, true)
	rooms := make([]string, 0, len(resp.Rooms.Join))
	for r := range resp.Rooms.Join {
		rooms = append(rooms, r)
	}
	slices.Sort(rooms)
	for _, room := range rooms {
		jr := resp.Rooms.Join[room]
		events := jr.Timeline.Events
		if jr.Timeline.Limited && jr.Timeline.PrevBatch != "" {
			gap, ok := c.backfill(ctx, room, jr.Timeline.PrevBatch, since)
			if !ok {
				return false
			}
			events = append(gap, events...)
		}
		for _, e := range events {
			e.RoomID = room
			m, ok := c.inbound(ctx, in, e)
			if ok && !channel.PublishDurably(ctx, in, m, c.log, c.retryBase) {
				return false
			}
		}
	}
	return true
}

// backfill pages back from the timeline's prev_batch to the previous
// sync's token and returns the missed events oldest first. It retries
// until it has them (or ctx ends): the sync token must not move past
// messages the gateway never saw.
func (c *Channel) backfill(ctx context.Context, room string, from, to string) ([]*clientEvent, bool) {
	var back []*clientEvent
	b := &channel.Backoff{Base: c.retryBase, Max: c.retryMax}
	for from != "" {
		var page *messagesResponse
		ok, err := channel.Retry(ctx, c.log, "matrix: filling a gap in a room's timeline", b, func(ctx context.Context) error {
			rctx, cancel := context.WithTimeout(ctx, c.requestTimeout)
			defer cancel()
			var err error
			page, err = c.cli.messages(rctx, room, from, to, 100)
			return err
		}, func(err error) (error, time.Duration) {
			if re := asAPIError(err); re != nil && re.Code == "M_FORBIDDEN" {
				return err, 0
			}
			return classify(err)
		})
		if err != nil {
			c.log.Warn("matrix: a gap in a room's timeline cannot be filled", "room", room, "err", err)
			break
		}
		if !ok {
			return nil, false
		}
		back = append(back, page.Chunk...)
		if page.End == "" || len(page.Chunk) == 0 || page.End == from {
			break
		}
		from = page.End
	}
	slices.Reverse(back)
	c.log.Info("matrix: filled a gap in a room's timeline", "room", room, "events", len(back))
	return back, true
}
