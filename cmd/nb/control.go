package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/nbots/nb/catalog"
	"github.com/nbots/nb/eventlog"
	"github.com/nbots/nb/internal/control"
	"github.com/nbots/nb/server"
	"github.com/nbots/nb/server/agentsrv"
	"github.com/nbots/nb/server/openaiapi"
)

// controlRows is how many stored responses and agent runs nb serve's
// control page lists: the most recent.
const controlRows = 20

// servePage is what nb serve's control page reads, given as nb serve
// makes its parts (the page is made before them).
type servePage struct {
	mu        sync.Mutex
	srv       *server.Server
	responses *openaiapi.Handler
	agents    *agentsrv.Handler
}

func (p *servePage) setServer(s *server.Server) { p.mu.Lock(); p.srv = s; p.mu.Unlock() }

func (p *servePage) setResponses(h *openaiapi.Handler) {
	p.mu.Lock()
	p.responses = h
	p.mu.Unlock()
}

func (p *servePage) setAgents(h *agentsrv.Handler) { p.mu.Lock(); p.agents = h; p.mu.Unlock() }

// serveControl is nb serve's control page: besides what every control
// page shows, its cartridges with their load errors, its runs, its
// stored responses and its agent runs, read at each poll.
func serveControl(p *servePage, tokens []*server.Token) http.Handler {
	return control.New(control.Options{Server: "nb serve", Tokens: tokens, Tables: func(ctx context.Context) []control.Table {
		p.mu.Lock()
		s, responses, agents := p.srv, p.responses, p.agents
		p.mu.Unlock()
		if s == nil {
			return nil
		}
		tables := []control.Table{cartridgeTable(s), runsTable(s)}
		if responses != nil {
			l, err := responses.StoredResponses(ctx, controlRows)
			tables = append(tables, responseTable(l, err))
		}
		if agents != nil {
			l, err := agents.RunList(ctx, controlRows)
			tables = append(tables, agentRunTable(l, err))
		}
		return tables
	}})
}

// cartridgeTable lists the cartridges served, those that failed to load
// with the first line of their error (file, line, key and what is wrong;
// the source excerpt is in the log and in the error's answer).
func cartridgeTable(s *server.Server) control.Table {
	t := control.Table{ID: "cartridges", Title: "Cartridges", Columns: []string{"id", "model", "file", "loaded at", "status"}}
	held := &catalog.Leases{}
	defer held.Release()
	failed := 0
	for _, m := range s.Catalog().Models(nil, held) {
		model, status, loaded := "", "loaded", ""
		if m.Cartridge != nil {
			model = m.Cartridge.Provider().ID + " " + m.Cartridge.Provider().Model()
		}
		if m.Err != nil {
			failed++
			first, _, _ := strings.Cut(m.Err.Error(), "\n")
			status = "failed to load: " + first
		}
		if !m.Modified.IsZero() {
			loaded = stamp(m.Modified)
		}
		t.Rows = append(t.Rows, []any{m.ID, model, m.Path, loaded, status})
	}
	t.Note = fmt.Sprintf("%d cartridges, %d failed to load", len(t.Rows), failed)
	return t
}

func runsTable(s *server.Server) control.Table {
	adm := s.Admission()
	return control.Table{ID: "runs", Title: "Runs", Columns: []string{"running", "waiting on their client", "limit"},
		Rows: [][]any{{adm.Active() - adm.Waiting(), adm.Waiting(), adm.Limits().MaxRuns}}}
}

// responseTable lists the stored responses of the OpenAI-compatible
// API (kept for previous_response_id and GET /v1/responses/{id}).
func responseTable(l []eventlog.Entry, err error) control.Table {
	t := control.Table{ID: "responses", Title: "Stored responses", Columns: []string{"response", "model", "status", "created", "tokens", "bytes", "client"}}
	for _, e := range l {
		t.Rows = append(t.Rows, []any{e.ID, e.Label, e.Status, stamp(e.Created), e.Tokens, e.Size, client(e.Owner)})
	}
	t.Note = listNote(len(l), err)
	return t
}

// agentRunTable lists the agent protocol's runs: those running and
// those whose end is kept for a reconnecting client.
func agentRunTable(l []eventlog.Entry, err error) control.Table {
	t := control.Table{ID: "agent-runs", Title: "Agent runs", Columns: []string{"run", "agent", "state", "started", "tokens", "client"}}
	for _, e := range l {
		t.Rows = append(t.Rows, []any{e.ID, e.Label, e.Status, stamp(e.Created), e.Tokens, client(e.Owner)})
	}
	t.Note = listNote(len(l), err)
	return t
}

func listNote(n int, err error) string {
	if err != nil {
		return "cannot be read now: " + err.Error()
	}
	if n >= controlRows {
		return fmt.Sprintf("the %d most recent", controlRows)
	}
	return ""
}

// client names an owner (server.Owner) by its token's name.
func client(owner string) string {
	name := strings.TrimPrefix(owner, "token:")
	if name == "" {
		return "-"
	}
	return name
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02 15:04:05Z")
}
