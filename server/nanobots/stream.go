package nanobots

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nbots/nb/eventlog"
	"github.com/nbots/nb/internal/bytesize"
)

// Stream states, as the reference names them.
const (
	statePending  = "pending"
	stateFinished = "finished"
	stateFailed   = "failed"
	stateUnknown  = "unknown"
)

// stream is one evaluation clients follow by polling or with server-sent
// events: an event log whose output only grows (the editor plugins
// insert the part of each answer they have not seen).
type stream struct {
	*eventlog.Log
	cancel context.CancelCauseFunc
	// copied: the stream runs on another replica; this is its copy.
	copied bool
	served atomic.Int64 // output length the last poll answered with
	// polling is held while a poll copies the output: polls of one stream
	// take its memory one at a time, however many a client sends.
	polling sync.Mutex
}

// snapshot is the stream as a poll answers it.
type snapshot struct {
	id       string
	started  time.Time
	finished time.Time
	state    string
	output   string
	errMsg   string
}

// cutNotice ends the output of a stream that reached its bytes, once it
// is over: the output only grows, so it comes last.
func cutNotice(limit int64) string {
	return fmt.Sprintf("\n\n[nb: the output was cut here: it reached the limit of %s per answer]", bytesize.String(limit))
}

// output is the stream's output from byte from, with the cut notice at
// the end of a finished stream that reached its bytes, and its state.
func (a *API) output(s *stream, from int) (string, eventlog.State, int) {
	out, st := s.Output(from)
	end := st.TextLen
	if st.Cut && st.Status != eventlog.Open {
		notice := cutNotice(a.opts.MaxOutput)
		if skip := from - st.TextLen; skip < len(notice) {
			out += notice[max(skip, 0):]
		}
		end += len(notice)
	}
	return out, st, end
}

func (a *API) snapshot(s *stream) snapshot {
	out, st, _ := a.output(s, 0)
	return snapshot{id: s.ID(), started: st.Started, finished: st.Finished, state: st.Status.String(), output: out, errMsg: st.Err}
}

// hold waits before a poll. While the stream is pending and its output
// has not grown since the last poll, it waits up to hold for a change:
// the plugins poll in a tight loop, so this turns hundreds of empty
// answers a second into a few, and delivers a change as soon as it
// comes.
func (a *API) hold(ctx context.Context, s *stream, hold time.Duration) {
	defer s.Watch()() // a poll that waits is a reader: the stream is not abandoned
	served := int(s.served.Load())
	if st := s.State(); hold > 0 && st.Status == eventlog.Open && st.TextLen == served {
		// Only output or the end wake it: other events do not change a poll.
		s.Wait(ctx, int(^uint(0)>>1), served, hold)
	}
}

// kept is the number of streams kept.
func (a *API) kept() int {
	n, _ := a.streams.Stats()
	return n
}
