package agentsrv

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"sync"

	"github.com/nbots/nb/agentproto"
	"github.com/nbots/nb/agents"
	"github.com/nbots/nb/bot"
	"github.com/nbots/nb/server"
)

// DefaultDescription describes the built-in default cartridge's agent,
// whose meta (the specification's) says only "Unknown".
const DefaultDescription = "nb's built-in default cartridge: a general assistant on the default provider, without tools"

// Mount serves the agent protocol on nb serve's server: its routes are
// behind the server's tokens, request log and limits (each run counts as
// one of the server's runs, with its deadline and its shutdown), the
// agents are the cartridges the request's token may use (see
// ServerCatalog) and the agents of minion files, and a run's end user is
// the server's for the request. h gives the protocol's own settings
// (frame limits, remote minions); its Runtime is made when nil.
func Mount(srv *server.Server, h *Handler, minions []*agents.Agent) *ServerCatalog {
	cat := &ServerCatalog{Server: srv, Minions: minions}
	if h.Runtime == nil {
		h.Runtime = agents.New(cat)
	} else {
		h.Runtime.Catalog = cat
	}
	h.Admit = func(r *http.Request) (context.Context, func(), error) {
		return srv.Admit(r.Context(), true)
	}
	h.WriteError = srv.WriteError
	h.EndUser = srv.EndUser
	h.Owner = func(r *http.Request) string { return server.Owner(r.Context()) }
	if h.Shared == nil {
		h.Shared = srv.Shared()
	}
	if h.Log == nil {
		h.Log = srv.Logger(context.Background())
	}
	h.Register(srv)
	return cat
}

// ServerCatalog is the Catalog of nb serve: every cartridge the client's
// token may use is an agent (cartridges that failed to load, or whose
// agent block is wrong, are left out of the list and refused by name
// with why), named by its meta.name, or by its cartridge id when it has
// none or shares it with another cartridge (it can always be run by id;
// the built-in default cartridge is the agent "default");
// the agents of minion files are added for the tokens that may use the
// default cartridge, whose provider they run on.
type ServerCatalog struct {
	Server  *server.Server
	Minions []*agents.Agent

	mu    sync.Mutex
	built map[*bot.Bot]builtAgent
}

type builtAgent struct {
	agent *agents.Agent
	err   error
}

// view is what one client sees.
type view struct {
	list   []*agents.Agent
	byName map[string]*agents.Agent
	failed map[string]error // by cartridge id
	idOf   map[*agents.Agent]string
}

func (c *ServerCatalog) view(ctx context.Context) view {
	models := c.Server.Models(ctx)
	v := view{byName: map[string]*agents.Agent{}, failed: map[string]error{}, idOf: map[*agents.Agent]string{}}
	c.mu.Lock()
	next := map[*bot.Bot]builtAgent{}
	type found struct {
		id    string
		agent *agents.Agent
	}
	var ok []found
	names := map[string]int{}
	for _, m := range models {
		if m.Err != nil {
			v.failed[m.ID] = m.Err
			continue
		}
		if m.Bot == nil {
			continue // being reloaded
		}
		b, seen := c.built[m.Bot]
		if !seen {
			b.agent, b.err = agents.FromCartridge(m.Bot)
			if b.err != nil {
				c.Server.Logger(ctx).Warn("cartridge is not a usable agent", "cartridge", m.ID, "error", b.err)
			}
		}
		next[m.Bot] = b
		if b.err != nil {
			v.failed[m.ID] = b.err
			continue
		}
		ok = append(ok, found{m.ID, b.agent})
		names[b.agent.Name()]++
	}
	c.built = next
	c.mu.Unlock()
	for _, f := range ok {
		a := f.agent
		switch {
		case f.id == server.DefaultID:
			a = a.Renamed("default")             // the built-in default cartridge
			if a.Repr.Description == "Unknown" { // the specification's default meta
				a.Repr.Description = DefaultDescription
			}
		case names[a.Name()] > 1:
			a = a.Renamed(f.id)
		}
		v.byName[f.id] = a
		v.idOf[a] = f.id
		if _, taken := v.byName[a.Name()]; !taken || a.Name() == f.id {
			v.byName[a.Name()] = a
		}
		v.list = append(v.list, a)
	}
	if server.TokenFrom(ctx).Allows(server.DefaultID) {
		for _, a := range c.Minions {
			if _, taken := v.byName[a.Name()]; taken {
				continue
			}
			v.byName[a.Name()] = a
			v.list = append(v.list, a)
		}
	}
	sort.Slice(v.list, func(i, j int) bool { return v.list[i].Name() < v.list[j].Name() })
	return v
}

// Agents implements agents.Catalog.
func (c *ServerCatalog) Agents(ctx context.Context) []*agents.Agent { return c.view(ctx).list }

// Agent implements agents.Catalog: by name, or by cartridge id.
func (c *ServerCatalog) Agent(ctx context.Context, name string) (*agents.Agent, error) {
	v := c.view(ctx)
	if a, ok := v.byName[name]; ok {
		if id, ok := v.idOf[a]; ok {
			server.NameCartridge(ctx, id)
		}
		return a, nil
	}
	if err, ok := v.failed[name]; ok {
		return nil, &agents.Failure{Code: agentproto.CodeCartridge, Message: fmt.Sprintf("the cartridge %q cannot run as an agent: %v", name, err)}
	}
	if _, err := c.Server.Model(ctx, name); err != nil {
		return nil, &agents.Failure{Code: agentproto.CodeUnknownAgent, Message: err.Error()}
	}
	return nil, &agents.Failure{Code: agentproto.CodeUnknownAgent, Message: fmt.Sprintf("there is no agent %q on this server (GET /agents lists them)", name)}
}
