package tracing

import (
	"context"
	"encoding/hex"
	"log/slog"

	"go.opentelemetry.io/otel/trace"
)

// LogHandler wraps h so that each record logged with a context that
// holds a span carries its trace_id and span_id (lower-case hex, as in
// traceparent), for log shippers to join logs to traces.
func LogHandler(h slog.Handler) slog.Handler { return logHandler{h} }

type logHandler struct{ slog.Handler }

func (h logHandler) Handle(ctx context.Context, r slog.Record) error {
	if ctx != nil {
		if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
			// Both ids in one string: one allocation.
			tid, sid := sc.TraceID(), sc.SpanID()
			var buf [48]byte
			hex.Encode(buf[:32], tid[:])
			hex.Encode(buf[32:], sid[:])
			ids := string(buf[:])
			r = r.Clone()
			r.AddAttrs(slog.String("trace_id", ids[:32]), slog.String("span_id", ids[32:]))
		}
	}
	return h.Handler.Handle(ctx, r)
}

func (h logHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return logHandler{h.Handler.WithAttrs(attrs)}
}

func (h logHandler) WithGroup(name string) slog.Handler {
	return logHandler{h.Handler.WithGroup(name)}
}
