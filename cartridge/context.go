package cartridge

// ContextSettings is the cartridge's context key (an nb extension): what
// the system prompt says about where the agent works (package project).
type ContextSettings struct {
	// On says whether any context is sent.
	On bool
	// Environment sends the environment block.
	Environment bool
	// Docs are the instruction files' names; nil takes the model
	// family's (AGENTS.md and CLAUDE.md or GEMINI.md), empty none.
	Docs []string
	// Budget bounds the instructions in bytes (0: the default, 32 KB).
	Budget int
	// Base sends nb's base prompt for the model family (package
	// baseprompt) before the rest; true unless context.base is false.
	Base bool
	// Git adds git's summary to the environment block (it runs git
	// status and git log); true unless context.git is false.
	Git bool
}

// Context reads the context key: false turns the context off, true or a
// mapping (environment, project-docs: a list of names or false, budget)
// on. Without the key it is on when defaultOn is (cartridges with file or
// exec built-ins). A mistake is an *Error naming the file, line and key.
func (c *Cartridge) Context(defaultOn bool) (ContextSettings, error) {
	on := ContextSettings{On: true, Environment: true, Base: true, Git: true}
	v, ok := c.Data["context"]
	if !ok || v == nil {
		if defaultOn {
			return on, nil
		}
		return ContextSettings{}, nil
	}
	p := builtinsParser{c: c}
	m := p.group(v, "context", "true, false or a mapping (base, environment, git, project-docs, budget)")
	if m == nil {
		return ContextSettings{}, errOrNil(p.err)
	}
	p.known(m, "context", "base", "environment", "git", "project-docs", "budget")
	on.Environment = p.boolean(m, "context", "environment", true)
	on.Base = p.boolean(m, "context", "base", true)
	on.Git = p.boolean(m, "context", "git", true)
	switch docs := m["project-docs"].(type) {
	case nil:
	case bool:
		if !docs {
			on.Docs = []string{}
		}
	default:
		on.Docs = p.list(m, "context", "project-docs")
		if on.Docs == nil {
			on.Docs = []string{}
		}
	}
	on.Budget = p.count(m, "context", "budget", 0)
	return on, errOrNil(p.err)
}

// errOrNil keeps a nil *Error from becoming a non-nil error.
func errOrNil(e *Error) error {
	if e == nil {
		return nil
	}
	return e
}
