package server

import (
	"context"
	"net/http"
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

// readyTimeout bounds each check of GET /ready.
const readyTimeout = 3 * time.Second

// ready answers GET /ready: 200 when the server takes work and every
// check passes, else 503 saying which check failed and why. Like
// /healthz it needs no token (load balancers ask it); the reasons name
// hosts and databases but never their credentials.
func (s *Server) ready(w http.ResponseWriter, r *http.Request) {
	Quiet(r.Context())
	ok, checks := RunChecks(r.Context(), s.opts.Checks)
	body := map[string]any{"ready": ok, "checks": checks}
	if s.isDraining() {
		ok = false
		body["ready"], body["status"] = false, "stopping"
	}
	status := http.StatusOK
	if !ok {
		status = http.StatusServiceUnavailable
		s.log.Warn("not ready", "checks", checks)
	}
	WriteJSON(w, status, body)
}

// RunChecks runs checks, each within a few seconds: ok when all pass;
// results maps each name to "ok" or its failure.
func RunChecks(ctx context.Context, checks []Check) (ok bool, results map[string]string) {
	ok, results = true, map[string]string{}
	for _, c := range checks {
		cctx, cancel := context.WithTimeout(ctx, readyTimeout)
		err := c.Run(cctx)
		cancel()
		results[c.Name] = "ok"
		if err != nil {
			ok, results[c.Name] = false, err.Error()
		}
	}
	return ok, results
}
