package bot

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/nbots/nb/agent"
	"github.com/nbots/nb/builtin"
	"github.com/nbots/nb/cartridge"
	"github.com/nbots/nb/tool"
)

// builtinOptions are the options of a cartridge's built-in tools for a
// bot at depth (0 for the bot itself, 1 for its sub-agents...). The
// SpawnFunc given here runs sub-agents that report nowhere; each exchange
// replaces the spawn tool with one bound to it (see Agent).
func builtinOptions(h Host, depth int, spawn builtin.SpawnFunc) builtin.Options {
	o := h.Builtins
	o.Environ = h.Environ
	if o.Notice == nil {
		o.Notice = h.warn
	}
	o.Depth = depth
	o.Spawn = spawn
	return o
}

// BuiltinsStatus says which built-in tools c gets on this host and how
// they run (the exec sandbox above all), without building the bot: `nb
// CART - cartridge` shows it for a cartridge whose provider is not set up.
func BuiltinsStatus(c *cartridge.Cartridge, h Host) (builtin.Status, error) {
	unbound := func(context.Context, string, []string, int) (string, error) {
		return "", errors.New("no bot")
	}
	_, st, err := builtin.FromCartridge(c, builtinOptions(h, 0, unbound))
	return st, err
}

// Builtins says which built-in tools the bot has and how they run.
func (b *Bot) Builtins() builtin.Status { return b.builtins }

// addBuiltins adds the cartridge's built-in tools to the bot's.
func (b *Bot) addBuiltins() error {
	tools, st, err := builtin.FromCartridge(b.Cartridge, builtinOptions(b.host, 0, b.spawnFor(Exchange{})))
	if err != nil {
		return err
	}
	for _, t := range tools {
		name := t.Spec().Name
		if b.ownTool(name) {
			b.host.warn(fmt.Sprintf("%s: the cartridge's own tool %s replaces the built-in one", DisplayPath(b.Cartridge), name))
			continue
		}
		b.tools.Add(t)
		if name == "spawn" {
			b.spawns = true
		}
	}
	b.builtins = st
	return nil
}

// ownTool reports whether the cartridge defines a tool named name (as
// the provider matches names): it wins over a built-in one.
func (b *Bot) ownTool(name string) bool {
	for _, t := range b.own {
		if tool.MatchName(t.Spec().Name) == tool.MatchName(name) {
			return true
		}
	}
	return false
}

// toolsAt is the tool set of a sub-agent at depth: the cartridge's
// functions and robopages, and its built-in tools for that depth (no
// spawn at builtins.spawn.max-depth). Sets are built once per depth.
func (b *Bot) toolsAt(depth int) (*tool.Set, error) {
	if depth == 0 {
		return b.tools, nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if s, ok := b.depths[depth]; ok {
		return s, nil
	}
	s := &tool.Set{}
	for _, t := range b.own {
		s.Add(t)
	}
	tools, _, err := builtin.FromCartridge(b.Cartridge, builtinOptions(b.host, depth, b.spawnFor(Exchange{})))
	if err != nil {
		return nil, err
	}
	for _, t := range tools {
		if !b.ownTool(t.Spec().Name) {
			s.Add(t)
		}
	}
	if b.depths == nil {
		b.depths = map[int]*tool.Set{}
	}
	b.depths[depth] = s
	return s, nil
}

// bindSpawn returns set with its spawn tool (if it has one) bound to the
// exchange x at depth: the sub-agents it starts report to x's front-end
// and ask x's confirmer.
func (b *Bot) bindSpawn(set *tool.Set, x Exchange, depth int) *tool.Set {
	if _, ok := set.Lookup("spawn"); !ok {
		return set
	}
	out := &tool.Set{}
	for _, t := range set.Tools() {
		out.Add(t)
	}
	out.Add(builtin.SpawnTool(b.spawnFor(x), depth))
	return out
}

// spawnFor returns the function that runs a sub-agent for exchange x: the
// same cartridge (provider, behaviours, tools) in a fresh conversation,
// restricted to the tools named (all of its depth's when none are), run
// to its end; its final answer is the spawn call's result. Its tool
// feedback and retries go to x's events, so its steps show in the
// parent's feedback; its confirmations go to x's confirmer.
func (b *Bot) spawnFor(x Exchange) builtin.SpawnFunc {
	return func(ctx context.Context, task string, names []string, depth int) (string, error) {
		available, err := b.toolsAt(depth)
		if err != nil {
			return "", err
		}
		if x.ToolFilter != nil {
			// A sub-agent gets no tool its parent's exchange was denied.
			kept := &tool.Set{}
			for _, t := range available.Tools() {
				if x.ToolFilter(t) {
					kept.Add(t)
				}
			}
			available = kept
		}
		set := available
		if len(names) > 0 {
			set = &tool.Set{}
			for _, name := range names {
				t, ok := available.Lookup(name)
				if !ok {
					return "", fmt.Errorf("unknown tool %q: a sub-agent here can use %s", name, strings.Join(toolNames(available), ", "))
				}
				set.Add(t)
			}
		}
		sub := Exchange{Mode: x.Mode, EndUser: x.EndUser, Confirmer: x.Confirmer, Output: x.Output, OnEvent: steps(x.OnEvent), project: x.project}
		a := b.agent(sub, agent.NewMemory(), b.bindSpawn(set, x, depth))
		res, err := a.Ask(ctx, task)
		if err != nil {
			return "", err
		}
		return res.Text, nil
	}
}

// steps passes on the events of a sub-agent that show its steps in the
// parent's feedback (its tool feedback and its retries), not its answer:
// that is the spawn call's result.
func steps(parent func(agent.Event)) func(agent.Event) {
	if parent == nil {
		return nil
	}
	return func(ev agent.Event) {
		switch ev.Kind {
		case agent.Feedback, agent.Retry:
			parent(ev)
		}
	}
}

func toolNames(s *tool.Set) []string {
	var out []string
	for _, sp := range s.Specs() {
		out = append(out, sp.Name)
	}
	slices.Sort(out)
	return out
}

// warner is a tool that can tell why a call looks dangerous (exec).
type warner interface {
	Warn(call tool.Call) string
}

// placed is a tool that can tell where its calls run (exec: sandboxed or
// not), for the confirmation.
type placed interface {
	Where() string
}

// warnedConfirmer adds a tool's warning about a call to the text the
// user confirms: "exec {...} [warning: recursive or forced delete]".
type warnedConfirmer struct {
	next  agent.Confirmer
	tools *tool.Set
}

// warned wraps c so that confirmations show the warnings of tools; nil
// stays nil (every call that needs a confirmation is denied).
func warned(c agent.Confirmer, tools *tool.Set) agent.Confirmer {
	if c == nil {
		return nil
	}
	return warnedConfirmer{next: c, tools: tools}
}

func (w warnedConfirmer) Confirm(ctx context.Context, call tool.Call, text string) (bool, error) {
	if t, ok := w.tools.Lookup(call.Name); ok {
		if pt, ok := t.(placed); ok {
			text += " [" + pt.Where() + "]"
		}
		if wt, ok := t.(warner); ok {
			if msg := wt.Warn(call); msg != "" {
				text += " [warning: " + msg + "]"
			}
		}
	}
	return w.next.Confirm(ctx, call, text)
}
