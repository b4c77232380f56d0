package main

import (
	"encoding/json"
	"net/http"
	"path/filepath"

	"github.com/nbots/nb/gateway/channel"
	"github.com/nbots/nb/gateway/config"
)

// channelStatusPath is the file where a running gateway keeps its
// channels' states (gateway.KeepStatus), beside their receive positions.
func (a *App) channelStatusPath(workspace string) string {
	return filepath.Join(a.gatewayState(workspace).Channels, "status.json")
}

// configuredChannels are the configuration's channels, enabled or not,
// by name.
func configuredChannels(c *config.Config) map[string]bool {
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
// share one: gateway_shared.go), and the gateway's logger.
func (rt *gatewayRuntime) channelEnv(name string, raw json.RawMessage) channel.Env {
	dir := rt.App.gatewayState(rt.Config.Workspace).Channels
	return channel.Env{Workspace: rt.Config.Workspace, StateDir: dir, Logger: rt.Log, OpenPosition: rt.sharedPosition(name, raw),
		MediaQuota: rt.Config.Gateway.Limits.Media(), NanobotDir: rt.nanobotDir()}
}

// nanobotDir is nanobot's data folder, where its WhatsApp bridge keeps
// its token and media: the configuration's folder when that is
// ~/.nanobot (or another instance's), else ~/.nanobot.
func (rt *gatewayRuntime) nanobotDir() string {
	if p := rt.Config.Path; p != "" && filepath.Base(filepath.Dir(p)) == ".nanobot" {
		return filepath.Dir(p)
	}
	return filepath.Join(rt.App.Getenv("HOME"), ".nanobot")
}
