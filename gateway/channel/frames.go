package channel

import (
	"context"
	"encoding/json"
	"log/slog"
	"time"

	"github.com/coder/websocket"
)

// ReadFrames decodes conn's messages as JSON into frames, in order, until
// reading fails, and then ends the connection's context with the failure
// (stop). A message that is not JSON is logged (as a "what" that is not
// JSON) and skipped. It returns when ctx ends; it is the reader of the
// platforms' WebSocket connections (Discord's Gateway, Slack's Socket
// Mode), run while the connection's owner handles the frames read, so
// that the connection's pings are answered meanwhile.
func ReadFrames[T any](ctx context.Context, stop context.CancelCauseFunc, conn *websocket.Conn, frames chan<- T, log *slog.Logger, what string) {
	for {
		_, b, err := conn.Read(ctx)
		if err != nil {
			stop(err)
			return
		}
		var f T
		if err := json.Unmarshal(b, &f); err != nil {
			log.Warn(what+" that is not JSON ignored", "bytes", len(b))
			continue
		}
		select {
		case frames <- f:
		case <-ctx.Done():
			return
		}
	}
}

// WriteFrame sends v as one JSON text message (json.Marshal's bytes, with
// no newline after them, as wsjson.Write would add), within 10 s: the
// frames nb sends to the platforms' WebSocket APIs (Discord, Slack,
// DingTalk, QQ, WeCom) are small, and a write that takes longer is a
// connection that is gone.
func WriteFrame(ctx context.Context, conn *websocket.Conn, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return conn.Write(ctx, websocket.MessageText, b)
}
