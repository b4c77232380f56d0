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
	checks := map[string]string{}
	ok := true
	for _, c := range s.opts.Checks {
		ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
		err := c.Run(ctx)
		cancel()
		if err != nil {
			ok = false
			checks[c.Name] = err.Error()
			continue
		}
		checks[c.Name] = "ok"
	}
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
