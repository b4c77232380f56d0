package gateway

import (
	"context"
	"strings"

	"github.com/nbots/nb/agent"
	"github.com/nbots/nb/bot"
	"github.com/nbots/nb/cartridge"
	"github.com/nbots/nb/provider"
	"github.com/nbots/nb/tool"
)

// This file is the gateway's only use of the runtime (package bot): the
// runtime's exchange API is being reshaped, and a change to it should
// touch nothing else here.

// Turn is one turn of the agent on a session.
type Turn struct {
	// Conversation is the session.
	Conversation agent.Conversation
	// Input is the user's message.
	Input string
	// System is the gateway's system prompt (bootstrap files, memory,
	// skills), sent after the cartridge's own directive.
	System string
	// Tools are the turn's own tools (message), besides the bot's.
	Tools []tool.Tool
	// OnEvent receives the turn's events (streamed text, tool calls).
	OnEvent func(agent.Event)
	// Steering, when set, is asked after each round of tool calls for
	// the session's messages that arrived meanwhile (see
	// agent.Agent.Steering).
	Steering func() []string
}

// Answer is what a turn produced.
type Answer struct {
	Text  string
	Usage provider.Usage
	// Model is the model that answered (for /status).
	Model string
}

// Runner runs the agent's turns.
type Runner interface {
	Run(ctx context.Context, t Turn) (Answer, error)
	// Model names the model, for /status.
	Model() string
}

// BotRunner runs turns on a bot built from the assistant's cartridge.
type BotRunner struct {
	Bot *bot.Bot
}

// Run implements Runner.
func (r BotRunner) Run(ctx context.Context, t Turn) (Answer, error) {
	res, err := r.Bot.Ask(ctx, bot.Exchange{Mode: cartridge.REPL, Conversation: t.Conversation, System: t.System, Tools: t.Tools, OnEvent: t.OnEvent, Steering: t.Steering}, t.Input)
	if err != nil {
		return Answer{}, err
	}
	text := res.Text
	if res.Notice != "" {
		// A limit stopped the turn before an answer: the user reads why
		// and how to go on (the session keeps the conversation).
		text = strings.TrimSpace(text + "\n\n" + res.Notice)
	}
	return Answer{Text: text, Usage: res.Usage, Model: r.Model()}, nil
}

// Model implements Runner.
func (r BotRunner) Model() string {
	c := r.Bot.Cartridge
	if m := c.String("provider", "settings", "model"); m != "" {
		return c.String("provider", "id") + "/" + m
	}
	if m := c.String("provider", "options", "model"); m != "" {
		return c.String("provider", "id") + "/" + m
	}
	return c.String("provider", "id")
}
