package gatewaycmd

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nbots/nb/gateway/channel/wecom/wecomtest"
)

// TestGatewayWecom runs nb gateway from channels.wecom in a nanobot
// configuration against the WeCom fake and a fake model: an allowed
// user is answered on their message's stream, a stranger gets a pairing
// code and no answer from the model, and a group mention is answered in
// the group.
func TestGatewayWecom(t *testing.T) {
	const secret = "wecom-BOT-secret-e2e"
	ws := wecomtest.New("aib_e2e", secret)
	defer ws.Close()
	dir, cfg := echoGatewayConfig(t, fmt.Sprintf(`{"wecom": {"enabled": true, "botId": "aib_e2e", "secret": %q, "wsUrl": %q, "allowFrom": ["ann"]}}`, secret, ws.URL))
	runGateway(t, dir, cfg, secret)
	ctx, stop := context.WithTimeout(context.Background(), 30*time.Second)
	defer stop()
	if err := ws.Wait(ctx, func() bool { return ws.Connections() > 0 }); err != nil {
		t.Fatalf("the gateway did not connect: %v", err)
	}
	answer := func(req string) string {
		t.Helper()
		if err := ws.Wait(ctx, func() bool { st := ws.Stream(req); return st != nil && st.Finished }); err != nil {
			t.Fatalf("no answer on %s: %v", req, err)
		}
		return ws.Stream(req).Content
	}
	_, req := ws.Post(wecomtest.Incoming{Sender: "ann", Text: "hello there"})
	if got := answer(req); !strings.Contains(got, "echo: hello there") {
		t.Errorf("answer %q", got)
	}
	_, req = ws.Post(wecomtest.Incoming{Sender: "eve", Text: "let me in"})
	if got := answer(req); strings.Contains(got, "echo:") || !strings.Contains(strings.ToLower(got), "pair") {
		t.Errorf("the stranger got %q", got)
	}
	_, req = ws.Post(wecomtest.Incoming{Sender: "ann", Chat: "wrkGROUP", Text: "@nb and you?"})
	if got := answer(req); !strings.Contains(got, "echo: and you?") {
		t.Errorf("in the group: %q", got)
	}
}
