package budget_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nbots/nb/gateway/budget"
	"github.com/nbots/nb/gateway/bus/jetstream"
	"github.com/nbots/nb/gateway/modelcall"
	"github.com/nbots/nb/internal/natstest"
	"github.com/nbots/nb/provider"
)

// replicas returns n ledgers, each on its own connection to one NATS
// server, sharing their counts, running until the test ends.
func replicas(t *testing.T, n int, limits budget.Limits) []*budget.Ledger {
	t.Helper()
	s := natstest.Start(t)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	var out []*budget.Ledger
	for range n {
		dctx, dcancel := context.WithTimeout(ctx, 10*time.Second)
		b, err := jetstream.Dial(dctx, s.URL(), "budget test", jetstream.Options{Namespace: "budgets"})
		if err != nil {
			dcancel()
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		c, err := b.Counters(dctx, "budget")
		dcancel()
		if err != nil {
			t.Fatal(err)
		}
		l := &budget.Ledger{Limits: limits, Shared: c, Path: t.TempDir() + "/usage.json", Warn: func(msg string) { t.Log(msg) }}
		wg.Add(1)
		go func() { defer wg.Done(); l.Run(ctx) }() //nolint:errcheck // ends with ctx
		out = append(out, l)
	}
	return out
}

// eventually waits up to 10 s for cond.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatal(what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A budget is the replicas' together: what one spends counts on the
// others, for the session's budget and the day's.
func TestSharedBudgets(t *testing.T) {
	ls := replicas(t, 3, budget.Limits{SessionTokens: 600, DailyTokens: 1000})
	a, b, c := ls[0], ls[1], ls[2]
	a.Record("telegram:1", budget.Chat, budget.Usage{Input: 300, Output: 100})
	b.Record("telegram:1", budget.Chat, budget.Usage{Input: 200, Output: 100})
	var ex *budget.Exceeded
	eventually(t, "replica c never saw the session's 700 tokens spent on a and b", func() bool {
		return errors.As(c.Check("telegram:1"), &ex) && ex.Budget == "session" && ex.Used == 700
	})
	if err := c.Check("telegram:2"); err != nil {
		t.Fatalf("another session: %v", err)
	}
	c.Record("telegram:2", budget.Cron, budget.Usage{Input: 250, Output: 50})
	eventually(t, "replica a never saw the day's 1,000 tokens spent", func() bool {
		return errors.As(a.Check("telegram:3"), &ex) && ex.Budget == "daily" && ex.Used == 1000
	})
	r := b.Report("telegram:1")
	if r.TodayTotal != 1000 || r.Today[budget.Chat].Total() != 700 || r.Today[budget.Cron].Total() != 300 || r.Session.Total() != 700 {
		t.Errorf("b's report %+v", r)
	}
	// /new on one replica starts the session's count again on all.
	a.ResetSession("telegram:1")
	eventually(t, "replica b still counts the session that was started anew", func() bool {
		return b.Report("telegram:1").Session.Total() == 0
	})
}

// Replicas adding at once lose nothing.
func TestSharedCountsLoseNothing(t *testing.T) {
	ls := replicas(t, 3, budget.Limits{})
	var wg sync.WaitGroup
	for _, l := range ls {
		for range 40 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				l.Record("s", budget.Chat, budget.Usage{Input: 1, Output: 1})
				time.Sleep(time.Millisecond)
			}()
		}
	}
	wg.Wait()
	for i, l := range ls {
		eventually(t, "the counts of 120 calls did not add up", func() bool {
			return l.Report("s").Session.Total() == 240 && l.Report("s").TodayTotal == 240
		})
		if err := l.Flush(); err != nil {
			t.Errorf("replica %d: %v", i, err)
		}
	}
}

// 50 chats at once on three replicas against one daily budget of 100
// tokens: the replicas' reservations meet in the shared counters, so the
// budget is exceeded by at most one call's answer across them.
func TestSharedBudgetHoldsUnderConcurrency(t *testing.T) {
	ls := replicas(t, 3, budget.Limits{DailyTokens: 100})
	for _, l := range ls {
		l.AnswerTokens = 10
	}
	var answered atomic.Int32
	var wg sync.WaitGroup
	for i := range 50 {
		l := ls[i%len(ls)]
		model := budget.Guard(modelcall.Func(func(context.Context, modelcall.Request) (modelcall.Reply, error) {
			time.Sleep(20 * time.Millisecond)
			return modelcall.Reply{Usage: provider.Usage{InputTokens: 16, OutputTokens: 10}}, nil
		}), l)
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_, err := model.Call(ctx, modelcall.Request{Session: fmt.Sprintf("web:%d", i), Source: "chat", User: strings.Repeat("x", 32)})
			var ex *budget.Exceeded
			switch {
			case err == nil:
				answered.Add(1)
			case !errors.As(err, &ex):
				t.Errorf("call %d: %v", i, err)
			}
		}()
	}
	wg.Wait()
	n := int(answered.Load())
	eventually(t, "the replicas' counts never met", func() bool { return ls[0].Report("x").TodayTotal == 26*n })
	t.Logf("%d of 50 answered on 3 replicas: %d tokens of 100", n, 26*n)
	if n == 0 || 26*n > 100+10 {
		t.Errorf("%d answered: %d tokens of 100 (at most 110 allowed)", n, 26*n)
	}
}

// The two ways of counting: a ledger alone counts from its file (the
// counts of before a restart are loaded, a session reset forgets one,
// Run has nothing to do), and a shared one from the replicas' sums, which
// its file shows; ResetSession starts the session's count again in both.
func TestCountsAloneAndShared(t *testing.T) {
	day := time.Now().UTC().Format("2006-01-02")
	path := t.TempDir() + "/usage.json"
	file := fmt.Sprintf(`{"day":%q,"today":{"chat":{"input":60,"output":40}},"sessions":{"s1":{"input":30,"output":20}}}`, day)
	if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	alone := &budget.Ledger{Limits: budget.Limits{DailyTokens: 1000}, Path: path}
	if r := alone.Report("s1"); r.TodayTotal != 100 || r.Session.Total() != 50 {
		t.Fatalf("alone, loaded: %+v", r)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := alone.Run(ctx); err != nil || ctx.Err() != nil {
		t.Fatalf("alone: Run = %v (it has nothing to keep current: it returns at once)", err)
	}
	alone.Record("s1", budget.Chat, budget.Usage{Input: 5, Output: 5})
	alone.ResetSession("s1")
	if r := alone.Report("s1"); r.TodayTotal != 110 || r.Session.Total() != 0 {
		t.Fatalf("alone, after a call and a reset: %+v", r)
	}

	ls := replicas(t, 2, budget.Limits{DailyTokens: 1000})
	ls[0].Record("s1", budget.Chat, budget.Usage{Input: 7, Output: 3})
	// The day's sum and the session's are kept under their own keys: each
	// arrives on its own.
	eventually(t, "the other replica sees the sums", func() bool {
		r := ls[1].Report("s1")
		return r.TodayTotal == 10 && r.Session.Total() == 10
	})
	ls[1].ResetSession("s1")
	eventually(t, "the reset reaches the first replica", func() bool { return ls[0].Report("s1").Session.Total() == 0 })
	if err := ls[1].Flush(); err != nil {
		t.Fatal(err)
	}
}
