package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"

	"github.com/nbots/nb/agent"
	"github.com/nbots/nb/bot"
	"github.com/nbots/nb/cartridge"
	"github.com/nbots/nb/media"
	"github.com/nbots/nb/provider"
	"github.com/nbots/nb/state"
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
	// Images are the pictures that came with it, for this turn only: the
	// session keeps the text (which names their files), and a provider
	// that takes no images gets the text alone.
	Images []media.Image
	// System is the gateway's system prompt (bootstrap files, memory,
	// skills), sent after the cartridge's own directive.
	System string
	// Tools are the turn's own tools (message), besides the bot's.
	Tools []tool.Tool
	// ToolFilter, when set, keeps the bot's tools it says yes to (a
	// guest's turn); nil keeps them all.
	ToolFilter func(tool.Tool) bool
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
	// Confirmer decides the tool calls that ask for a confirmation; nil
	// denies them (nobody can confirm in a chat). nb gateway chat --yes
	// sets one.
	Confirmer agent.Confirmer
	// Words rewrites the notice of a limit that stopped a turn in the
	// words of the configuration (nil keeps it).
	Words func(string) string
	// PromptTokens, when positive, bounds each request's prompt
	// (estimated tokens: system text, tool definitions and history):
	// nanobot's contextWindowTokens less the answer's maxTokens. The
	// oldest turns are left out of the request to fit (the session keeps
	// them, and consolidation moves them to memory).
	PromptTokens int
}

// budget is the history budget of a turn: PromptTokens less the tools'
// definitions, which the agent does not count (it counts the system
// text itself).
func (r BotRunner) budget(t Turn) int {
	if r.PromptTokens <= 0 {
		return 0
	}
	var specs []tool.Spec
	if r.Bot != nil && r.Bot.Tools() != nil {
		for _, s := range r.Bot.Tools().Specs() {
			if t.ToolFilter == nil || t.ToolFilter(specTool{s}) {
				specs = append(specs, s)
			}
		}
	}
	for _, tl := range t.Tools {
		specs = append(specs, tl.Spec())
	}
	b, _ := json.Marshal(specs)
	return max(r.PromptTokens-(len(b)+3)/4, 1)
}

// specTool is a tool known by its spec alone, for a ToolFilter.
type specTool struct{ spec tool.Spec }

func (s specTool) Spec() tool.Spec { return s.spec }
func (s specTool) Run(context.Context, tool.Call) (any, error) {
	return nil, errors.New("not runnable")
}

// Run implements Runner.
func (r BotRunner) Run(ctx context.Context, t Turn) (Answer, error) {
	x := bot.Exchange{Mode: cartridge.REPL, Conversation: t.Conversation, System: t.System, Tools: t.Tools, ToolFilter: t.ToolFilter, OnEvent: t.OnEvent, Steering: t.Steering, Confirmer: r.Confirmer,
		Budget: r.budget(t)}
	if len(t.Images) > 0 {
		conv := &turnImages{Conversation: t.Conversation}
		x.Conversation = conv
		res, err := r.Bot.Ask(ctx, x, t.Input, t.Images...)
		var unsupported *provider.UnsupportedError
		if errors.As(err, &unsupported) && !conv.dropped {
			// The model takes no images: the question stands, recorded,
			// with the note that names their files.
			conv.dropped = true
			res, err = r.Bot.Continue(ctx, x)
		}
		return r.answer(res, err)
	}
	return r.answer(r.Bot.Ask(ctx, x, t.Input))
}

func (r BotRunner) answer(res *agent.Result, err error) (Answer, error) {
	if err != nil {
		return Answer{}, err
	}
	text := res.Text
	if notice := res.Notice; notice != "" {
		// A limit stopped the turn before an answer: the user reads why
		// and how to go on (the session keeps the conversation).
		if r.Words != nil {
			notice = r.Words(notice)
		}
		text = strings.TrimSpace(text + "\n\n" + notice)
	}
	return Answer{Text: text, Usage: res.Usage, Model: r.Model()}, nil
}

// turnImages keeps a turn's images out of the session, which stores
// text, and shows them to the agent with the turn's user message for as
// long as the turn lasts (unless the provider refused them).
type turnImages struct {
	agent.Conversation
	images  []media.Image
	dropped bool
}

// Append records events, their images set aside.
func (c *turnImages) Append(events ...state.Event) error {
	out := make([]state.Event, len(events))
	for i, ev := range events {
		if ev.Who == state.RoleUser && len(ev.Images) > 0 {
			c.images, ev.Images = ev.Images, nil
		}
		out[i] = ev
	}
	return c.Conversation.Append(out...)
}

// History is the session's, the last user message with the turn's images.
func (c *turnImages) History() []state.Event {
	h := c.Conversation.History()
	if c.dropped || len(c.images) == 0 {
		return h
	}
	for i := len(h) - 1; i >= 0; i-- {
		if h[i].Who == state.RoleUser {
			h = slices.Clone(h)
			h[i].Images = c.images
			break
		}
	}
	return h
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
