package pgstore

import (
	"context"
	"testing"

	"github.com/nbots/nb/state"
)

// Expire makes a turn's lease expire as if its holder stopped renewing
// it: the renewals stop and the lease's expiry is put in the past.
func Expire(t *testing.T, tu state.Turn) {
	t.Helper()
	tr := tu.(*turn)
	tr.stopRenewing()
	if _, err := tr.c.s.pool.Exec(context.Background(), `UPDATE nb_leases SET expires_at = clock_timestamp() - interval '1 second' WHERE holder = $1`, tr.holder); err != nil {
		t.Fatal(err)
	}
}

// Crash does what a replica killed in the middle of an Append leaves: a
// transaction that wrote part of the events and never committed (its
// connection closed), and a lease that nobody renews, which expires after
// the TTL.
func Crash(t *testing.T, tu state.Turn, events []state.Event) {
	t.Helper()
	tr := tu.(*turn)
	tr.stopRenewing()
	ctx := context.Background()
	conn, err := tr.c.s.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release() // closed below: the pool drops it
	raw := conn
	if _, err := raw.Exec(ctx, "BEGIN"); err != nil {
		t.Fatal(err)
	}
	data, err := tr.c.encode(events[:1])
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if err := raw.QueryRow(ctx, appendSQL, tr.c.args(tr.holder, 1, data)...).Scan(&n); err != nil || n != 1 {
		t.Fatalf("the crashing append: %d, %v", n, err)
	}
	raw.PgConn().Close(ctx) // the server rolls the transaction back
}

// stopRenewing stops the renewals without releasing the lease.
func (t *turn) stopRenewing() {
	t.endOnce.Do(func() {
		close(t.stop)
		<-t.done
	})
}
