package server

import (
	"context"
	"net/http"
	"time"

	"github.com/nbots/nb/eventlog"
)

// Shared is the store the server's replicas share (Options.Shared), nil
// when the server keeps its streams, responses and runs in its memory.
func (s *Server) Shared() eventlog.Shared { return s.opts.Shared }

// unshared says why the server takes no work now: it cannot reach the
// store it shares with its replicas. It would answer polls and
// continuations from what its memory holds, which the other replicas no
// longer see, so it refuses everything but /healthz and /ready: a load
// balancer that checks /ready sends the clients elsewhere.
func (s *Server) unshared() error {
	if s.opts.Shared == nil {
		return nil
	}
	if err := s.opts.Shared.Err(); err != nil {
		return &Error{Status: http.StatusServiceUnavailable, Code: "store_unreachable", RetryAfter: time.Second, Err: err,
			Message: "this replica takes no work: " + err.Error() + "; another replica can answer"}
	}
	return nil
}

// sharedCheck is the shared store's part of GET /ready: the store's own
// view (its heartbeat, every second), not a query of its own.
func sharedCheck(shared eventlog.Shared) Check {
	return Check{Name: "serve state", Run: func(context.Context) error { return shared.Err() }}
}
