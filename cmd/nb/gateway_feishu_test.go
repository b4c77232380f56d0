package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nbots/nb/gateway/channel/feishu/feishutest"
)

// TestGatewayFeishu runs nb gateway from channels.feishu in a nanobot
// configuration against the Feishu fake and a fake model: an allowed
// user is answered in their chat, a stranger gets a pairing code and no
// answer from the model, and group chatter without a mention is not
// answered while a mention is.
func TestGatewayFeishu(t *testing.T) {
	const secret = "feishu-APP-secret-e2e"
	fs := feishutest.New("cli_e2e", secret)
	defer fs.Close()
	const ann, eve, grp = "ou_ann", "ou_eve", "oc_team"
	dir, cfg := echoGatewayConfig(t, fmt.Sprintf(`{"feishu": {"enabled": true, "appId": "cli_e2e", "appSecret": %q, "apiBase": %q, "allowFrom": [%q]}}`, secret, fs.URL, ann))
	runGateway(t, dir, cfg, secret)
	ctx, stop := context.WithTimeout(context.Background(), 30*time.Second)
	defer stop()
	waitSent := func(to string, n int) []feishutest.Message {
		t.Helper()
		if err := fs.Wait(ctx, func() bool { return len(fs.Sent(to)) >= n }); err != nil {
			t.Fatalf("no answer to %s: %v", to, err)
		}
		return fs.Sent(to)
	}
	if err := fs.Wait(ctx, func() bool { return fs.Connections() > 0 }); err != nil {
		t.Fatalf("the gateway did not connect: %v", err)
	}
	fs.Post(feishutest.Incoming{Sender: ann, Text: "hello there"})
	if got := waitSent(ann, 1); !strings.Contains(got[0].Text(), "echo: hello there") {
		t.Errorf("answer %q", got[0].Text())
	}
	fs.Post(feishutest.Incoming{Sender: eve, Text: "let me in"})
	if got := waitSent(eve, 1); strings.Contains(got[0].Text(), "echo:") || !strings.Contains(strings.ToLower(got[0].Text()), "pair") {
		t.Errorf("the stranger got %q", got[0].Text())
	}
	fs.Post(feishutest.Incoming{Sender: ann, Chat: grp, Text: "chatter"})
	fs.Post(feishutest.Incoming{Sender: ann, Chat: grp, Text: "and you?", MentionBot: true})
	got := waitSent(grp, 1)
	time.Sleep(300 * time.Millisecond)
	got = fs.Sent(grp)
	if len(got) != 1 || !strings.Contains(got[0].Text(), "and you?") || strings.Contains(got[0].Text(), "chatter") {
		t.Errorf("in the group: %+v", got)
	}
}
