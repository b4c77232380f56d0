package heartbeat

import (
	"context"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/nbots/nb/gateway/replica"
	"github.com/nbots/nb/internal/metric/metrictest"
)

// nb_gateway_heartbeat_beats_total counts every beat the service takes,
// by outcome: skipped when there is nothing to do, called when the tasks
// ran, failed when HEARTBEAT.md could not be read.
func TestBeatsCounted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		before := metrictest.Read(t)
		dir := t.TempDir()
		path := filepath.Join(dir, "HEARTBEAT.md")
		time.Sleep(time.Until(time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC)))
		var calls atomic.Int32
		s := &Service{Workspace: dir, Interval: time.Hour, Claims: &replica.Local{}, Execute: func(context.Context, string) error {
			calls.Add(1)
			return nil
		}}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- s.Run(ctx) }()
		step := func(beats int) {
			time.Sleep(time.Duration(beats) * time.Hour)
			synctest.Wait()
		}
		time.Sleep(time.Minute) // between beats from here on
		step(3)                 // no file: 3 skipped
		os.WriteFile(path, []byte("- [ ] water the plants\n"), 0o600)
		step(2) // 2 called
		os.Remove(path)
		os.Mkdir(path, 0o700) // a folder cannot be read as the file
		step(1)               // 1 failed
		cancel()
		<-done
		if n := calls.Load(); n != 2 {
			t.Fatalf("the tasks ran %d times, want 2", n)
		}
		after := metrictest.Read(t)
		for outcome, want := range map[string]float64{"skipped": 3, "called": 2, "failed": 1} {
			series := `nb_gateway_heartbeat_beats_total{outcome="` + outcome + `"}`
			if got := metrictest.Delta(before, after, series); got != want {
				t.Errorf("%s: %v, want %v", series, got, want)
			}
		}
	})
}
