package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nbots/nb/gateway"
	"github.com/nbots/nb/gateway/access"
	"github.com/nbots/nb/gateway/budget"
	"github.com/nbots/nb/gateway/config"
	"github.com/nbots/nb/gateway/cron"
	"github.com/nbots/nb/gateway/heartbeat"
	"github.com/nbots/nb/gateway/memory"
	"github.com/nbots/nb/gateway/modelcall"
	gwsession "github.com/nbots/nb/gateway/session"
	"github.com/nbots/nb/gateway/skills"
	"github.com/nbots/nb/state"
)

// gatewayFeatures wires the assistant's memory, heartbeat, budgets and
// skills (issue 20 §2) into the gateway's seams once it is built.
func gatewayFeatures(_ context.Context, rt *gatewayRuntime) error {
	c, g := rt.Config, rt.Gateway
	d := c.Agents.Defaults
	zone := rt.Zone

	ledger := gatewayLedger(c, rt.State, zone)
	ledger.Shared = rt.Counters
	ledger.Warn = func(msg string) { rt.Log.Warn(msg) }
	g.Budget = ledger
	// Each model call reserves its prompt and its answer's cap before it
	// starts (the cartridge's max_tokens: maxTokens, 8,192 by default).
	answer := d.MaxTokens
	if answer <= 0 {
		answer = 8192
	}
	ledger.AnswerTokens, g.AnswerTokens = answer, answer
	rt.Background = append(rt.Background, func(ctx context.Context) error {
		ledger.Run(ctx) //nolint:errcheck // with replicas, until ctx ends; alone, at once
		<-ctx.Done()
		return ledger.Flush()
	})

	set := &skills.Set{Loader: skills.Loader{Workspace: c.Workspace, Getenv: rt.App.Getenv}, Warn: func(msg string) { rt.Log.Warn(msg) }}
	cons := &memory.Consolidator{
		Workspace: c.Workspace,
		Model:     budget.Guard(modelcall.Provider(rt.Bot.Provider()), ledger),
		Window:    d.MemoryWindow,
		Log:       rt.Log,
		// The memory a call is shown is the prompt's (agents.defaults.limits).
		MaxMemoryBytes:  d.Limits.MemoryBytes,
		MaxChunkBytes:   d.Limits.ConsolidationChunkBytes,
		MaxMessageBytes: d.Limits.ConsolidationMessageBytes,
		Open: func(ctx context.Context, key string) (memory.Session, error) {
			s, err := rt.Sessions.Get(ctx, key)
			if err != nil {
				return nil, err
			}
			return consolidatedSession{s}, nil
		},
	}
	if d.ContextWindowTokens > 0 {
		cons.ContextTokens = d.ContextWindowTokens - max(d.MaxTokens, 0) - 1024
	}
	if g.Prompt != nil {
		g.Prompt.Skills = set
		g.Prompt.Memory = cons
	}
	g.Consolidator = archiver{cons, ledger}
	prev := g.AfterTurn
	g.AfterTurn = func(s *gwsession.Session) {
		if prev != nil {
			prev(s)
		}
		n, from := s.Len(), s.Meta().LastConsolidated
		tokens := 0
		if cons.ContextTokens > 0 {
			tokens = memory.EstimateTokens(consolidatedSession{s}.messages()[min(from, n):])
		}
		cons.Maybe(s.Key, n-from, tokens)
	}
	rt.Background = append(rt.Background, cons.Run)

	hb := c.Gateway.Heartbeat
	if hb.Enabled == nil || *hb.Enabled {
		svc := &heartbeat.Service{
			Workspace: c.Workspace,
			Interval:  time.Duration(hb.IntervalS) * time.Second,
			Zone:      zone,
			Log:       rt.Log,
			Execute: func(ctx context.Context, prompt string) error {
				// Isolated: the beat's session replays none of its past
				// beats (the file keeps them).
				if s, err := rt.Sessions.Get(ctx, heartbeat.Session); err == nil {
					if err := s.ConsolidateAll(ctx); err != nil {
						return err
					}
				}
				channel, chat := heartbeatTarget(ctx, rt)
				_, err := g.RunDirect(ctx, gateway.Direct{
					Entry: access.Heartbeat, SessionKey: heartbeat.Session,
					Channel: channel, ChatID: chat, Content: prompt,
					Source: gateway.SourceHeartbeat, Deliver: channel != "cli",
				})
				return err
			},
		}
		svc.Claims = rt.Claims
		rt.Background = append(rt.Background, func(ctx context.Context) error { return rt.leadOrRun(ctx, "heartbeat", svc.Run) })
	}
	return nil
}

// heartbeatTarget is where a beat's answer goes, as nanobot chooses
// among the owner's chats: the most recently updated session, on a
// channel other than cli and system, of a chat that is the owner's (a
// guest who wrote last never reads the owner's tasks), else cli:direct
// (not delivered).
func heartbeatTarget(ctx context.Context, rt *gatewayRuntime) (string, string) {
	infos, err := rt.Sessions.List(ctx)
	if err == nil {
		for _, in := range infos {
			ch, chat, ok := strings.Cut(in.Key, ":")
			if !ok || ch == "cli" || ch == "system" || ch == "cron" || in.Key == heartbeat.Session {
				continue
			}
			if rt.Access.RoleOf(ch, chat) != access.Owner {
				continue
			}
			return ch, chat
		}
	}
	return "cli", "direct"
}

// archiver is /new's consolidation: everything left goes to memory, and
// the session's budget starts again with the new session.
type archiver struct {
	c *memory.Consolidator
	l *budget.Ledger
}

func (a archiver) Archive(ctx context.Context, s *gwsession.Session) error {
	if err := a.c.Consolidate(ctx, s.Key, true); err != nil {
		return err
	}
	a.l.ResetSession(s.Key)
	return nil
}

// consolidatedSession is a gateway session as memory consolidation reads
// it: message i is event i, as last_consolidated counts them.
type consolidatedSession struct{ s *gwsession.Session }

func (c consolidatedSession) Load(context.Context) ([]memory.Message, int, error) {
	return c.messages(), c.s.Meta().LastConsolidated, nil
}

func (c consolidatedSession) SetCursor(ctx context.Context, n int) error {
	return c.s.SetConsolidated(ctx, n)
}

func (c consolidatedSession) messages() []memory.Message {
	events := c.s.Events()
	out := make([]memory.Message, len(events))
	for i, ev := range events {
		m := memory.Message{Role: string(ev.Who), Timestamp: ev.At}
		if ev.Who == state.RoleAI {
			m.Role = "assistant"
		}
		switch v := ev.Message.(type) {
		case string:
			m.Content = v
		case nil:
		default:
			b, _ := json.Marshal(v)
			m.Content = string(b)
		}
		for _, call := range ev.ToolCalls {
			if call.Name != "" {
				m.Tools = append(m.Tools, call.Name)
			}
		}
		out[i] = m
	}
	return out
}

// gatewayLedger is the budgets' ledger of c, in its state file.
func gatewayLedger(c *config.Config, st gatewayStateFiles, zone *time.Location) *budget.Ledger {
	d := c.Agents.Defaults
	return &budget.Ledger{
		Limits: budget.Limits{SessionTokens: d.Budget.SessionTokens, DailyTokens: d.Budget.DailyTokens},
		Path:   st.Usage,
		Zone:   zone,
	}
}

// gatewayStatus is nb gateway status: the workspace, today's tokens by
// source against the budgets, the memory files and the cron jobs.
func (a *App) gatewayStatus(_ context.Context, args []string) error {
	fs, f := a.gatewayFlagSet("nb gateway status", "nb gateway status [flags]", "Shows the workspace, today's token use by source and the budgets, memory and cron jobs.")
	if help, err := parseFlags(fs, args); help || err != nil {
		return err
	}
	c, err := a.loadGatewayConfig(f)
	if err != nil {
		return err
	}
	zone, err := gatewayZone(c)
	if err != nil {
		return err
	}
	r := gatewayLedger(c, a.gatewayState(c.Workspace), zone).Report("")
	fmt.Fprintf(a.Stdout, "Workspace: %s\n", c.Workspace)
	fmt.Fprintf(a.Stdout, "Tokens today: %s", budget.Thousands(r.TodayTotal))
	if r.Limits.DailyTokens > 0 {
		fmt.Fprintf(a.Stdout, " of %s (resets %s)", budget.Thousands(r.Limits.DailyTokens), r.Resets.Format("15:04 MST"))
	}
	fmt.Fprintln(a.Stdout)
	for _, s := range budget.Sources {
		fmt.Fprintf(a.Stdout, "  %-14s %s\n", s, budget.Thousands(r.Today[s].Total()))
	}
	if r.Limits.SessionTokens > 0 {
		fmt.Fprintf(a.Stdout, "Session budget: %s tokens\n", budget.Thousands(r.Limits.SessionTokens))
	}
	cons := &memory.Consolidator{Workspace: c.Workspace}
	for _, p := range []string{cons.MemoryPath(), cons.HistoryPath()} {
		if fi, err := os.Stat(p); err == nil {
			fmt.Fprintf(a.Stdout, "%s: %d bytes\n", filepath.Base(p), fi.Size())
		} else {
			fmt.Fprintf(a.Stdout, "%s: none\n", filepath.Base(p))
		}
	}
	jobs, err := cron.NewStore(c.Workspace).Load()
	if err != nil {
		return err
	}
	enabled := 0
	for _, j := range jobs.Jobs {
		if j.Enabled {
			enabled++
		}
	}
	running := "not running"
	if cron.NewStore(c.Workspace).Running() {
		running = "running"
	}
	fmt.Fprintf(a.Stdout, "Cron jobs: %d enabled, %d in all (scheduler %s)\n", enabled, len(jobs.Jobs), running)
	return nil
}
