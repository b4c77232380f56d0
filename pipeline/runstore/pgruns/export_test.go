package pgruns

import (
	"context"
	"testing"

	"github.com/nbots/nb/pipeline/runstore"
)

// Crash does what a replica that dies leaves: a lease nobody renews,
// here put past its expiry at once rather than after the TTL.
func Crash(t *testing.T, rs runstore.Run) {
	t.Helper()
	r := rs.(*run)
	r.stopRenewing()
	if _, err := r.s.pool.Exec(context.Background(), `UPDATE nb_pipeline_runs SET expires_at = clock_timestamp() - interval '1 second' WHERE id = $1 AND holder = $2`, r.info.ID, r.holder); err != nil {
		t.Fatal(err)
	}
}
