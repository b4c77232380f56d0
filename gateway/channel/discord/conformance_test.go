package discord

import (
	"testing"

	"github.com/nbots/nb/gateway/channel"
	"github.com/nbots/nb/gateway/channel/channeltest"
	"github.com/nbots/nb/gateway/channel/discord/discordtest"
)

// platform is the conformance suite's view of the Discord fake: alice
// writes to the bot in a direct message.
type platform struct{ fake *discordtest.Server }

func (p platform) Channel(t *testing.T, env channel.Env) channel.Channel {
	c, err := New(Config{Token: token, APIBase: p.fake.URL}, env)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func (p platform) Say(t *testing.T, text string) string {
	return p.fake.Post("", "200000000000000001", alice, text).ChannelID
}

func (p platform) Sent(t *testing.T, chatID string) []string {
	var out []string
	for _, m := range p.fake.Sent(chatID) {
		out = append(out, m.Content)
	}
	return out
}

// Cut stops the gateway: the channel must report it is connecting again.
func (p platform) Cut(t *testing.T) { p.fake.Refuse(true) }

func TestConformance(t *testing.T) {
	channeltest.Conformance(t, func(t *testing.T) channeltest.Platform { return platform{newFake(t)} })
}
