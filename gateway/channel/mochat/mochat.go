// Package mochat is the gateway's Mochat channel (nanobot's "mochat"):
// a claw agent account on a Mochat server, receiving by Socket.IO
// (Engine.IO 4 over a websocket, JSON packets) and, while the socket is
// down or refused, by the claw HTTP API's long polls, as nanobot does:
// /api/claw/sessions/watch per session (with its cursor) and
// /api/claw/groups/panels/messages per panel. Answers go by
// /api/claw/sessions/send and /api/claw/groups/panels/send.
//
// Identity: Inbound.SenderID is the message's author id; ChatID is the
// session id ("session_…") or the panel id; a panel's message carries its
// group. Session cursors are saved, in nanobot's session_cursors.json
// form, only after the messages before them are durable.
package mochat

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/url"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/nbots/nb/gateway/bus"
	"github.com/nbots/nb/gateway/channel"
)

// Name is the channel's configuration name, channels.mochat.
const Name = "mochat"

// MaxMessageLength is where answers are split (Mochat documents no limit;
// its web client shows long messages badly past this).
const MaxMessageLength = 10000

// SeenWindow is how many message ids per session or panel are
// remembered to drop a message delivered twice (nanobot's 2,000).
const SeenWindow = 2000

// MentionConfig is channels.mochat.mention.
type MentionConfig struct {
	// RequireInGroups answers panel messages only when they mention the
	// agent (when replyDelayMode is not "non-mention").
	RequireInGroups bool `json:"requireInGroups"`
}

// GroupRule is one entry of channels.mochat.groups.
type GroupRule struct {
	RequireMention bool `json:"requireMention"`
}

// Config is channels.mochat: nanobot's keys, unchanged.
type Config struct {
	Enabled bool `json:"enabled"`
	// BaseURL is the Mochat server (default https://mochat.io).
	BaseURL string `json:"baseUrl,omitempty"`
	// SocketURL is the Socket.IO server (default BaseURL), SocketPath its
	// path (default /socket.io).
	SocketURL  string `json:"socketUrl,omitempty"`
	SocketPath string `json:"socketPath,omitempty"`
	// SocketDisableMsgpack is accepted; nb always speaks JSON packets.
	SocketDisableMsgpack      bool `json:"socketDisableMsgpack,omitempty"`
	SocketReconnectDelayMs    int  `json:"socketReconnectDelayMs,omitempty"`
	SocketMaxReconnectDelayMs int  `json:"socketMaxReconnectDelayMs,omitempty"`
	SocketConnectTimeoutMs    int  `json:"socketConnectTimeoutMs,omitempty"`
	// RefreshIntervalMs is how often sessions and panels are discovered
	// (with "*") and panels polled while the socket is down.
	RefreshIntervalMs int `json:"refreshIntervalMs,omitempty"`
	WatchTimeoutMs    int `json:"watchTimeoutMs,omitempty"`
	WatchLimit        int `json:"watchLimit,omitempty"`
	RetryDelayMs      int `json:"retryDelayMs,omitempty"`
	// MaxRetryAttempts is accepted; nb reconnects without a limit.
	MaxRetryAttempts int `json:"maxRetryAttempts,omitempty"`
	// ClawToken is the agent's token (X-Claw-Token).
	ClawToken string `json:"clawToken"`
	// AgentUserID is the agent's own user id: its messages are skipped,
	// mentions of it recognised.
	AgentUserID string `json:"agentUserId,omitempty"`
	// Sessions and Panels list the ids received from; "*" adds every one
	// the server lists.
	Sessions  []string             `json:"sessions,omitempty"`
	Panels    []string             `json:"panels,omitempty"`
	AllowFrom []string             `json:"allowFrom"`
	Mention   MentionConfig        `json:"mention,omitempty"`
	Groups    map[string]GroupRule `json:"groups,omitempty"`
	// ReplyDelayMode "non-mention" (the default) holds a panel's messages
	// that do not mention the agent for ReplyDelayMs (default 120,000)
	// and delivers them together; a mention delivers them at once.
	// Anything else delivers each message as it comes.
	ReplyDelayMode string `json:"replyDelayMode,omitempty"`
	ReplyDelayMs   *int   `json:"replyDelayMs,omitempty"`
	// NanobotDir is nanobot's data folder, set by the gateway: its
	// mochat/session_cursors.json is read on the first start.
	NanobotDir string `json:"-"`
}

func ms(v, def int) time.Duration {
	if v <= 0 {
		v = def
	}
	return time.Duration(v) * time.Millisecond
}

// Channel is one Mochat agent account.
type Channel struct {
	// link is the receive loop's connection, for Status.
	link  channel.Conn
	cfg   Config
	env   channel.Env
	log   *slog.Logger
	api   *client
	pacer channel.Pacer
	turns channel.Turns

	replyDelay time.Duration

	mu       sync.Mutex
	sessions map[string]bool
	panels   map[string]bool
	allSess  bool
	allPanel bool
	groupOf  map[string]string // panel → group, learned from messages
	socketUp bool
	// up is closed, and replaced, when socketUp changes.
	up      chan struct{}
	cursors map[string]int64
	started time.Time
	sock    *sock

	// ready and fail are Run's: the first connection, and a final error.
	ready  func()
	fail   func(error)
	events chan event
}

// Status implements channel.Reporter: where the receive loop's
// connection is.
func (c *Channel) Status() channel.Status { return c.link.Status() }

// New checks cfg and builds the channel; nothing connects before Run.
func New(cfg Config, env channel.Env) (*Channel, error) {
	if strings.TrimSpace(cfg.ClawToken) == "" {
		return nil, fmt.Errorf("channels.mochat.clawToken is empty: set it to the agent's claw token")
	}
	if cfg.BaseURL == "" {
		cfg.BaseURL = "https://mochat.io"
	}
	for key, raw := range map[string]string{"baseUrl": cfg.BaseURL, "socketUrl": cfg.SocketURL} {
		if raw == "" {
			continue
		}
		u, err := url.Parse(raw)
		if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
			return nil, fmt.Errorf("channels.mochat.%s %q is not an http or https URL", key, raw)
		}
	}
	if cfg.ReplyDelayMode == "" {
		cfg.ReplyDelayMode = "non-mention"
	}
	delay := 120 * time.Second
	if cfg.ReplyDelayMs != nil {
		delay = time.Duration(max(0, *cfg.ReplyDelayMs)) * time.Millisecond
	}
	c := &Channel{
		cfg: cfg, env: env, log: env.Log().With("channel", Name),
		api:        newClient(cfg),
		pacer:      channel.Pacer{Interval: func(string) time.Duration { return 200 * time.Millisecond }},
		replyDelay: delay,
		sessions:   map[string]bool{}, panels: map[string]bool{}, groupOf: map[string]string{},
		events:  make(chan event, 64),
		up:      make(chan struct{}),
		cursors: map[string]int64{},
	}
	for _, s := range cfg.Sessions {
		if s = strings.TrimSpace(s); s == "*" {
			c.allSess = true
		} else if s != "" {
			c.sessions[s] = true
		}
	}
	for _, p := range cfg.Panels {
		if p = strings.TrimSpace(p); p == "*" {
			c.allPanel = true
		} else if p != "" {
			c.panels[p] = true
		}
	}
	return c, nil
}

// Name is "mochat".
func (c *Channel) Name() string { return Name }

// Capabilities: text only, Markdown as written, no edits.
func (c *Channel) Capabilities() channel.Capabilities {
	return channel.Capabilities{MaxMessageLength: MaxMessageLength, Markdown: channel.Plain}
}

func sorted(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// target is a chat id resolved as nanobot's resolve_mochat_target does.
type target struct {
	id    string
	panel bool
}

func resolveTarget(raw string) target {
	t := strings.TrimSpace(raw)
	lower := strings.ToLower(t)
	forced := false
	for _, p := range []string{"mochat:", "group:", "channel:", "panel:"} {
		if strings.HasPrefix(lower, p) {
			t = strings.TrimSpace(t[len(p):])
			forced = p != "mochat:"
			break
		}
	}
	if t == "" {
		return target{}
	}
	return target{id: t, panel: forced || !strings.HasPrefix(t, "session_")}
}

// Send delivers m's text to its session or panel, split at
// MaxMessageLength; Mochat's claw API takes no files, so a message's
// files are named as not attached.
func (c *Channel) Send(ctx context.Context, m bus.Outbound) (string, error) {
	t := resolveTarget(m.ChatID)
	if t.id == "" {
		return "", &channel.Undeliverable{Reason: "empty mochat target"}
	}
	content := m.Content
	if m.Kind == bus.Message {
		for _, p := range m.Media {
			content += fmt.Sprintf("\n\n(%s not attached: Mochat's claw API takes no files)", p[strings.LastIndex(p, "/")+1:])
		}
	}
	var pieces []string
	for _, p := range channel.SplitFenced(content, MaxMessageLength) {
		if strings.TrimSpace(p) != "" {
			pieces = append(pieces, p)
		}
	}
	post := func(i int, text string) (string, error) {
		if err := c.pacer.Wait(ctx, t.id); err != nil {
			return "", err
		}
		body := map[string]any{"content": text}
		path := "/api/claw/sessions/send"
		if t.panel {
			path = "/api/claw/groups/panels/send"
			body["panelId"] = t.id
			c.mu.Lock()
			g := c.groupOf[t.id]
			c.mu.Unlock()
			if v, ok := m.Metadata["group_id"].(string); ok && v != "" {
				g = v
			}
			if g != "" {
				body["groupId"] = g
			}
		} else {
			body["sessionId"] = t.id
		}
		if m.ReplyTo != "" && i == 0 {
			body["replyTo"] = m.ReplyTo
		}
		var out struct {
			MessageID string `json:"messageId"`
			ID        string `json:"_id"`
		}
		err := c.api.post(ctx, path, body, &out)
		var ra *channel.RetryAfter
		if errorsAs(err, &ra) {
			c.pacer.Defer(t.id, ra.After)
		}
		if err != nil {
			return "", err
		}
		if out.MessageID != "" {
			return out.MessageID, nil
		}
		return out.ID, nil
	}
	edit := func(_ string, text string) error { _, err := post(1, text); return err }
	return channel.Deliver(&c.turns, m, pieces, post, edit)
}

// cursors is nanobot's session_cursors.json.
type cursors struct {
	SchemaVersion int              `json:"schemaVersion"`
	UpdatedAt     string           `json:"updatedAt,omitempty"`
	Cursors       map[string]int64 `json:"cursors"`
}

func parseCursors(s string) map[string]int64 {
	var c cursors
	if json.Unmarshal([]byte(s), &c) != nil || c.Cursors == nil {
		return map[string]int64{}
	}
	return c.Cursors
}
