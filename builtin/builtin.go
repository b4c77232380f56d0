// Package builtin builds nb's built-in tools from a cartridge's builtins
// key: the files group (package files), exec (package shell), the web
// group (package web) and spawn. The runtime calls FromCartridge when it
// builds a bot and adds the tools to the bot's tool set; the status it
// returns says how they will run (the exec sandbox above all), for
// `nb CART - cartridge`.
package builtin

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"time"

	"github.com/nbots/nb/builtin/files"
	"github.com/nbots/nb/builtin/remote"
	"github.com/nbots/nb/builtin/shell"
	"github.com/nbots/nb/builtin/web"
	"github.com/nbots/nb/cartridge"
	"github.com/nbots/nb/netguard"
	"github.com/nbots/nb/proc"
	"github.com/nbots/nb/tool"
)

// SpawnFunc runs a sub-agent on task to its end and returns its final
// answer. tools names the tools it may use (empty: the caller decides,
// usually all of the parent's); depth is the sub-agent's depth (1 for a
// sub-agent of the cartridge's own bot). The runtime provides it: this
// package cannot build agents (the runtime imports it).
type SpawnFunc func(ctx context.Context, task string, tools []string, depth int) (string, error)

// Options are what the runtime gives FromCartridge.
type Options struct {
	// Environ is nb's environment (NAME=value entries): exec's commands
	// see its allow-listed part, and ~ in paths is its HOME. Only cmd/
	// reads the process environment; it passes it down.
	Environ []string
	// CartridgeDir is the folder relative paths (the workspace) start
	// from; empty means the cartridge file's folder, or the working
	// directory for a cartridge without a file.
	CartridgeDir string
	// Resolver and Dialer are web_fetch's (nil: the system's). Tests
	// inject fakes to need no network.
	Resolver netguard.Resolver
	Dialer   netguard.Dialer
	// HTTPClient sends web_search's requests (nil: a client with a timeout).
	HTTPClient *http.Client
	// SearchURL replaces the Brave Search API's address.
	SearchURL string
	// Bwrap is bubblewrap's path (empty: looked for in Environ's PATH).
	Bwrap string
	// RequireSandbox refuses exec's commands where bubblewrap cannot
	// run, even with sandbox: auto (servers; see shell.Options).
	RequireSandbox bool
	// RequireAdvice says how to allow them (see shell.Options).
	RequireAdvice string
	// Notice is told once when exec first runs a command unsandboxed.
	Notice func(msg string)
	// Spawn runs sub-agents; nil leaves the spawn tool out.
	Spawn SpawnFunc
	// Agents runs managed sub-agents (builtins.spawn.managed); nil
	// leaves their tools out.
	Agents Agents
	// Workspace, when set, is the folder of the files group and of exec
	// instead of the cartridge's: a managed sub-agent's working_dir,
	// which the runtime has checked lies inside its parent's.
	Workspace string
	// Depth is the depth of the bot the tools are for: 0 for the
	// cartridge's own bot, 1 for its sub-agents, and so on. spawn is
	// offered only below builtins.spawn.max-depth.
	Depth int
}

// Status says which built-in tools a cartridge gets and how they run.
type Status struct {
	// Tools are the built-in tools' names, in the order they are offered.
	Tools []string
	// Workspace is the files group's folder ("" when the group is off).
	Workspace string
	// Profile is the files group's editing profile, as chosen.
	Profile files.Profile
	// Exec is the exec tool's status (nil when exec is off).
	Exec *shell.Status
	// ExecWorkspace is the folder commands run in.
	ExecWorkspace string
	// Remote is set when the tools run on another machine
	// (builtins.environment): Workspace and ExecWorkspace are its URL.
	Remote bool
	// Notes are other facts worth showing (a missing search key, the
	// spawn depth).
	Notes []string
}

// Lines describes the status for people, one fact per line.
func (s Status) Lines() []string {
	var out []string
	if len(s.Tools) > 0 {
		out = append(out, "tools: "+strings.Join(s.Tools, ", "))
	}
	if s.Workspace != "" {
		out = append(out, "files: workspace "+s.Workspace)
		out = append(out, "files: profile "+s.Profile.String())
	}
	if s.Exec != nil {
		out = append(out, "exec: "+s.Exec.String())
		out = append(out, "exec: runs in "+s.ExecWorkspace)
	}
	return append(out, s.Notes...)
}

// TakesToolImages tells whether a provider's API takes the images a tool
// returns (read_file's pictures) by default: OpenAI's, Anthropic's,
// Google's and Mistral's do; for the others (whose models mostly read
// text only) builtins.files.images: true turns them on.
func TakesToolImages(providerID string) bool {
	switch providerID {
	case "openai", "anthropic", "google", "mistral":
		return true
	}
	return false
}

// FromCartridge builds the built-in tools c's builtins key switches on.
// A cartridge without the key gets none. Mistakes (a workspace that does
// not exist) are *cartridge.Error values naming the file, line and key.
func FromCartridge(c *cartridge.Cartridge, o Options) ([]tool.Tool, Status, error) {
	var st Status
	cfg, err := c.Builtins()
	if err != nil || cfg == nil {
		return nil, st, err
	}
	base := o.CartridgeDir
	if base == "" && c.Path != "" {
		base = filepath.Dir(c.Path)
	}
	fail := func(key, format string, args ...any) error {
		return &cartridge.Error{File: c.Path, Line: c.Line(key), Key: key, Msg: fmt.Sprintf(format, args...)}
	}
	resolve := func(key, p string) (string, error) {
		if p == "~" || strings.HasPrefix(p, "~/") {
			home, ok := proc.Lookup(o.Environ, "HOME")
			if !ok || home == "" {
				return "", fail(key, "%s starts with ~, but HOME is not set", p)
			}
			p = filepath.Join(home, p[1:])
		}
		if !filepath.IsAbs(p) {
			p = filepath.Join(base, p)
		}
		abs, err := filepath.Abs(p)
		if err != nil {
			return "", fail(key, "%v", err)
		}
		return abs, nil
	}

	var tools []tool.Tool
	var filesDir string
	var profile files.Profile
	var env *remote.Env // the other machine the files and exec groups work on
	if cfg.Environment != nil && (cfg.Files != nil || cfg.Exec != nil) {
		if env, err = openRemote(c, cfg, resolve, o.Environ); err != nil {
			return nil, st, err
		}
		st.Remote = true
	}
	if cfg.Files != nil {
		var ws *files.Workspace
		if env != nil {
			ws = files.OpenOn(env, env.Dir())
			st.Workspace = env.URL()
		} else {
			dir, err := resolve("builtins.files.workspace", cfg.Files.Workspace)
			if err != nil {
				return nil, st, err
			}
			if o.Workspace != "" {
				dir = o.Workspace
			}
			open := files.Open
			if cfg.Files.Anywhere {
				home, _ := proc.Lookup(o.Environ, "HOME")
				open = func(dir string) (*files.Workspace, error) { return files.OpenAnywhere(dir, home) }
				st.Notes = append(st.Notes, "files: the tools reach every path this user can, not only the workspace (builtins.files.anywhere)")
			}
			if ws, err = open(dir); err != nil {
				return nil, st, fail("builtins.files.workspace", "%v", err)
			}
			filesDir, st.Workspace = ws.Dir(), ws.Dir()
		}
		ws.AllowHardLinks(cfg.Files.HardLinks)
		if cfg.Files.Images != nil {
			ws.AllowImages(*cfg.Files.Images)
		} else {
			ws.AllowImages(TakesToolImages(c.Provider().ID))
		}
		profile = files.Profile(cfg.Files.Profile)
		if profile == files.ProfileAuto {
			prov := c.Provider()
			profile = files.ProfileFor(prov.ID, prov.Model())
		}
		st.Profile = profile
		tools = append(tools, files.Tools(ws, cfg.Files.Write, profile)...)
	}
	if e := cfg.Exec; e != nil && env != nil {
		timeout := e.Timeout
		if timeout == 0 {
			timeout = time.Duration(profile.ShellTimeout()) * time.Second
		}
		ex, status, err := shell.New(shell.Options{
			Remote: env, Timeout: timeout, Sandbox: e.Sandbox,
			Environ: o.Environ, Env: e.Env, PathAppend: e.PathAppend,
		})
		if err != nil {
			return nil, st, fail("builtins.exec.sandbox", "%v", err)
		}
		st.Exec, st.ExecWorkspace = &status, env.URL()
		tools = append(tools, ex)
	} else if e != nil {
		key, dir := "builtins.exec.workspace", e.Workspace
		if dir == "" {
			key, dir = "builtins.files.workspace", filesDir
			if dir == "" {
				key, dir = "builtins.exec", "."
			}
		}
		dir, err := resolve(key, dir)
		if err != nil {
			return nil, st, err
		}
		if o.Workspace != "" {
			dir = o.Workspace
		}
		paths := func(key string, list []string) ([]string, error) {
			var out []string
			for i, p := range list {
				abs, err := resolve(fmt.Sprintf("%s[%d]", key, i), p)
				if err != nil {
					return nil, err
				}
				out = append(out, abs)
			}
			return out, nil
		}
		readOnly, err := paths("builtins.exec.read-only", e.ReadOnly)
		if err != nil {
			return nil, st, err
		}
		writable, err := paths("builtins.exec.writable", e.Writable)
		if err != nil {
			return nil, st, err
		}
		timeout := e.Timeout
		if timeout == 0 {
			// The reference's defaults for the models' own shells.
			timeout = time.Duration(profile.ShellTimeout()) * time.Second
		}
		ex, status, err := shell.New(shell.Options{
			Workspace: dir, Timeout: timeout, Sandbox: e.Sandbox, Network: e.Network,
			Environ: o.Environ, Env: e.Env, PathAppend: e.PathAppend, ReadOnly: readOnly, Writable: writable, Bwrap: o.Bwrap,
			RequireSandbox: o.RequireSandbox, RequireAdvice: o.RequireAdvice, Notice: o.Notice,
		})
		if err != nil {
			return nil, st, fail(key, "%v", err)
		}
		st.Exec, st.ExecWorkspace = &status, dir
		tools = append(tools, ex)
	}
	if w := cfg.Web; w != nil {
		if w.Fetch != nil {
			tools = append(tools, web.NewFetch(web.FetchOptions{
				Guard:    netguard.Guard{Resolver: o.Resolver, Dialer: o.Dialer, AllowHosts: w.Fetch.AllowHosts},
				MaxBytes: w.Fetch.MaxBytes, Timeout: w.Fetch.Timeout,
			}))
			if len(w.Fetch.AllowHosts) > 0 {
				st.Notes = append(st.Notes, "web_fetch: may reach private addresses of "+strings.Join(w.Fetch.AllowHosts, ", "))
			}
		}
		if s := w.Search; s != nil {
			base := s.BaseURL
			if o.SearchURL != "" {
				base = o.SearchURL
			}
			search, err := web.NewSearch(web.SearchOptions{Provider: s.Provider, APIKey: s.APIKey, APIKeyVar: s.APIKeyVar, Count: s.Count, BaseURL: base, Client: o.HTTPClient})
			if err != nil {
				return nil, st, fail("builtins.web.search", "%v", err)
			}
			tools = append(tools, search)
			switch {
			case s.Provider == web.SearXNG:
			case s.APIKey == "" && s.APIKeyVar != "":
				st.Notes = append(st.Notes, "web_search: no API key ("+s.APIKeyVar+" is not set): every search will fail")
			case s.APIKey == "":
				st.Notes = append(st.Notes, "web_search: no API key (set builtins.web.search.api-key): every search will fail")
			}
		}
	}
	if sp := cfg.Spawn; sp != nil {
		switch {
		case sp.Managed && o.Agents == nil || !sp.Managed && o.Spawn == nil:
			st.Notes = append(st.Notes, "spawn: not offered (this front-end cannot run sub-agents)")
		case o.Depth >= sp.MaxDepth:
			// A sub-agent at the deepest level gets no spawn tool at all.
		case sp.Managed:
			tools = append(tools, AgentTools(o.Agents, o.Depth, sp.Models)...)
			st.Notes = append(st.Notes, fmt.Sprintf("spawn: managed sub-agents (spawn_agent, send_input, wait, close_agent) may nest %d deep", sp.MaxDepth))
		default:
			tools = append(tools, &spawnTool{run: o.Spawn, depth: o.Depth})
			st.Notes = append(st.Notes, fmt.Sprintf("spawn: sub-agents may nest %d deep", sp.MaxDepth))
		}
	}
	for _, t := range tools {
		st.Tools = append(st.Tools, t.Spec().Name)
	}
	return tools, st, nil
}
