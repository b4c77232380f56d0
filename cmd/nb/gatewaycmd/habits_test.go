package gatewaycmd

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestGatewayStatusProviders: nb gateway status shows, as nanobot status
// does, the model, the provider chosen for it (nanobot's matching: the
// README's quick start goes to OpenRouter) and which providers have a
// key, never a key itself; -c is --config.
func TestGatewayStatusProviders(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.json")
	err := os.WriteFile(cfg, []byte(fmt.Sprintf(`{
  "agents": {"defaults": {"model": "anthropic/claude-opus-4-5", "workspace": %q}},
  "providers": {"openrouter": {"apiKey": "sk-or-v1-very-secret"}}
}`, filepath.Join(dir, "ws"))), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	code, out, errs := runNB(t, []string{"HOME=" + dir, "XDG_STATE_HOME=" + filepath.Join(dir, "state")}, "gateway", "status", "-c", cfg)
	if code != 0 {
		t.Fatalf("nb gateway status: %d\n%s%s", code, out, errs)
	}
	for _, want := range []string{"Config: " + cfg + "\n", "Model: anthropic/claude-opus-4-5\n", "Provider: openrouter\n",
		fmt.Sprintf("  %-24s ✓\n", "openrouter:"), fmt.Sprintf("  %-24s not set\n", "anthropic:"), fmt.Sprintf("  %-24s not set\n", "vllm:"),
		fmt.Sprintf("  %-24s ✓ (OAuth", "github_copilot:")} {
		if !strings.Contains(out, want) {
			t.Errorf("nb gateway status lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out+errs, "very-secret") {
		t.Errorf("a key reached the output:\n%s%s", out, errs)
	}
}

// TestGatewayAgentIsChat: nb gateway agent -m is nb gateway chat -m
// (nanobot agent's name), with -c and -w as nanobot's.
func TestGatewayAgentIsChat(t *testing.T) {
	dir, cfg := echoGatewayConfig(t, `{}`)
	env := []string{"HOME=" + dir, "XDG_STATE_HOME=" + filepath.Join(dir, "state")}
	ws := filepath.Join(dir, "elsewhere")
	code, out, errs := runNB(t, env, "gateway", "agent", "-c", cfg, "-w", ws, "-m", "hello from nanobot's habits")
	if code != 0 || !strings.Contains(out, "hello from nanobot's habits") {
		t.Fatalf("nb gateway agent -m: %d\n%s%s", code, out, errs)
	}
	if _, err := os.Stat(filepath.Join(ws, "sessions")); err != nil {
		t.Errorf("-w did not choose the workspace: %v", err)
	}
}

// TestGatewayPortAndVerbose: nb gateway -p PORT listens on that port of
// gateway.host, and -v logs at debug level (nanobot's gateway flags).
func TestGatewayPortAndVerbose(t *testing.T) {
	dir, cfg := echoGatewayConfig(t, `{}`)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	logFile := filepath.Join(dir, "stderr")
	f, err := os.Create(logFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	a := &cli{stdout: f, stderr: f, environ: []string{"HOME=" + dir, "XDG_STATE_HOME=" + filepath.Join(dir, "state")}}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- a.gatewayServe(ctx, []string{"-c", cfg, "-p", strconv.Itoa(port), "-v"}) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("nb gateway: %v", err)
		}
	}()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		c, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("nothing listens on port %d:\n%s", port, logOf(logFile))
		}
	}
	for deadline := time.Now().Add(5 * time.Second); !strings.Contains(logOf(logFile), "level=DEBUG"); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("-v logged nothing at debug level:\n%s", logOf(logFile))
		}
	}
}
