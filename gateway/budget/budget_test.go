package budget

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/nbots/nb/gateway/clock"
	"github.com/nbots/nb/gateway/modelcall"
	"github.com/nbots/nb/provider"
)

func TestBudgetsCheckedBeforeTheCall(t *testing.T) {
	ny, _ := time.LoadLocation("America/New_York")
	fake := clock.NewFake(time.Date(2026, 11, 26, 18, 48, 0, 0, ny))
	path := filepath.Join(t.TempDir(), "state", "usage.json") // a folder to make
	l := &Ledger{Limits: Limits{SessionTokens: 1000, DailyTokens: 1500}, Path: path, Zone: ny, Clock: fake}
	calls := 0
	model := Guard(modelcall.Func(func(context.Context, modelcall.Request) (modelcall.Reply, error) {
		calls++
		return modelcall.Reply{Usage: provider.Usage{InputTokens: 450, OutputTokens: 50}}, nil
	}), l)
	call := func(session, src string) error {
		_, err := model.Call(context.Background(), modelcall.Request{Session: session, Source: src})
		return err
	}
	for range 2 {
		if err := call("telegram:1", "consolidation"); err != nil {
			t.Fatal(err)
		}
	}
	err := call("telegram:1", "consolidation")
	var ex *Exceeded
	if !errors.As(err, &ex) || ex.Budget != "session" || calls != 2 {
		t.Fatalf("third call of the session: %v (calls %d)", err, calls)
	}
	if want := "This session's token budget (1,000 tokens) is spent: 1,000 used. It resets when you start a new session with /new."; err.Error() != want {
		t.Errorf("got %q", err)
	}
	l.Record("cron:ab12cd34", Cron, Usage{400, 100})
	err = call("web:2", "heartbeat")
	if err == nil || err.Error() != "The daily token budget (1,500 tokens) is spent: 1,500 used today. It resets at 00:00 EST, Fri 27 Nov (in 5 h 12 min)." || calls != 2 {
		t.Fatalf("daily: %v (calls %d)", err, calls)
	}
	if got := l.Report("telegram:1").String(); got != "Tokens today: 1,500 of 1,500 (cron 500, consolidation 1,000); this session: 1,000 of 1,000" {
		t.Errorf("report: %s", got)
	}
	if got := l.Status("telegram:1"); got != "today 1,500 of 1,500 tokens, resets 00:00 EST; this session 1,000 of 1,000 tokens, resets with /new" {
		t.Errorf("status: %s", got)
	}
	if got := (&Ledger{}).Status("x"); got != "" {
		t.Errorf("status without budgets: %q", got)
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	// A restart keeps the counts; midnight renews the daily budget, /new the session's.
	l2 := &Ledger{Limits: l.Limits, Path: path, Zone: ny, Clock: fake}
	if err := l2.Check("web:2"); err == nil {
		t.Error("the counts did not survive a restart")
	}
	fake.Set(time.Date(2026, 11, 27, 0, 0, 0, 0, ny))
	if err := l2.Check("web:2"); err != nil {
		t.Errorf("after midnight: %v", err)
	}
	if err := l2.Check("telegram:1"); err == nil {
		t.Error("the session budget reset at midnight")
	}
	l2.ResetSession("telegram:1")
	if err := l2.Check("telegram:1"); err != nil {
		t.Errorf("after /new: %v", err)
	}
}
