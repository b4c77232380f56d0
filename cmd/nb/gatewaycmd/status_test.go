package gatewaycmd

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestGatewayChannelsStatus: nb gateway channels status lists the
// running gateway's channels: Telegram connected, a channel this nb has
// not stopped with why, a switched-off one disabled; with no gateway
// running, the configured channels and that it is not running.
func TestGatewayChannelsStatus(t *testing.T) {
	tg := fakeTelegram(t)
	dir, cfg := echoGatewayConfig(t, fmt.Sprintf(`{
	  "telegram": {"enabled": true, "token": "123456:secret-token", "apiBase": %q, "pollTimeout": 1},
	  "signal": {"enabled": true},
	  "email": {"enabled": false}
	}`, tg.URL))
	status := func() string {
		code, out, errs := runNB(t, []string{"HOME=" + dir, "XDG_STATE_HOME=" + filepath.Join(dir, "state")}, "gateway", "channels", "status", "--config", cfg)
		if code != 0 {
			t.Fatalf("nb gateway channels status: %d\n%s%s", code, out, errs)
		}
		return out
	}
	if out := status(); !strings.Contains(out, "the gateway is not running") || !strings.Contains(out, "email      disabled") || !strings.Contains(out, "telegram   not running") {
		t.Errorf("before the start:\n%s", out)
	}
	logs := runGateway(t, dir, cfg, "secret-token")
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		out := status()
		if strings.Contains(out, "the gateway runs") && strings.Contains(out, "telegram   connected (since") &&
			strings.Contains(out, "signal     stopped: channel signal is not supported by this nb") && strings.Contains(out, "email      disabled") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("status:\n%s\nlogs:\n%s", out, logs())
		}
	}
	code, out, errs := runNB(t, []string{"HOME=" + dir, "XDG_STATE_HOME=" + filepath.Join(dir, "state")}, "gateway", "status", "--config", cfg)
	if code != 0 || !strings.Contains(out, "Channels: the gateway runs") || !strings.Contains(out, "telegram   connected") {
		t.Errorf("nb gateway status: %d\n%s%s", code, out, errs)
	}
}

// TestGatewayRefusesAChannelKeyTypo: nb gateway with
// channels.telegram.alowFrom does not start, and says which key was
// meant.
func TestGatewayRefusesAChannelKeyTypo(t *testing.T) {
	dir, cfg := echoGatewayConfig(t, `{"telegram": {"enabled": true, "token": "123456:secret-token", "alow_from": ["42"]}}`)
	out, err := os.Create(filepath.Join(dir, "output"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	a := &cli{stdout: out, stderr: out, environ: []string{"HOME=" + dir, "XDG_STATE_HOME=" + filepath.Join(dir, "state")}}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	err = a.gatewayServe(ctx, []string{"--config", cfg, "--listen", "127.0.0.1:0"})
	if err == nil || !strings.Contains(err.Error(), `channels.telegram.alowFrom: unknown key: did you mean "allowFrom"?`) || strings.Contains(fmt.Sprint(err)+logOf(out.Name()), "secret-token") {
		t.Errorf("nb gateway: %v\n%s", err, logOf(out.Name()))
	}
}

func logOf(path string) string { b, _ := os.ReadFile(path); return string(b) }
