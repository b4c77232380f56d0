package pipelinesrv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/nbots/nb/server"
)

// events streams the run's events as server-sent events: every event
// from the start (or after Last-Event-ID), then each new one as it
// comes, until the run has ended. Each is
//
//	id: <its number in the run>
//	event: <its §9.6 name, e.g. StageCompleted>
//	data: <the event as JSON, one line>
//
// A stream of a run that has ended with nothing after Last-Event-ID
// answers 204, which tells an EventSource to stop reconnecting. An idle
// stream gets a comment line every Heartbeat. The client going away
// ends the stream, never the run.
func (h *Handler) events(w http.ResponseWriter, r *http.Request) {
	run := h.run(w, r)
	if run == nil {
		return
	}
	after, err := lastEventID(r)
	if err != nil {
		h.fail(w, r, http.StatusBadRequest, "%v", err)
		return
	}
	if info := run.Info(); Ended(info.Status) && after >= info.Events {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	rc := http.NewResponseController(w)
	rc.SetWriteDeadline(time.Time{}) //nolint:errcheck // not every writer has deadlines
	hd := w.Header()
	hd.Set("Content-Type", "text/event-stream")
	hd.Set("Cache-Control", "no-cache")
	hd.Set("X-Accel-Buffering", "no") // nginx: do not hold the stream back
	w.WriteHeader(http.StatusOK)

	var mu sync.Mutex // one writer at a time: events and heartbeats
	write := func(b []byte) error {
		mu.Lock()
		defer mu.Unlock()
		if _, err := w.Write(b); err != nil {
			return err
		}
		return rc.Flush()
	}
	if err := write([]byte(": pipeline " + run.ID() + "\n\n")); err != nil {
		return
	}
	// The stream ends when the client goes away; when the server shuts
	// down, only once the run has said how it stopped (2 s at most).
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	defer cancel()
	stopAfter := context.AfterFunc(r.Context(), func() {
		select {
		case <-h.srv.Done():
			time.AfterFunc(2*time.Second, cancel)
		default:
			cancel()
		}
	})
	defer stopAfter()
	var beats sync.WaitGroup
	defer beats.Wait() // no write after the handler returns
	defer cancel()
	beats.Add(1)
	go func() {
		defer beats.Done()
		t := time.NewTicker(h.opts.Heartbeat)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				if write([]byte(": keep-alive\n\n")) != nil {
					cancel()
					return
				}
			case <-ctx.Done():
				return
			}
		}
	}()
	err = run.Follow(ctx, after, func(e Event) error {
		data, err := json.Marshal(e)
		if err != nil {
			return err
		}
		return write(fmt.Appendf(nil, "id: %d\nevent: %s\ndata: %s\n\n", e.Seq, e.Kind, data))
	})
	if err != nil && !errors.Is(err, context.Canceled) && r.Context().Err() == nil {
		server.Quiet(r.Context())
		h.opts.Log.Debug("pipeline event stream ended", "run", run.ID(), "error", err)
	}
}
