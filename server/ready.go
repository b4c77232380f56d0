package server

import (
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
	ok, checks := httpguard.RunChecks(r.Context(), s.opts.Checks)
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
