package gatewaycmd

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nbots/nb/gateway/channel/qq/qqtest"
)

// TestGatewayQQ runs nb gateway with channels.qq from a nanobot
// configuration against the QQ fake and a fake model: the allowed person
// is answered by a passive reply, a stranger gets a pairing code and no
// answer from the model, and a group message that @ the bot is answered
// in the group.
func TestGatewayQQ(t *testing.T) {
	const secret = "qqSecret-0123456789"
	fake, err := qqtest.New("1020304", secret)
	if err != nil {
		t.Fatal(err)
	}
	defer fake.Close()
	dir, cfg := echoGatewayConfig(t, fmt.Sprintf(`{"qq": {"enabled": true, "appId": "1020304", "secret": %q, "apiBase": %q, "allowFrom": ["OPENID-ANN"]}}`, secret, fake.URL))
	runGateway(t, dir, cfg, secret)

	wait, stop := context.WithTimeout(context.Background(), 30*time.Second)
	defer stop()
	if err := fake.WaitConnected(wait, 1); err != nil {
		t.Fatal(err)
	}
	said := fake.Say(qqtest.Message{User: "OPENID-ANN", Content: "hello there"})
	sent, err := fake.WaitSent(wait, "OPENID-ANN", 1)
	if err != nil {
		t.Fatalf("no answer to the allowed person: %v", err)
	}
	if !strings.Contains(sent[0].Content, "echo: hello there") || sent[0].ReplyTo != said.ID {
		t.Errorf("answer %+v", sent[0])
	}
	fake.Say(qqtest.Message{User: "OPENID-EVE", Content: "let me in"})
	sent, err = fake.WaitSent(wait, "OPENID-EVE", 1)
	if err != nil {
		t.Fatalf("no pairing answer to the stranger: %v", err)
	}
	if strings.Contains(sent[0].Content, "echo:") || !strings.Contains(strings.ToLower(sent[0].Content), "pair") {
		t.Errorf("the stranger got %q", sent[0].Content)
	}
	fake.Say(qqtest.Message{User: "OPENID-ANN", Group: "GROUP-1", Content: " robot, answer"})
	sent, err = fake.WaitSent(wait, "group:GROUP-1", 1)
	if err != nil {
		t.Fatalf("no answer in the group: %v", err)
	}
	if !strings.Contains(sent[0].Content, "echo: robot, answer") {
		t.Errorf("group answer %+v", sent[0])
	}
}
