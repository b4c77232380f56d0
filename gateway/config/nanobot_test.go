package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestMemoryWindowByVersion: a nanobot configuration's memoryWindow is
// read as the nanobot it was written for reads it: beside
// contextWindowTokens (v0.1.4.post5's onboard writes it) it is ignored,
// with a hint; alone (up to v0.1.4.post4) it is kept, with a hint that
// v0.1.4.post5 ignores it. nb's own gateway.json is not touched.
func TestMemoryWindowByVersion(t *testing.T) {
	home := t.TempDir()
	env := Env{"HOME=" + home}
	write := func(name, defaults string) string {
		p := filepath.Join(home, name)
		os.MkdirAll(filepath.Dir(p), 0o700)
		os.WriteFile(p, []byte(`{"agents": {"defaults": {`+defaults+`}}}`), 0o600)
		return p
	}
	for _, tc := range []struct {
		name, file, defaults string
		window               int
		hint                 string
	}{
		{"post5", ".nanobot/config.json", `"memoryWindow": 100, "contextWindowTokens": 65536`, -1, "agents.defaults.memoryWindow is ignored beside contextWindowTokens, as nanobot from v0.1.4.post5 on ignores it"},
		{"post4", "old/config.json", `"memoryWindow": 50`, 50, "memory is consolidated every 50 messages, as nanobot up to v0.1.4.post4 does; nanobot v0.1.4.post5 ignores memoryWindow"},
		{"nb", ".config/nb/gateway.json", `"memoryWindow": 80, "contextWindowTokens": 65536`, 80, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Load(write(tc.file, tc.defaults), "", env)
			if err != nil {
				t.Fatal(err)
			}
			if c.Agents.Defaults.MemoryWindow != tc.window {
				t.Errorf("memoryWindow %d, want %d", c.Agents.Defaults.MemoryWindow, tc.window)
			}
			w := strings.Join(c.Warnings, "\n")
			if tc.hint == "" && strings.Contains(w, "memoryWindow") || !strings.Contains(w, tc.hint) {
				t.Errorf("warnings %q, want %q", w, tc.hint)
			}
		})
	}
}

// TestNanobotPaths: nanobot's legacy jobs file and sessions folder are
// looked for beside a nanobot configuration only.
func TestNanobotPaths(t *testing.T) {
	home := t.TempDir()
	env := Env{"HOME=" + home}
	p := filepath.Join(home, "elsewhere", "config.json")
	os.MkdirAll(filepath.Dir(p), 0o700)
	os.WriteFile(p, []byte(`{}`), 0o600)
	c, err := Load(p, "", env)
	if err != nil {
		t.Fatal(err)
	}
	if c.NanobotCron != filepath.Join(home, "elsewhere", "cron", "jobs.json") || c.NanobotSessions != filepath.Join(home, ".nanobot", "sessions") {
		t.Errorf("%s %s", c.NanobotCron, c.NanobotSessions)
	}
	p = filepath.Join(home, "gateway.json")
	os.WriteFile(p, []byte(`{}`), 0o600)
	if c, err = Load(p, "", env); err != nil || c.NanobotCron != "" || c.NanobotSessions != "" {
		t.Errorf("nb's own configuration: %q %q %v", c.NanobotCron, c.NanobotSessions, err)
	}
}
