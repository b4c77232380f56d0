package gatewaycmd

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestGatewayOnboardRefreshesInPlace: nb gateway onboard on a nanobot
// configuration adds the missing keys with nanobot's defaults and keeps
// every value, key spelling, order and unknown key the user wrote;
// nothing missing the second time.
func TestGatewayOnboardRefreshesInPlace(t *testing.T) {
	home := t.TempDir()
	cfg := filepath.Join(home, ".nanobot", "config.json")
	if err := os.MkdirAll(filepath.Dir(cfg), 0o700); err != nil {
		t.Fatal(err)
	}
	const before = `{"agents": {"defaults": {"model": "deepseek/deepseek-chat", "max_tokens": 4096, "workspace": "` + "WS" + `"}},
  "providers": {"deepseek": {"api_key": "sk-mine"}},
  "tools": {"exec": {"timeout": 120}, "restrictToWorkspace": true, "myOwnKey": [1, 2]}}`
	ws := filepath.Join(home, "ws")
	if err := os.WriteFile(cfg, []byte(strings.Replace(before, "WS", ws, 1)), 0o640); err != nil {
		t.Fatal(err)
	}
	env := []string{"HOME=" + home, "XDG_CONFIG_HOME=" + filepath.Join(home, ".config")}
	code, out, errs := runNB(t, env, "gateway", "onboard")
	if code != 0 || !strings.Contains(out, "refreshed "+cfg+": added agents.defaults.provider") {
		t.Fatalf("nb gateway onboard: %d\n%s%s", code, out, errs)
	}
	b, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, b)
	}
	text := string(b)
	for _, want := range []string{`"model": "deepseek/deepseek-chat"`, `"max_tokens": 4096`, `"api_key": "sk-mine"`, `"timeout": 120`,
		`"restrictToWorkspace": true`, `"myOwnKey": [`, `"provider": "auto"`, `"maxToolIterations": 40`, `"sendProgress": true`, `"intervalS": 1800`, `"openrouter": {`} {
		if !strings.Contains(text, want) {
			t.Errorf("the refreshed file lacks %s:\n%s", want, text)
		}
	}
	for _, unwanted := range []string{`"maxTokens"`, `"host"`, `"restrictToWorkspace": false`, `"memoryWindow"`, `"deepseek": {"apiKey"`} {
		if strings.Contains(text, unwanted) {
			t.Errorf("the refreshed file has %s:\n%s", unwanted, text)
		}
	}
	if strings.Index(text, `"agents"`) > strings.Index(text, `"providers"`) || strings.Index(text, `"providers"`) > strings.Index(text, `"channels"`) {
		t.Errorf("the user's keys come first, in their order:\n%s", text)
	}
	if fi, _ := os.Stat(cfg); fi.Mode().Perm() != 0o640 {
		t.Errorf("mode %v, want the file's own 0640", fi.Mode().Perm())
	}
	if _, err := os.Stat(filepath.Join(ws, "AGENTS.md")); err != nil {
		t.Errorf("the workspace's templates: %v", err)
	}
	if code, out, errs := runNB(t, env, "gateway", "onboard"); code != 0 || !strings.Contains(out, "kept      "+cfg+" (nothing missing)") {
		t.Errorf("a second nb gateway onboard: %d\n%s%s", code, out, errs)
	}
	if after, _ := os.ReadFile(cfg); string(after) != text {
		t.Error("a second onboard changed the file")
	}
}

// TestGatewayInitRefusesToShadowNanobot: with ~/.nanobot/config.json and
// no configuration of nb's, nb gateway init writes nothing and says why;
// with --config it writes where it is told.
func TestGatewayInitRefusesToShadowNanobot(t *testing.T) {
	home := t.TempDir()
	cfg := filepath.Join(home, ".nanobot", "config.json")
	if err := os.MkdirAll(filepath.Dir(cfg), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg, []byte(`{}`), 0o600); err != nil {
		t.Fatal(err)
	}
	env := []string{"HOME=" + home, "XDG_CONFIG_HOME=" + filepath.Join(home, ".config"), "XDG_DATA_HOME=" + filepath.Join(home, "data")}
	nbPath := filepath.Join(home, ".config", "nb", "gateway.json")
	code, out, errs := runNB(t, env, "gateway", "init")
	if code != 1 || !strings.Contains(errs, cfg+" exists, and nb gateway reads it: a new "+nbPath+" would shadow it") || !strings.Contains(errs, "nb gateway onboard") {
		t.Errorf("nb gateway init beside nanobot's configuration: %d\n%s%s", code, out, errs)
	}
	if _, err := os.Stat(nbPath); err == nil {
		t.Errorf("nb gateway init wrote %s", nbPath)
	}
	if code, out, errs := runNB(t, env, "gateway", "init", "--config", nbPath); code != 0 || !strings.Contains(out, "wrote     "+nbPath) {
		t.Errorf("nb gateway init --config: %d\n%s%s", code, out, errs)
	}
}

// TestGatewayInitWritesNBGatewayConfig: without --config, nb gateway init
// writes the file NB_GATEWAY_CONFIG names (~ expanded), where nb gateway
// and its other commands read it; nanobot's file beside it is no reason
// to refuse (the variable says which file is meant), and the default
// path stays untouched.
func TestGatewayInitWritesNBGatewayConfig(t *testing.T) {
	home := t.TempDir()
	nanobot := filepath.Join(home, ".nanobot", "config.json")
	if err := os.MkdirAll(filepath.Dir(nanobot), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(nanobot, []byte(`{}`), 0o600); err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(home, "conf", "gw.json")
	env := []string{"HOME=" + home, "XDG_CONFIG_HOME=" + filepath.Join(home, ".config"), "XDG_DATA_HOME=" + filepath.Join(home, "data"),
		"NB_GATEWAY_CONFIG=~/conf/gw.json"}
	if code, out, errs := runNB(t, env, "gateway", "init"); code != 0 || !strings.Contains(out, "wrote     "+want) {
		t.Fatalf("nb gateway init with NB_GATEWAY_CONFIG: %d\n%s%s", code, out, errs)
	}
	if b, err := os.ReadFile(want); err != nil || !strings.Contains(string(b), "agents") {
		t.Errorf("%s: %v\n%s", want, err, b)
	}
	if _, err := os.Stat(filepath.Join(home, ".config", "nb", "gateway.json")); err == nil {
		t.Error("nb gateway init wrote the default path too")
	}
	// nb gateway status reads the same file.
	if code, out, errs := runNB(t, append(env, "ANTHROPIC_API_KEY=k", "BRAVE_API_KEY=k"), "gateway", "status"); code != 0 || !strings.Contains(out, "Config: "+want) {
		t.Errorf("nb gateway status after init: %d\n%s%s", code, out, errs)
	}
}
