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

// ContextOf is what a bot of c would tell the model about where it works
// (ok false when the cartridge sends no context), without building the
// bot: `nb CART - cartridge` shows it.
func ContextOf(c *cartridge.Cartridge, h Host) (ctx project.Context, ok bool, err error) {
	set, err := contextSettings(c)
	if err != nil || !set.On {
		return project.Context{}, false, err
	}
	st, err := BuiltinsStatus(c, h)
	if err != nil {
		return project.Context{}, false, err
	}
	return gather(c, set, st), true, nil
}

// BaseOf is nb's base prompt a bot of c would send first ("" when the
// context or its base is off, or the cartridge has no file or exec
// built-ins), without building the bot: `nb CART - cartridge` shows it.
func BaseOf(c *cartridge.Cartridge, h Host) (string, error) {
	set, err := contextSettings(c)
	if err != nil || !set.On || !set.Base {
		return "", err
	}
	st, err := BuiltinsStatus(c, h)
	if err != nil {
		return "", err
	}
	profile := st.Profile
	if profile == "" {
		p := c.Provider()
		profile = files.ProfileFor(p.ID, p.Model())
	}
	return baseprompt.Text(profile, func(name string) bool { return slices.Contains(st.Tools, name) }), nil
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
		profile := b.builtins.Profile
		if profile == "" {
			p := b.Cartridge.Provider()
			profile = files.ProfileFor(p.ID, p.Model())
		}
		base = baseprompt.Text(profile, func(name string) bool {
			_, ok := tools.Lookup(name)
			return ok
		})
	}
	var ctx string
	if x.project != nil {
		ctx = x.project()
	} else {
		ctx = gather(b.Cartridge, b.context, b.builtins).Text()
	}
	if base == "" {
		return ctx
	}
	if ctx == "" {
		return base
	}
	return base + "\n\n" + ctx
}
