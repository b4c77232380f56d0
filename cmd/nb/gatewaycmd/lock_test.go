package gatewaycmd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nbots/nb/gateway/gatewayrun"
)

// TestGatewayRefusesASecondGateway: a second nb gateway on the workspace
// of a running one, or on another workspace with the same Telegram bot,
// is refused at start with the first one's pid and listen address; a
// lock file a crashed gateway left (unlocked) stops nobody.
func TestGatewayRefusesASecondGateway(t *testing.T) {
	tg := fakeTelegram(t)
	dir, cfg := echoGatewayConfig(t, fmt.Sprintf(`{"telegram": {"enabled": true, "token": "123456:secret-token", "apiBase": %q, "pollTimeout": 1}}`, tg.URL))
	env := []string{"HOME=" + dir, "XDG_STATE_HOME=" + filepath.Join(dir, "state")}
	lockFile := (&cli{environ: env}).gatewayState(filepath.Join(dir, "ws")).Lock
	// What a crashed gateway leaves: a file, locked by nobody.
	if err := os.MkdirAll(filepath.Dir(lockFile), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(lockFile, []byte(`{"pid": 999999, "address": "127.0.0.1:1"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	logs := runGateway(t, dir, cfg, "secret-token")
	var addr string
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		b, _ := os.ReadFile(lockFile)
		if s := string(b); strings.Contains(s, fmt.Sprintf(`"pid":%d`, os.Getpid())) && strings.Contains(s, `"address":"127.0.0.1:`) {
			addr = s[strings.Index(s, `"address":"`)+len(`"address":"`):]
			addr = addr[:strings.Index(addr, `"`)]
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the first gateway never wrote its lock file: %q\n%s", b, logs())
		}
	}
	second := func(cfg string) error {
		a := &cli{stdout: &strings.Builder{}, stderr: &strings.Builder{}, environ: env}
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		defer cancel()
		return a.gatewayServe(ctx, []string{"--config", cfg, "--listen", "127.0.0.1:0"})
	}
	err := second(cfg)
	var held *gatewayrun.LockedError
	if !errors.As(err, &held) || held.PID != os.Getpid() || held.Address != addr ||
		!strings.Contains(err.Error(), fmt.Sprintf("another nb gateway (pid %d, listening on %s) already runs on the workspace %s", os.Getpid(), addr, filepath.Join(dir, "ws"))) {
		t.Errorf("a second gateway on the workspace: %v", err)
	}
	// Another workspace, the same bot.
	b, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(dir, "other.json")
	if err := os.WriteFile(other, []byte(strings.Replace(string(b), filepath.Join(dir, "ws"), filepath.Join(dir, "ws2"), 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	err = second(other)
	if !errors.As(err, &held) || !strings.Contains(err.Error(), fmt.Sprintf("(pid %d, listening on %s) already runs on the account of channels.telegram", os.Getpid(), addr)) ||
		strings.Contains(err.Error(), "secret-token") {
		t.Errorf("a second gateway on the bot: %v", err)
	}
	// A replica cannot join a gateway alone either.
	err = (&cli{stdout: &strings.Builder{}, stderr: &strings.Builder{}, environ: env}).serveGateway(t.Context(), []string{"--config", cfg, "--listen", "127.0.0.1:0", "--bus", "nats://127.0.0.1:1"})
	if !errors.As(err, &held) || held.Replica {
		t.Errorf("a replica beside a gateway alone: %v", err)
	}
	if entries, _ := filepath.Glob(filepath.Join(dir, "state", "nb", "gateway", "*.lock")); len(entries) != 3 { // the two workspaces', the bot's
		t.Errorf("lock files: %v", entries)
	}
}
