package gatewaycmd

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nbots/nb/gateway/channel/dingtalk/dingtalktest"
)

// TestGatewayDingTalk runs nb gateway with channels.dingtalk from a
// nanobot configuration against the DingTalk fake and a fake model: the
// allowed person is answered, a stranger gets a pairing code and no
// answer from the model, and in a group only the message that calls the
// robot is answered.
func TestGatewayDingTalk(t *testing.T) {
	const secret = "dingSecret-0123456789"
	fake, err := dingtalktest.New("dingclient", secret)
	if err != nil {
		t.Fatal(err)
	}
	defer fake.Close()
	dir, cfg := echoGatewayConfig(t, fmt.Sprintf(`{"dingtalk": {"enabled": true, "clientId": "dingclient", "clientSecret": %q, "apiBase": %q, "allowFrom": ["staff-ann"]}}`, secret, fake.URL))
	runGateway(t, dir, cfg, secret)

	wait, stop := context.WithTimeout(context.Background(), 30*time.Second)
	defer stop()
	if err := fake.WaitConnected(wait, 1); err != nil {
		t.Fatal(err)
	}
	fake.Say(dingtalktest.Message{SenderStaffID: "staff-ann", SenderNick: "Ann", Text: &dingtalktest.Text{Content: "hello there"}})
	sent, err := fake.WaitSent(wait, "staff-ann", 1)
	if err != nil {
		t.Fatalf("no answer to the allowed person: %v", err)
	}
	if !strings.Contains(sent[0].Text, "echo: hello there") {
		t.Errorf("answer %q", sent[0].Text)
	}
	fake.Say(dingtalktest.Message{SenderStaffID: "staff-eve", SenderNick: "Eve", Text: &dingtalktest.Text{Content: "let me in"}})
	sent, err = fake.WaitSent(wait, "staff-eve", 1)
	if err != nil {
		t.Fatalf("no pairing answer to the stranger: %v", err)
	}
	if strings.Contains(sent[0].Text, "echo:") || !strings.Contains(strings.ToLower(sent[0].Text), "pair") {
		t.Errorf("the stranger got %q", sent[0].Text)
	}
	fake.Say(dingtalktest.Message{SenderStaffID: "staff-ann", ConversationType: "2", ConversationID: "cidTEAM", Text: &dingtalktest.Text{Content: "chatter"}})
	fake.Say(dingtalktest.Message{SenderStaffID: "staff-ann", ConversationType: "2", ConversationID: "cidTEAM", IsInAtList: true, Text: &dingtalktest.Text{Content: "robot, answer"}})
	sent, err = fake.WaitSent(wait, "group:cidTEAM", 1)
	if err != nil {
		t.Fatalf("no answer in the group: %v", err)
	}
	time.Sleep(200 * time.Millisecond)
	sent = fake.Sent("group:cidTEAM")
	if len(sent) != 1 || !strings.Contains(sent[0].Text, "echo: robot, answer") {
		t.Errorf("group answers %+v", sent)
	}
}
