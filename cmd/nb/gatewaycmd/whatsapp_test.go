package gatewaycmd

import (
	"fmt"
	"strings"
	"testing"

	"github.com/nbots/nb/gateway/channel/whatsapp/whatsapptest"
)

// TestGatewayWhatsApp runs nb gateway from channels.whatsapp in a nanobot
// configuration against the fake bridge: an allowed phone is answered
// through the bridge's send command, a stranger gets a pairing code and
// no answer from the model.
func TestGatewayWhatsApp(t *testing.T) {
	const token = "secret-bridge-token-e2e"
	b := whatsapptest.New(t, token)
	dir, cfg := echoGatewayConfig(t, fmt.Sprintf(`{"whatsapp": {"enabled": true, "bridgeUrl": %q, "bridgeToken": %q, "allowFrom": ["15551230001"]}}`, b.URL, token))
	runGateway(t, dir, cfg, token)

	b.Deliver(t, whatsapptest.Message{ID: "E1", Sender: "15551230001@s.whatsapp.net", Content: "hello there"})
	sent := b.WaitSent(t, 1)
	if sent[0].To != "15551230001@s.whatsapp.net" || !strings.Contains(sent[0].Text, "echo: hello there") {
		t.Errorf("answer %+v", sent[0])
	}
	b.Deliver(t, whatsapptest.Message{ID: "E2", Sender: "999000@lid", Content: "let me in"})
	sent = b.WaitSent(t, 2)
	if sent[1].To != "999000@lid" || strings.Contains(sent[1].Text, "echo:") || !strings.Contains(strings.ToLower(sent[1].Text), "pair") {
		t.Errorf("stranger got %+v", sent[1])
	}
}
