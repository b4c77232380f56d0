package gatewayrun

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/nbots/nb/gateway/budget"
	"github.com/nbots/nb/gateway/cron"
	"github.com/nbots/nb/internal/control"
	"github.com/nbots/nb/internal/httpguard"
	"github.com/nbots/nb/internal/metric"
)

// controlPage is nb gateway's control page: besides what every control
// page shows, the channels' health, the sessions with their budget, the
// cron jobs and the memory files; the tokens by source come from the
// budgets' ledger, which keeps them across restarts.
func (gw *Gateway) controlPage(tokens []*httpguard.Token, ledger *budget.Ledger, jobs *cron.Store) *control.Handler {
	return control.New(control.Options{Server: "nb gateway", Tokens: tokens,
		TokensBySource: func(context.Context) []metric.DayTokens { return ledgerDays(ledger) },
		Tables: func(ctx context.Context) []control.Table {
			return []control.Table{gw.channelTable(), gw.sessionTable(ctx, ledger), cronTable(jobs, time.Now()), gw.memoryTable()}
		}})
}

// ledgerDays are the ledger's tokens per day: past days' totals ("all")
// and today's by source.
func ledgerDays(l *budget.Ledger) []metric.DayTokens {
	if l == nil {
		return nil
	}
	past, today, bySource := l.Days()
	var out []metric.DayTokens
	for d, u := range past {
		out = append(out, metric.DayTokens{Day: d, Key: "all", Input: u.Input, Output: u.Output})
	}
	for src, u := range bySource {
		out = append(out, metric.DayTokens{Day: today, Key: string(src), Input: u.Input, Output: u.Output})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Day != out[j].Day {
			return out[i].Day < out[j].Day
		}
		return out[i].Key < out[j].Key
	})
	return out
}

func (gw *Gateway) channelTable() control.Table {
	t := control.Table{ID: "channels", Title: "Channels", Columns: []string{"channel", "state"}}
	for _, st := range gw.Core.Channels() {
		t.Rows = append(t.Rows, []any{st.Name, st.String()})
	}
	return t
}

// sessionTable lists the sessions, the most recent first (50 at most).
func (gw *Gateway) sessionTable(ctx context.Context, ledger *budget.Ledger) control.Table {
	t := control.Table{ID: "sessions", Title: "Sessions", Columns: []string{"session", "messages", "last activity", "tokens used"}}
	infos, err := gw.Sessions.List(ctx)
	if err != nil {
		t.Note = err.Error()
		return t
	}
	for i, in := range infos {
		if i == 50 {
			t.Note = fmt.Sprintf("and %d more", len(infos)-50)
			break
		}
		used := 0
		if ledger != nil {
			used = ledger.Report(in.Key).Session.Total()
		}
		t.Rows = append(t.Rows, []any{in.Key, in.Messages, in.UpdatedAt.Format(time.DateTime), used})
	}
	return t
}

// cronTable is the jobs due in the next 24 hours and the last runs.
func cronTable(store *cron.Store, now time.Time) control.Table {
	t := control.Table{ID: "cron", Title: "Cron: next 24 hours and last runs", Columns: []string{"job", "next run", "last run", "outcome"}}
	if store == nil {
		return t
	}
	f, err := store.Load()
	if err != nil {
		t.Note = err.Error()
		return t
	}
	at := func(ms *int64) string {
		if ms == nil {
			return ""
		}
		return time.UnixMilli(*ms).Format(time.DateTime)
	}
	sort.Slice(f.Jobs, func(i, j int) bool {
		a, b := f.Jobs[i].State.NextRunAtMs, f.Jobs[j].State.NextRunAtMs
		return a != nil && (b == nil || *a < *b)
	})
	for _, j := range f.Jobs {
		next := ""
		if ms := j.State.NextRunAtMs; j.Enabled && ms != nil && time.UnixMilli(*ms).Before(now.Add(24*time.Hour)) {
			next = at(ms)
		}
		if next == "" && j.State.LastRunAtMs == nil {
			continue
		}
		outcome := ""
		if j.State.LastStatus != nil {
			outcome = *j.State.LastStatus
		}
		if j.State.LastError != nil && *j.State.LastError != "" {
			outcome += ": " + *j.State.LastError
		}
		name := j.Name
		if name == "" {
			name = j.ID
		}
		t.Rows = append(t.Rows, []any{name, next, at(j.State.LastRunAtMs), outcome})
	}
	return t
}

// memoryTable is the sizes of the workspace's memory files.
func (gw *Gateway) memoryTable() control.Table {
	t := control.Table{ID: "memory", Title: "Memory files", Columns: []string{"file", "bytes", "modified"}}
	dir := filepath.Join(gw.Config.Workspace, "memory")
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Note = "no memory folder yet"
		return t
	}
	for _, e := range entries {
		if fi, err := e.Info(); err == nil && fi.Mode().IsRegular() {
			t.Rows = append(t.Rows, []any{e.Name(), fi.Size(), fi.ModTime().Format(time.DateTime)})
		}
	}
	return t
}
