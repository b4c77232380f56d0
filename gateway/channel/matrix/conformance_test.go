package matrix

import (
	"testing"

	"github.com/nbots/nb/gateway/channel"
	"github.com/nbots/nb/gateway/channel/channeltest"
	"github.com/nbots/nb/gateway/channel/matrix/matrixtest"
)

// platform is the conformance suite's view of the Matrix fake: alice
// writes in her direct room with the bot, opened at her first message.
type platform struct {
	fake *matrixtest.Server
	room *string
}

func (p platform) Channel(t *testing.T, env channel.Env) channel.Channel {
	c, _ := newChannel(t, p.fake, env, Config{})
	return c
}

func (p platform) Say(t *testing.T, text string) string {
	if *p.room == "" {
		*p.room = direct(t, p.fake, alice)
	}
	p.fake.Say(*p.room, alice, text)
	return *p.room
}

func (p platform) Sent(t *testing.T, chatID string) []string { return p.fake.Texts(chatID) }

func TestConformance(t *testing.T) {
	channeltest.Conformance(t, func(t *testing.T) channeltest.Platform { return platform{newFake(t), new(string)} })
}

// Throttle makes the next send answer M_LIMIT_EXCEEDED.
func (p platform) Throttle(t *testing.T) { p.fake.Inject("send", channeltest.TooMany) }

// Cut stops the fake: the channel's connection and its reconnections are
// refused.
func (p platform) Cut(t *testing.T) { p.fake.Close() }
