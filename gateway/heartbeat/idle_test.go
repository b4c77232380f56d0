package heartbeat

import (
	"context"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nbots/nb/gateway/clock"
	"github.com/nbots/nb/gateway/cron"
)

// TestIdleDayDefaultConfiguration is the figure "model calls in 24 h idle,
// default configuration": a workspace as `nb gateway init` leaves it (the
// HEARTBEAT.md template, no cron job), the heartbeat every 1,800 s and the
// cron scheduler running for 24 hours of a fake clock, stepped 5 minutes
// at a time. Every way to a model is counted.
func TestIdleDayDefaultConfiguration(t *testing.T) {
	ws := t.TempDir()
	os.WriteFile(filepath.Join(ws, "HEARTBEAT.md"), []byte(Template), 0o600)
	start := time.Date(2026, 3, 8, 0, 0, 0, 0, time.UTC)
	fake := clock.NewFake(start)
	var calls atomic.Int32
	hb := &Service{Workspace: ws, Interval: 1800 * time.Second, Clock: fake, Execute: func(context.Context, string) error {
		calls.Add(1)
		return nil
	}}
	sched := &cron.Scheduler{Store: cron.NewStore(ws), Clock: fake, Poll: time.Minute, RunJob: func(context.Context, cron.Job) error {
		calls.Add(1)
		return nil
	}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{}, 2)
	go func() { hb.Run(ctx); done <- struct{}{} }()
	go func() { sched.Run(ctx); done <- struct{}{} }()
	for fake.Now().Before(start.Add(24 * time.Hour)) {
		deadline := time.Now().Add(10 * time.Second)
		for fake.Waiters() < 2 {
			if time.Now().After(deadline) {
				t.Fatal("heartbeat and cron do not both wait")
			}
			time.Sleep(100 * time.Microsecond)
		}
		fake.Advance(5 * time.Minute)
	}
	cancel()
	fake.Advance(time.Hour) // wake both so they see ctx
	<-done
	<-done
	if n := calls.Load(); n != 0 {
		t.Errorf("%d model calls in 24 h idle, want 0", n)
	}
	t.Logf("model calls in 24 h idle, default configuration: %d", calls.Load())
}
