package bot

import (
	"path/filepath"
	"slices"

	"github.com/nbots/nb/baseprompt"
	"github.com/nbots/nb/builtin"
	"github.com/nbots/nb/builtin/files"
	"github.com/nbots/nb/cartridge"
	"github.com/nbots/nb/project"
	"github.com/nbots/nb/tool"
)

// contextSettings reads the cartridge's context key: on by default for
// cartridges with file or exec built-ins, which work in a folder the
// model should know about.
func contextSettings(c *cartridge.Cartridge) (cartridge.ContextSettings, error) {
	b, err := c.Builtins()
	if err != nil {
		return cartridge.ContextSettings{}, err
	}
	return c.Context(b != nil && (b.Files != nil || b.Exec != nil))
}

// gather is the project context of c: about the files workspace, else the
// folder commands run in, else the cartridge's folder.
func gather(c *cartridge.Cartridge, set cartridge.ContextSettings, st builtin.Status) project.Context {
	dir := "."
	switch {
	case st.Workspace != "":
		dir = st.Workspace
	case st.ExecWorkspace != "":
		dir = st.ExecWorkspace
	case c.Path != "":
		dir = filepath.Dir(c.Path)
	}
	p := c.Provider()
	return project.Gather(project.Options{
		Dir: dir, Provider: p.ID, Model: p.Model(),
		Environment: set.Environment, NoGit: !set.Git, Docs: set.Docs, Budget: set.Budget,
	})
}

// ContextOf is what a bot of c would send first in its system prompt
// (ok false when the cartridge sends no context): nb's base prompt and
// the project context, without building the bot: `nb CART - cartridge`
// shows it.
func ContextOf(c *cartridge.Cartridge, h Host) (text string, ok bool, err error) {
	set, err := contextSettings(c)
	if err != nil || !set.On {
		return "", false, err
	}
	st, err := BuiltinsStatus(c, h)
	if err != nil {
		return "", false, err
	}
	var base string
	if set.Base {
		base = baseprompt.Text(baseProfile(c, st), func(name string) bool { return slices.Contains(st.Tools, name) })
	}
	return withBase(base, gather(c, set, st).Text()), true, nil
}

// baseProfile is the family nb's base prompt is written for: the files
// group's profile, else the model's.
func baseProfile(c *cartridge.Cartridge, st builtin.Status) files.Profile {
	if st.Profile != "" {
		return st.Profile
	}
	p := c.Provider()
	return files.ProfileFor(p.ID, p.Model())
}

// withBase puts nb's base prompt before the project context.
func withBase(base, ctx string) string {
	if base == "" {
		return ctx
	}
	if ctx == "" {
		return base
	}
	return base + "\n\n" + ctx
}

// projectContext is the context's text for exchange x with tools (""
// when off): nb's base prompt for the model family, then the environment
// block and the project's instructions, gathered anew for each exchange
// (the date and the files change) and once for an exchange and the
// sub-agents it spawns (x.project).
func (b *Bot) projectContext(x Exchange, tools *tool.Set) string {
	if !b.context.On {
		return ""
	}
	var base string
	if b.context.Base {
		base = baseprompt.Text(baseProfile(b.Cartridge, b.builtins), func(name string) bool {
			_, ok := tools.Lookup(name)
			return ok
		})
	}
	if x.project != nil {
		return withBase(base, x.project())
	}
	return withBase(base, gather(b.Cartridge, b.context, b.builtins).Text())
}
