package channel

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// TestReadFrames: messages are decoded in order, one that is not JSON is
// skipped, and the connection's end is the cause its context ends with.
func TestReadFrames(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		ctx := r.Context()
		for _, m := range []string{`{"op":1}`, `not json`, `{"op":2}`} {
			if err := c.Write(ctx, websocket.MessageText, []byte(m)); err != nil {
				return
			}
		}
		c.Close(websocket.StatusGoingAway, "bye")
	}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, _, err := websocket.Dial(ctx, "ws"+srv.URL[len("http"):], nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.CloseNow() //nolint:errcheck // done
	cctx, stop := context.WithCancelCause(ctx)
	type frame struct{ Op int }
	frames := make(chan frame, 4)
	go ReadFrames(cctx, stop, conn, frames, slog.New(slog.NewTextHandler(io.Discard, nil)), "a frame")
	for _, want := range []int{1, 2} {
		select {
		case f := <-frames:
			if f.Op != want {
				t.Fatalf("frame %+v, want op %d", f, want)
			}
		case <-ctx.Done():
			t.Fatal("no frame")
		}
	}
	<-cctx.Done()
	if got := websocket.CloseStatus(context.Cause(cctx)); got != websocket.StatusGoingAway {
		t.Errorf("ended with %v (close status %d)", context.Cause(cctx), got)
	}
}
