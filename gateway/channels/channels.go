// Package channels is the registry of the chat platforms a gateway starts
// from the configuration's channels.<name> sections: one Factory per
// platform package, so adding a platform is one line in Builtin.
package channels

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
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
	"github.com/nbots/nb/gateway/channel/whatsapp/native"
	"github.com/nbots/nb/gateway/config"
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
		if err := decodeSection(name, raw, &cfg, env); err != nil {
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
			if err := decodeSection(whatsapp.Name, raw, &cfg, env); err != nil {
				return nil, err
			}
			if cfg.Native {
				return native.New(cfg, env) // whatsmeow, in an nb built with -tags whatsmeow
			}
			return whatsapp.New(cfg, env)
		}},
		{Name: mochat.Name, New: func(raw json.RawMessage, env channel.Env) (channel.Channel, error) {
			cfg := mochat.Config{NanobotDir: env.NanobotDir}
			if err := decodeSection(mochat.Name, raw, &cfg, env); err != nil {
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

// decodeSection reads channels.<name>'s section raw into cfg, a
// channel's Config, after CheckKeys.
func decodeSection(name string, raw json.RawMessage, cfg any, env channel.Env) error {
	if err := CheckKeys(name, raw, cfg, env.Log()); err != nil {
		return err
	}
	return Decode(raw, cfg)
}

// CheckKeys checks the keys of channels.<name>'s section raw against
// cfg, the channel's Config (its json tags are the keys it knows, so
// there is no second list to keep): a key that is not known but near
// one that is (alowFrom for allowFrom) is an error naming both, as the
// typo would silently change what the channel does (lock its owner out);
// any other unknown key (one of a newer nanobot) is logged as ignored.
// Keys are camelCase, as the configuration's loader leaves them (it
// takes nanobot's snake_case too).
func CheckKeys(name string, raw json.RawMessage, cfg any, log *slog.Logger) error {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil // Decode says what is wrong with it
	}
	var typos []string
	for _, u := range config.UnknownKeys(v, reflect.TypeOf(cfg), "channels."+name) {
		if u.Near == "" {
			log.Warn(u.Path + ": unknown key, ignored")
			continue
		}
		typos = append(typos, fmt.Sprintf("%s: unknown key: did you mean %q?", u.Path, u.Near))
	}
	if len(typos) > 0 {
		return &KeyError{Typos: typos}
	}
	return nil
}

// KeyError is CheckKeys' refusal: each typo names its whole key
// (channels.<name>.<key>) already, so callers add no prefix.
type KeyError struct {
	Typos []string // "channels.telegram.alowFrom: unknown key: did you mean \"allowFrom\"?"
}

func (e *KeyError) Error() string { return strings.Join(e.Typos, "; ") }

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
