package bot

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

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
	o.Agents = noAgents{} // bound to each exchange by bindSpawn
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
		if name == "spawn" || name == "spawn_agent" {
			b.spawns = true
		}
	}
	b.builtins = st
	if cfg, err := b.Cartridge.Builtins(); err == nil && cfg != nil && cfg.Spawn != nil {
		b.spawnDepth = cfg.Spawn.MaxDepth
		if len(cfg.Spawn.Models) > 0 {
			b.agentModels = slices.Clone(cfg.Spawn.Models)
			if own := agent.Model(b.Cartridge); own != "" && !slices.Contains(b.agentModels, own) {
				b.agentModels = append(b.agentModels, own)
			}
		}
	}
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

// toolsAt is the tool set of a sub-agent at depth working in dir (""
// for the cartridge's workspace): the cartridge's functions and
// robopages, and its built-in tools for that depth (no spawn at
// builtins.spawn.max-depth) and folder. Sets in the cartridge's
// workspace are built once per depth.
func (b *Bot) toolsAt(depth int, dir string) (*tool.Set, error) {
	if depth == 0 && dir == "" {
		return b.tools, nil
	}
	build := func() (*tool.Set, error) {
		s := &tool.Set{}
		for _, t := range b.own {
			s.Add(t)
		}
		o := builtinOptions(b.host, depth, b.spawnFor(Exchange{}))
		o.Workspace = dir
		tools, _, err := builtin.FromCartridge(b.Cartridge, o)
		if err != nil {
			return nil, err
		}
		for _, t := range tools {
			if !b.ownTool(t.Spec().Name) {
				s.Add(t)
			}
		}
		return s, nil
	}
	if dir != "" {
		return build()
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if s, ok := b.depths[depth]; ok {
		return s, nil
	}
	s, err := build()
	if err != nil {
		return nil, err
	}
	if b.depths == nil {
		b.depths = map[int]*tool.Set{}
	}
	b.depths[depth] = s
	return s, nil
}

// bindSpawn returns set with its sub-agent tools (spawn, or the managed
// ones) bound to the exchange x at depth: the sub-agents they start
// report to x's front-end and ask x's confirmer.
func (b *Bot) bindSpawn(set *tool.Set, x Exchange, depth int) *tool.Set {
	_, blocking := set.Lookup("spawn")
	_, managed := set.Lookup("spawn_agent")
	if !blocking && !managed {
		return set
	}
	out := set.Clone()
	if blocking {
		out.Add(builtin.SpawnTool(b.spawnFor(x), depth))
	}
	if managed {
		var agents builtin.Agents = noAgents{}
		if x.agents != nil {
			agents = x.agents
		}
		for _, t := range builtin.AgentTools(agents, depth, b.agentModels) {
			if _, ok := set.Lookup(t.Spec().Name); ok {
				out.Add(t)
			}
		}
	}
	return out
}

// subSpec is what a sub-agent is made of, besides its parent's exchange.
type subSpec struct {
	names     []string // the tools it may use (none: all of its depth's)
	depth     int
	workspace string // its folder ("" for the cartridge's)
	model     string // its model ("" for the cartridge's)
	rounds    int    // its round limit (0: the cartridge's)
}

// subTools is the tool set of a sub-agent of exchange x: its depth's
// tools in its folder, without those x's filter denies, restricted to
// the names it was given.
func (b *Bot) subTools(x Exchange, sp subSpec) (*tool.Set, error) {
	available, err := b.toolsAt(sp.depth, sp.workspace)
	if err != nil {
		return nil, err
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
	if len(sp.names) == 0 {
		return available, nil
	}
	set := &tool.Set{}
	for _, name := range sp.names {
		t, ok := available.Lookup(name)
		if !ok {
			return nil, fmt.Errorf("unknown tool %q: a sub-agent here can use %s", name, strings.Join(toolNames(available), ", "))
		}
		set.Add(t)
	}
	return set, nil
}

// subExchange is the exchange of a sub-agent of x: x's end user,
// confirmer and script output; x's events that show its steps; x's
// project context, or its own folder's.
func (b *Bot) subExchange(x Exchange, sp subSpec) Exchange {
	sub := Exchange{Mode: x.Mode, EndUser: x.EndUser, Confirmer: x.Confirmer, Output: x.Output, OnEvent: steps(x.OnEvent), project: x.project,
		workspace: sp.workspace, model: sp.model, rounds: sp.rounds}
	if sp.workspace != "" && sp.workspace != x.workspace {
		st := b.builtins
		st.Workspace, st.ExecWorkspace = sp.workspace, sp.workspace
		sub.project = sync.OnceValue(func() string { return gather(b.Cartridge, b.context, st).Text() })
	}
	return sub
}

// spawnFor returns the function that runs a sub-agent for exchange x
// (the blocking spawn): the same cartridge (provider, behaviours, tools)
// in a fresh conversation, restricted to the tools named (all of its
// depth's when none are), run to its end; its final answer is the spawn
// call's result. Its tool feedback and retries go to x's events, so its
// steps show in the parent's feedback; its confirmations go to x's
// confirmer.
func (b *Bot) spawnFor(x Exchange) builtin.SpawnFunc {
	return func(ctx context.Context, task string, names []string, depth int) (string, error) {
		sp := subSpec{names: names, depth: depth, workspace: x.workspace, model: x.model}
		set, err := b.subTools(x, sp)
		if err != nil {
			return "", err
		}
		sub := b.subExchange(x, sp)
		a, err := b.agent(sub, agent.NewMemory(), b.bindSpawn(set, sub, depth))
		if err != nil {
			return "", err
		}
		res, err := a.Ask(ctx, task)
		if err != nil {
			return "", err
		}
		return res.Text, nil
	}
}

// runChild runs one turn of the managed sub-agent c of m's exchange on
// input: its conversation goes on from its last turn, its messages
// (send_input) are its steering, and its own sub-agents, when its depth
// allows them, live as long as this turn.
func (b *Bot) runChild(ctx context.Context, m *agentManager, c *child, input string) (*agent.Result, error) {
	sub := b.subExchange(m.parent, c.spec)
	kids := newAgentManager(ctx, b, sub, c.spec.depth)
	defer kids.close()
	sub.agents = kids
	sub.Steering, sub.SteerFirst = m.steering(c), true
	a, err := b.agent(sub, c.conv, b.bindSpawn(c.tools, sub, c.spec.depth))
	if err != nil {
		return nil, err
	}
	return a.Ask(ctx, input)
}

// workspaceOf is the folder exchange x's tools work in: its own (a
// sub-agent's working_dir), else the files group's, else exec's.
func (b *Bot) workspaceOf(x Exchange) string {
	switch {
	case x.workspace != "":
		return x.workspace
	case b.builtins.Workspace != "":
		return b.builtins.Workspace
	}
	return b.builtins.ExecWorkspace
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
