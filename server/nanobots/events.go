package nanobots

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/nbots/nb/eventlog"
	"github.com/nbots/nb/server"
)

// keepAlive is how often an idle event stream gets a comment line, so
// proxies do not close it.
const keepAlive = 15 * time.Second

// lastEventID is the output offset a reconnecting client has read.
func lastEventID(r *http.Request) int {
	n, err := strconv.Atoi(strings.TrimSpace(r.Header.Get("Last-Event-ID")))
	if err != nil || n < 0 {
		return 0
	}
	return n
}

// events sends the stream as server-sent events from the output offset
// from: "output" events carry each new piece of text ({"output": piece}),
// with the offset after it as the event id (a client that reconnects
// with Last-Event-ID resumes there); the last event is "finished" or
// "failed" and carries the whole stream object, as a poll gives it.
// With announce, a first "stream" event carries the new stream's object
// (its id), for clients that created it with this request.
func (a *API) events(w http.ResponseWriter, r *http.Request, s *stream, from int, announce bool) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no") // nginx: do not buffer the events
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	defer s.Watch()()
	var b strings.Builder
	if announce {
		writeEvent(&b, "stream", "", snapshotJSON(a.snapshot(s)))
	}
	ticker := time.NewTicker(keepAlive)
	defer ticker.Stop()
	for {
		piece, st, end := a.output(s, from)
		from = end
		if piece != "" {
			writeEvent(&b, "output", strconv.Itoa(from), map[string]string{"output": piece})
		}
		if st.Status != eventlog.Open {
			writeEvent(&b, st.Status.String(), strconv.Itoa(from), snapshotJSON(a.snapshot(s)))
		}
		if b.Len() > 0 {
			if _, err := w.Write([]byte(b.String())); err != nil {
				return
			}
			b.Reset()
			if err := rc.Flush(); err != nil {
				return
			}
		}
		if st.Status != eventlog.Open {
			return
		}
		select {
		case <-st.Changed:
		case <-ticker.C:
			b.WriteString(": keep-alive\n\n")
		case <-r.Context().Done():
			return
		}
	}
}

// unknownEvents answers an event stream request for an id that does not
// exist (or expired): one "unknown" event with the reference's template.
func (a *API) unknownEvents(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	var b strings.Builder
	writeEvent(&b, stateUnknown, "", runJSON{State: stateUnknown})
	w.Write([]byte(b.String())) //nolint:errcheck // the client went away
}

func writeEvent(b *strings.Builder, event, id string, v any) {
	data, err := server.MarshalJSON(v)
	if err != nil {
		data = []byte(`{}`)
	}
	b.WriteString("event: " + event + "\n")
	if id != "" {
		b.WriteString("id: " + id + "\n")
	}
	b.WriteString("data: ")
	b.Write(data)
	b.WriteString("\n\n")
}
