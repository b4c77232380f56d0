package session_test

import (
	"context"
	"testing"
	"time"

	"github.com/nbots/nb/gateway/session"
	"github.com/nbots/nb/gateway/session/sessiontest"
	"github.com/nbots/nb/internal/pgtest"
	"github.com/nbots/nb/state"
	"github.com/nbots/nb/state/pgstore"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// TestConformanceFiles runs the session suite on nanobot's files: two
// managers of one folder are a gateway and nb gateway chat.
func TestConformanceFiles(t *testing.T) {
	sessiontest.Run(t, sessiontest.Harness{New: func(t *testing.T) sessiontest.Replicas {
		dir := t.TempDir()
		var r sessiontest.Replicas
		for _, m := range []**session.Manager{&r.A, &r.B} {
			var err error
			if *m, err = session.NewManager(dir); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { (*m).Close() })
		}
		return r
	}})
}

// testTTL is the leases' TTL here: a dead replica's sessions are taken
// over quickly, renewals still pass on a loaded machine.
const testTTL = 2 * time.Second

// openPG opens a view of the database at url, as a replica does.
func openPG(t testing.TB, url string, cipher *state.Cipher) *pgstore.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := pgstore.Open(ctx, url, pgstore.Options{LeaseTTL: testTTL, Cipher: cipher})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// TestConformancePostgreSQL runs the session suite on PostgreSQL: two
// replicas, each with its own connections; killing A closes them, so
// that its leases are no longer renewed and expire.
func TestConformancePostgreSQL(t *testing.T) {
	sessiontest.Run(t, sessiontest.Harness{New: func(t *testing.T) sessiontest.Replicas {
		url := pgtest.New(t)
		a, b := openPG(t, url, state.NewCipher("a password")), openPG(t, url, state.NewCipher("a password"))
		t.Cleanup(b.Close)
		closeA := func() {}
		killed := false
		closeA = func() {
			if !killed {
				killed = true
				a.Close()
			}
		}
		t.Cleanup(closeA)
		var r sessiontest.Replicas
		var err error
		if r.A, err = session.NewStoreManager(a, session.Bot("test")); err != nil {
			t.Fatal(err)
		}
		if r.B, err = session.NewStoreManager(b, session.Bot("test")); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.A.Close(); r.B.Close() })
		r.KillA = closeA
		return r
	}})
}
