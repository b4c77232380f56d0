package gateway

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync"

	"github.com/nbots/nb/builtin/files"
	"github.com/nbots/nb/gateway/access"
	"github.com/nbots/nb/gateway/bus"
	"github.com/nbots/nb/gateway/session"
	"github.com/nbots/nb/state"
	"github.com/nbots/nb/tool"
)

// What a turn may do depends on whose turn it is (access.Role). Every
// turn's tools work under a files.Policy, carried by the turn's context,
// that the file tools and exec honour:
//
//   - the gateway's own files (sessions, cron jobs, locks, the state
//     folder) are hidden from every turn: a cron turn cannot rewrite
//     cron/jobs.json past the cron tool's rules, nor any turn read
//     another chat's session;
//   - the files that shape every chat's system prompt (PromptFiles) are
//     written in the owner's turns only, and each write is announced in
//     the chat the turn answers;
//   - a guest's turn gets the tools GuestPolicy grants (by default no
//     exec, spawn nor cron), cannot see memory or other chats' media, and
//     its message tool sends to its own chat alone.

// DefaultGuestTools are the tools a guest's turn gets when the
// configuration's guests.tools does not name them: reading the
// workspace, the web, and answering in their own chat.
var DefaultGuestTools = []string{"read_file", "list_dir", "glob", "grep", "web_fetch", "web_search", "message"}

// NeverGuestTools are never offered to a guest, whatever the
// configuration says: the cron tool changes the owner's jobs.
var NeverGuestTools = []string{"cron"}

// GuestPolicy is what guests' turns may use (the gateway configuration's
// gateway.guests, an nb extension).
type GuestPolicy struct {
	// Tools names the tools a guest's turn is offered; nil is
	// DefaultGuestTools. Granting exec lets a guest run commands in the
	// sandbox only (the gateway's files hidden); NeverGuestTools stay out.
	Tools []string
}

// allows reports whether the policy offers the tool named name to guests.
func (p GuestPolicy) allows(name string) bool {
	if slices.Contains(NeverGuestTools, name) {
		return false
	}
	list := p.Tools
	if list == nil {
		list = DefaultGuestTools
	}
	return slices.Contains(list, name)
}

// PromptFiles are the workspace's files and folders that go into every
// chat's system prompt (or decide what runs in it): the bootstrap files,
// HEARTBEAT.md, memory and skills, and the instruction files a cartridge
// with project context reads there (agents.defaults.cartridge).
func PromptFiles() []string {
	return append(slices.Clone(BootstrapFiles), "HEARTBEAT.md", "memory", "skills", "CLAUDE.md", "GEMINI.md")
}

// ControlFiles are the workspace's files the gateway keeps for itself:
// the sessions, the cron jobs and their lock, the memory's locks and
// journal.
func ControlFiles() []string {
	return []string{"sessions", "cron", filepath.Join("memory", ".lock"), filepath.Join("memory", ".consolidating.json")}
}

// policy is the files.Policy of turn d: what its tools may reach, and
// the announcement of its writes to the prompt's files (owner's turns).
func (g *Gateway) policy(ctx context.Context, d Direct, turnID string) *files.Policy {
	ws, hidden, watched := g.policyPaths()
	abs := func(names []string) []string { return absIn(ws, names) }
	p := &files.Policy{Hidden: hidden}
	if d.Role != access.Owner {
		// The owner's memory and tasks, and what other chats sent.
		p.Hidden = append(p.Hidden, abs([]string{"memory", "HEARTBEAT.md", "media"})...)
		p.Visible = abs(d.Media)
		p.ReadOnly = abs(PromptFiles())
		p.RequireSandbox = true
		return p
	}
	p.Watched = watched
	var mu sync.Mutex
	told := map[string]bool{}
	p.OnWrite = func(path string) {
		name := path
		if r, err := filepath.Rel(ws, path); err == nil {
			name = filepath.ToSlash(r)
		}
		mu.Lock()
		seen := told[name]
		told[name] = true
		mu.Unlock()
		g.log().Info("a file of every chat's system prompt was changed", "file", name, "session", d.SessionKey)
		if seen {
			return
		}
		// A turn id of its own: the turn's final reply keeps its place
		// (the bus sends one final reply per turn and chat).
		g.publish(ctx, d, bus.Message, turnID+":changed:"+name,
			fmt.Sprintf("📝 I changed %s: it is part of what I read in every chat.", name))
	}
	return p
}

// absIn makes names absolute in the workspace ws: absolute ones
// cleaned, relative ones joined to ws (left out when ws is ""). The list
// is clipped: an append copies.
func absIn(ws string, names []string) []string {
	var out []string
	for _, n := range names {
		if filepath.IsAbs(n) {
			out = append(out, filepath.Clean(n))
		} else if ws != "" {
			out = append(out, filepath.Join(ws, n))
		}
	}
	return slices.Clip(out)
}

// policyPaths are the workspace, its control files and the protected
// paths (every turn's Hidden), and its prompt's files (an owner's turn's
// Watched), as absolute paths: made once per workspace and protected
// paths, not at every turn. The lists are clipped: an append copies.
func (g *Gateway) policyPaths() (ws string, hidden, watched []string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	c := &g.paths
	if !c.made || c.from != g.workspaceSetting() || !slices.Equal(c.protected, g.ProtectedPaths) {
		ws := g.workspace()
		*c = policyPaths{made: true, from: g.workspaceSetting(), protected: slices.Clone(g.ProtectedPaths), ws: ws,
			hidden: absIn(ws, append(ControlFiles(), g.ProtectedPaths...)), watched: absIn(ws, PromptFiles())}
	}
	return c.ws, c.hidden, c.watched
}

// policyPaths is what Gateway.policyPaths made, and from what.
type policyPaths struct {
	made            bool
	from            string
	protected       []string
	ws              string
	hidden, watched []string
}

// workspaceSetting is the workspace as configured ("" for none).
func (g *Gateway) workspaceSetting() string {
	if g.Prompt == nil {
		return ""
	}
	return g.Prompt.Workspace
}

// workspace is the gateway's workspace folder, absolute ("" when unknown).
func (g *Gateway) workspace() string {
	if g.Prompt == nil || g.Prompt.Workspace == "" {
		return ""
	}
	abs, err := filepath.Abs(g.Prompt.Workspace)
	if err != nil {
		return ""
	}
	return abs
}

// toolFilter is the tools turn d is offered: all for the owner, those
// the guest policy grants for a guest.
func (g *Gateway) toolFilter(d Direct) func(tool.Tool) bool {
	if d.Role == access.Owner {
		return nil
	}
	return func(t tool.Tool) bool { return g.Guests.allows(t.Spec().Name) }
}

// filterTools keeps the gateway's own tools (message, cron) filter keeps.
func filterTools(tools []tool.Tool, filter func(tool.Tool) bool) []tool.Tool {
	if filter == nil {
		return tools
	}
	return slices.DeleteFunc(tools, func(t tool.Tool) bool { return !filter(t) })
}

// GuestHistory is how many of a guest's latest messages the guest's turns
// see: their sessions are never consolidated into memory (which is the
// owner's, in every prompt), so the older messages leave the context
// instead (the session file keeps them).
const GuestHistory = 40

// forgetOld moves a guest session's consolidation mark past all but its
// last GuestHistory messages, at a user's message, so that the context
// never starts with a tool result whose call was cut off.
func (g *Gateway) forgetOld(ctx context.Context, sess *session.Session) {
	from := sess.Meta().LastConsolidated
	events := sess.EventsFrom(from) // those not consolidated
	if len(events) <= GuestHistory {
		return
	}
	i := len(events) - GuestHistory
	for i < len(events) && events[i].Who != state.RoleUser {
		i++
	}
	if i >= len(events) {
		return
	}
	cut := from + i
	if err := sess.SetConsolidated(ctx, cut); err != nil {
		g.log().Warn("a guest's session keeps its old messages in the context", "session", sess.Key, "error", err)
	}
}
