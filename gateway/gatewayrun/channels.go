package gatewayrun

import (
	"encoding/json"
	"net/http"
	"path/filepath"

	"github.com/nbots/nb/gateway/channel"
	"github.com/nbots/nb/gateway/config"
)

// ConfiguredChannels are the configuration's channels, enabled or not,
// by name.
func ConfiguredChannels(c *config.Config) map[string]bool {
	out := map[string]bool{}
	for name := range c.Channels.Each {
		cc, _ := c.Channels.Channel(name)
		out[name] = cc.Enabled
	}
	return out
}

// channelWebhooks are the channels that receive by webhook, by the path
// the listener serves them at.
func channelWebhooks(chs []channel.Channel) map[string]http.Handler {
	hooks := map[string]http.Handler{}
	for _, ch := range chs {
		if w, ok := ch.(channel.Webhook); ok && w.WebhookPath() != "" {
			hooks[w.WebhookPath()] = w
		}
	}
	return hooks
}

// channelEnv is what the platform channel name (its section raw) gets:
// the workspace (inbound media go under media/<channel>), a folder beside
// the pairing store for its receive positions (on the bus, when replicas
// share one: shared.go), and the gateway's logger.
func (gw *Gateway) channelEnv(name string, raw json.RawMessage, nanobotDir string) channel.Env {
	return channel.Env{Workspace: gw.Config.Workspace, StateDir: gw.State.Channels, Logger: gw.log, OpenPosition: gw.sharedPosition(name, raw),
		MediaQuota: gw.Config.Gateway.Limits.Media(), NanobotDir: nanobotDir, Postgres: gw.storeURL}
}

// NanobotDir is nanobot's data folder, where its WhatsApp bridge keeps
// its token and media: the folder of the configuration at configPath
// when that is ~/.nanobot (or another instance's), else ~/.nanobot in
// home.
func NanobotDir(configPath, home string) string {
	if configPath != "" && filepath.Base(filepath.Dir(configPath)) == ".nanobot" {
		return filepath.Dir(configPath)
	}
	return filepath.Join(home, ".nanobot")
}
