package nanobots

import (
	"bytes"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/nbots/nb/eventlog"
	"github.com/nbots/nb/internal/jsonstr"
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
	var b []byte
	if announce {
		b = appendEvent(b, "stream", "", marshalRun(snapshotJSON(a.snapshot(s))))
	}
	ticker := time.NewTicker(keepAlive)
	defer ticker.Stop()
	for {
		piece, st, end := a.output(s, from)
		from = end
		if piece != "" {
			data := jsonstr.Append(append(make([]byte, 0, len(piece)+16), `{"output":`...), piece)
			b = appendEvent(b, "output", strconv.Itoa(from), append(data, '}'))
		}
		if st.Status != eventlog.Open {
			b = appendEvent(b, st.Status.String(), strconv.Itoa(from), marshalRun(snapshotJSON(a.snapshot(s))))
		}
		if len(b) > 0 {
			if _, err := w.Write(b); err != nil {
				return
			}
			b = b[:0]
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
			b = append(b, ": keep-alive\n\n"...)
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
	w.Write(appendEvent(nil, stateUnknown, "", marshalRun(runJSON{State: stateUnknown}))) //nolint:errcheck // the client went away
}

// appendEvent appends one server-sent event with data.
func appendEvent(b []byte, event, id string, data []byte) []byte {
	b = append(b, "event: "+event+"\n"...)
	if id != "" {
		b = append(b, "id: "+id+"\n"...)
	}
	b = append(b, "data: "...)
	b = append(b, data...)
	return append(b, "\n\n"...)
}

// marshalRun is v as server.MarshalJSON writes it, with its output
// escaped in place instead of through an encoder's growing buffers: the
// output may be 64 MiB, and every poll answers it whole.
func marshalRun(v runJSON) []byte {
	out := v.Output
	v.Output = ""
	head, err := server.MarshalJSON(v)
	if err != nil {
		return []byte(`{}`)
	}
	const field = `"output":`
	i := bytes.Index(head, []byte(field+`""`)) + len(field)
	b := make([]byte, 0, len(head)+len(out)+len(out)/16+16)
	b = append(b, head[:i]...)
	b = jsonstr.Append(b, out)
	return append(b, head[i+2:]...)
}

// writeRun answers v, as server.WriteJSON would.
func writeRun(w http.ResponseWriter, status int, v runJSON) {
	b := marshalRun(v)
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	w.Write(b) //nolint:errcheck // the client went away
}
