package jetstream_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/nbots/nb/gateway/bus/jetstream"
	"github.com/nbots/nb/gateway/replica"
	"github.com/nbots/nb/internal/natstest"
)

// Replicas adding to one key at once lose nothing, and a watcher sees
// the sum.
func TestCountersAddAtOnce(t *testing.T) {
	s := natstest.Start(t)
	ctx := context.Background()
	var cs []*jetstream.Counters
	for range 3 {
		c, err := dial(t, s.URL(), jetstream.Options{Namespace: "counters"}).Counters(ctx, "budget")
		if err != nil {
			t.Fatal(err)
		}
		cs = append(cs, c)
	}
	var mu sync.Mutex
	seen := map[string]replica.Count{}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ready := make(chan struct{})
	go cs[0].Watch(wctx, func(key string, c replica.Count) { //nolint:errcheck // ends with wctx
		mu.Lock()
		seen[key] = c
		mu.Unlock()
	}, func() { close(ready) })
	<-ready
	var wg sync.WaitGroup
	for _, c := range cs {
		for range 30 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := c.Add(ctx, "day.2026-11-26.chat", map[string]int64{"input": 2, "output": 1}); err != nil {
					t.Error(err)
				}
			}()
		}
	}
	wg.Wait()
	for deadline := time.Now().Add(3 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		mu.Lock()
		got := seen["day.2026-11-26.chat"].Values
		mu.Unlock()
		if got["input"] == 180 && got["output"] == 90 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("90 adds made %v, want input 180 and output 90", got)
		}
	}
	if err := cs[1].Delete(ctx, "day.2026-11-26.chat"); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(3 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		mu.Lock()
		d := seen["day.2026-11-26.chat"].Deleted
		mu.Unlock()
		if d {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the watcher did not see the deletion")
		}
	}
}
