package bot

import (
	"context"

	"github.com/nbots/nb/agent"
	"github.com/nbots/nb/media"
)

// Session is one conversation with a bot for a front-end that holds one,
// as the terminal's eval and REPL do: its exchanges share an Exchange,
// and a stateless session keeps its conversation in memory. Each
// exchange of a session with a state key reads the conversation from the
// store, so two sessions on one key never drift apart.
type Session struct {
	Bot *Bot
	Exchange
}

// NewSession returns a session on b; with no key and no conversation it
// keeps one in memory.
func NewSession(b *Bot, x Exchange) *Session {
	if x.Key == "" && x.Conversation == nil {
		x.Conversation = agent.NewMemory()
	}
	return &Session{Bot: b, Exchange: x}
}

// Ask runs one exchange of the session.
func (s *Session) Ask(ctx context.Context, input string, images ...media.Image) (*agent.Result, error) {
	return s.Bot.Ask(ctx, s.Exchange, input, images...)
}

// Boot runs the cartridge's boot exchange, if it has one.
func (s *Session) Boot(ctx context.Context) (*agent.Result, error) {
	return s.Bot.Boot(ctx, s.Exchange)
}

// HasBoot reports whether the cartridge has a boot exchange.
func (s *Session) HasBoot() bool { return s.Bot.HasBoot() }
