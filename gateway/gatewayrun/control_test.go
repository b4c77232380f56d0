package gatewayrun

import (
	"context"
	"testing"
	"time"

	"github.com/nbots/nb/gateway/budget"
	"github.com/nbots/nb/gateway/cron"
)

// The cron panel lists the jobs due in the next 24 hours and those that
// ran, with their outcome; a job due later that never ran is left out.
func TestCronTable(t *testing.T) {
	store := cron.NewStore(t.TempDir())
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	ms := func(d time.Duration) *int64 { v := now.Add(d).UnixMilli(); return &v }
	str := func(s string) *string { return &s }
	err := store.Edit(context.Background(), func(f *cron.File) error {
		f.Jobs = []cron.Job{
			{ID: "a", Name: "later", Enabled: true, State: cron.State{NextRunAtMs: ms(48 * time.Hour)}},
			{ID: "b", Name: "soon", Enabled: true, State: cron.State{NextRunAtMs: ms(2 * time.Hour), LastRunAtMs: ms(-time.Hour), LastStatus: str("error"), LastError: str("timeout")}},
			{ID: "c", Name: "sooner", Enabled: true, State: cron.State{NextRunAtMs: ms(time.Hour)}},
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	tab := cronTable(store, now)
	if len(tab.Rows) != 2 || tab.Rows[0][0] != "sooner" || tab.Rows[1][0] != "soon" || tab.Rows[1][3] != "error: timeout" {
		t.Fatalf("%+v", tab.Rows)
	}
}

// The tokens by source come from the budgets' ledger: today's by source.
func TestLedgerDays(t *testing.T) {
	l := &budget.Ledger{}
	l.Record("s1", budget.Chat, budget.Usage{Input: 10, Output: 5})
	l.Record("s1", budget.Cron, budget.Usage{Input: 3, Output: 1})
	days := ledgerDays(l)
	got := map[string]int{}
	for _, d := range days {
		got[d.Key] += d.Input + d.Output
	}
	if got["chat"] != 15 || got["cron"] != 4 || len(days) != 2 {
		t.Fatalf("%+v", days)
	}
}
