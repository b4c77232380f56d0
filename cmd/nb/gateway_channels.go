package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"

	"github.com/nbots/nb/gateway/channel"
	"github.com/nbots/nb/gateway/channel/dingtalk"
	"github.com/nbots/nb/gateway/channel/discord"
	"github.com/nbots/nb/gateway/channel/email"
	"github.com/nbots/nb/gateway/channel/feishu"
	"github.com/nbots/nb/gateway/channel/matrix"
	"github.com/nbots/nb/gateway/channel/mochat"
	"github.com/nbots/nb/gateway/channel/qq"
	"github.com/nbots/nb/gateway/channel/slack"
	"github.com/nbots/nb/gateway/channel/telegram"
	"github.com/nbots/nb/gateway/channel/wecom"
	"github.com/nbots/nb/gateway/channel/whatsapp"
)

// The chat platforms nb gateway starts from channels.<name> (the keys of
// nanobot's configuration; docs/gateway-channels.md).
func init() {
	gatewayChannels[telegram.Name] = func(raw json.RawMessage, rt *gatewayRuntime) (channel.Channel, error) {
		var cfg telegram.Config
		if err := decodeChannel(raw, &cfg); err != nil {
			return nil, err
		}
		return telegram.New(cfg, rt.channelEnv(telegram.Name, raw))
	}
	gatewayChannels[slack.Name] = func(raw json.RawMessage, rt *gatewayRuntime) (channel.Channel, error) {
		var cfg slack.Config
		if err := decodeChannel(raw, &cfg); err != nil {
			return nil, err
		}
		return slack.New(cfg, rt.channelEnv(slack.Name, raw))
	}
	gatewayChannels[discord.Name] = func(raw json.RawMessage, rt *gatewayRuntime) (channel.Channel, error) {
		var cfg discord.Config
		if err := decodeChannel(raw, &cfg); err != nil {
			return nil, err
		}
		return discord.New(cfg, rt.channelEnv(discord.Name, raw))
	}
	gatewayChannels[email.Name] = func(raw json.RawMessage, rt *gatewayRuntime) (channel.Channel, error) {
		var cfg email.Config
		if err := decodeChannel(raw, &cfg); err != nil {
			return nil, err
		}
		return email.New(cfg, rt.channelEnv(email.Name, raw))
	}
	gatewayChannels[matrix.Name] = func(raw json.RawMessage, rt *gatewayRuntime) (channel.Channel, error) {
		var cfg matrix.Config
		if err := decodeChannel(raw, &cfg); err != nil {
			return nil, err
		}
		return matrix.New(cfg, rt.channelEnv(matrix.Name, raw))
	}
	gatewayChannels[feishu.Name] = func(raw json.RawMessage, rt *gatewayRuntime) (channel.Channel, error) {
		var cfg feishu.Config
		if err := decodeChannel(raw, &cfg); err != nil {
			return nil, err
		}
		return feishu.New(cfg, rt.channelEnv(feishu.Name, raw))
	}
	gatewayChannels[wecom.Name] = func(raw json.RawMessage, rt *gatewayRuntime) (channel.Channel, error) {
		var cfg wecom.Config
		if err := decodeChannel(raw, &cfg); err != nil {
			return nil, err
		}
		return wecom.New(cfg, rt.channelEnv(wecom.Name, raw))
	}
	gatewayChannels[dingtalk.Name] = func(raw json.RawMessage, rt *gatewayRuntime) (channel.Channel, error) {
		var cfg dingtalk.Config
		if err := decodeChannel(raw, &cfg); err != nil {
			return nil, err
		}
		return dingtalk.New(cfg, rt.channelEnv(dingtalk.Name, raw))
	}
	gatewayChannels[qq.Name] = func(raw json.RawMessage, rt *gatewayRuntime) (channel.Channel, error) {
		var cfg qq.Config
		if err := decodeChannel(raw, &cfg); err != nil {
			return nil, err
		}
		return qq.New(cfg, rt.channelEnv(qq.Name, raw))
	}
	gatewayChannels[whatsapp.Name] = func(raw json.RawMessage, rt *gatewayRuntime) (channel.Channel, error) {
		cfg := whatsapp.Config{NanobotDir: rt.nanobotDir()}
		if err := decodeChannel(raw, &cfg); err != nil {
			return nil, err
		}
		return whatsapp.New(cfg, rt.channelEnv(whatsapp.Name, raw))
	}
	gatewayChannels[mochat.Name] = func(raw json.RawMessage, rt *gatewayRuntime) (channel.Channel, error) {
		cfg := mochat.Config{NanobotDir: rt.nanobotDir()}
		if err := decodeChannel(raw, &cfg); err != nil {
			return nil, err
		}
		return mochat.New(cfg, rt.channelEnv(mochat.Name, raw))
	}
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

// decodeChannel reads a channel's section (keys in camelCase, as the
// configuration loader left them) into its Config; a value of the wrong
// type is named, without the section's values (they hold tokens).
func decodeChannel(raw json.RawMessage, cfg any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(cfg); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return fmt.Errorf("%s must be %s, not %s", te.Field, strings.TrimPrefix(te.Type.String(), "[]"), te.Value)
		}
		return fmt.Errorf("unreadable settings")
	}
	return nil
}

// channelEnv is what the platform channel name (its section raw) gets:
// the workspace (inbound media go under media/<channel>), a folder beside
// the pairing store for its receive positions (on the bus, when replicas
// share one: gateway_shared.go), and the gateway's logger.
func (rt *gatewayRuntime) channelEnv(name string, raw json.RawMessage) channel.Env {
	pairing := rt.App.pairingStore(rt.Config.Workspace)
	dir := filepath.Join(filepath.Dir(pairing), "channels-"+strings.TrimSuffix(strings.TrimPrefix(filepath.Base(pairing), "pairing-"), ".json"))
	return channel.Env{Workspace: rt.Config.Workspace, StateDir: dir, Logger: rt.Log, OpenPosition: rt.sharedPosition(name, raw), MediaQuota: rt.Config.Gateway.Limits.Media()}
}
