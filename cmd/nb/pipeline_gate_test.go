package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nbots/nb/gateway/channel/telegram/botapi"
	"github.com/nbots/nb/gateway/channel/telegram/telegramtest"
	"github.com/nbots/nb/pipeline/engine"
)

// TestPipelineGateTelegram: nb pipeline run --gateway-config asks a gate
// with human.channel in the Telegram chat it names, through the channel
// of that configuration, and follows the owner's answer.
func TestPipelineGateTelegram(t *testing.T) {
	const token = "123456789:AAE-secret_TOKEN-value"
	fake, err := telegramtest.New(token)
	if err != nil {
		t.Fatal(err)
	}
	defer fake.Close()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "gateway.json")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`{"agents":{"defaults":{"workspace":%q}},"channels":{"telegram":{"enabled":true,"token":%q,"apiBase":%q,"allowFrom":["42"],"pollTimeout":1}}}`,
		filepath.Join(dir, "ws"), token, fake.URL)), 0o600)
	flow := filepath.Join(dir, "gate.dot")
	os.WriteFile(flow, []byte(`digraph Gate {
	start [shape=Mdiamond]
	exit  [shape=Msquare]
	deploy_gate [shape=hexagon, label="Deploy to production?", human.channel="telegram:42"]
	start -> deploy_gate
	deploy_gate -> exit   [label="[Y] Yes"]
	deploy_gate -> cancel [label="[N] No"]
	cancel -> exit
}`), 0o644)
	alice := botapi.User{ID: 42, FirstName: "Alice", Username: "alice"}
	fake.Post(botapi.Message{From: &alice, Chat: botapi.Chat{ID: 42, Type: botapi.Private}, Text: "/start", Date: time.Now().Add(-time.Minute).Unix()})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	go func() {
		if _, err := fake.WaitSent(ctx, 42, 1); err == nil {
			fake.Say(alice, "y")
		}
	}()
	logs := filepath.Join(dir, "run")
	code, out, errOut := runNB(t, []string{"HOME=" + dir, "NB_DOTENV=0"}, "pipeline", "run", "--simulate", "--gateway-config", cfg, "--logs", logs, flow)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	sent := fake.Sent(42)
	if len(sent) < 2 || !strings.Contains(sent[0].Text, "Deploy to production?") || !strings.Contains(sent[0].Text, "[Y] Yes") {
		t.Fatalf("sent %+v", sent)
	}
	cp, err := engine.LoadCheckpoint(logs)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(cp.CompletedNodes, ","); got != "start,deploy_gate,exit" {
		t.Errorf("completed %s, want the Yes path", got)
	}
}
