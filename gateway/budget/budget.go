// Package budget counts the gateway's tokens and enforces its budgets (nb
// extension keys agents.defaults.budget.sessionTokens and dailyTokens):
// a Ledger is checked before each model call, so that a spent budget
// costs nothing and the user reads which budget is spent and when it
// resets; it keeps a count per source (chat, cron, heartbeat,
// consolidation, sub-agent) for /status and `nb gateway status`.
package budget

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/nbots/nb/gateway/modelcall"
	"github.com/nbots/nb/gateway/replica"
	"github.com/nbots/nb/internal/atomicfile"
	"github.com/nbots/nb/internal/metric"
	"github.com/nbots/nb/provider"
)

// Source is who made a model call.
type Source string

// The sources of the ledger.
const (
	Chat          Source = "chat"
	Cron          Source = "cron"
	Heartbeat     Source = "heartbeat"
	Consolidation Source = "consolidation"
	SubAgent      Source = "subagent"
)

// Sources are the sources in the order /status lists them.
var Sources = []Source{Chat, Cron, Heartbeat, Consolidation, SubAgent}

// Limits are the budgets; 0 is no limit.
type Limits struct {
	// SessionTokens is the most tokens (input + output) one session may
	// use, until it is started anew (/new).
	SessionTokens int
	// DailyTokens is the most tokens all calls may use in a day of Zone.
	DailyTokens int
}

// Usage is a count of tokens.
type Usage struct {
	Input  int `json:"input"`
	Output int `json:"output"`
}

// Total is input plus output.
func (u Usage) Total() int { return u.Input + u.Output }

// Ledger counts tokens. Set Path to keep the counts across restarts.
type Ledger struct {
	Limits Limits
	// Path is the file that keeps the counts (written at most once a
	// second, and by Flush); "" keeps them in memory.
	Path string
	// Zone is where days begin and end (agents.defaults.timezone); nil is UTC.
	Zone *time.Location
	// Shared, when replicas share the gateway's work, holds the sums of
	// every replica's counts, which the budgets are checked against (see
	// Run); nil counts this process's calls only.
	Shared replica.Counters
	// Warn receives a failure to reach Shared (nil: dropped).
	Warn func(msg string)
	// AnswerTokens is the cap of a model's answer (maxTokens), which
	// Guard reserves for each call besides its prompt (see Reserve).
	AnswerTokens int

	sh      sharedState
	res     reservations
	cnt     counts // alone or shared: chosen once (countsOf)
	cntOnce sync.Once
	gateMu  sync.Mutex // orders this replica's changes of the gates
	mu      sync.Mutex
	loaded  bool
	data    ledgerFile
	dirty   bool
	flushed time.Time
}

type ledgerFile struct {
	Day      string           `json:"day"`
	Today    map[Source]Usage `json:"today"`
	Sessions map[string]Usage `json:"sessions"`
	Days     map[string]Usage `json:"days,omitempty"` // totals of past days, the last 31
}

// Exceeded is the error of Check when a budget is spent. Its message is
// meant for the user as it is.
type Exceeded struct {
	// Budget is "session" or "daily".
	Budget string
	Limit  int
	Used   int
	// Resets is when a daily budget is new again; zero for a session's.
	Resets time.Time
	// Needed, when the budget is not spent yet, is the estimated size of
	// the request that the tokens left cannot take.
	Needed int
	now    time.Time
}

func (e *Exceeded) Error() string {
	if e.Needed > 0 {
		left := Thousands(e.Limit - e.Used)
		if e.Budget == "session" {
			return fmt.Sprintf("This session's token budget (%s tokens) is nearly spent: %s left, and this request needs about %s. It resets when you start a new session with /new.", Thousands(e.Limit), left, Thousands(e.Needed))
		}
		return fmt.Sprintf("The daily token budget (%s tokens) is nearly spent: %s left today, and this request needs about %s. It resets at %s (in %s).",
			Thousands(e.Limit), left, Thousands(e.Needed), e.Resets.Format("15:04 MST, Mon 2 Jan"), roughly(e.Resets.Sub(e.now)))
	}
	if e.Budget == "session" {
		return fmt.Sprintf("This session's token budget (%s tokens) is spent: %s used. It resets when you start a new session with /new.", Thousands(e.Limit), Thousands(e.Used))
	}
	return fmt.Sprintf("The daily token budget (%s tokens) is spent: %s used today. It resets at %s (in %s).",
		Thousands(e.Limit), Thousands(e.Used), e.Resets.Format("15:04 MST, Mon 2 Jan"), roughly(e.Resets.Sub(e.now)))
}

// Check says whether session may make a call now: nil, or *Exceeded.
func (l *Ledger) Check(session string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	l.roll(now)
	if lim := l.Limits.DailyTokens; lim > 0 {
		if used := total(l.todayBySource()); used >= lim {
			return &Exceeded{Budget: "daily", Limit: lim, Used: used, Resets: l.nextDay(now), now: now}
		}
	}
	if lim := l.Limits.SessionTokens; lim > 0 {
		if used := l.sessionUsed(session).Total(); used >= lim {
			return &Exceeded{Budget: "session", Limit: lim, Used: used, now: now}
		}
	}
	return nil
}

// Record counts a call's tokens (and nb_gateway_tokens_total by source).
func (l *Ledger) Record(session string, src Source, u Usage) {
	metric.SourceTokens(string(src), u.Input, u.Output)
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	l.roll(now)
	t := l.data.Today[src]
	l.data.Today[src] = Usage{t.Input + u.Input, t.Output + u.Output}
	s := l.data.Sessions[session]
	l.data.Sessions[session] = Usage{s.Input + u.Input, s.Output + u.Output}
	l.dirty = true
	l.counts().record(l.data.Day, src, session, u)
	if now.Sub(l.flushed) >= time.Second {
		l.flushLocked(now) //nolint:errcheck // the next Record or Flush tries again
	}
}

// Days are the totals of past days (the last 31, by date in Zone) and
// today's count by source, for the control page.
func (l *Ledger) Days() (past map[string]Usage, today string, bySource map[Source]Usage) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.roll(l.now())
	past = make(map[string]Usage, len(l.data.Days))
	for d, u := range l.data.Days {
		past[d] = u
	}
	return past, l.data.Day, l.todayBySource()
}

// ResetSession forgets a session's count (the session was started anew).
func (l *Ledger) ResetSession(session string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.roll(l.now())
	delete(l.data.Sessions, session)
	l.dirty = true
	l.counts().resetSession(session)
}

// Report is what /status shows.
type Report struct {
	Limits  Limits
	Session Usage
	Today   map[Source]Usage
	// TodayTotal is the sum of Today.
	TodayTotal int
	Resets     time.Time
}

// Report is the counts of today and of session.
func (l *Ledger) Report(session string) Report {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	l.roll(now)
	r := Report{Limits: l.Limits, Session: l.sessionUsed(session), Today: l.todayBySource(), Resets: l.nextDay(now)}
	r.TodayTotal = total(r.Today)
	return r
}

// String is the report as /status prints it: "Tokens today: 12,345 of
// 200,000 (chat 10,000, consolidation 2,345); this session: 3,000 of 50,000".
func (r Report) String() string {
	var parts []string
	for _, s := range Sources {
		if u, ok := r.Today[s]; ok && u.Total() > 0 {
			parts = append(parts, string(s)+" "+Thousands(u.Total()))
		}
	}
	var extra []string
	for s, u := range r.Today {
		if !knownSource(s) && u.Total() > 0 {
			extra = append(extra, string(s)+" "+Thousands(u.Total()))
		}
	}
	sort.Strings(extra)
	parts = append(parts, extra...)
	out := "Tokens today: " + Thousands(r.TodayTotal) + of(r.Limits.DailyTokens)
	if len(parts) > 0 {
		out += " (" + strings.Join(parts, ", ") + ")"
	}
	return out + "; this session: " + Thousands(r.Session.Total()) + of(r.Limits.SessionTokens)
}

func of(limit int) string {
	if limit <= 0 {
		return ""
	}
	return " of " + Thousands(limit)
}

func knownSource(s Source) bool {
	for _, k := range Sources {
		if k == s {
			return true
		}
	}
	return false
}

// Flush writes the counts to Path now.
func (l *Ledger) Flush() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.flushLocked(l.now())
}

func (l *Ledger) flushLocked(now time.Time) error {
	if l.Path == "" || !l.dirty {
		return nil
	}
	l.data.Today = l.todayBySource() // shared: the file shows every replica's counts
	data, err := json.MarshalIndent(l.data, "", "  ")
	if err != nil {
		return fmt.Errorf("budget: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(l.Path), 0o700); err != nil {
		return fmt.Errorf("budget: %w", err)
	}
	if err := atomicfile.WriteFile(l.Path, append(data, '\n'), 0o600); err != nil {
		return fmt.Errorf("budget: %w", err)
	}
	l.dirty, l.flushed = false, now
	return nil
}

// roll loads the counts once and starts a new day when the day changed.
func (l *Ledger) roll(now time.Time) {
	if !l.loaded {
		l.loaded = true
		if l.Path != "" {
			if b, err := os.ReadFile(l.Path); err == nil {
				if err := json.Unmarshal(b, &l.data); err != nil {
					l.data = ledgerFile{}
				}
			} else if !errors.Is(err, fs.ErrNotExist) {
				l.data = ledgerFile{}
			}
		}
	}
	if l.data.Today == nil {
		l.data.Today = map[Source]Usage{}
	}
	if l.data.Sessions == nil {
		l.data.Sessions = map[string]Usage{}
	}
	day := now.In(l.zone()).Format("2006-01-02")
	if l.data.Day == day {
		return
	}
	if l.data.Day != "" {
		l.data.Today = l.todayBySource()
		if l.data.Days == nil {
			l.data.Days = map[string]Usage{}
		}
		var sum Usage
		for _, u := range l.data.Today {
			sum.Input += u.Input
			sum.Output += u.Output
		}
		l.data.Days[l.data.Day] = sum
		for len(l.data.Days) > 31 {
			oldest := ""
			for d := range l.data.Days {
				if oldest == "" || d < oldest {
					oldest = d
				}
			}
			delete(l.data.Days, oldest)
		}
	}
	l.data.Day = day
	l.data.Today = map[Source]Usage{}
	l.dirty = true
}

// todayBySource is today's counts: this process's, or with Shared the
// sums of every replica's.
func (l *Ledger) todayBySource() map[Source]Usage { return l.counts().today() }

// sessionUsed is session's count: this process's, or with Shared the
// sum of every replica's.
func (l *Ledger) sessionUsed(session string) Usage { return l.counts().session(session) }

// counts is how the ledger counts, chosen on its first use: alone, or
// shared through Shared.
func (l *Ledger) counts() counts {
	l.cntOnce.Do(func() {
		switch l.Shared.(type) {
		case nil:
			l.cnt = alone{l}
		default:
			l.cnt = shared{l}
		}
	})
	return l.cnt
}

func total(by map[Source]Usage) int {
	n := 0
	for _, u := range by {
		n += u.Total()
	}
	return n
}

// nextDay is the next midnight of the zone (a day may have 23 or 25 hours).
func (l *Ledger) nextDay(now time.Time) time.Time {
	t := now.In(l.zone())
	return time.Date(t.Year(), t.Month(), t.Day()+1, 0, 0, 0, 0, l.zone())
}

func (l *Ledger) zone() *time.Location {
	if l.Zone == nil {
		return time.UTC
	}
	return l.Zone
}

func (l *Ledger) now() time.Time { return time.Now() }

// Allow is Check for the gateway's Budget seam (the source does not
// matter: every call counts against both budgets).
func (l *Ledger) Allow(session, source string) error { return l.Check(session) }

// Spent is Record for the gateway's Budget seam.
func (l *Ledger) Spent(session, source string, u provider.Usage) {
	l.Record(session, Source(source), Usage{u.InputTokens, u.OutputTokens})
}

// Status is /status's budget line: each budget set, its use and reset
// ("today 1,500 of 200,000 tokens, resets 00:00 UTC; this session 300 of
// 50,000 tokens, resets with /new"); "" when no budget is set.
func (l *Ledger) Status(session string) string {
	r := l.Report(session)
	var parts []string
	if lim := r.Limits.DailyTokens; lim > 0 {
		parts = append(parts, fmt.Sprintf("today %s of %s tokens, resets %s", Thousands(r.TodayTotal), Thousands(lim), r.Resets.Format("15:04 MST")))
	}
	if lim := r.Limits.SessionTokens; lim > 0 {
		parts = append(parts, fmt.Sprintf("this session %s of %s tokens, resets with /new", Thousands(r.Session.Total()), Thousands(lim)))
	}
	return strings.Join(parts, "; ")
}

// Guard wraps a Caller so that each call reserves its tokens in the
// ledger first (its request's estimated size and AnswerTokens: see
// Reserve) and settles with what it cost, under the request's Source and
// Session.
func Guard(c modelcall.Caller, l *Ledger) modelcall.Caller {
	return modelcall.Func(func(ctx context.Context, req modelcall.Request) (modelcall.Reply, error) {
		r, err := l.Reserve(ctx, req.Session, Source(req.Source), RequestTokens(req), l.AnswerTokens)
		if err != nil {
			return modelcall.Reply{}, err
		}
		reply, err := c.Call(ctx, req)
		r.Settle(Usage{reply.Usage.InputTokens, reply.Usage.OutputTokens})
		return reply, err
	})
}

// RequestTokens estimates a call's prompt as the agent does: a token per
// 4 bytes of its texts and tools' specifications.
func RequestTokens(req modelcall.Request) int {
	n := len(req.System) + len(req.User)
	for _, t := range req.Tools {
		b, _ := json.Marshal(t)
		n += len(b)
	}
	return (n+3)/4 + 8
}

// Thousands writes n with thousands separators: 200,000.
func Thousands(n int) string {
	s := fmt.Sprint(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// roughly writes a duration as people say it: "5 h 12 min", "40 min".
func roughly(d time.Duration) string {
	d = d.Round(time.Minute)
	h, m := int(d.Hours()), int(d.Minutes())%60
	switch {
	case h > 0 && m > 0:
		return fmt.Sprintf("%d h %d min", h, m)
	case h > 0:
		return fmt.Sprintf("%d h", h)
	}
	return fmt.Sprintf("%d min", max(m, 1))
}
