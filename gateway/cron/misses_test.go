package cron

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/nbots/nb/gateway/replica"
	"github.com/nbots/nb/internal/metric/metrictest"
)

// failingClaims cannot claim any slot.
type failingClaims struct{}

func (failingClaims) Claim(context.Context, string) (bool, error) {
	return false, errors.New("the bus is down")
}

// nb_gateway_cron_misses_total counts each slot that did not run at its
// time, by reason: skipped at the start (nanobot's rule), a one-time job
// disabled unrun, slots folded into one run, a slot that could not be
// claimed.
func TestCronMissesCounted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		before := metrictest.Read(t)
		start := time.Date(2026, 6, 1, 8, 0, 0, 0, time.UTC)
		sleepUntil(start)
		st := NewStore(t.TempDir())
		r := &runs{}
		addJob(t, st, Spec{Name: "hourly", Message: "m", Cron: "0 * * * *"}, start)
		addJob(t, st, Spec{Name: "once", Message: "m", At: start.Add(90 * time.Minute)}, start)
		addJob(t, st, Spec{Name: "later", Message: "m", At: start.Add(10 * time.Hour)}, start)
		catchUp := addJob(t, st, Spec{Name: "catch up", Message: "m", Cron: "30 * * * *", CatchUp: true}, start)
		// stopped from 08:00 to 12:45: hourly misses 09:00 to 12:00 (4
		// slots), once is disabled, catch up runs once for 08:30 to 12:30
		// (4 slots missed besides the one it runs)
		sleepUntil(time.Date(2026, 6, 1, 12, 45, 0, 0, time.UTC))
		s := &Scheduler{Store: st, Claims: &replica.Local{}, RunJob: r.run}
		if err := s.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Tick(context.Background()); err != nil {
			t.Fatal(err)
		}
		if got := r.get(catchUp.ID); len(got) != 1 {
			t.Fatalf("catch up ran %d times, want once", len(got))
		}
		// 13:00: hourly is due, and its slot cannot be claimed.
		sleepUntil(time.Date(2026, 6, 1, 13, 0, 0, 0, time.UTC))
		s.Claims = failingClaims{}
		if _, err := s.Tick(context.Background()); err != nil {
			t.Fatal(err)
		}
		after := metrictest.Read(t)
		for reason, want := range map[string]float64{"skipped": 4, "expired": 1, "coalesced": 4, "claim_error": 1} {
			series := `nb_gateway_cron_misses_total{reason="` + reason + `"}`
			if got := metrictest.Delta(before, after, series); got != want {
				t.Errorf("%s: %v, want %v", series, got, want)
			}
		}
	})
}
