package server

import (
	"context"
	"net/http"

	"github.com/nbots/nb/internal/httpguard"
)

// Check is one thing a replica needs to take work; see httpguard.Check.
type Check = httpguard.Check

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

// RunChecks runs checks, each within a few seconds; see
// httpguard.RunChecks.
func RunChecks(ctx context.Context, checks []Check) (ok bool, results map[string]string) {
	return httpguard.RunChecks(ctx, checks)
}
