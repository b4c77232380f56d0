package slack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/coder/websocket"

	"github.com/nbots/nb/gateway/channel"
)

// envelope is a Socket Mode message (https://api.slack.com/apis/socket-mode):
// "hello" when a connection opens, "disconnect" when Slack is about to
// close it, and the envelopes of what the app receives ("events_api",
// "slash_commands", "interactive"), each with an envelope_id the app
// acknowledges, and retry_attempt and retry_reason when Slack sends it
// again because no acknowledgement came.
type envelope struct {
	Type         string          `json:"type"`
	EnvelopeID   string          `json:"envelope_id"`
	Payload      json.RawMessage `json:"payload"`
	RetryAttempt int             `json:"retry_attempt"`
	RetryReason  string          `json:"retry_reason"`
	// Reason is a disconnect's ("warning", "refresh_requested",
	// "link_disabled", …).
	Reason string `json:"reason"`
	// NumConnections is a hello's count of the app's open connections.
	NumConnections int `json:"num_connections"`
}

// ack is the acknowledgement of an envelope: its envelope_id, no
// payload.
type ack struct {
	EnvelopeID string `json:"envelope_id"`
}

// disconnected is a connection Slack ended with a disconnect message.
type disconnected struct{ reason string }

func (e *disconnected) Error() string {
	switch e.reason {
	case "warning":
		return "Slack is about to close the connection (warning): reconnecting"
	case "refresh_requested":
		return "Slack refreshes the connection (refresh_requested): reconnecting"
	case "link_disabled":
		return "Slack closed the connection: Socket Mode is turned off in the app's settings (link_disabled)"
	case "too_many_websockets":
		return "Slack closed the connection: the app has too many Socket Mode connections open (too_many_websockets)"
	}
	return fmt.Sprintf("Slack closed the connection (%s): reconnecting", e.reason)
}

// requested tells a routine disconnect, which Slack asks to be answered
// by reconnecting right away, from one that says something is wrong,
// after which reconnecting waits as after a failure.
func (e *disconnected) requested() bool {
	return e.reason != "link_disabled" && e.reason != "too_many_websockets"
}

// errNoPong is a connection whose ping went unanswered.
var errNoPong = errors.New("slack did not answer a ping: the connection is dead")

// socket is a Socket Mode client: apps.connections.open names a
// WebSocket URL (good for one connection), the connection says hello,
// and then carries envelopes, each handed to handle in order and
// acknowledged once handle returns (Slack sends again what was not
// acknowledged, on this connection or the next). A disconnect message,
// a dropped connection or an unanswered ping ends the connection, and
// another is opened, right away after one that worked, after a doubling
// wait after one that failed.
type socket struct {
	api  *api
	log  *slog.Logger
	link *channel.Conn

	// retry is the first wait after a failed connection (doubled up to
	// a minute).
	retry time.Duration
	// pingEvery is how often the app pings; a ping not answered in as
	// long ends the connection. helloWait bounds the wait for hello.
	pingEvery, helloWait time.Duration

	// hello is called at each connection's hello.
	hello func(numConnections int)
	// handle takes an events_api envelope's payload, in the order
	// received; it returns false when ctx ended before it could take
	// it (the envelope is then not acknowledged).
	handle func(ctx context.Context, payload json.RawMessage) bool
}

// maxFrameBytes bounds a Socket Mode message read.
const maxFrameBytes = 16 << 20

// frameQueue is how many envelopes are read ahead of the one handled:
// the connection is read (and pings answered) while one is handled,
// up to that many.
const frameQueue = 64

// run connects, and connects again, until ctx ends or Slack refuses
// the app-level token (the error returned).
func (s *socket) run(ctx context.Context) error {
	b := channel.Backoff{Base: s.retry, Max: time.Minute, Conn: s.link}
	for {
		up, err := s.connect(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if f := final(err); f != nil {
			return f
		}
		var d time.Duration
		var dc *disconnected
		if up && (!errors.As(err, &dc) || dc.requested()) {
			// A connection that worked and ended: the next right away.
			b.Reset()
			s.link.Down(err)
		} else {
			var rl *rateLimited
			var after time.Duration
			if errors.As(err, &rl) {
				after = rl.After
			}
			d = b.Failed(err, after)
		}
		if dc != nil && dc.requested() {
			s.log.Info("slack: "+err.Error(), "retry_in", d)
		} else {
			s.log.Warn("slack: socket mode connection ended; reconnecting", "err", err, "retry_in", d)
		}
		if !channel.Sleep(ctx, d) {
			return nil
		}
	}
}

// connect opens one connection and serves it until it ends; up tells
// whether it got as far as hello.
func (s *socket) connect(ctx context.Context) (up bool, err error) {
	addr, err := s.api.connectionsOpen(ctx)
	if err != nil {
		return false, err
	}
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	conn, _, err := websocket.Dial(dctx, addr, &websocket.DialOptions{HTTPClient: s.api.hc})
	cancel()
	if err != nil {
		// Without the URL: its ticket opens a connection.
		return false, fmt.Errorf("connecting to Socket Mode: %w", redact(err))
	}
	defer conn.CloseNow() //nolint:errcheck // done with it
	conn.SetReadLimit(maxFrameBytes)

	cctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	frames := make(chan envelope, frameQueue)
	go channel.ReadFrames(cctx, stop, conn, frames, s.log, "slack: a socket mode message")
	go ping(cctx, stop, conn, s.pingEvery)

	helloBy := time.NewTimer(s.helloWait)
	defer helloBy.Stop()
	for {
		select {
		case <-ctx.Done():
			return up, nil
		case <-cctx.Done():
			return up, ended(cctx)
		case <-helloBy.C:
			if !up {
				return false, fmt.Errorf("slack did not say hello in %s", s.helloWait)
			}
		case e := <-frames:
			switch e.Type {
			case "hello":
				up = true
				s.hello(e.NumConnections)
				continue
			case "disconnect":
				return up, &disconnected{reason: e.Reason}
			}
			if e.EnvelopeID == "" {
				s.log.Debug("slack: a socket mode message without an envelope ignored", "type", e.Type)
				continue
			}
			if e.RetryAttempt > 0 {
				s.log.Debug("slack: an envelope sent again", "envelope", e.EnvelopeID, "retry_attempt", e.RetryAttempt, "retry_reason", e.RetryReason)
			}
			// Events are carried; slash commands, interactions and what
			// else comes are not, and are acknowledged so that Slack
			// stops sending them.
			if e.Type == "events_api" && !s.handle(ctx, e.Payload) {
				return up, nil
			}
			if err := channel.WriteFrame(cctx, conn, ack{EnvelopeID: e.EnvelopeID}); err != nil {
				if c := ended(cctx); c != nil && !errors.Is(c, context.Canceled) {
					err = c
				}
				return up, fmt.Errorf("acknowledging an envelope: %w", err)
			}
		}
	}
}

// ended is why the connection's context ended: the reader's failure
// (Slack closing the socket said so), an unanswered ping, or nil.
func ended(cctx context.Context) error {
	err := context.Cause(cctx)
	if websocket.CloseStatus(err) != -1 {
		return fmt.Errorf("slack closed the connection: %w", err)
	}
	return err
}

// ping pings every, and ends the connection when a ping is not answered
// within as long.
func ping(ctx context.Context, stop context.CancelCauseFunc, conn *websocket.Conn, every time.Duration) {
	if every <= 0 {
		return
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		pctx, cancel := context.WithTimeout(ctx, every)
		err := conn.Ping(pctx)
		cancel()
		if err != nil && ctx.Err() == nil {
			stop(errNoPong)
			return
		}
	}
}
