// Package channels is the registry of the chat platforms a gateway starts
// from the configuration's channels.<name> sections: one Factory per
// platform package, so adding a platform is one line in Builtin.
package channels

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
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

// Factory builds the channel of one platform from its configuration
// section.
type Factory struct {
	// Name is the key of the platform's section under channels (nanobot's).
	Name string
	// New builds the channel from the section raw (keys in camelCase, as
	// the configuration loader left them) and what the gateway gives it.
	New func(raw json.RawMessage, env channel.Env) (channel.Channel, error)
}

// Of is the Factory of a platform package that exposes Name, a Config
// read from the section's JSON and New(Config, channel.Env).
func Of[C any, T channel.Channel](name string, build func(C, channel.Env) (T, error)) Factory {
	return Factory{Name: name, New: func(raw json.RawMessage, env channel.Env) (channel.Channel, error) {
		var cfg C
		if err := Decode(raw, &cfg); err != nil {
			return nil, err
		}
		return build(cfg, env)
	}}
}

// Builtin are the platforms this nb links (docs/gateway-channels.md).
func Builtin() []Factory {
	return []Factory{
		Of(telegram.Name, telegram.New),
		Of(slack.Name, slack.New),
		Of(discord.Name, discord.New),
		Of(email.Name, email.New),
		Of(matrix.Name, matrix.New),
		Of(feishu.Name, feishu.New),
		Of(wecom.Name, wecom.New),
		Of(dingtalk.Name, dingtalk.New),
		Of(qq.Name, qq.New),
		// WhatsApp's bridge and Mochat keep their token, media and cursors
		// in nanobot's data folder unless the section says otherwise.
		{Name: whatsapp.Name, New: func(raw json.RawMessage, env channel.Env) (channel.Channel, error) {
			cfg := whatsapp.Config{NanobotDir: env.NanobotDir}
			if err := Decode(raw, &cfg); err != nil {
				return nil, err
			}
			return whatsapp.New(cfg, env)
		}},
		{Name: mochat.Name, New: func(raw json.RawMessage, env channel.Env) (channel.Channel, error) {
			cfg := mochat.Config{NanobotDir: env.NanobotDir}
			if err := Decode(raw, &cfg); err != nil {
				return nil, err
			}
			return mochat.New(cfg, env)
		}},
	}
}

// Find is the factory of name among fs.
func Find(fs []Factory, name string) (Factory, bool) {
	for _, f := range fs {
		if f.Name == name {
			return f, true
		}
	}
	return Factory{}, false
}

// Decode reads a channel's section into its Config; a value of the wrong
// type is named, without the section's values (they hold tokens).
func Decode(raw json.RawMessage, cfg any) error {
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
