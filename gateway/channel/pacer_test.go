package channel

import (
	"context"
	"sync"
	"testing"
	"time"
)

func TestPacerPerDestination(t *testing.T) {
	p := &Pacer{Interval: func(key string) time.Duration {
		if key == "slow" {
			return 200 * time.Millisecond
		}
		return 0
	}}
	ctx := context.Background()
	p.Defer("limited", 300*time.Millisecond)
	t0 := time.Now()
	var wg sync.WaitGroup
	var fast time.Duration
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range 50 {
			p.Wait(ctx, "fast") //nolint:errcheck // background ctx
		}
		fast = time.Since(t0)
	}()
	p.Wait(ctx, "slow") //nolint:errcheck
	p.Wait(ctx, "slow") //nolint:errcheck
	slow := time.Since(t0)
	p.Wait(ctx, "limited") //nolint:errcheck
	limited := time.Since(t0)
	wg.Wait()
	if fast > 100*time.Millisecond {
		t.Errorf("an unpaced destination waited %s behind the others", fast)
	}
	if slow < 190*time.Millisecond {
		t.Errorf("two sends to a paced destination %s apart", slow)
	}
	if limited < 290*time.Millisecond {
		t.Errorf("a deferred destination was free after %s", limited)
	}
	cctx, cancel := context.WithCancel(ctx)
	p.Defer("x", time.Hour)
	cancel()
	if err := p.Wait(cctx, "x"); err == nil {
		t.Error("Wait ignored its context")
	}
}
