package email

import (
	"strings"
	"sync"
	"testing"
	"time"

	"net/mail"

	"github.com/nbots/nb/gateway/channel"
	"github.com/nbots/nb/gateway/channel/channeltest"
)

// platform is the conformance suite's view of the mail servers: alice
// writes to the bot; what the bot sends her is read from the SMTP sink.
type platform struct {
	s *servers

	mu    sync.Mutex
	texts map[*mail.Message]string // a body is read once
}

func (p *platform) Channel(t *testing.T, env channel.Env) channel.Channel {
	c, err := New(config(p.s), env)
	if err != nil {
		t.Fatal(err)
	}
	c.poll, c.retryBase, c.timeout = 20*time.Millisecond, 5*time.Millisecond, 2*time.Second
	c.idleRefresh = 200 * time.Millisecond
	return c
}

func (p *platform) Say(t *testing.T, text string) string {
	p.s.deliver(t, "alice@example.org", "", text)
	return "alice@example.org"
}

func (p *platform) Sent(t *testing.T, chatID string) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, m := range p.s.sink.mails() {
		if m.Header.Get("To") != "<"+chatID+">" {
			continue
		}
		text, ok := p.texts[m]
		if !ok {
			body, err := textOf(m.Header.Get("Content-Type"), m.Header.Get("Content-Transfer-Encoding"), m.Body)
			if err != nil {
				t.Fatal(err)
			}
			text = strings.TrimRight(body, "\r\n")
			p.texts[m] = text
		}
		out = append(out, text)
	}
	return out
}

func TestConformance(t *testing.T) {
	channeltest.Conformance(t, func(t *testing.T) channeltest.Platform {
		return &platform{s: newServers(t), texts: map[*mail.Message]string{}}
	})
}
