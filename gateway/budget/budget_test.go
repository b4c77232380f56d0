package budget

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/nbots/nb/gateway/modelcall"
	"github.com/nbots/nb/provider"
)

func TestBudgetsCheckedBeforeTheCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ny, _ := time.LoadLocation("America/New_York")
		time.Sleep(time.Until(time.Date(2026, 11, 26, 18, 48, 0, 0, ny)))
		path := filepath.Join(t.TempDir(), "state", "usage.json") // a folder to make
		l := &Ledger{Limits: Limits{SessionTokens: 1000, DailyTokens: 1500}, Path: path, Zone: ny}
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
		l2 := &Ledger{Limits: l.Limits, Path: path, Zone: ny}
		if err := l2.Check("web:2"); err == nil {
			t.Error("the counts did not survive a restart")
		}
		time.Sleep(time.Until(time.Date(2026, 11, 27, 0, 0, 0, 0, ny)))
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
	})
}

// fiftyAtOnce runs 50 calls at once through Guard on ledgers (round
// robin), each call's request estimated at 16 tokens and costing 26 (16
// in, 10 out, the answer's cap), and returns how many were answered.
func fiftyAtOnce(t *testing.T, ledgers []*Ledger) int {
	t.Helper()
	var answered atomic.Int32
	var wg sync.WaitGroup
	for i := range 50 {
		l := ledgers[i%len(ledgers)]
		model := Guard(modelcall.Func(func(context.Context, modelcall.Request) (modelcall.Reply, error) {
			time.Sleep(20 * time.Millisecond) // calls overlap
			return modelcall.Reply{Usage: provider.Usage{InputTokens: 16, OutputTokens: 10}}, nil
		}), l)
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			_, err := model.Call(ctx, modelcall.Request{Session: fmt.Sprintf("web:%d", i), Source: "chat", User: strings.Repeat("x", 32)})
			var ex *Exceeded
			switch {
			case err == nil:
				answered.Add(1)
			case !errors.As(err, &ex):
				t.Errorf("call %d: %v", i, err)
			}
		}()
	}
	wg.Wait()
	return int(answered.Load())
}

// 50 chats at once against a daily budget of 100 tokens: the calls
// reserve before they start, so the budget is exceeded by at most one
// call's answer (it was 1,300 of 100 when each call was checked before
// and counted after).
func TestBudgetHoldsUnderConcurrency(t *testing.T) {
	l := &Ledger{Limits: Limits{DailyTokens: 100}, AnswerTokens: 10}
	if RequestTokens(modelcall.Request{User: strings.Repeat("x", 32)}) != 16 {
		t.Fatal("the estimate changed: adjust the test")
	}
	n := fiftyAtOnce(t, []*Ledger{l})
	used := l.Report("web:0").TodayTotal
	t.Logf("%d of 50 answered, %d tokens of 100", n, used)
	if n == 0 || used > 100+10 || used != 26*n {
		t.Errorf("%d answered, %d tokens used of 100 (at most 110 allowed)", n, used)
	}
	if n < 3 {
		t.Errorf("only %d answered: calls were refused while the budget had room", n)
	}
}

// A request larger than what is left is refused, with a message that
// says so, before it is sent.
func TestBudgetRefusesWhatDoesNotFit(t *testing.T) {
	l := &Ledger{Limits: Limits{SessionTokens: 100}}
	l.Record("s", Chat, Usage{60, 10})
	_, err := l.Reserve(context.Background(), "s", Chat, 50, 0)
	var ex *Exceeded
	if !errors.As(err, &ex) || ex.Needed != 50 {
		t.Fatalf("%v", err)
	}
	if want := "This session's token budget (100 tokens) is nearly spent: 30 left, and this request needs about 50. It resets when you start a new session with /new."; err.Error() != want {
		t.Errorf("%q", err)
	}
	r, err := l.Reserve(context.Background(), "s", Chat, 20, 500)
	if err != nil {
		t.Fatal(err)
	}
	// A second call waits for the first to settle, then is refused.
	done := make(chan error, 1)
	go func() { _, err := l.Reserve(context.Background(), "s", Chat, 20, 0); done <- err }()
	select {
	case err := <-done:
		t.Fatalf("did not wait for the running call: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	r.Settle(Usage{20, 20})
	if err := <-done; !errors.As(err, &ex) || ex.Used != 110 {
		t.Errorf("after the first settled: %v", err)
	}
}
