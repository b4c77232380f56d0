package slack

import (
	"log/slog"
	"testing"
	"time"

	"github.com/nbots/nb/gateway/channel"
	"github.com/nbots/nb/gateway/channel/channeltest"
	"github.com/nbots/nb/gateway/channel/slack/slacktest"
)

// platform is the conformance suite's view of the Slack fake: a person
// writes to the bot in a direct message.
type platform struct{ fake *slacktest.Server }

func (p platform) Channel(t *testing.T, env channel.Env) channel.Channel {
	env.Logger = slog.New(slog.DiscardHandler)
	c, err := New(Config{BotToken: botToken, AppToken: appToken, APIBase: p.fake.URL}, env)
	if err != nil {
		t.Fatal(err)
	}
	c.retryBase = time.Millisecond
	return c
}

func (p platform) Say(t *testing.T, text string) string {
	return p.fake.Post(slacktest.Event{Channel: "D0001", ChannelType: "im", User: "U0001", Text: text}).Channel
}

func (p platform) Sent(t *testing.T, chatID string) []string {
	var out []string
	for _, m := range p.fake.Sent(chatID) {
		out = append(out, m.Text)
	}
	return out
}

func TestConformance(t *testing.T) {
	channeltest.Conformance(t, func(t *testing.T) channeltest.Platform { return platform{newFake(t)} })
}

// Cut stops the fake: the channel's connection and its reconnections are
// refused.
func (p platform) Cut(t *testing.T) { p.fake.Close() }
