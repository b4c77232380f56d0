// Package replicatest is the conformance suite of the replica seams
// (replica.Elector, replica.Claims, replica.Counters): the behaviour every
// implementation shows, whether it lives in one process (replica.Local)
// or is shared by replicas (NATS JetStream). Each implementation's tests
// call Run with a function that makes the replicas of a fresh group.
package replicatest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nbots/nb/gateway/replica"
)

// Replica is what one replica of a gateway uses to agree with the others.
// Counters may be nil where the implementation has none; the suite skips
// its tests.
type Replica struct {
	Elector  replica.Elector
	Claims   replica.Claims
	Counters replica.Counters
}

// Open returns n replicas of a fresh, empty group, or fewer when the
// implementation lives in one process (replica.Local: one); the suite
// skips what needs more replicas than it got. A replica's standbys must
// look for a lost leader within a second or two.
type Open func(t *testing.T, n int) []Replica

// Run runs the suite.
func Run(t *testing.T, open Open) {
	t.Run("LeadRunsUntilCancelled", func(t *testing.T) { leadRuns(t, open) })
	t.Run("LeadReturnsWhenFnReturns", func(t *testing.T) { leadReturns(t, open) })
	t.Run("LeadKeysIndependent", func(t *testing.T) { leadKeys(t, open) })
	t.Run("OneLeaderAtATime", func(t *testing.T) { oneLeader(t, open) })
	t.Run("ClaimOnce", func(t *testing.T) { claimOnce(t, open) })
	t.Run("ClaimAnyKey", func(t *testing.T) { claimAnyKey(t, open) })
	t.Run("CountersAddAtOnce", func(t *testing.T) { countersAdd(t, open) })
	t.Run("CountersWatch", func(t *testing.T) { countersWatch(t, open) })
}

const wait = 10 * time.Second

func one(t *testing.T, open Open) Replica {
	t.Helper()
	rs := open(t, 1)
	if len(rs) == 0 {
		t.Fatal("Open made no replica")
	}
	return rs[0]
}

// Lead runs fn at once when nobody else leads; fn's context ends with
// Lead's, and Lead then returns nil.
func leadRuns(t *testing.T, open Open) {
	r := one(t, open)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	started, ended := make(chan struct{}), make(chan struct{})
	errc := make(chan error, 1)
	go func() {
		errc <- r.Elector.Lead(ctx, "telegram.account", func(fctx context.Context) error {
			close(started)
			<-fctx.Done()
			close(ended)
			return nil
		}, nil)
	}()
	select {
	case <-started:
	case <-time.After(wait):
		t.Fatal("the only replica does not lead")
	}
	cancel()
	select {
	case <-ended:
	case <-time.After(wait):
		t.Fatal("fn's context did not end with Lead's")
	}
	select {
	case err := <-errc:
		if err != nil {
			t.Errorf("Lead returned %v after its context ended, want nil", err)
		}
	case <-time.After(wait):
		t.Fatal("Lead did not return after its context ended")
	}
}

// fn returning by itself (a channel's final error) ends Lead with its
// error: the work is not run again.
func leadReturns(t *testing.T, open Open) {
	r := one(t, open)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	final := errors.New("the token was revoked")
	var runs atomic.Int32
	errc := make(chan error, 1)
	go func() {
		errc <- r.Elector.Lead(ctx, "k", func(context.Context) error { runs.Add(1); return final }, nil)
	}()
	select {
	case err := <-errc:
		if !errors.Is(err, final) {
			t.Errorf("Lead returned %v, want fn's error", err)
		}
	case <-time.After(wait):
		t.Fatal("Lead did not return when fn did")
	}
	if n := runs.Load(); n != 1 {
		t.Errorf("fn ran %d times, want 1", n)
	}
}

// One replica leads two keys at once: each key is its own election.
func leadKeys(t *testing.T, open Open) {
	r := one(t, open)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	started := make(chan string, 2)
	for _, k := range []string{"telegram.a", "discord.b"} {
		wg.Go(func() {
			r.Elector.Lead(ctx, k, func(ctx context.Context) error { //nolint:errcheck // ends with ctx
				started <- k
				<-ctx.Done()
				return nil
			}, nil)
		})
	}
	for range 2 {
		select {
		case <-started:
		case <-time.After(wait):
			t.Fatal("a replica leading one key cannot lead another")
		}
	}
	cancel()
	wg.Wait()
}

// Among three replicas one leads, the others are told they stand by;
// when the leader stops another takes over; two never lead at once.
func oneLeader(t *testing.T, open Open) {
	rs := open(t, 3)
	if len(rs) < 2 {
		t.Skip("one replica only")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var leading, standbys atomic.Int32
	var overlap atomic.Bool
	started := make(chan int, len(rs)*2)
	stops := make([]context.CancelFunc, len(rs))
	var wg sync.WaitGroup
	for i, r := range rs {
		rctx, stop := context.WithCancel(ctx)
		stops[i] = stop
		wg.Go(func() {
			r.Elector.Lead(rctx, "account", func(ctx context.Context) error { //nolint:errcheck // ends with rctx
				if leading.Add(1) > 1 {
					overlap.Store(true)
				}
				started <- i
				<-ctx.Done()
				leading.Add(-1)
				return nil
			}, func() { standbys.Add(1) })
		})
	}
	var first int
	select {
	case first = <-started:
	case <-time.After(wait):
		t.Fatal("nobody leads")
	}
	deadline := time.Now().Add(wait)
	for standbys.Load() < int32(len(rs)-1) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := standbys.Load(); n < int32(len(rs)-1) {
		t.Errorf("%d replicas were told they stand by, want %d", n, len(rs)-1)
	}
	stops[first]()
	select {
	case next := <-started:
		if next == first {
			t.Error("the stopped replica leads again")
		}
	case <-time.After(wait):
		t.Fatal("nobody took over from a replica that stopped")
	}
	if overlap.Load() {
		t.Error("two replicas led at once")
	}
	cancel()
	wg.Wait()
}

// Replicas claiming the same slots at once win each exactly once, and a
// claimed slot stays claimed.
func claimOnce(t *testing.T, open Open) {
	rs := open(t, 3)
	ctx := context.Background()
	const slots = 20
	var won atomic.Int32
	var wg sync.WaitGroup
	// Where there is one replica, its goroutines race as replicas would.
	for i := range max(len(rs), 3) {
		r := rs[i%len(rs)]
		wg.Go(func() {
			for slot := range slots {
				ok, err := r.Claims.Claim(ctx, fmt.Sprintf("cron.job-1.%d", slot))
				if err != nil {
					t.Error(err)
				}
				if ok {
					won.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if won.Load() != slots {
		t.Fatalf("%d claims won for %d slots", won.Load(), slots)
	}
	if ok, err := rs[0].Claims.Claim(ctx, "cron.job-1.0"); ok || err != nil {
		t.Errorf("a claimed slot claimed again: %v, %v", ok, err)
	}
}

// Keys need not be a storage's valid keys: session keys and account
// hashes hold ':', '/', spaces and NUL.
func claimAnyKey(t *testing.T, open Open) {
	r := one(t, open)
	ctx := context.Background()
	for _, k := range []string{"telegram:42", "a b/c", "turn\x00web\x001", ".leading.dot", "ünïcode", replica.Slot("heartbeat", time.Unix(0, 0), time.Hour)} {
		if ok, err := r.Claims.Claim(ctx, k); !ok || err != nil {
			t.Errorf("first claim of %q: %v, %v", k, ok, err)
		}
		if ok, err := r.Claims.Claim(ctx, k); ok || err != nil {
			t.Errorf("second claim of %q: %v, %v", k, ok, err)
		}
	}
}

func counters(t *testing.T, open Open, n int) []replica.Counters {
	t.Helper()
	var out []replica.Counters
	for _, r := range open(t, n) {
		if r.Counters == nil {
			t.Skip("no counters")
		}
		out = append(out, r.Counters)
	}
	return out
}

// Replicas adding to one key at once lose nothing; each Add returns the
// counts it made, at a higher revision than the last.
func countersAdd(t *testing.T, open Open) {
	cs := counters(t, open, 3)
	ctx := context.Background()
	const each = 15
	var wg sync.WaitGroup
	for i := range max(len(cs), 3) {
		c := cs[i%len(cs)]
		wg.Go(func() {
			var last uint64
			for range each {
				got, err := c.Add(ctx, "budget.day", map[string]int64{"input": 2, "output": 1})
				if err != nil {
					t.Error(err)
					return
				}
				if got.Revision <= last {
					t.Errorf("revision %d after %d", got.Revision, last)
				}
				last = got.Revision
			}
		})
	}
	wg.Wait()
	got, err := cs[0].Add(ctx, "budget.day", map[string]int64{"input": 0})
	if err != nil {
		t.Fatal(err)
	}
	adds := int64(max(len(cs), 3) * each)
	if got.Values["input"] != 2*adds || got.Values["output"] != adds {
		t.Errorf("counts %v after %d adds of input 2, output 1", got.Values, adds)
	}
	if err := cs[0].Delete(ctx, "budget.day"); err != nil {
		t.Fatal(err)
	}
	if err := cs[0].Delete(ctx, "budget.never"); err != nil {
		t.Errorf("deleting a key never added: %v", err)
	}
	got, err = cs[len(cs)-1].Add(ctx, "budget.day", map[string]int64{"input": 5})
	if err != nil || got.Values["input"] != 5 || got.Values["output"] != 0 {
		t.Errorf("after Delete, Add made %v, %v; want input 5 from zero", got.Values, err)
	}
}

// Watch reports the counts as they are, calls ready, then reports every
// change another replica makes, deletions included.
func countersWatch(t *testing.T, open Open) {
	cs := counters(t, open, 2)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := cs[0].Add(ctx, "before", map[string]int64{"n": 1}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	seen := map[string]replica.Count{}
	changed := make(chan struct{}, 64)
	ready := make(chan struct{})
	errc := make(chan error, 1)
	go func() {
		errc <- cs[len(cs)-1].Watch(ctx, func(key string, c replica.Count) {
			mu.Lock()
			if c.Revision >= seen[key].Revision {
				seen[key] = c
			}
			mu.Unlock()
			changed <- struct{}{}
		}, func() { close(ready) })
	}()
	select {
	case <-ready:
	case <-time.After(wait):
		t.Fatal("Watch did not report the counts as they were")
	}
	mu.Lock()
	if seen["before"].Values["n"] != 1 {
		t.Errorf("the counts as they were: %v", seen)
	}
	mu.Unlock()
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		deadline := time.After(wait)
		for {
			mu.Lock()
			done := ok()
			mu.Unlock()
			if done {
				return
			}
			select {
			case <-changed:
			case <-deadline:
				t.Fatalf("Watch did not report %s: %v", what, seen)
			}
		}
	}
	if _, err := cs[0].Add(ctx, "after", map[string]int64{"n": 7}); err != nil {
		t.Fatal(err)
	}
	waitFor("an Add", func() bool { return seen["after"].Values["n"] == 7 })
	if err := cs[0].Delete(ctx, "after"); err != nil {
		t.Fatal(err)
	}
	waitFor("a Delete", func() bool { return seen["after"].Deleted })
	cancel()
	select {
	case err := <-errc:
		if err != nil {
			t.Errorf("Watch returned %v after its context ended, want nil", err)
		}
	case <-time.After(wait):
		t.Fatal("Watch did not return after its context ended")
	}
}
