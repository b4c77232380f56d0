package pgruns_test

import (
	"context"
	"testing"
	"time"

	"github.com/nbots/nb/internal/pgtest"
	"github.com/nbots/nb/pipeline/runstore"
	"github.com/nbots/nb/pipeline/runstore/pgruns"
	"github.com/nbots/nb/pipeline/runstore/runstoretest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// testTTL is the leases' TTL in tests: renewals every 0.67 s.
const testTTL = 2 * time.Second

// TestConformance runs the run store suite on PostgreSQL, each view of
// the database with its own pool and holder, as replicas have; answers
// are never polled for (TestAnswerPoll checks the poll), so they must
// be notified.
func TestConformance(t *testing.T) {
	runstoretest.Run(t, runstoretest.Harness{
		New: func(t *testing.T) func() runstore.Store {
			url := pgtest.New(t)
			return func() runstore.Store {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				s, err := pgruns.Open(ctx, url, pgruns.Options{LeaseTTL: testTTL, AnswerPoll: time.Hour})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(s.Close)
				return s
			}
		},
		Crash: pgruns.Crash,
	})
}
