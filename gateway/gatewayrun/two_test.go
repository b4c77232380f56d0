package gatewayrun

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"

	"github.com/nbots/nb/gateway/channel/telegram/botapi"
	"github.com/nbots/nb/gateway/channel/telegram/telegramtest"
	"github.com/nbots/nb/gateway/web"
	"github.com/nbots/nb/internal/natstest"
	"github.com/nbots/nb/internal/testbuf"
	"github.com/nbots/nb/provider/openai/openaitest"
)

// TestTwoGatewaysInOneProcess: two replicas of one gateway, opened in
// this process on an embedded NATS server, share a Telegram bot (the
// fake) and a workspace. The Telegram messages are answered once, by the
// replica elected to receive them; each replica's web chat answers its
// own socket. Both stop with their context, without a failure.
func TestTwoGatewaysInOneProcess(t *testing.T) {
	ns := natstest.Start(t)
	tg, err := telegramtest.New("123456:two")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tg.Close)
	model := httptest.NewServer(openaitest.New(echo))
	t.Cleanup(model.Close)
	c := testConfig(t, model.URL, map[string]any{"telegram": map[string]any{
		"enabled": true, "token": tg.Token, "apiBase": tg.URL, "allowFrom": []string{"*"}, "pollTimeout": 1,
	}})
	state := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	type replica struct {
		gw   *Gateway
		url  string
		log  *testbuf.Buffer
		done chan error
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	var rs []*replica
	for i := range 2 {
		log := &testbuf.Buffer{}
		reps, err := JoinReplicas(ctx, ns.URL(), slog.New(slog.NewTextHandler(log, nil)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(reps.Close)
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		o := testOptions(t)
		o.StateDir, o.Replicas, o.Listeners, o.Log = state, reps, []net.Listener{ln}, slog.New(slog.NewTextHandler(log, nil))
		gw, err := Open(ctx, c, o)
		if err != nil {
			t.Fatalf("replica %d: %v", i, err)
		}
		t.Cleanup(gw.Close)
		r := &replica{gw: gw, url: "http://" + ln.Addr().String(), log: log, done: make(chan error, 1)}
		go func() { r.done <- gw.Run(runCtx) }()
		rs = append(rs, r)
	}
	dump := func() string {
		var b strings.Builder
		for i, r := range rs {
			fmt.Fprintf(&b, "--- replica %d ---\n%s\n", i, r.log.String())
		}
		return b.String()
	}
	for i, r := range rs {
		for {
			resp, err := http.Get(r.url + "/ready")
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					break
				}
			}
			if ctx.Err() != nil {
				t.Fatalf("replica %d never ready\n%s", i, dump())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	// Telegram: every message answered once, whichever replica receives.
	owner := botapi.User{ID: 111, FirstName: "owner"}
	for i := range 3 {
		tg.Say(owner, fmt.Sprint("m", i))
	}
	sent, err := tg.WaitSent(ctx, owner.ID, 3)
	if err != nil {
		t.Fatalf("%v\n%s", err, dump())
	}
	for i, m := range sent {
		if want := fmt.Sprint("echo: m", i); m.Text != want {
			t.Errorf("answer %d is %q, want %q", i, m.Text, want)
		}
	}

	// The web chat: each replica answers the socket it holds.
	for i, r := range rs {
		ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(r.url, "http")+"/ws", &websocket.DialOptions{HTTPHeader: http.Header{"Origin": {r.url}}})
		if err != nil {
			t.Fatalf("replica %d: %v", i, err)
		}
		chat := fmt.Sprint("c", i)
		if err := wsjson.Write(ctx, ws, web.Frame{Type: "message", ChatID: chat, Content: "hello " + chat}); err != nil {
			t.Fatal(err)
		}
		for {
			var f web.Frame
			if err := wsjson.Read(ctx, ws, &f); err != nil {
				t.Fatalf("replica %d: %v\n%s", i, err, dump())
			}
			if f.Type == "message" {
				if want := "echo: hello " + chat; f.Content != want || f.ChatID != chat {
					t.Errorf("replica %d answered %q in %s, want %q in %s", i, f.Content, f.ChatID, want, chat)
				}
				break
			}
		}
		ws.Close(websocket.StatusNormalClosure, "")
	}

	stop()
	for i, r := range rs {
		if err := <-r.done; err != nil {
			t.Errorf("replica %d: Run = %v, want nil once stopped", i, err)
		}
	}
	if more := tg.Sent(owner.ID); len(more) != 3 {
		t.Errorf("Telegram got %d answers, want 3 (one a message)", len(more))
	}
}
