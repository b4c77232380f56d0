package nanobots

import (
	"context"
	"net/http"
	"time"

	"github.com/nbots/nb/eventlog"
	"github.com/nbots/nb/server"
)

// Streams across replicas. A stream runs on the replica that created it,
// which publishes its output to the shared store as it grows; a poll or
// an event stream that reaches another replica follows it from there,
// through a copy kept like the replica's own streams (the same limits
// and expiry), so every client reads the same output whichever replica
// answers. A stream read only elsewhere is not abandoned.

// publish puts a new stream in the shared store, when there is one: a
// stream the other replicas cannot see is not started.
func (a *API) publish(ctx context.Context, id, owner string, s *stream) error {
	if a.shared == nil {
		return nil
	}
	lim := eventlog.Limits{Count: a.opts.MaxStreams, Bytes: a.opts.StreamBytes, TTL: a.opts.StreamTTL}
	if err := a.shared.Publish(ctx, id, owner, s.Log, lim, s.cancel); err != nil {
		return &server.Error{Status: http.StatusServiceUnavailable, RetryAfter: time.Second, Err: err,
			Message: "the stream could not be started: " + err.Error()}
	}
	return nil
}

// lookup finds the stream id of owner: one of this replica's, else one
// another replica runs, followed from the shared store (nil when there
// is none).
func (a *API) lookup(ctx context.Context, id, owner string) (*stream, error) {
	if s, ok := a.streams.Get(id, owner); ok || a.shared == nil {
		return s, nil
	}
	a.followMu.Lock()
	defer a.followMu.Unlock()
	if s, ok := a.streams.Get(id, owner); ok {
		return s, nil
	}
	l, stop, err := a.shared.Follow(ctx, id, owner, a.opts.MaxOutput)
	if err != nil {
		return nil, &server.Error{Status: http.StatusServiceUnavailable, RetryAfter: time.Second, Err: err,
			Message: "the stream could not be read: " + err.Error()}
	}
	if l == nil {
		return nil, nil
	}
	s := &stream{Log: l, copied: true}
	// Letting go of a copy (nobody reads it, or the replica's memory is
	// full) stops following; a later read follows it afresh.
	s.cancel = func(error) {
		stop()
		a.streams.Delete(id, owner)
	}
	a.streams.Put(id, owner, s, 0)
	return s, nil
}

// readElsewhere reports whether a stream of this replica that nobody
// read here lately was read through another replica: it is not
// abandoned then.
func (a *API) readElsewhere(s *stream) bool {
	if a.shared == nil || s.copied {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	at, err := a.shared.LastRead(ctx, s.ID())
	if err != nil {
		return true // cannot tell: do not stop what may be read
	}
	if time.Since(at) < a.opts.AbandonAfter {
		s.Seen()
		return true
	}
	return false
}
