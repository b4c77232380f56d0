package config

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nbots/nb/cartridge"
)

func TestLoadNanobotConfig(t *testing.T) {
	home := t.TempDir()
	env := Env{"HOME=" + home, "TG_TOKEN=tg-secret", "ANTHROPIC_KEY=sk-ant", "NANOBOT_AGENTS__DEFAULTS__MAX_TOOL_ITERATIONS=12", "NANOBOT_GATEWAY__PORT=18800"}
	c, err := Load("testdata/nanobot.json", "", env)
	if err != nil {
		t.Fatal(err)
	}
	d := c.Agents.Defaults
	if d.Model != "anthropic/claude-opus-4-5" || d.MaxTokens != 4096 || *d.Temperature != 0.2 || d.MemoryWindow != 50 || d.Timezone != "Europe/Paris" {
		t.Fatalf("defaults %+v", d)
	}
	if d.MaxToolIterations != 12 || c.Gateway.Port != 18800 {
		t.Fatalf("NANOBOT_ overrides not applied: %d %d", d.MaxToolIterations, c.Gateway.Port)
	}
	if c.Workspace != filepath.Join(home, ".nanobot", "workspace") {
		t.Fatal(c.Workspace)
	}
	if !c.Channels.Progress() || !c.Channels.SendToolHints || c.Gateway.Heartbeat.IntervalS != 1800 {
		t.Fatalf("%+v", c.Channels)
	}
	tg, err := c.Channels.Channel("telegram")
	if err != nil || !tg.Enabled || len(tg.AllowFrom) != 1 || tg.AllowFrom[0] != "123|alice" {
		t.Fatalf("%+v %v", tg, err)
	}
	if !strings.Contains(string(c.Channels.Each["telegram"]), `"token":"tg-secret"`) {
		t.Fatalf("${VAR} not resolved in a channel: %s", c.Channels.Each["telegram"])
	}
	if c.Providers["anthropic"].APIKey != "sk-ant" || c.Providers["anthropic"].ExtraHeaders["X-Team_Id"] != "t1" {
		t.Fatalf("%+v", c.Providers)
	}
	mcp := c.Tools.MCPServers["my_files"]
	if mcp.Env["LOG_LEVEL"] != "warn" || mcp.ToolTimeout != 10 {
		t.Fatalf("names under mcpServers and env must stay as written: %+v", c.Tools.MCPServers)
	}
	if len(c.Warnings) != 1 || !strings.Contains(c.Warnings[0], `tools.restrictToWorkspce: unknown key, ignored: did you mean "restrictToWorkspace"?`) {
		t.Fatalf("warnings %q", c.Warnings)
	}

	cart, warnings, err := c.Cartridge(cartridge.Default(env.Lookup), env)
	if err != nil {
		t.Fatal(err)
	}
	if cart.String("provider", "id") != "anthropic" || cart.String("provider", "settings", "model") != "claude-opus-4-5" || cart.String("provider", "credentials", "api-key") != "sk-ant" {
		t.Fatalf("provider %v", cart.Raw)
	}
	if v, _ := cart.Get("provider", "settings", "max_tokens"); v != int64(4096) && v != uint64(4096) {
		t.Fatalf("max_tokens %T %v", v, v)
	}
	bi, err := cart.Builtins()
	if err != nil || bi.Files == nil || bi.Files.Workspace != c.Workspace || bi.Exec == nil || bi.Exec.Sandbox != "auto" || !bi.Files.Anywhere || bi.Web == nil || bi.Web.Search.APIKey != "brave-key" {
		t.Fatalf("builtins %+v %v", bi, err)
	}
	// restrictToWorkspace: false (nanobot onboard writes it) opens the
	// file tools, as nanobot's, not exec's sandbox: one warning says so.
	if len(warnings) != 1 || !strings.Contains(warnings[0], "restrictToWorkspace is false: the file tools") || !strings.Contains(warnings[0], "exec stays in its sandbox") {
		t.Fatalf("warnings %q", warnings)
	}
	servers, err := cart.MCP(env.Lookup)
	if err != nil || len(servers) != 1 || servers[0].Name != "my_files" || strings.Join(servers[0].Tools, ",") != "read,list" {
		t.Fatalf("mcp %+v %v", servers, err)
	}
	if bi.Files.Profile != "nanobot" {
		t.Fatalf("editing tool profile %q: nanobot's edit_file is wanted", bi.Files.Profile)
	}
	if c.ExtraHeaders()["X-Team_Id"] != "t1" {
		t.Fatal(c.ExtraHeaders())
	}
}

func TestMissingVariable(t *testing.T) {
	_, err := Load("testdata/nanobot.json", "", Env{"HOME=/h", "TG_TOKEN=x"})
	if err == nil || !strings.Contains(err.Error(), "providers.anthropic.apiKey: the environment variable ANTHROPIC_KEY is not set") {
		t.Fatal(err)
	}
}

func TestFindAndDefault(t *testing.T) {
	home := t.TempDir()
	env := Env{"HOME=" + home, "XDG_DATA_HOME=" + filepath.Join(home, "data")}
	p, err := Find("", env)
	if err != nil || p != "" {
		t.Fatal(p, err)
	}
	c, err := Load("", "", env)
	if err != nil {
		t.Fatal(err)
	}
	if c.Workspace != filepath.Join(home, "data", "nb", "gateway") || c.Gateway.Host != "127.0.0.1" || c.Gateway.Port != 18790 || c.Mapped() {
		t.Fatalf("%+v", c)
	}
	cart, _, err := c.Cartridge(cartridge.Default(env.Lookup), env)
	if err != nil || cart.String("provider", "id") != "openai" || cart.RawString("provider", "credentials", "access-token") != "ENV/OPENAI_API_KEY" {
		t.Fatalf("%v %v", cart.Raw, err)
	}
	// A file that leaves maxToolIterations out gets nanobot's 40 rounds.
	os.MkdirAll(filepath.Join(home, ".nanobot"), 0o700)
	os.WriteFile(filepath.Join(home, ".nanobot", "config.json"), []byte(`{}`), 0o600)
	c, err = Load(filepath.Join(home, ".nanobot", "config.json"), "", env)
	if err != nil {
		t.Fatal(err)
	}
	cart, _, err = c.Cartridge(cartridge.Default(env.Lookup), env)
	if v, ok := cart.Get("safety", "tools", "rounds"); err != nil || !ok || fmt.Sprint(v) != "40" {
		t.Fatalf("rounds %v (%v)", v, err)
	}
	// ~/.nanobot/config.json is found, then nb's own file first.
	os.WriteFile(filepath.Join(home, ".nanobot", "config.json"), []byte(`{}`), 0o600)
	if p, _ := Find("", env); p != filepath.Join(home, ".nanobot", "config.json") {
		t.Fatal(p)
	}
	if c, _ := Load(filepath.Join(home, ".nanobot", "config.json"), "", env); c.Workspace != filepath.Join(home, ".nanobot", "workspace") {
		t.Fatal(c.Workspace)
	}
	nb := filepath.Join(home, ".config", "nb", "gateway.json")
	os.MkdirAll(filepath.Dir(nb), 0o700)
	os.WriteFile(nb, []byte(`{}`), 0o600)
	if p, _ := Find("", env); p != nb {
		t.Fatal(p)
	}
	if _, err := Find("/nope.json", env); err == nil || !strings.Contains(err.Error(), "--config /nope.json") {
		t.Fatal(err)
	}
}

func TestBadConfig(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.json")
	os.WriteFile(path, []byte("{\n \"gateway\": {\"port\": \"x\"}\n}"), 0o600)
	if _, err := Load(path, "", nil); err == nil || !strings.Contains(err.Error(), "gateway.port: must be a number") {
		t.Fatal(err)
	}
	os.WriteFile(path, []byte("{\n \"gateway\": {\"port\": ,}\n}"), 0o600)
	if _, err := Load(path, "", nil); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Fatal(err)
	}
}

func TestStarterLoads(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gateway.json")
	os.WriteFile(path, Starter, 0o600)
	c, err := Load(path, "", Env{"HOME=/h", "ANTHROPIC_API_KEY=k", "BRAVE_API_KEY=b"})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Warnings) != 0 || c.Agents.Defaults.Model != "anthropic/claude-sonnet-4-5" || c.Providers["anthropic"].APIKey != "k" {
		t.Fatalf("%+v %q", c.Agents.Defaults, c.Warnings)
	}
	if string(stripComments([]byte(`{"a": "http://x/*y*/"} // c`))) != `{"a": "http://x/*y*/"}     ` {
		t.Fatal("comments inside strings must stay")
	}
}

// gateway.guests.tools is read as written (snake_case too); absent, it is
// nil (the gateway's default); cron in it is warned about.
func TestGuests(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.json")
	os.WriteFile(path, []byte(`{"gateway": {"guests": {"tools": ["read_file", "exec", "cron"]}}}`), 0o600)
	c, err := Load(path, "", Env{"HOME=/h"})
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Gateway.Guests.Tools; len(got) != 3 || got[1] != "exec" {
		t.Fatalf("guests.tools %q", got)
	}
	if len(c.Warnings) != 1 || !strings.Contains(c.Warnings[0], "gateway.guests.tools: cron is never offered to guests") {
		t.Fatalf("warnings %q", c.Warnings)
	}
	os.WriteFile(path, []byte(`{"gateway": {"guests": {"tools": []}}}`), 0o600)
	if c, err = Load(path, "", Env{"HOME=/h"}); err != nil || c.Gateway.Guests.Tools == nil || len(c.Warnings) != 0 {
		t.Fatalf("an empty list (no tools at all) must stay empty, not absent: %v %q", err, c.Warnings)
	}
	if c, err = Load("", "", Env{"HOME=/h"}); err != nil || c.Gateway.Guests.Tools != nil {
		t.Fatalf("the default configuration: %v %v", err, c.Gateway.Guests.Tools)
	}
}

// agents.defaults.limits (nb) is read, and its keys are known.
func TestLimitsKeys(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gateway.json")
	os.WriteFile(path, []byte(`{"agents": {"defaults": {"limits": {"promptFileBytes": 1000, "memoryBytes": 2000, "consolidationChunkBytes": 3000, "consolidationMessageBytes": 400}}}}`), 0o600)
	c, err := Load(path, "", Env{"HOME=/h"})
	if err != nil {
		t.Fatal(err)
	}
	if l := c.Agents.Defaults.Limits; len(c.Warnings) != 0 || l != (Limits{1000, 2000, 3000, 400}) {
		t.Fatalf("%+v %q", l, c.Warnings)
	}
}

// Target is where nb gateway init writes: --config, NB_GATEWAY_CONFIG
// (where Find looks next, ~ expanded), then nb's own path.
func TestTarget(t *testing.T) {
	home := t.TempDir()
	env := Env{"HOME=" + home, "XDG_CONFIG_HOME=" + filepath.Join(home, "cfg")}
	for _, tc := range []struct {
		flag     string
		env      Env
		path, by string
	}{
		{"", env, filepath.Join(home, "cfg", "nb", "gateway.json"), ""},
		{"", append(env, "NB_GATEWAY_CONFIG=~/x/gw.json"), filepath.Join(home, "x", "gw.json"), "NB_GATEWAY_CONFIG"},
		{"/etc/gw.json", append(env, "NB_GATEWAY_CONFIG=/other.json"), "/etc/gw.json", "--config"},
		{"", Env{}, "", ""},
	} {
		if p, by := Target(tc.flag, tc.env); p != tc.path || by != tc.by {
			t.Errorf("Target(%q, %v) = %q, %q; want %q, %q", tc.flag, tc.env, p, by, tc.path, tc.by)
		}
	}
}
