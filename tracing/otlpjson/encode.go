package otlpjson

import (
	"encoding/base64"
	"encoding/hex"
	"math"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/nbots/nb/internal/jsonstr"
)

// AppendRequest appends to dst the ExportTraceServiceRequest carrying
// spans, all of one resource whose attributes are resource, grouped by
// scope in the order the scopes first come.
func AppendRequest(dst []byte, resource []attribute.KeyValue, spans []*SpanData) []byte {
	dst = append(dst, `{"resourceSpans":[{"resource":{`...)
	if len(resource) > 0 {
		dst = appendKeyValues(append(dst, `"attributes":`...), resource)
	}
	dst = append(dst, `},"scopeSpans":[`...)
	var scopes [4]*Scope
	seen := scopes[:0]
	for i, s := range spans {
		if contains(seen, s.Scope) {
			continue
		}
		seen = append(seen, s.Scope)
		if len(seen) > 1 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"scope":{"name":`...)
		var name, version string
		if s.Scope != nil {
			name, version = s.Scope.Name, s.Scope.Version
		}
		dst = jsonstr.Append(dst, name)
		if version != "" {
			dst = jsonstr.Append(append(dst, `,"version":`...), version)
		}
		dst = append(dst, `},"spans":[`...)
		first := true
		for _, o := range spans[i:] {
			if o.Scope != s.Scope {
				continue
			}
			if !first {
				dst = append(dst, ',')
			}
			first = false
			dst = appendSpan(dst, o)
		}
		dst = append(dst, "]}"...)
	}
	return append(dst, "]}]}"...)
}

func contains(scopes []*Scope, s *Scope) bool {
	for _, o := range scopes {
		if o == s {
			return true
		}
	}
	return false
}

func appendSpan(dst []byte, s *SpanData) []byte {
	dst = appendID(append(dst, `{"traceId":`...), s.TraceID[:])
	dst = appendID(append(dst, `,"spanId":`...), s.SpanID[:])
	if ts := s.TraceState.String(); ts != "" {
		dst = jsonstr.Append(append(dst, `,"traceState":`...), ts)
	}
	// Bit 8 (0x100) says whether the parent is known to be remote, bit 9
	// whether it is; the low 8 bits are the W3C trace flags.
	flags := uint32(s.Flags) | 0x100
	if s.Parent.IsValid() {
		dst = appendID(append(dst, `,"parentSpanId":`...), s.Parent[:])
		if s.ParentRemote {
			flags |= 0x200
		}
	}
	dst = strconv.AppendUint(append(dst, `,"flags":`...), uint64(flags), 10)
	dst = append(dst, `,"name":"`...)
	dst = append(jsonstr.AppendEscaped(jsonstr.AppendEscaped(dst, s.Name), s.NameSuffix), '"')
	dst = strconv.AppendInt(append(dst, `,"kind":`...), int64(kind(s.Kind)), 10)
	dst = appendNanos(append(dst, `,"startTimeUnixNano":`...), s.Start)
	dst = appendNanos(append(dst, `,"endTimeUnixNano":`...), s.End)
	if len(s.Attributes) > 0 {
		dst = appendKeyValues(append(dst, `,"attributes":`...), s.Attributes)
	}
	dst = appendCount(dst, `,"droppedAttributesCount":`, s.DroppedAttributes)
	if len(s.Events) > 0 {
		dst = append(dst, `,"events":[`...)
		for i, e := range s.Events {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendNanos(append(dst, `{"timeUnixNano":`...), e.Time)
			dst = jsonstr.Append(append(dst, `,"name":`...), e.Name)
			if len(e.Attributes) > 0 {
				dst = appendKeyValues(append(dst, `,"attributes":`...), e.Attributes)
			}
			dst = append(appendCount(dst, `,"droppedAttributesCount":`, e.DroppedAttributes), '}')
		}
		dst = append(dst, ']')
	}
	dst = appendCount(dst, `,"droppedEventsCount":`, s.DroppedEvents)
	if len(s.Links) > 0 {
		dst = append(dst, `,"links":[`...)
		for i, l := range s.Links {
			if i > 0 {
				dst = append(dst, ',')
			}
			sc := l.SpanContext
			tid, sid := sc.TraceID(), sc.SpanID()
			dst = appendID(append(dst, `{"traceId":`...), tid[:])
			dst = appendID(append(dst, `,"spanId":`...), sid[:])
			if ts := sc.TraceState().String(); ts != "" {
				dst = jsonstr.Append(append(dst, `,"traceState":`...), ts)
			}
			if len(l.Attributes) > 0 {
				dst = appendKeyValues(append(dst, `,"attributes":`...), l.Attributes)
			}
			dst = appendCount(dst, `,"droppedAttributesCount":`, l.DroppedAttributes)
			lf := uint32(sc.TraceFlags()) | 0x100
			if sc.IsRemote() {
				lf |= 0x200
			}
			dst = append(strconv.AppendUint(append(dst, `,"flags":`...), uint64(lf), 10), '}')
		}
		dst = append(dst, ']')
	}
	dst = appendCount(dst, `,"droppedLinksCount":`, s.DroppedLinks)
	if s.Status != codes.Unset || s.StatusMessage != "" {
		// otel's codes: Unset 0, Error 1, Ok 2; OTLP's: Unset 0, Ok 1, Error 2.
		code := 0
		switch s.Status {
		case codes.Ok:
			code = 1
		case codes.Error:
			code = 2
		}
		dst = append(dst, `,"status":{`...)
		if code != 0 {
			dst = strconv.AppendInt(append(dst, `"code":`...), int64(code), 10)
		}
		if s.StatusMessage != "" {
			if code != 0 {
				dst = append(dst, ',')
			}
			dst = jsonstr.Append(append(dst, `"message":`...), s.StatusMessage)
		}
		dst = append(dst, '}')
	}
	return append(dst, '}')
}

// kind maps otel's span kinds to OTLP's, which have the same numbers
// (internal 1, server 2, client 3, producer 4, consumer 5); unspecified
// becomes internal, as the SDK's exporters do.
func kind(k trace.SpanKind) int {
	if k < trace.SpanKindInternal || k > trace.SpanKindConsumer {
		return int(trace.SpanKindInternal)
	}
	return int(k)
}

func appendCount(dst []byte, field string, n int) []byte {
	if n == 0 {
		return dst
	}
	return strconv.AppendInt(append(dst, field...), int64(n), 10)
}

// appendID appends id as a lower-case hex string, "" when all zero.
func appendID(dst []byte, id []byte) []byte {
	dst = append(dst, '"')
	for _, b := range id {
		if b != 0 {
			dst = hex.AppendEncode(dst, id)
			break
		}
	}
	return append(dst, '"')
}

func appendNanos(dst []byte, t time.Time) []byte {
	dst = append(dst, '"')
	if t.IsZero() {
		dst = append(dst, '0')
	} else {
		dst = strconv.AppendInt(dst, t.UnixNano(), 10)
	}
	return append(dst, '"')
}

func appendKeyValues(dst []byte, kvs []attribute.KeyValue) []byte {
	dst = append(dst, '[')
	for i, kv := range kvs {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = jsonstr.Append(append(dst, `{"key":`...), string(kv.Key))
		dst = append(appendValue(append(dst, `,"value":`...), kv.Value), '}')
	}
	return append(dst, ']')
}

func appendValue(dst []byte, v attribute.Value) []byte {
	switch v.Type() {
	case attribute.BOOL:
		return append(strconv.AppendBool(append(dst, `{"boolValue":`...), v.AsBool()), '}')
	case attribute.INT64:
		return append(strconv.AppendInt(append(dst, `{"intValue":"`...), v.AsInt64(), 10), `"}`...)
	case attribute.FLOAT64:
		return append(appendDouble(append(dst, `{"doubleValue":`...), v.AsFloat64()), '}')
	case attribute.STRING:
		return append(jsonstr.Append(append(dst, `{"stringValue":`...), v.AsString()), '}')
	case attribute.BYTESLICE:
		dst = append(dst, `{"bytesValue":"`...)
		return append(base64.StdEncoding.AppendEncode(dst, v.AsByteSlice()), `"}`...)
	case attribute.BOOLSLICE:
		dst = append(dst, `{"arrayValue":{"values":[`...)
		for i, b := range v.AsBoolSlice() {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(strconv.AppendBool(append(dst, `{"boolValue":`...), b), '}')
		}
		return append(dst, "]}}"...)
	case attribute.INT64SLICE:
		dst = append(dst, `{"arrayValue":{"values":[`...)
		for i, n := range v.AsInt64Slice() {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(strconv.AppendInt(append(dst, `{"intValue":"`...), n, 10), `"}`...)
		}
		return append(dst, "]}}"...)
	case attribute.FLOAT64SLICE:
		dst = append(dst, `{"arrayValue":{"values":[`...)
		for i, f := range v.AsFloat64Slice() {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(appendDouble(append(dst, `{"doubleValue":`...), f), '}')
		}
		return append(dst, "]}}"...)
	case attribute.STRINGSLICE:
		dst = append(dst, `{"arrayValue":{"values":[`...)
		for i, s := range v.AsStringSlice() {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(jsonstr.Append(append(dst, `{"stringValue":`...), s), '}')
		}
		return append(dst, "]}}"...)
	case attribute.SLICE:
		dst = append(dst, `{"arrayValue":{"values":[`...)
		for i, e := range v.AsSlice() {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendValue(dst, e)
		}
		return append(dst, "]}}"...)
	case attribute.MAP:
		dst = append(dst, `{"kvlistValue":{"values":`...)
		return append(appendKeyValues(dst, v.AsMap()), "}}"...)
	case attribute.EMPTY:
		return append(dst, "{}"...)
	}
	return append(jsonstr.Append(append(dst, `{"stringValue":`...), v.Emit()), '}')
}

// appendDouble appends a float; JSON has no NaN or infinities, so those
// are the strings protobuf's JSON mapping uses.
func appendDouble(dst []byte, f float64) []byte {
	switch {
	case math.IsNaN(f):
		return append(dst, `"NaN"`...)
	case math.IsInf(f, 1):
		return append(dst, `"Infinity"`...)
	case math.IsInf(f, -1):
		return append(dst, `"-Infinity"`...)
	}
	return strconv.AppendFloat(dst, f, 'g', -1, 64)
}
