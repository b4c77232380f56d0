package channels

import (
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nbots/nb/gateway/channel"
	"github.com/nbots/nb/gateway/channel/whatsapp/native"
	"github.com/nbots/nb/gateway/config"
)

// TestBuiltin: every platform is registered once, under its section's key.
func TestBuiltin(t *testing.T) {
	seen := map[string]bool{}
	for _, f := range Builtin() {
		if f.Name == "" || f.New == nil {
			t.Errorf("factory %+v is incomplete", f)
		}
		if seen[f.Name] {
			t.Errorf("%s is registered twice", f.Name)
		}
		seen[f.Name] = true
	}
	for _, name := range []string{"telegram", "slack", "discord", "email", "matrix"} {
		if _, ok := Find(Builtin(), name); !ok {
			t.Errorf("%s is not registered", name)
		}
	}
	if _, ok := Find(Builtin(), "nosuch"); ok {
		t.Error("Find found a platform nb has not")
	}
}

// TestOfNamesTheWrongType: a section's value of the wrong type is named
// by its key, and the section's values (tokens) are not repeated.
func TestOfNamesTheWrongType(t *testing.T) {
	f, _ := Find(Builtin(), "telegram")
	_, err := f.New(json.RawMessage(`{"token":"123:SECRET","allowFrom":"x"}`), channel.Env{Workspace: t.TempDir(), StateDir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "allowFrom") || strings.Contains(err.Error(), "SECRET") {
		t.Errorf("err = %v, want one naming allowFrom without the token", err)
	}
}

// TestTypoInAKeyIsAnError: channels.telegram.alowFrom stops the channel
// with an error naming the key and the one meant, not the token; a key
// nothing is near (a newer nanobot's) is logged as ignored.
func TestTypoInAKeyIsAnError(t *testing.T) {
	f, _ := Find(Builtin(), "telegram")
	env := channel.Env{Workspace: t.TempDir(), StateDir: t.TempDir()}
	_, err := f.New(json.RawMessage(`{"enabled":true,"token":"123:SECRET","alowFrom":["42"]}`), env)
	if err == nil || !strings.Contains(err.Error(), `channels.telegram.alowFrom: unknown key: did you mean "allowFrom"?`) || strings.Contains(err.Error(), "SECRET") {
		t.Errorf("err = %v", err)
	}
	var logs strings.Builder
	env.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	if _, err := f.New(json.RawMessage(`{"enabled":true,"token":"123:SECRET","futureFeature":true}`), env); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "channels.telegram.futureFeature: unknown key, ignored") {
		t.Errorf("no warning: %s", logs.String())
	}
}

// TestEveryChannelChecksItsKeys: each platform refuses a typo in its
// section, nested sections too (slack's dm, mochat's mention and groups).
func TestEveryChannelChecksItsKeys(t *testing.T) {
	for _, f := range Builtin() {
		_, err := f.New(json.RawMessage(`{"enabled":true,"alowFrom":["42"]}`), channel.Env{Workspace: t.TempDir(), StateDir: t.TempDir()})
		if err == nil || !strings.Contains(err.Error(), "channels."+f.Name+".alowFrom: unknown key") {
			t.Errorf("%s: err = %v", f.Name, err)
		}
	}
	f, _ := Find(Builtin(), "slack")
	if _, err := f.New(json.RawMessage(`{"dm":{"polcy":"open"}}`), channel.Env{Workspace: t.TempDir(), StateDir: t.TempDir()}); err == nil || !strings.Contains(err.Error(), "unknown key: did you mean") {
		t.Errorf("slack: err = %v", err)
	}
	f, _ = Find(Builtin(), "mochat")
	_, err := f.New(json.RawMessage(`{"mention":{"requireInGroup":true},"groups":{"g1":{"requireMentions":true}}}`), channel.Env{})
	if err == nil || !strings.Contains(err.Error(), `channels.mochat.mention.requireInGroup: unknown key: did you mean "requireInGroups"?`) ||
		!strings.Contains(err.Error(), `channels.mochat.groups.g1.requireMentions: unknown key: did you mean "requireMention"?`) {
		t.Errorf("mochat: err = %v", err)
	}
}

// nanobotKeys are the keys of every channel of nanobot v0.1.4.post5
// (nanobot/config/schema.py), camelCase as its alias generator makes
// them: none may be taken for a typo.
var nanobotKeys = map[string][]string{
	"whatsapp": {"enabled", "bridgeUrl", "bridgeToken", "allowFrom"},
	"telegram": {"enabled", "token", "allowFrom", "proxy", "replyToMessage"},
	"feishu":   {"enabled", "appId", "appSecret", "encryptKey", "verificationToken", "allowFrom", "reactEmoji"},
	"dingtalk": {"enabled", "clientId", "clientSecret", "allowFrom"},
	"discord":  {"enabled", "token", "allowFrom", "gatewayUrl", "intents", "groupPolicy"},
	"matrix": {"enabled", "homeserver", "accessToken", "userId", "deviceId", "e2eeEnabled", "syncStopGraceSeconds", "maxMediaBytes",
		"allowFrom", "groupPolicy", "groupAllowFrom", "allowRoomMentions"},
	"email": {"enabled", "consentGranted", "imapHost", "imapPort", "imapUsername", "imapPassword", "imapMailbox", "imapUseSsl",
		"smtpHost", "smtpPort", "smtpUsername", "smtpPassword", "smtpUseTls", "smtpUseSsl", "fromAddress", "autoReplyEnabled",
		"pollIntervalSeconds", "markSeen", "maxBodyChars", "subjectPrefix", "allowFrom"},
	"mochat": {"enabled", "baseUrl", "socketUrl", "socketPath", "socketDisableMsgpack", "socketReconnectDelayMs", "socketMaxReconnectDelayMs",
		"socketConnectTimeoutMs", "refreshIntervalMs", "watchTimeoutMs", "watchLimit", "retryDelayMs", "maxRetryAttempts", "clawToken",
		"agentUserId", "sessions", "panels", "allowFrom", "mention", "groups", "replyDelayMode", "replyDelayMs"},
	"slack": {"enabled", "mode", "webhookPath", "botToken", "appToken", "userTokenReadOnly", "replyInThread", "reactEmoji", "allowFrom",
		"groupPolicy", "groupAllowFrom", "dm"},
	"qq": {"enabled", "appId", "secret", "allowFrom"},
}

// TestNanobotKeysAreNoTypos: a nanobot configuration's channel sections
// pass the key check unchanged, whatever nb does with each key.
func TestNanobotKeysAreNoTypos(t *testing.T) {
	for name, keys := range nanobotKeys {
		f, ok := Find(Builtin(), name)
		if !ok {
			t.Errorf("%s is not registered", name)
			continue
		}
		section := map[string]any{}
		for _, k := range keys {
			section[k] = nil
		}
		raw, _ := json.Marshal(section)
		if _, err := f.New(raw, channel.Env{Workspace: t.TempDir(), StateDir: t.TempDir()}); err != nil && strings.Contains(err.Error(), "unknown key") {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestSnakeCaseKeys: a section written in nanobot's snake_case passes
// the check (the loader makes it camelCase, as pydantic's aliases
// accept both), and a typo in it is named as the key it stands for.
func TestSnakeCaseKeys(t *testing.T) {
	f, _ := Find(Builtin(), "telegram")
	for section, typo := range map[string]bool{
		`{"enabled": true, "token": "123:SECRET", "allow_from": ["42"], "reply_to_message": true}`: false,
		`{"enabled": true, "token": "123:SECRET", "alow_from": ["42"]}`:                            true,
	} {
		path := filepath.Join(t.TempDir(), "config.json")
		if err := os.WriteFile(path, []byte(`{"channels": {"telegram": `+section+`}}`), 0o600); err != nil {
			t.Fatal(err)
		}
		c, err := config.Load(path, t.TempDir(), config.Env{"HOME=" + t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		_, err = f.New(c.Channels.Each["telegram"], channel.Env{Workspace: t.TempDir(), StateDir: t.TempDir()})
		if typo != (err != nil) || typo && !strings.Contains(err.Error(), `channels.telegram.alowFrom: unknown key: did you mean "allowFrom"?`) {
			t.Errorf("%s: err = %v", section, err)
		}
	}
}

// TestShippedConfigurationsPass: the channel sections of the starting
// configuration nb gateway init writes, and of the nanobot configuration
// the loader is tested with, hold no key taken for a typo.
func TestShippedConfigurationsPass(t *testing.T) {
	starter := filepath.Join(t.TempDir(), "starter.jsonc")
	if err := os.WriteFile(starter, config.Starter, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{starter, "../config/testdata/nanobot.json"} {
		c, err := config.Load(path, t.TempDir(), config.Env{"HOME=" + t.TempDir(), "TG_TOKEN=1:x", "TELEGRAM_BOT_TOKEN=1:x", "ANTHROPIC_API_KEY=k", "ANTHROPIC_KEY=k", "BRAVE_API_KEY=k", "OPENROUTER_API_KEY=k", "VAR=v"})
		if err != nil {
			t.Fatal(err)
		}
		for name, raw := range c.Channels.Each {
			f, ok := Find(Builtin(), name)
			if !ok {
				continue
			}
			if _, err := f.New(raw, channel.Env{Workspace: t.TempDir(), StateDir: t.TempDir()}); err != nil && strings.Contains(err.Error(), "unknown key") {
				t.Errorf("%s: %v", path, err)
			}
		}
	}
}

// TestNamesKeptAsWritten: the ids under channels.mochat.groups and
// channels.whatsapp.lidMappings are names, not keys: the loader leaves
// them as written (group_1 stays group_1), and their entries' keys are
// still checked.
func TestNamesKeptAsWritten(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(path, []byte(`{"channels": {
	  "mochat": {"groups": {"group_1": {"require_mention": true}}},
	  "whatsapp": {"lid_mappings": {"123_456@lid": "49170@s.whatsapp.net"}}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := config.Load(path, t.TempDir(), config.Env{"HOME=" + t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if got := string(c.Channels.Each["mochat"]); got != `{"groups":{"group_1":{"requireMention":true}}}` {
		t.Errorf("mochat: %s", got)
	}
	if got := string(c.Channels.Each["whatsapp"]); got != `{"lidMappings":{"123_456@lid":"49170@s.whatsapp.net"}}` {
		t.Errorf("whatsapp: %s", got)
	}
}

// channels.whatsapp.native in an nb built without whatsmeow is refused
// at start, naming the build tag.
func TestWhatsAppNativeNotBuilt(t *testing.T) {
	if native.Built {
		t.Skip("this nb has the native mode")
	}
	f, ok := Find(Builtin(), "whatsapp")
	if !ok {
		t.Fatal("no whatsapp channel")
	}
	_, err := f.New(json.RawMessage(`{"enabled": true, "native": true, "allowFrom": ["15551234567"]}`), channel.Env{})
	if err == nil || !strings.Contains(err.Error(), "-tags whatsmeow") {
		t.Errorf("native without the tag: %v", err)
	}
}
