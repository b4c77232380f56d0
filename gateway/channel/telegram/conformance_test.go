package telegram

import (
	"strconv"
	"testing"

	"github.com/nbots/nb/gateway/channel"
	"github.com/nbots/nb/gateway/channel/channeltest"
	"github.com/nbots/nb/gateway/channel/telegram/telegramtest"
)

// platform is the conformance suite's view of the Telegram fake.
type platform struct{ fake *telegramtest.Server }

func (p platform) Channel(t *testing.T, env channel.Env) channel.Channel {
	c, _ := newChannel(t, p.fake, env, Config{})
	return c
}

func (p platform) Say(t *testing.T, text string) string {
	m := p.fake.Say(alice, text)
	return strconv.FormatInt(m.Chat.ID, 10)
}

func (p platform) Sent(t *testing.T, chatID string) []string {
	id, err := strconv.ParseInt(chatID, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range p.fake.Sent(id) {
		out = append(out, m.Text)
	}
	return out
}

func TestConformance(t *testing.T) {
	channeltest.Conformance(t, func(t *testing.T) channeltest.Platform { return platform{newFake(t)} })
}

// Throttle makes the next sendMessage answer 429 with retry_after 1.
func (p platform) Throttle(t *testing.T) { p.fake.Inject("sendMessage", channeltest.TooMany) }

// Cut makes every getUpdates answer 502 from now on.
func (p platform) Cut(t *testing.T) {
	faults := make([]channeltest.Fault, 100000)
	for i := range faults {
		faults[i] = channeltest.BadGateway
	}
	p.fake.Inject("getUpdates", faults...)
}
