package gatewayrun

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/nbots/nb/gateway"
	"github.com/nbots/nb/gateway/access"
	"github.com/nbots/nb/gateway/budget"
	"github.com/nbots/nb/gateway/cron"
	"github.com/nbots/nb/gateway/gate"
	"github.com/nbots/nb/gateway/heartbeat"
	"github.com/nbots/nb/gateway/memory"
	"github.com/nbots/nb/gateway/modelcall"
	"github.com/nbots/nb/gateway/replica"
	gwsession "github.com/nbots/nb/gateway/session"
	"github.com/nbots/nb/gateway/skills"
	"github.com/nbots/nb/internal/metric"
	"github.com/nbots/nb/state"
	"github.com/nbots/nb/tool"
)

// features wires the assistant's budgets, skills, memory, cron and
// heartbeat (issue 20 §2) into the gateway's seams, in the order Open
// calls them.
type features struct {
	gw        *Gateway
	zone      *time.Location
	lookupEnv func(string) (string, bool)
	ledger    *budget.Ledger
	// cronJobs are the workspace's cron jobs (the control page).
	cronJobs *cron.Store
	// model is the background features' model call (consolidation, the
	// heartbeat's decision, the notification gate): the assistant's
	// provider, each call counted in the budgets.
	model modelcall.Caller
	// gate is nanobot's notification gate of cron's and the heartbeat's
	// answers.
	gate *gate.Gate
	// claims are the cron slots' and heartbeats' (replica.Local alone).
	claims replica.Claims
}

// budgets are the budgets' ledger: each model call reserves its prompt
// and its answer's cap before it starts (the cartridge's max_tokens:
// maxTokens, 8,192 by default).
func (f *features) budgets() {
	gw, g := f.gw, f.gw.Core
	ledger := Ledger(gw.Config, gw.State, f.zone)
	if r := gw.replicas; r != nil {
		ledger.Shared = r.counters
	}
	ledger.Warn = func(msg string) { gw.log.Warn(msg) }
	g.Budget = ledger
	answer := gw.Config.AnswerTokens()
	ledger.AnswerTokens, g.AnswerTokens = answer, answer
	gw.background = append(gw.background, part{name: "the gateway", run: func(ctx context.Context) error {
		ledger.Run(ctx) //nolint:errcheck // with replicas, until ctx ends; alone, at once
		<-ctx.Done()
		return ledger.Flush()
	}})
	f.ledger = ledger
	metric.BudgetFunc("daily", func() int { return ledger.Report("").TodayTotal }, func() int { return ledger.Limits.DailyTokens })
	f.model = budget.Guard(modelcall.Provider(gw.Bot.Provider()), ledger)
	f.gate = &gate.Gate{Model: f.model, Log: gw.log}
}

// memory are the skills and the memory every prompt shows, and the
// consolidations after turns and on /new, under the budgets.
func (f *features) memory() {
	gw, g, c := f.gw, f.gw.Core, f.gw.Config
	d := c.Agents.Defaults
	getenv := func(name string) string { v, _ := f.lookupEnv(name); return v }
	set := &skills.Set{Loader: skills.Loader{Workspace: c.Workspace, Getenv: getenv}, Warn: func(msg string) { gw.log.Warn(msg) }}
	cons := &memory.Consolidator{
		Workspace: c.Workspace,
		Model:     f.model,
		Window:    d.MemoryWindow,
		Log:       gw.log,
		// The memory a call is shown is the prompt's (agents.defaults.limits).
		MaxMemoryBytes:  d.Limits.MemoryBytes,
		MaxChunkBytes:   d.Limits.ConsolidationChunkBytes,
		MaxMessageBytes: d.Limits.ConsolidationMessageBytes,
		Open: func(ctx context.Context, key string) (memory.Session, error) {
			s, err := gw.Sessions.Get(ctx, key)
			if err != nil {
				return nil, err
			}
			return consolidatedSession{s}, nil
		},
	}
	if d.ContextWindowTokens > 0 {
		cons.ContextTokens = d.ContextWindowTokens - max(d.MaxTokens, 0) - 1024
	}
	g.Prompt.Skills = set
	g.Prompt.Memory = cons
	g.HistoryMessages = cons.MessageWindow()
	g.Consolidator = archiver{cons, f.ledger}
	g.AfterTurn = func(s *gwsession.Session) {
		n, from := s.Len(), s.Meta().LastConsolidated
		tokens := 0
		if cons.ContextTokens > 0 {
			// Kept up to date with each turn's messages: the tail is
			// not read again (nor back from the file) at every turn.
			tokens = s.Tally(from, estimateTokens)
		}
		cons.Maybe(s.Key, n-from, tokens)
	}
	gw.background = append(gw.background, part{name: "the gateway", run: cons.Run, chat: true})
	// Line 1's updated_at, which nanobot's list_sessions() reads, kept true.
	gw.background = append(gw.background, part{name: "the gateway", run: gw.Sessions.KeepHeads, chat: true})
}

// heartbeat runs the workspace's HEARTBEAT.md tasks every
// gateway.heartbeat.intervalS (on the elected replica), unless disabled.
func (f *features) heartbeat() {
	gw, g, c := f.gw, f.gw.Core, f.gw.Config
	hb := c.Gateway.Heartbeat
	if hb.Enabled != nil && !*hb.Enabled {
		return
	}
	svc := &heartbeat.Service{
		Workspace: c.Workspace,
		Interval:  time.Duration(hb.IntervalS) * time.Second,
		Zone:      f.zone,
		Log:       gw.log,
		Execute: func(ctx context.Context, prompt string) error {
			// Isolated: the beat's session replays none of its past
			// beats (the file keeps them).
			if s, err := gw.Sessions.Get(ctx, heartbeat.Session); err == nil {
				if err := s.ConsolidateAll(ctx); err != nil {
					return err
				}
			}
			channel, chat := heartbeatTarget(ctx, gw.Sessions, gw.Access)
			_, err := g.RunDirect(ctx, gateway.Direct{
				Entry: access.Heartbeat, SessionKey: heartbeat.Session,
				Channel: channel, ChatID: chat, Content: prompt,
				Source: gateway.SourceHeartbeat, Deliver: channel != "cli",
				Notify: func(ctx context.Context, answer string) bool {
					return f.gate.Notify(ctx, gateway.SourceHeartbeat, heartbeat.Session, prompt, answer)
				},
			})
			return err
		},
	}
	svc.Claims = f.claims
	svc.Decide = f.model
	gw.background = append(gw.background, part{name: "the gateway", run: func(ctx context.Context) error { return gw.leadOrRun(ctx, "heartbeat", svc.Run) }})
}

// cron runs the workspace's jobs beside the gateway (each as a turn in
// session cron:<id>, as nanobot's process_direct) and gives every turn
// the cron tool.
func (f *features) cron() {
	gw, g := f.gw, f.gw.Core
	store := cron.NewStore(gw.Config.Workspace)
	store.MaxJobs, store.Legacy = gw.Config.Gateway.Limits.Cron(), gw.Config.NanobotCron
	store.Log = func(msg string) { gw.log.Info(msg) }
	zone := f.zone
	sched := &cron.Scheduler{Store: store, Zone: zone, Log: gw.log, RunJob: func(ctx context.Context, j cron.Job) error {
		channel, chat := "cli", "direct"
		if j.Payload.Channel != nil && *j.Payload.Channel != "" {
			channel = *j.Payload.Channel
		}
		if j.Payload.To != nil && *j.Payload.To != "" {
			chat = *j.Payload.To
		}
		_, err := g.RunDirect(ctx, gateway.Direct{
			Entry: access.Cron, SessionKey: "cron:" + j.ID, Channel: channel, ChatID: chat,
			Content: j.Prompt(), Source: gateway.SourceCron,
			Deliver: j.Payload.Deliver && j.Payload.To != nil && *j.Payload.To != "",
			Notify: func(ctx context.Context, answer string) bool {
				return f.gate.Notify(ctx, gateway.SourceCron, "cron:"+j.ID, j.Payload.Message, answer)
			},
		})
		metric.CronRun(err)
		return err
	}}
	sched.Claims = f.claims
	f.cronJobs = store
	gw.background = append(gw.background, part{name: "the gateway", run: func(ctx context.Context) error { return gw.runScheduler(ctx, sched) }})
	g.ExtraTools = func(d gateway.Direct) []tool.Tool {
		return []tool.Tool{&cron.Tool{Store: store, Zone: zone, Channel: d.Channel, ChatID: d.ChatID, InCronJob: d.Source == gateway.SourceCron}}
	}
}

// heartbeatTarget is where a beat's answer goes, as nanobot chooses
// among the owner's chats: the most recently updated session, on a
// channel other than cli and system, of a chat that is the owner's (a
// guest who wrote last never reads the owner's tasks), else cli:direct
// (not delivered).
func heartbeatTarget(ctx context.Context, sessions *gwsession.Manager, checker *access.Checker) (string, string) {
	infos, err := sessions.List(ctx)
	if err == nil {
		for _, in := range infos {
			ch, chat, ok := strings.Cut(in.Key, ":")
			if !ok || ch == "cli" || ch == "system" || ch == "cron" || in.Key == heartbeat.Session {
				continue
			}
			if checker.RoleOf(ch, chat) != access.Owner {
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

// Load reads the messages not consolidated only (a session read back
// for its turns holds the last window: those before are read back from
// the first one not consolidated, not from the file's start).
func (c consolidatedSession) Load(context.Context) ([]memory.Message, int, error) {
	from := c.s.Meta().LastConsolidated
	return c.messages(from), from, nil
}

func (c consolidatedSession) SetCursor(ctx context.Context, n int) error {
	return c.s.SetConsolidated(ctx, n)
}

// messages are the session's messages from the index from on.
func (c consolidatedSession) messages(from int) []memory.Message {
	return memoryMessages(c.s.EventsFrom(from))
}

// estimateTokens is memory.EstimateTokens of events (a session's
// Tally).
func estimateTokens(events []state.Event) int { return memory.EstimateTokens(memoryMessages(events)) }

// memoryMessages are events as consolidation reads them.
func memoryMessages(events []state.Event) []memory.Message {
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
