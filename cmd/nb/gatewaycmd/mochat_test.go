package gatewaycmd

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nbots/nb/gateway/channel/mochat/mochattest"
)

// TestGatewayMochat runs nb gateway from channels.mochat in a nanobot
// configuration against the fake Mochat server: an allowed author is
// answered in their session, a stranger gets a pairing code and no answer
// from the model.
func TestGatewayMochat(t *testing.T) {
	const token = "claw-secret-token-e2e"
	srv := mochattest.New(t, token, []string{"session_a", "session_b"}, nil)
	dir, cfg := echoGatewayConfig(t, fmt.Sprintf(`{"mochat": {"enabled": true, "baseUrl": %q, "clawToken": %q, "agentUserId": "agent_1", "sessions": ["*"], "allowFrom": ["alice"], "refreshIntervalMs": 100}}`, srv.URL, token))
	runGateway(t, dir, cfg, token)
	srv.WaitSocket(t, 1)
	time.Sleep(300 * time.Millisecond) // subscribed

	srv.Say("session_a", "alice", "hello there")
	sent := srv.WaitSent(t, 1)
	if sent[0].SessionID != "session_a" || !strings.Contains(sent[0].Content, "echo: hello there") {
		t.Errorf("answer %+v", sent[0])
	}
	srv.Say("session_b", "eve", "let me in")
	sent = srv.WaitSent(t, 2)
	if sent[1].SessionID != "session_b" || strings.Contains(sent[1].Content, "echo:") || !strings.Contains(strings.ToLower(sent[1].Content), "pair") {
		t.Errorf("stranger got %+v", sent[1])
	}
}
