package cartridge

import (
	"fmt"
	"maps"
	"math"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Builtins is the cartridge's builtins key: the groups of built-in tools
// it switches on. A nil group is off.
type Builtins struct {
	Files *BuiltinFiles
	Exec  *BuiltinExec
	Web   *BuiltinWeb
	Spawn *BuiltinSpawn
	// Environment is where the files and exec groups work: nil for this
	// machine (builtins.environment unset or local), else another one.
	Environment *BuiltinEnvironment
	// Limits bound the output of some tools as the model sees it
	// (builtins.limits), by tool name: they win over the tools' own.
	Limits map[string]ToolLimit
	// Line is the line of the builtins key.
	Line int
}

// ToolLimit is one tool's entry of builtins.limits: a number of
// characters, or chars, lines and mode (head_tail or tail). Zero fields
// keep the tool's own.
type ToolLimit struct {
	Chars, Lines int
	Mode         string
}

// BuiltinFiles is builtins.files: read_file, list_dir, glob and grep,
// and with Write also write_file and edit_file.
type BuiltinFiles struct {
	// Workspace is the folder the tools work in, as written (relative to
	// the cartridge's folder, or absolute); "." when unset.
	Workspace string
	// Write offers write_file and the editing tool (true when unset).
	Write bool
	// HardLinks lets the tools read regular files with more than one
	// hard link (false when unset: such a file may also be outside the
	// workspace).
	HardLinks bool
	// Profile is the shape of the editing tool: auto (by provider and
	// model, the default), openai (apply_patch), anthropic, gemini or
	// nanobot (see builtin/files.Profile).
	Profile string
	// Images lets read_file answer pictures as images; nil when unset
	// (then by the provider: see builtin.FromCartridge).
	Images *bool
	// Anywhere lets the tools reach paths outside the workspace (absolute,
	// .., ~), relative paths still starting in it: nanobot's
	// restrictToWorkspace false (false when unset).
	Anywhere bool
}

// BuiltinExec is builtins.exec: the exec tool.
type BuiltinExec struct {
	// Workspace is where commands run, as written; empty means the
	// files group's workspace, else ".".
	Workspace string
	// Timeout is a command's default time limit; 0 when unset, which
	// takes the files profile's (10 s for OpenAI's models, 120 s for
	// Anthropic's) or else 60 s.
	Timeout time.Duration
	// Sandbox is auto (bubblewrap when it works here), on (refuse to
	// run without it) or off.
	Sandbox string
	// Network lets sandboxed commands reach the network.
	Network bool
	// Env names variables of nb's environment that commands also see.
	Env []string
	// PathAppend is appended to the PATH commands see (nanobot's
	// tools.exec.pathAppend).
	PathAppend string
	// ReadOnly and Writable are extra paths the sandbox shows to
	// commands (read-only, or read-write), as written.
	ReadOnly, Writable []string
}

// BuiltinEnvironment is builtins.environment when it names another
// machine: ssh://[user@]host[:port]/path[?known-hosts=FILE&identity=FILE].
type BuiltinEnvironment struct {
	// URL is the address as written.
	URL string
	// User is the remote user ("" when the address names none: nb's).
	User string
	// Host and Port are the server's (Port 0: 22).
	Host string
	Port int
	// Path is the workspace's absolute path on the remote machine.
	Path string
	// KnownHosts and Identity are the known_hosts file and the key file
	// (the query's known-hosts and identity), as written; empty: the
	// defaults (~/.ssh/known_hosts; the SSH agent and ~/.ssh/id_*).
	KnownHosts, Identity string
}

// ParseEnvironment reads an environment address (see BuiltinEnvironment);
// nil, nil for "local". Its errors say what is wrong with the address.
func ParseEnvironment(s string) (*BuiltinEnvironment, error) {
	if s == "local" {
		return nil, nil
	}
	const form = "ssh://user@host/path"
	u, err := url.Parse(s)
	if err != nil || u.Scheme == "" {
		return nil, fmt.Errorf("must be local or an SSH address (%s), not %q", form, s)
	}
	if u.Scheme != "ssh" {
		return nil, fmt.Errorf("must be local or an SSH address (%s), not a %s: address", form, u.Scheme)
	}
	if _, set := u.User.Password(); set {
		return nil, fmt.Errorf("holds a password: nb logs in with keys only (the SSH agent's, or ?identity=FILE), so leave it out of the address")
	}
	e := &BuiltinEnvironment{URL: s, User: u.User.Username(), Host: u.Hostname(), Path: u.Path}
	if e.Host == "" {
		return nil, fmt.Errorf("names no host (%s)", form)
	}
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return nil, fmt.Errorf("has the port %q, which is not a number from 1 to 65535", p)
		}
		e.Port = n
	}
	if e.Path == "" {
		return nil, fmt.Errorf("names no folder: give the workspace's absolute path on %s after the host (%s)", e.Host, form)
	}
	if path.Clean(e.Path) != e.Path && path.Clean(e.Path)+"/" != e.Path {
		return nil, fmt.Errorf("has the path %q, which is not clean (no .., . or //): give the workspace's path as it is", e.Path)
	}
	if u.Fragment != "" {
		return nil, fmt.Errorf("ends with #%s, which means nothing here", u.Fragment)
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return nil, fmt.Errorf("has a query nb cannot read: %v", err)
	}
	for _, k := range slices.Sorted(maps.Keys(q)) {
		switch k {
		case "known-hosts":
			e.KnownHosts = q.Get(k)
		case "identity":
			e.Identity = q.Get(k)
		default:
			return nil, fmt.Errorf("has the setting %q, which nb does not know (known-hosts or identity)", k)
		}
		if q.Get(k) == "" {
			return nil, fmt.Errorf("has an empty %s: give a file", k)
		}
	}
	return e, nil
}

// BuiltinWeb is builtins.web: web_fetch and web_search.
type BuiltinWeb struct {
	// Fetch is nil when web_fetch is off.
	Fetch *BuiltinFetch
	// Search is nil when web_search is off.
	Search *BuiltinSearch
}

// BuiltinFetch is builtins.web.fetch.
type BuiltinFetch struct {
	// AllowHosts are host names (or addresses) web_fetch may reach even
	// when they resolve to private or loopback addresses.
	AllowHosts []string
	// MaxBytes bounds a response body (0: the tool's default).
	MaxBytes int64
	// Timeout bounds a whole fetch, redirects included (0: the default).
	Timeout time.Duration
}

// BuiltinSearch is builtins.web.search.
type BuiltinSearch struct {
	// Provider is the search engine: brave (the default), tavily,
	// searxng or jina.
	Provider string
	// BaseURL replaces the engine's address (a SearXNG instance's).
	BaseURL string
	// APIKey is the engine's API key, after ENV substitution.
	APIKey string
	// APIKeyVar is the variable the key's ENV reference names when that
	// variable is not set (the key is then empty).
	APIKeyVar string
	// Count is the default number of results (0: the tool's default).
	Count int
}

// BuiltinSpawn is builtins.spawn.
type BuiltinSpawn struct {
	// MaxDepth bounds how deep sub-agents may spawn sub-agents (1: the
	// bot's own sub-agents cannot spawn). 2 when unset.
	MaxDepth int
	// Managed offers the managed sub-agent tools (spawn_agent,
	// send_input, wait, close_agent: sub-agents that run in the
	// background and can be steered) instead of the blocking spawn.
	Managed bool
	// Models are the models (of the cartridge's provider) a managed
	// sub-agent may be given besides the cartridge's own; empty allows
	// any.
	Models []string
}

// Builtins returns the cartridge's builtins key, or nil when it has none
// (or it is null or false). A mistake is an *Error naming the file, the
// line and the key.
func (c *Cartridge) Builtins() (*Builtins, error) {
	v, ok := c.Data["builtins"]
	if !ok || v == nil || v == false {
		return nil, nil
	}
	p := builtinsParser{c: c}
	b := &Builtins{Line: c.lineOf("builtins")}
	m := p.group(v, "builtins", "a mapping of groups (files, exec, web, spawn)")
	if m == nil {
		return nil, p.err
	}
	p.known(m, "builtins", "files", "exec", "web", "spawn", "limits", "environment")
	if env := p.text(m, "builtins", "environment", "local"); p.err == nil {
		e, err := ParseEnvironment(env)
		if err != nil {
			p.fail("builtins.environment", "%v", err)
		}
		b.Environment = e
	}

	if g := p.group(m["files"], "builtins.files", ""); g != nil {
		p.known(g, "builtins.files", "workspace", "write", "profile", "hard-links", "images", "anywhere")
		b.Files = &BuiltinFiles{
			Workspace: p.text(g, "builtins.files", "workspace", "."),
			Write:     p.boolean(g, "builtins.files", "write", true),
			Profile:   p.text(g, "builtins.files", "profile", "auto"),
			HardLinks: p.boolean(g, "builtins.files", "hard-links", false),
			Anywhere:  p.boolean(g, "builtins.files", "anywhere", false),
		}
		if v, set := g["images"]; set && v != nil {
			images := p.boolean(g, "builtins.files", "images", false)
			b.Files.Images = &images
		}
		switch b.Files.Profile {
		case "auto", "openai", "anthropic", "gemini", "nanobot":
		default:
			p.fail("builtins.files.profile", "must be auto (by the provider and model), openai (apply_patch), anthropic, gemini or nanobot, not %q", b.Files.Profile)
		}
	}
	if g := p.group(m["exec"], "builtins.exec", ""); g != nil {
		p.known(g, "builtins.exec", "workspace", "timeout", "sandbox", "network", "env", "read-only", "writable", "path-append")
		e := &BuiltinExec{
			Workspace:  p.text(g, "builtins.exec", "workspace", ""),
			Timeout:    p.seconds(g, "builtins.exec", "timeout", 0),
			Sandbox:    p.text(g, "builtins.exec", "sandbox", "auto"),
			Network:    p.boolean(g, "builtins.exec", "network", false),
			Env:        p.list(g, "builtins.exec", "env"),
			ReadOnly:   p.list(g, "builtins.exec", "read-only"),
			Writable:   p.list(g, "builtins.exec", "writable"),
			PathAppend: p.text(g, "builtins.exec", "path-append", ""),
		}
		switch e.Sandbox {
		case "auto", "on", "off":
		default:
			if p.err == nil {
				p.fail("builtins.exec.sandbox", "must be auto (bubblewrap when it works here), on (refuse to run without it) or off, not %q", e.Sandbox)
			}
		}
		b.Exec = e
	}
	if g := p.group(m["web"], "builtins.web", ""); g != nil {
		p.known(g, "builtins.web", "fetch", "search")
		w := &BuiltinWeb{}
		if f := p.group(g["fetch"], "builtins.web.fetch", ""); f != nil {
			p.known(f, "builtins.web.fetch", "allow-hosts", "max-bytes", "timeout")
			w.Fetch = &BuiltinFetch{
				AllowHosts: p.list(f, "builtins.web.fetch", "allow-hosts"),
				MaxBytes:   int64(p.count(f, "builtins.web.fetch", "max-bytes", 0)),
				Timeout:    p.seconds(f, "builtins.web.fetch", "timeout", 0),
			}
		}
		if s, present := g["search"]; present && s != nil && s != false {
			sm := p.group(s, "builtins.web.search", "")
			p.known(sm, "builtins.web.search", "provider", "base-url", "api-key", "count")
			search := &BuiltinSearch{
				Provider: p.text(sm, "builtins.web.search", "provider", "brave"),
				BaseURL:  p.text(sm, "builtins.web.search", "base-url", ""),
				APIKey:   p.text(sm, "builtins.web.search", "api-key", ""),
				Count:    p.count(sm, "builtins.web.search", "count", 0),
			}
			switch search.Provider {
			case "brave", "tavily", "jina":
			case "searxng":
				if search.BaseURL == "" {
					p.fail("builtins.web.search.base-url", "a searxng search needs the address of its instance (https://searx.example.org)")
				}
			default:
				p.fail("builtins.web.search.provider", "must be brave, tavily, searxng or jina, not %q", search.Provider)
			}
			search.APIKeyVar, _ = c.MissingFor("builtins.web.search.api-key")
			w.Search = search
		}
		if w.Fetch != nil || w.Search != nil {
			b.Web = w
		}
	}
	if v, present := m["limits"]; present && v != nil {
		b.Limits = p.limits(v)
	}
	if g := p.group(m["spawn"], "builtins.spawn", ""); g != nil {
		p.known(g, "builtins.spawn", "max-depth", "managed", "models")
		b.Spawn = &BuiltinSpawn{MaxDepth: p.count(g, "builtins.spawn", "max-depth", 2),
			Managed: p.boolean(g, "builtins.spawn", "managed", false), Models: p.list(g, "builtins.spawn", "models")}
	}
	if p.err != nil {
		return nil, p.err
	}
	return b, nil
}

// limits reads builtins.limits: tool names, each with a number of
// characters or a mapping of chars, lines and mode.
func (p *builtinsParser) limits(v any) map[string]ToolLimit {
	m, ok := v.(map[string]any)
	if !ok {
		p.fail("builtins.limits", "must be a mapping of tool names to limits (read_file: 20000, or grep: {chars: 20000, lines: 200, mode: tail}), not %s", kind(v))
		return nil
	}
	out := map[string]ToolLimit{}
	for _, name := range sortedKeys(m) {
		path := "builtins.limits." + name
		var l ToolLimit
		switch t := m[name].(type) {
		case int64:
			l.Chars = p.count(m, "builtins.limits", name, 0)
		case map[string]any:
			p.known(t, path, "chars", "lines", "mode")
			l.Chars = p.count(t, path, "chars", 0)
			l.Lines = p.count(t, path, "lines", 0)
			l.Mode = p.text(t, path, "mode", "")
			if l.Mode != "" && l.Mode != "head_tail" && l.Mode != "tail" {
				p.fail(path+".mode", "must be head_tail (keep the head and the tail) or tail (keep the end), not %q", l.Mode)
			}
		default:
			p.fail(path, "must be a number of characters or a mapping of chars, lines and mode, not %s", kind(t))
		}
		out[name] = l
	}
	return out
}

// builtinsParser reads the builtins key, keeping the first mistake.
type builtinsParser struct {
	c   *Cartridge
	err *Error
}

func (p *builtinsParser) fail(path, format string, args ...any) {
	if p.err == nil {
		p.err = &Error{File: p.c.Path, Line: p.c.lineOf(path), Key: path, Msg: fmt.Sprintf(format, args...)}
	}
}

// group reads a group's value: true or an empty value switches it on with
// its defaults, false or absence leaves it off, a mapping gives settings.
// It returns nil when the group is off.
func (p *builtinsParser) group(v any, path, what string) map[string]any {
	switch t := v.(type) {
	case nil:
		return nil
	case bool:
		if t {
			return map[string]any{}
		}
		return nil
	case map[string]any:
		return t
	}
	if what == "" {
		what = "true, false or a mapping of settings"
	}
	p.fail(path, "must be %s, not %s", what, kind(v))
	return nil
}

// known refuses settings the group does not have: a misspelt sandbox
// setting must not leave commands unsandboxed without a word.
func (p *builtinsParser) known(m map[string]any, path string, keys ...string) {
	for _, k := range sortedKeys(m) {
		if !contains(keys, k) {
			p.fail(join(path, k), "unknown setting%s", nearestOrKnown(k, keys))
		}
	}
}

func (p *builtinsParser) text(m map[string]any, path, key, def string) string {
	v, ok := m[key]
	if !ok || v == nil {
		return def
	}
	s, isText := v.(string)
	if !isText {
		p.fail(join(path, key), "must be text, not %s", kind(v))
		return def
	}
	return s
}

func (p *builtinsParser) boolean(m map[string]any, path, key string, def bool) bool {
	v, ok := m[key]
	if !ok || v == nil {
		return def
	}
	b, isBool := v.(bool)
	if !isBool {
		p.fail(join(path, key), "must be true or false, not %s", kind(v))
		return def
	}
	return b
}

// count reads a whole number above zero.
func (p *builtinsParser) count(m map[string]any, path, key string, def int) int {
	v, ok := m[key]
	if !ok || v == nil {
		return def
	}
	n, isInt := v.(int64)
	if !isInt || n <= 0 || n > math.MaxInt32 {
		p.fail(join(path, key), "must be a whole number above 0, not %v", v)
		return def
	}
	return int(n)
}

// seconds reads a duration written in seconds (a whole or decimal number).
func (p *builtinsParser) seconds(m map[string]any, path, key string, def time.Duration) time.Duration {
	v, ok := m[key]
	if !ok || v == nil {
		return def
	}
	var s float64
	switch t := v.(type) {
	case int64:
		s = float64(t)
	case float64:
		s = t
	default:
		p.fail(join(path, key), "must be a number of seconds, not %s", kind(v))
		return def
	}
	if s <= 0 || s > 24*3600 || math.IsNaN(s) {
		p.fail(join(path, key), "must be a number of seconds above 0 and at most a day, not %v", v)
		return def
	}
	return time.Duration(s * float64(time.Second))
}

// list reads a list of text, or one text as a list of one.
func (p *builtinsParser) list(m map[string]any, path, key string) []string {
	v, ok := m[key]
	if !ok || v == nil {
		return nil
	}
	switch t := v.(type) {
	case string:
		return []string{t}
	case []any:
		out := make([]string, 0, len(t))
		for i, x := range t {
			s, isText := x.(string)
			if !isText || strings.TrimSpace(s) == "" {
				p.fail(fmt.Sprintf("%s.%s[%d]", path, key, i), "must be non-empty text, not %s", kind(x))
				return nil
			}
			out = append(out, s)
		}
		return out
	}
	p.fail(join(path, key), "must be a list of text, not %s", kind(v))
	return nil
}
