package discord

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/url"
	"runtime"
	"time"

	"github.com/coder/websocket"

	"github.com/nbots/nb/gateway/channel"
)

// Gateway opcodes (Discord's "Gateway Opcodes").
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

// Gateway intents the channel uses.
const (
	intentGuilds         = 1 << 0
	intentGuildMessages  = 1 << 9
	intentDirectMessages = 1 << 12
	intentMessageContent = 1 << 15
)

// fatalClose tells the close codes after which reconnecting cannot help
// (Discord's "Gateway Close Event Codes" that say not to reconnect),
// with what the operator must fix.
func fatalClose(code websocket.StatusCode) (string, bool) {
	switch code {
	case 4004:
		return "authentication failed (4004): check channels.discord.token", true
	case 4010:
		return "invalid shard (4010)", true
	case 4011:
		return "sharding required (4011): the bot is in too many servers for one connection", true
	case 4012:
		return "invalid API version (4012)", true
	case 4013:
		return "invalid intents (4013): check channels.discord.intents", true
	case 4014:
		return "disallowed intents (4014): turn on the Message Content Intent (Developer Portal → Bot), or remove it from channels.discord.intents", true
	}
	return "", false
}

// frame is a Gateway payload.
type frame struct {
	Op int             `json:"op"`
	D  json.RawMessage `json:"d"`
	S  int64           `json:"s,omitempty"`
	T  string          `json:"t,omitempty"`
}

// event is a dispatch handed to the channel, in the order received.
type event struct {
	T string
	D json.RawMessage
}

// gateway is a client of Discord's Gateway. All its state (the session,
// the sequence, the dispatches not yet taken) belongs to the goroutine
// running run; the connection's reader only forwards frames to it.
type gateway struct {
	token   string // without "Bot "
	intents int
	rest    *rest
	log     *slog.Logger
	link    *channel.Conn

	// retry is the first wait after a failed connection (doubled up to a
	// minute); invalidWait is the random wait before identifying again
	// after an Invalid Session (Discord: 1 to 5 seconds).
	retry       time.Duration
	invalidWait func() time.Duration

	session   string // to resume; "" to identify
	resumeURL string
	seq       int64 // the last dispatch's sequence
	// pending are the dispatches read and not yet taken by the channel,
	// at most maxPending (defaultMaxPending if 0): with that many held,
	// the connection is not read until the channel takes half. Discord
	// keeps the rest, and what a slow channel costs the connection (an
	// unread heartbeat ACK ends it) is resumed from seq, replayed.
	pending    []event
	maxPending int
}

// defaultMaxPending is how many dispatches the gateway holds for a
// channel that has not taken them (the QQ channel's buffer is as long).
const defaultMaxPending = 64

// sessionLimit is Discord's session start limit reached: no Identify
// before after.
type sessionLimit struct{ after time.Duration }

func (e *sessionLimit) Error() string {
	return fmt.Sprintf("Discord allows the bot no new session for %s (session_start_limit)", e.after.Round(time.Second))
}

// Errors that end one connection.
var (
	errReconnect = errors.New("the gateway asked to reconnect")
	errZombie    = errors.New("the gateway did not acknowledge a heartbeat")
	errInvalid   = errors.New("the gateway invalidated the session")
)

// run connects, and connects again, until ctx ends or Discord closes
// with a code that reconnecting does not cure; it hands the dispatches
// to events in order.
func (g *gateway) run(ctx context.Context, events chan<- event) error {
	b := channel.Backoff{Base: g.retry, Max: time.Minute, Conn: g.link}
	failed := 0 // connections in a row that did not get as far as ready
	for {
		up, err := g.connect(ctx, events)
		if ctx.Err() != nil {
			return nil
		}
		code := websocket.CloseStatus(err)
		if why, ok := fatalClose(code); ok {
			return fmt.Errorf("discord closed the gateway: %s", why)
		}
		if code == 4007 || code == 4009 {
			g.session = "" // the session cannot be resumed: a new one
		}
		if failed++; up {
			failed = 0
		} else if failed >= 3 && g.session != "" {
			// The resume address keeps failing: a new session, from the
			// address Get Gateway Bot gives.
			g.session, g.resumeURL, g.seq = "", "", 0
		}
		var d time.Duration
		if up {
			// A connection that worked and broke: resume right away.
			b.Reset()
			g.link.Down(fmt.Errorf("the gateway's connection closed: %v", err))
		} else {
			var sl *sessionLimit
			if errors.As(err, &sl) {
				d = b.Failed(err, sl.after)
			} else {
				d = b.Failed(err, 0)
			}
		}
		g.log.Warn("discord: gateway connection ended; reconnecting", "err", err, "retry_in", d, "resume", g.session != "")
		if !g.sleep(ctx, events, d) {
			return nil
		}
	}
}

// sleep waits d (or until ctx ends, false) while still handing pending
// dispatches over.
func (g *gateway) sleep(ctx context.Context, events chan<- event, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		var out chan<- event
		var next event
		if len(g.pending) > 0 {
			out, next = events, g.pending[0]
		}
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
			return true
		case out <- next:
			g.pending = g.pending[1:]
		}
	}
}

// gatewayURL is the Gateway's address with the version and encoding.
func gatewayURL(base string) (string, error) {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "wss" && u.Scheme != "ws") || u.Host == "" {
		return "", fmt.Errorf("the gateway address %q is not a WebSocket URL", base)
	}
	q := u.Query()
	q.Set("v", apiVersion)
	q.Set("encoding", "json")
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// connect opens one connection, identifies or resumes, and serves it
// until it ends; up tells whether it got as far as READY or RESUMED.
func (g *gateway) connect(ctx context.Context, events chan<- event) (up bool, err error) {
	addr := g.resumeURL
	if g.session == "" || addr == "" {
		var gw struct {
			URL   string `json:"url"`
			Limit *struct {
				Remaining  int   `json:"remaining"`
				ResetAfter int64 `json:"reset_after"`
			} `json:"session_start_limit"`
		}
		if err := g.rest.do(ctx, request{method: "GET", path: "/gateway/bot", route: "GET /gateway/bot"}, &gw); err != nil {
			return false, fmt.Errorf("the gateway's address: %w", err)
		}
		if g.session == "" && gw.Limit != nil && gw.Limit.Remaining <= 0 {
			// No new session may start before the limit resets.
			return false, &sessionLimit{after: max(time.Duration(gw.Limit.ResetAfter)*time.Millisecond, time.Second)}
		}
		addr = gw.URL
	}
	addr, err = gatewayURL(addr)
	if err != nil {
		return false, err
	}
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	conn, _, err := websocket.Dial(dctx, addr, &websocket.DialOptions{HTTPHeader: map[string][]string{"User-Agent": {userAgent}}})
	cancel()
	if err != nil {
		return false, fmt.Errorf("connecting to the gateway: %w", err)
	}
	// Never a normal closure (1000, 1001) but at shutdown: Discord would
	// end the session, and the next connection could not resume it.
	defer conn.CloseNow() //nolint:errcheck // done with it
	conn.SetReadLimit(16 << 20)

	frames := make(chan frame)
	cctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	go channel.ReadFrames(cctx, stop, conn, frames, g.log, "discord: a gateway frame")

	var hello frame
	select {
	case hello = <-frames:
	case <-cctx.Done():
		return false, context.Cause(cctx)
	case <-time.After(30 * time.Second):
		return false, errors.New("the gateway did not say Hello in 30 s")
	}
	var h struct {
		Interval int64 `json:"heartbeat_interval"`
	}
	if hello.Op != opHello || json.Unmarshal(hello.D, &h) != nil || h.Interval <= 0 {
		return false, fmt.Errorf("the gateway did not say Hello (op %d)", hello.Op)
	}
	every := time.Duration(h.Interval) * time.Millisecond
	send := func(op int, d any) error {
		return channel.WriteFrame(cctx, conn, map[string]any{"op": op, "d": d})
	}
	identify := func() error {
		return send(opIdentify, map[string]any{
			"token": "Bot " + g.token, "intents": g.intents,
			"properties": map[string]string{"os": runtime.GOOS, "browser": "nb", "device": "nb"},
		})
	}
	if g.session != "" {
		err = send(opResume, map[string]any{"token": "Bot " + g.token, "session_id": g.session, "seq": g.seq})
	} else {
		err = identify()
	}
	if err != nil {
		return false, fmt.Errorf("identifying: %w", err)
	}

	// The first beat after a random part of the interval (so that many
	// clients reconnecting at once do not beat together), then at the
	// interval; a beat not acknowledged by the next one means a dead
	// connection.
	beat := time.NewTimer(time.Duration(rand.Float64() * float64(every)))
	defer beat.Stop()
	acked := true
	heartbeat := func() error {
		var s any
		if g.seq > 0 {
			s = g.seq
		}
		return send(opHeartbeat, s)
	}
	// reidentify is armed after an Invalid Session that cannot be resumed.
	var reidentify <-chan time.Time
	limit := g.maxPending
	if limit <= 0 {
		limit = defaultMaxPending
	}
	paused := false
	for {
		var out chan<- event
		var next event
		if len(g.pending) > 0 {
			out, next = events, g.pending[0]
		}
		// Paused at the limit, read again at half of it: a channel that
		// stays behind logs a pause per half a limit, not per dispatch.
		switch {
		case !paused && len(g.pending) >= limit:
			paused = true
			g.log.Warn("discord: the channel is behind; the gateway is not read until it takes half of the dispatches held (Discord keeps the rest; a resume replays them)", "held", len(g.pending))
		case paused && len(g.pending) <= limit/2:
			paused = false
			g.log.Info("discord: the channel took the dispatches held; reading the gateway again", "held", len(g.pending))
		}
		in := frames
		if paused {
			in = nil
		}
		select {
		case <-ctx.Done():
			// Shutting down: a normal closure ends the session.
			conn.Close(websocket.StatusNormalClosure, "") //nolint:errcheck // leaving
			return up, nil
		case <-cctx.Done():
			return up, context.Cause(cctx)
		case out <- next:
			g.pending = g.pending[1:]
		case <-beat.C:
			if !acked {
				return up, errZombie
			}
			if err := heartbeat(); err != nil {
				return up, fmt.Errorf("heartbeat: %w", err)
			}
			acked = false
			beat.Reset(every)
		case <-reidentify:
			reidentify = nil
			if err := identify(); err != nil {
				return up, fmt.Errorf("identifying: %w", err)
			}
		case f := <-in:
			if f.S > 0 {
				g.seq = f.S
			}
			switch f.Op {
			case opHeartbeat:
				if err := heartbeat(); err != nil {
					return up, fmt.Errorf("heartbeat: %w", err)
				}
			case opHeartbeatAck:
				acked = true
			case opReconnect:
				return up, errReconnect
			case opInvalidSession:
				var resumable bool
				json.Unmarshal(f.D, &resumable) //nolint:errcheck // false unless it says true
				if resumable {
					return up, errInvalid // reconnect and resume
				}
				g.session, g.resumeURL, g.seq = "", "", 0
				reidentify = time.After(g.invalidWait())
			case opDispatch:
				switch f.T {
				case "READY":
					var r struct {
						SessionID string `json:"session_id"`
						ResumeURL string `json:"resume_gateway_url"`
					}
					if err := json.Unmarshal(f.D, &r); err != nil {
						return up, fmt.Errorf("READY: %w", err)
					}
					g.session, g.resumeURL = r.SessionID, r.ResumeURL
					up = true
					g.link.Up()
				case "RESUMED":
					g.log.Info("discord: session resumed")
					up = true
					g.link.Up()
				}
				g.pending = append(g.pending, event{T: f.T, D: f.D})
			}
		}
	}
}

// invalidWait is Discord's wait before identifying after an Invalid
// Session: a random time between 1 and 5 seconds.
func invalidWait() time.Duration {
	return time.Second + rand.N(4*time.Second)
}
