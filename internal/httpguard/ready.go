package httpguard

import (
	"context"
	"time"
)

// Check is one thing a replica needs to take work: a store it must
// reach, a bus it must be connected to. GET /ready runs them all.
type Check struct {
	// Name says which (store, bus).
	Name string
	// Run fails with the reason, which must carry no credentials.
	Run func(ctx context.Context) error
}

// checkTimeout bounds each check of GET /ready.
const checkTimeout = 3 * time.Second

// RunChecks runs checks, each within a few seconds: ok when all pass;
// results maps each name to "ok" or its failure.
func RunChecks(ctx context.Context, checks []Check) (ok bool, results map[string]string) {
	ok, results = true, map[string]string{}
	for _, c := range checks {
		cctx, cancel := context.WithTimeout(ctx, checkTimeout)
		err := c.Run(cctx)
		cancel()
		results[c.Name] = "ok"
		if err != nil {
			ok, results[c.Name] = false, err.Error()
		}
	}
	return ok, results
}
