package jetstream_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nbots/nb/gateway/bus/jetstream"
	"github.com/nbots/nb/internal/natstest"
)

// Three replicas elect one leader for a key; when the leader's
// connection dies (no release, as with kill -9), another leads within
// the TTL and a quarter, and two never lead at once.
func TestElectionFailover(t *testing.T) {
	s := natstest.Start(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const ttl = time.Second
	var leading atomic.Int32
	var overlap atomic.Bool
	type event struct {
		replica int
		at      time.Time
	}
	started := make(chan event, 16)
	buses := make([]*jetstream.Bus, 3)
	var wg sync.WaitGroup
	for i := range buses {
		buses[i] = dial(t, s.URL(), jetstream.Options{Namespace: "elect"})
		e, err := buses[i].Elector(ctx, fmt.Sprint("replica-", i), ttl)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			e.Lead(ctx, "telegram:hashed-account", func(ctx context.Context) error { //nolint:errcheck // ends with ctx
				if leading.Add(1) > 1 {
					overlap.Store(true)
				}
				started <- event{i, time.Now()}
				<-ctx.Done()
				leading.Add(-1)
				return nil
			}, nil)
		}()
	}
	var first event
	select {
	case first = <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("nobody leads")
	}
	time.Sleep(2 * ttl) // renewals keep the lead
	select {
	case ev := <-started:
		t.Fatalf("replica %d led while %d renewed", ev.replica, first.replica)
	default:
	}
	killed := time.Now()
	buses[first.replica].Conn().Close()
	select {
	case ev := <-started:
		if ev.replica == first.replica {
			t.Fatal("the dead replica leads again")
		}
		took := ev.at.Sub(killed)
		t.Logf("failover in %v", took)
		if took > ttl+ttl/4+500*time.Millisecond {
			t.Fatalf("failover took %v (TTL %v)", took, ttl)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("nobody took over")
	}
	if overlap.Load() {
		t.Fatal("two replicas led at once")
	}
	cancel()
	wg.Wait()
}

// A leader that stops releases the key: another leads at once.
func TestElectionRelease(t *testing.T) {
	s := natstest.Start(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b := dial(t, s.URL(), jetstream.Options{Namespace: "release"})
	e1, _ := b.Elector(ctx, "one", time.Minute)
	e2, _ := b.Elector(ctx, "two", time.Minute)
	c1, stop1 := context.WithCancel(ctx)
	led := make(chan string, 2)
	go e1.Lead(c1, "k", func(ctx context.Context) error { led <- "one"; <-ctx.Done(); return nil }, nil) //nolint:errcheck // ends with c1
	if w := <-led; w != "one" {
		t.Fatal(w)
	}
	standby := make(chan bool, 1)
	go e2.Lead(ctx, "k", func(ctx context.Context) error { led <- "two"; <-ctx.Done(); return nil }, func() { standby <- true }) //nolint:errcheck // ends with ctx
	<-standby
	stop1()
	select {
	case w := <-led:
		if w != "two" {
			t.Fatal(w)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the key was not released (TTL is a minute)")
	}
}

func TestClaimsOnce(t *testing.T) {
	s := natstest.Start(t)
	ctx := context.Background()
	var won atomic.Int32
	var wg sync.WaitGroup
	for i := range 3 {
		c, err := dial(t, s.URL(), jetstream.Options{Namespace: "claims"}).Claims(ctx, fmt.Sprint(i))
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for slot := range 20 {
				ok, err := c.Claim(ctx, fmt.Sprintf("cron.job-1.%d", slot))
				if err != nil {
					t.Error(err)
				}
				if ok {
					won.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if won.Load() != 20 {
		t.Fatalf("%d claims won for 20 slots", won.Load())
	}
	d, err := dial(t, s.URL(), jetstream.Options{Namespace: "claims"}).Delivered(ctx)
	if err != nil {
		t.Fatal(err)
	}
	key := "turn\x00telegram\x0042"
	if seen, err := d.Seen(ctx, key); seen || err != nil {
		t.Fatal(seen, err)
	}
	if err := d.Record(ctx, key); err != nil {
		t.Fatal(err)
	}
	if seen, err := d.Seen(ctx, key); !seen || err != nil {
		t.Fatal(seen, err)
	}
}

// /stop reaches the turns the other replicas run, not the asker's own.
func TestStopperReachesOthers(t *testing.T) {
	s := natstest.Start(t)
	ctx := context.Background()
	var asked atomic.Int32
	stoppers := make([]*jetstream.Stopper, 3)
	for i := range stoppers {
		st, err := dial(t, s.URL(), jetstream.Options{Namespace: "stop"}).Stopper(fmt.Sprint("replica-", i), func(key string) int {
			asked.Add(1)
			if key == "telegram:1" {
				return i // replica i runs i turns of it
			}
			return 0
		})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		stoppers[i] = st
	}
	n, err := stoppers[0].Stop(ctx, "telegram:1")
	if err != nil || n != 1+2 {
		t.Fatal(n, err)
	}
	if asked.Load() != 2 {
		t.Fatalf("%d replicas asked, want the 2 others", asked.Load())
	}
}
