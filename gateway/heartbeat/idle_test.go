package heartbeat

import (
	"context"
	"github.com/nbots/nb/gateway/replica"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/nbots/nb/gateway/cron"
)

// TestIdleDayDefaultConfiguration is the figure "model calls in 24 h idle,
// default configuration": a workspace as `nb gateway init` leaves it (the
// HEARTBEAT.md template, no cron job), the heartbeat every 1,800 s and the
// cron scheduler running for 24 hours of a synctest bubble's clock, each
// timer firing at its instant. Every way to a model is counted.
func TestIdleDayDefaultConfiguration(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ws := t.TempDir()
		os.WriteFile(filepath.Join(ws, "HEARTBEAT.md"), []byte(Template), 0o600)
		time.Sleep(time.Until(time.Date(2026, 3, 8, 0, 0, 0, 0, time.UTC)))
		var calls atomic.Int32
		hb := &Service{Workspace: ws, Interval: 1800 * time.Second, Claims: &replica.Local{}, Execute: func(context.Context, string) error {
			calls.Add(1)
			return nil
		}}
		sched := &cron.Scheduler{Store: cron.NewStore(ws), Claims: &replica.Local{}, Poll: time.Minute, RunJob: func(context.Context, cron.Job) error {
			calls.Add(1)
			return nil
		}}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{}, 2)
		go func() { hb.Run(ctx); done <- struct{}{} }()
		go func() { sched.Run(ctx); done <- struct{}{} }()
		time.Sleep(24 * time.Hour)
		synctest.Wait() // what is due now is done
		cancel()
		<-done
		<-done
		if n := calls.Load(); n != 0 {
			t.Errorf("%d model calls in 24 h idle, want 0", n)
		}
		t.Logf("model calls in 24 h idle, default configuration: %d", calls.Load())
	})
}
