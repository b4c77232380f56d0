package gatewaycmd

import (
	"context"
	"fmt"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nbots/nb/gateway/channel/telegram/botapi"
	"github.com/nbots/nb/gateway/channel/telegram/telegramtest"
	"github.com/nbots/nb/provider/openai/openaitest"
	"github.com/nbots/nb/provider/providertest"
)

// TestGatewayTelegram runs nb gateway with a Telegram channel against the
// Bot API fake and a fake model: an allowed user is answered in their
// chat, an unknown one gets a pairing code and no answer from the model.
func TestGatewayTelegram(t *testing.T) {
	tg := fakeTelegram(t)
	dir, cfg := echoGatewayConfig(t, fmt.Sprintf(`{"telegram": {"enabled": true, "token": "123456:secret-token", "apiBase": %q, "allowFrom": ["4242|ann"]}}`, tg.URL))
	runGateway(t, dir, cfg, "secret-token")

	wait, stop := context.WithTimeout(context.Background(), 30*time.Second)
	defer stop()
	tg.Say(botapi.User{ID: 4242, FirstName: "Ann", Username: "ann"}, "hello there")
	sent, err := tg.WaitSent(wait, 4242, 1)
	if err != nil {
		t.Fatalf("no answer to the allowed user: %v", err)
	}
	if !strings.Contains(sent[0].Text, "echo: hello there") {
		t.Errorf("answer %q", sent[0].Text)
	}
	tg.Say(botapi.User{ID: 999, FirstName: "Eve", Username: "eve"}, "let me in")
	sent, err = tg.WaitSent(wait, 999, 1)
	if err != nil {
		t.Fatalf("no pairing answer to the unknown user: %v", err)
	}
	if strings.Contains(sent[0].Text, "echo:") || !strings.Contains(strings.ToLower(sent[0].Text), "pair") {
		t.Errorf("unknown user got %q", sent[0].Text)
	}
}

// echoGatewayConfig writes a gateway configuration with an echoing model
// and the channels section given, in a fresh folder.
// fakeTelegram is a fake Bot API for the bot 123456:secret-token, closed
// after the test (and after the gateway the test runs on it).
func fakeTelegram(t *testing.T) *telegramtest.Server {
	t.Helper()
	tg, err := telegramtest.New("123456:secret-token")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tg.Close)
	return tg
}

func echoGatewayConfig(t *testing.T, channels string) (dir, cfg string) {
	t.Helper()
	model := httptest.NewServer(openaitest.New(providertest.Echo))
	t.Cleanup(model.Close)
	dir = t.TempDir()
	cfg = filepath.Join(dir, "config.json")
	err := os.WriteFile(cfg, []byte(fmt.Sprintf(`{
  "agents": {"defaults": {"model": "m", "provider": "custom", "workspace": %q}},
  "providers": {"custom": {"apiBase": %q, "apiKey": "k"}},
  "channels": %s,
  "gateway": {"heartbeat": {"enabled": false}}
}`, filepath.Join(dir, "ws"), model.URL, channels)), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	return dir, cfg
}

// runGateway runs nb gateway with the configuration file until the test
// ends, then checks that it stopped cleanly and that secret never reached
// its output. It returns the output so far.
func runGateway(t *testing.T, dir, cfg, secret string) (logs func() string) {
	t.Helper()
	return runGatewayOn(t, dir, cfg, secret, "127.0.0.1:0")
}

// runGatewayOn is runGateway with the listener's address.
func runGatewayOn(t *testing.T, dir, cfg, secret, listen string) (logs func() string) {
	t.Helper()
	errFile, err := os.Create(filepath.Join(dir, "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	logs = func() string { b, _ := os.ReadFile(errFile.Name()); return string(b) }
	a := &cli{stdout: errFile, stderr: errFile, environ: []string{"HOME=" + dir, "XDG_STATE_HOME=" + filepath.Join(dir, "state")}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.gatewayServe(ctx, []string{"--config", cfg, "--listen", listen}) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("nb gateway: %v", err)
			}
		case <-time.After(20 * time.Second):
			t.Error("nb gateway did not stop")
		}
		errFile.Close()
		if strings.Contains(logs(), secret) {
			t.Errorf("a secret reached the log:\n%s", logs())
		}
	})
	return logs
}

// TestGatewayTelegramWebhook runs nb gateway with Telegram receiving by
// webhook on the gateway's own listener: the fake posts updates there
// with the secret; a forged post is refused.
func TestGatewayTelegramWebhook(t *testing.T) {
	tg := fakeTelegram(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // the gateway listens there
	dir, cfg := echoGatewayConfig(t, fmt.Sprintf(`{"telegram": {"enabled": true, "token": "123456:secret-token", "apiBase": %q, "allowFrom": ["4242"],
  "webhookUrl": "http://%s/telegram/hook-1", "webhookSecret": "hook_secret_0123456789"}}`, tg.URL, addr))
	logs := runGatewayOn(t, dir, cfg, "hook_secret_0123456789", addr)
	wait, stop := context.WithTimeout(context.Background(), 30*time.Second)
	defer stop()
	for tg.Webhook() == "" {
		if wait.Err() != nil {
			t.Fatalf("no webhook set\n%s", logs())
		}
		time.Sleep(10 * time.Millisecond)
	}
	tg.Say(botapi.User{ID: 4242, FirstName: "Ann"}, "hello by webhook")
	sent, err := tg.WaitSent(wait, 4242, 1)
	if err != nil {
		t.Fatalf("no answer: %v\n%s", err, logs())
	}
	if !strings.Contains(sent[0].Text, "echo: hello by webhook") {
		t.Errorf("answer %q", sent[0].Text)
	}
	if code, err := tg.PostRaw("forged_secret_0123456789", []byte(`{"update_id":1}`)); err != nil || code != 401 {
		t.Errorf("a forged post: %d %v", code, err)
	}
}
