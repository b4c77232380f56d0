package openaiapi

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"errors"
	"net/http"
	"strings"

	"github.com/nbots/nb/agent"
)

var idEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// newID is a random id: 120 bits, unguessable (a response id is all a
// client needs to read a stored response).
func newID() string {
	var b [15]byte
	rand.Read(b[:]) //nolint:errcheck // never fails
	return idEncoding.EncodeToString(b[:])
}

// finishReason is OpenAI's finish_reason for an exchange's result.
func finishReason(res *agent.Result, calls int) string {
	if calls > 0 {
		return "tool_calls"
	}
	switch strings.ToLower(res.FinishReason) {
	case "length", "max_tokens", "model_length", "model_context_window_exceeded", "error_limit", agent.StopRoundLimit, agent.StopLoop, agent.StopTokenLimit:
		return "length"
	case "content_filter", "safety", "recitation", "blocklist", "prohibited_content", "spii", "refusal", "error_toxic", "image_safety":
		return "content_filter"
	}
	return "stop"
}

// chatCompletion is the chat.completion object of a whole answer.
func chatCompletion(id string, created int64, model string, out *outcome) []byte {
	b := make([]byte, 0, 512+len(out.text)+len(out.reasoning))
	b = append(b, `{"id":`...)
	b = appendString(b, id)
	b = append(b, `,"object":"chat.completion","created":`...)
	b = appendInt(b, created)
	b = append(b, `,"model":`...)
	b = appendString(b, model)
	b = append(b, `,"choices":[{"index":0,"message":{"role":"assistant","content":`...)
	if out.text == "" && len(out.calls) > 0 {
		b = append(b, "null"...)
	} else {
		b = appendString(b, out.text)
	}
	if out.reasoning != "" {
		b = append(b, `,"reasoning_content":`...)
		b = appendString(b, out.reasoning)
	}
	if len(out.calls) > 0 {
		b = append(b, `,"tool_calls":[`...)
		for i, c := range out.calls {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"id":`...)
			b = appendString(b, c.ID)
			b = append(b, `,"type":"function","function":{"name":`...)
			b = appendString(b, c.Name)
			b = append(b, `,"arguments":`...)
			b = appendString(b, c.Arguments)
			b = append(b, "}}"...)
		}
		b = append(b, ']')
	}
	b = append(b, `,"refusal":null,"annotations":[]},"logprobs":null,"finish_reason":`...)
	b = appendString(b, finishReason(out.res, len(out.calls)))
	b = append(b, `}],"usage":`...)
	b = appendChatUsage(b, out.res.Usage)
	b = append(b, "}\n"...)
	return b
}

// chatStream writes an answer as chat.completion.chunk events, as OpenAI
// streams them: the role first, then content (and reasoning) deltas, the
// tool calls (id, type and name, then the arguments), the finish reason,
// the usage chunk with no choices when asked for, and [DONE]. Nothing is
// sent before the answer begins, so a request that fails at once gets an
// error status.
type chatStream struct {
	sse
	id, model    string
	created      int64
	includeUsage bool
	roleSent     bool
}

func (h *Handler) streamChat(w http.ResponseWriter, r *http.Request, t *turn, id string, created int64, includeUsage bool) {
	cs := &chatStream{sse: sse{w: w}, id: id, model: t.model, created: created, includeUsage: includeUsage}
	out, err := h.run(r.Context(), t, cs)
	if err != nil {
		if !cs.started {
			h.fail(w, r, t, err)
			return
		}
		if !errors.Is(r.Context().Err(), context.Canceled) {
			e := apiError(err, t.model, t.bot.Provider().ID())
			h.logger(r.Context()).Error("exchange failed while streaming", "model", t.model, "status", e.Status, "error", err)
			body, _ := e.MarshalJSON()
			cs.data(body)
		}
		return
	}
	cs.role()
	for i, c := range out.calls {
		cs.toolCall(i, c)
	}
	b := cs.head()
	b = append(b, `"choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":`...)
	b = appendString(b, finishReason(out.res, len(out.calls)))
	b = append(b, "}]"...)
	cs.chunk(b)
	if includeUsage {
		b = cs.head()
		b = append(b, `"choices":[],"usage":`...)
		b = appendChatUsage(b, out.res.Usage)
		b = append(b, '}')
		cs.data(b)
	}
	cs.data([]byte("[DONE]"))
}

// head begins a chunk: its fields up to choices.
func (cs *chatStream) head() []byte {
	b := cs.buf[:0]
	b = append(b, `{"id":`...)
	b = appendString(b, cs.id)
	b = append(b, `,"object":"chat.completion.chunk","created":`...)
	b = appendInt(b, cs.created)
	b = append(b, `,"model":`...)
	b = appendString(b, cs.model)
	return append(b, ',')
}

// chunk ends a chunk begun by head (after its choices) and sends it.
func (cs *chatStream) chunk(b []byte) {
	if cs.includeUsage {
		b = append(b, `,"usage":null`...)
	}
	b = append(b, '}')
	cs.buf = b
	cs.data(b)
}

// delta sends a chunk whose delta is the JSON object body inner.
func (cs *chatStream) delta(inner func([]byte) []byte) {
	b := cs.head()
	b = append(b, `"choices":[{"index":0,"delta":{`...)
	b = inner(b)
	b = append(b, `},"logprobs":null,"finish_reason":null}]`...)
	cs.chunk(b)
}

func (cs *chatStream) role() {
	if cs.roleSent {
		return
	}
	cs.roleSent = true
	// Sent with what follows it (a delta, the finish chunk), not alone.
	cs.hold = true
	cs.delta(func(b []byte) []byte { return append(b, `"role":"assistant","content":"","refusal":null`...) })
	cs.hold = false
}

func (cs *chatStream) text(s string) {
	cs.role()
	cs.delta(func(b []byte) []byte { return appendString(append(b, `"content":`...), s) })
}

func (cs *chatStream) reasoning(s string) {
	cs.role()
	cs.delta(func(b []byte) []byte { return appendString(append(b, `"reasoning_content":`...), s) })
}

// argumentPiece is the size of the argument fragments of a streamed tool
// call: the arguments come whole from the agent, and are streamed in
// pieces as OpenAI does, so clients that assemble them are exercised.
const argumentPiece = 64

func (cs *chatStream) toolCall(index int, c clientCall) {
	cs.delta(func(b []byte) []byte {
		b = append(b, `"tool_calls":[{"index":`...)
		b = appendInt(b, int64(index))
		b = append(b, `,"id":`...)
		b = appendString(b, c.ID)
		b = append(b, `,"type":"function","function":{"name":`...)
		b = appendString(b, c.Name)
		return append(b, `,"arguments":""}}]`...)
	})
	for _, piece := range pieces(c.Arguments, argumentPiece) {
		cs.delta(func(b []byte) []byte {
			b = append(b, `"tool_calls":[{"index":`...)
			b = appendInt(b, int64(index))
			b = append(b, `,"function":{"arguments":`...)
			b = appendString(b, piece)
			return append(b, "}}]"...)
		})
	}
}

// pieces cuts s into pieces of about n bytes, never inside a UTF-8
// sequence.
func pieces(s string, n int) []string {
	var out []string
	for len(s) > n {
		i := n
		for i < len(s) && s[i]&0xC0 == 0x80 {
			i++
		}
		out = append(out, s[:i])
		s = s[i:]
	}
	if s != "" {
		out = append(out, s)
	}
	return out
}

// sse writes server-sent events, starting the response with the first.
type sse struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	started bool
	failed  bool
	// hold keeps the events written from being flushed: the next event
	// flushed carries them in the same write. The events that open an
	// answer (the role, a message item) are held for its first delta.
	hold bool
	buf  []byte
	out  []byte
}

func (s *sse) start() {
	if s.started {
		return
	}
	s.started = true
	s.rc = http.NewResponseController(s.w)
	h := s.w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	s.w.WriteHeader(http.StatusOK)
}

// data sends one event of data b.
func (s *sse) data(b []byte) { s.event("", b) }

// event sends one event named name ("" for none) of data b, and flushes.
func (s *sse) event(name string, b []byte) {
	s.start()
	if s.failed {
		return
	}
	out := s.out[:0]
	if name != "" {
		out = append(out, "event: "...)
		out = append(out, name...)
		out = append(out, '\n')
	}
	out = append(out, "data: "...)
	out = append(out, b...)
	out = append(out, "\n\n"...)
	s.out = out
	if _, err := s.w.Write(out); err != nil {
		s.failed = true // the client has gone; the request's context ends the exchange
		return
	}
	if s.hold {
		return
	}
	if err := s.rc.Flush(); err != nil {
		s.failed = true
	}
}
