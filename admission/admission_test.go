package admission

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestRate(t *testing.T) {
	var tenant Tenant
	rate := Rate{N: 2, Per: time.Minute}
	now := time.Now()
	for i := range 2 {
		if ok, _ := tenant.take(rate, now); !ok {
			t.Fatalf("run %d refused", i+1)
		}
	}
	ok, wait := tenant.take(rate, now)
	if ok || wait < 29*time.Second || wait > 31*time.Second {
		t.Fatalf("third run: %v %v", ok, wait)
	}
	if ok, _ := tenant.take(rate, now.Add(31*time.Second)); !ok {
		t.Fatal("not refilled")
	}
}

func reason(err error) Reason {
	var ae *Error
	if errors.As(err, &ae) {
		return ae.Reason
	}
	return 0
}

func TestLimits(t *testing.T) {
	c := New(Limits{MaxRuns: 2})
	var a, b Tenant
	ra, err := c.Admit(&a, Policy{MaxRuns: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Admit(&a, Policy{MaxRuns: 1}); reason(err) != TenantBusy {
		t.Fatalf("a second run of a one-run tenant: %v", err)
	}
	rb, err := c.Admit(&b, Policy{Rate: Rate{N: 1, Per: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Admit(&b, Policy{}); reason(err) != Busy {
		t.Fatalf("a third run on a two-run controller: %v", err)
	}
	rb.Done()
	rb.Done() // twice is harmless
	var ae *Error
	if _, err := c.Admit(&b, Policy{Rate: Rate{N: 1, Per: time.Hour}}); !errors.As(err, &ae) || ae.Reason != RateLimited || ae.RetryAfter < 59*time.Minute {
		t.Fatalf("a second run of a 1/hour tenant: %v", err)
	}
	if n := c.Drain(); n != 1 {
		t.Fatalf("Drain: %d runs, want 1", n)
	}
	if _, err := c.Admit(&b, Policy{}); reason(err) != Stopping {
		t.Fatalf("a run while draining: %v", err)
	}
	ra.Done()
	c.Wait()
	if c.Active() != 0 || a.Runs() != 0 || b.Runs() != 0 {
		t.Fatalf("left: %d, %d, %d", c.Active(), a.Runs(), b.Runs())
	}
}

// Runs waiting on their client leave the runs in progress: a tenant that
// keeps MaxRuns runs waiting does not starve the others, it only reaches
// its own limit; the waiting ones have a ceiling of their own, and a run
// that goes on again takes a slot back, waiting for one when the server
// is full.
func TestWaitingRunsDoNotStarveOthers(t *testing.T) {
	const max = 4
	c := New(Limits{MaxRuns: max, MaxWaiting: max + 1})
	var greedy, other Tenant
	ctx := context.Background()
	var resumes []func()
	for i := range max {
		r, err := c.Admit(&greedy, Policy{})
		if err != nil {
			t.Fatalf("run %d: %v", i, err)
		}
		resumes = append(resumes, r.Wait(ctx))
		defer r.Done()
	}
	if _, err := c.Admit(&greedy, Policy{}); reason(err) != TenantBusy {
		t.Fatalf("the waiting tenant's own limit: %v", err)
	}
	if c.Waiting() != max || c.Active() != max {
		t.Fatalf("waiting %d, active %d", c.Waiting(), c.Active())
	}
	var others []*Run
	for i := range max {
		r, err := c.Admit(&other, Policy{})
		if err != nil {
			t.Fatalf("another tenant's run %d, with %d runs waiting: %v", i, max, err)
		}
		others = append(others, r)
	}
	if _, err := c.Admit(&other, Policy{}); reason(err) != Busy {
		t.Fatalf("beyond MaxRuns: %v", err)
	}
	// The waiting ceiling: one more waits, the next stays in progress.
	others[0].Wait(ctx)
	resumeLast := others[1].Wait(ctx)
	if c.Waiting() != max+1 {
		t.Fatalf("waiting %d, want the ceiling %d", c.Waiting(), max+1)
	}
	resumeLast() // it never waited: nothing to take back

	// A waiting run goes on while the server is full: it waits for a
	// slot, and no new run takes the slot first.
	var third Tenant
	extra, err := c.Admit(&third, Policy{})
	if err != nil {
		t.Fatal(err)
	}
	resumed := make(chan struct{})
	go func() { resumes[0](); close(resumed) }()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		c.mu.Lock()
		inLine := c.resuming
		c.mu.Unlock()
		if inLine == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the resumed run is not waiting for a slot")
		}
	}
	others[2].Done()
	if _, err := c.Admit(&third, Policy{}); reason(err) != Busy {
		t.Fatalf("a new run took the slot of a resumed one: %v", err)
	}
	select {
	case <-resumed:
	case <-time.After(5 * time.Second):
		t.Fatal("a resumed run did not get the free slot")
	}
	if c.Waiting() != max || c.Active() != max+max {
		t.Fatalf("after resuming: waiting %d, all %d", c.Waiting(), c.Active())
	}
	// A run cancelled while in line stops waiting for a slot.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	others[0].resume(cctx)
	for _, r := range []*Run{others[0], others[1], others[3], extra} {
		r.Done()
	}
	if c.Waiting() != max-1 {
		t.Fatalf("waiting %d after the others ended", c.Waiting())
	}
}
