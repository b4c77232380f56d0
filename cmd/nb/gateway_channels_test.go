package main

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nbots/nb/gateway/channel/telegram/botapi"
	"github.com/nbots/nb/gateway/channel/telegram/telegramfake"
	"github.com/nbots/nb/provider/openai/openaitest"
	"github.com/nbots/nb/provider/providertest"
)

// TestGatewayTelegram runs nb gateway with a Telegram channel against the
// Bot API fake and a fake model: an allowed user is answered in their
// chat, an unknown one gets a pairing code and no answer from the model.
func TestGatewayTelegram(t *testing.T) {
	tg, err := telegramfake.New("123456:secret-token")
	if err != nil {
		t.Fatal(err)
	}
	defer tg.Close()
	model := httptest.NewServer(openaitest.New(providertest.Echo))
	defer model.Close()
	dir := t.TempDir()
	ws := filepath.Join(dir, "ws")
	cfg := filepath.Join(dir, "config.json")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`{
  "agents": {"defaults": {"model": "m", "provider": "custom", "workspace": %q}},
  "providers": {"custom": {"apiBase": %q, "apiKey": "k"}},
  "channels": {"telegram": {"enabled": true, "token": "123456:secret-token", "apiBase": %q, "allowFrom": ["4242|ann"]}},
  "gateway": {"heartbeat": {"enabled": false}}
}`, ws, model.URL, tg.URL)), 0o600)

	var stderr strings.Builder
	errFile, _ := os.Create(filepath.Join(dir, "stderr"))
	defer errFile.Close()
	a := &App{Stdout: errFile, Stderr: errFile, Environ: []string{"HOME=" + dir, "XDG_STATE_HOME=" + filepath.Join(dir, "state")}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.gatewayServe(ctx, []string{"--config", cfg, "--listen", "127.0.0.1:0"}) }()
	defer func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("nb gateway: %v", err)
			}
		case <-time.After(20 * time.Second):
			t.Error("nb gateway did not stop")
		}
		b, _ := os.ReadFile(errFile.Name())
		stderr.Write(b)
		if strings.Contains(stderr.String(), "secret-token") {
			t.Errorf("the bot token reached the log:\n%s", stderr.String())
		}
	}()

	wait, stop := context.WithTimeout(context.Background(), 30*time.Second)
	defer stop()
	tg.Say(botapi.User{ID: 4242, FirstName: "Ann", Username: "ann"}, "hello there")
	sent, err := tg.WaitSent(wait, 4242, 1)
	if err != nil {
		b, _ := os.ReadFile(errFile.Name())
		t.Fatalf("no answer to the allowed user: %v\n%s", err, b)
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
