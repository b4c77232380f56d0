package pgstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/nbots/nb/internal/pgtest"
	"github.com/nbots/nb/state"
	"github.com/nbots/nb/state/pgstore"
	"github.com/nbots/nb/state/storetest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// testTTL is the leases' TTL in tests: short, so that a crashed holder's
// conversation is taken over quickly, long enough for renewals under a
// loaded machine.
const testTTL = 2 * time.Second

// opener opens views of a new database, each with its own pool (as
// replicas have), closed when the test ends.
func opener(t *testing.T, ttl time.Duration) (url string, open func(password string) *pgstore.Store) {
	url = pgtest.New(t)
	return url, func(password string) *pgstore.Store {
		o := pgstore.Options{LeaseTTL: ttl}
		if password != "" {
			o.Cipher = state.NewCipher(password)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		s, err := pgstore.Open(ctx, url, o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
		return s
	}
}

// TestConformance runs the store conformance suite on PostgreSQL.
func TestConformance(t *testing.T) {
	storetest.Run(t, storetest.Harness{
		New: func(t *testing.T) func(string) state.Store {
			_, open := opener(t, testTTL)
			return func(password string) state.Store { return open(password) }
		},
		Crash:  pgstore.Crash,
		Expire: pgstore.Expire,
	})
}
