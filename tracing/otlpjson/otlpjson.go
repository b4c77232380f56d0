// Package otlpjson exports OpenTelemetry spans over OTLP/HTTP in its JSON
// encoding (Content-Type application/json, POST to .../v1/traces), the
// encoding the OTLP specification defines beside protobuf. It exists to
// keep nb's binary small: the stock OTLP exporter links protobuf and the
// generated OTLP packages (about 11 MB more in nb).
//
// The JSON follows the OTLP rules: lowerCamelCase field names, trace and
// span ids as lower-case hex (not base64), 64-bit integers and nanosecond
// times as decimal strings, enums as their integer values. It is written
// straight from the recorded spans (SpanData) into one reused buffer;
// the Request types describe the same JSON for those who read it.
package otlpjson

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// SpanData is one ended span, as the exporter encodes it.
type SpanData struct {
	// Scope is the instrumentation scope that recorded the span.
	Scope      *Scope
	TraceID    trace.TraceID
	SpanID     trace.SpanID
	TraceState trace.TraceState
	Flags      trace.TraceFlags
	// Parent is the parent span's id (invalid for a root span);
	// ParentRemote says it came from another process (a traceparent).
	Parent       trace.SpanID
	ParentRemote bool
	// The span's name is Name followed by NameSuffix (kept apart so
	// that recording a span need not join them: "chat " and the model).
	Name, NameSuffix string
	Kind             trace.SpanKind
	Start, End       time.Time
	Attributes       []attribute.KeyValue
	Events           []EventData
	Links            []LinkData
	// The Dropped counts are what the span's limits turned away.
	DroppedAttributes, DroppedEvents, DroppedLinks int
	Status                                         codes.Code
	StatusMessage                                  string
}

// EventData is a timed event of a span (an exception, say).
type EventData struct {
	Time              time.Time
	Name              string
	Attributes        []attribute.KeyValue
	DroppedAttributes int
}

// LinkData points at another span.
type LinkData struct {
	SpanContext       trace.SpanContext
	Attributes        []attribute.KeyValue
	DroppedAttributes int
}

// Exporter sends spans to one OTLP/HTTP traces endpoint. It is used by
// one goroutine at a time.
type Exporter struct {
	url      string
	headers  map[string]string
	client   *http.Client
	resource []attribute.KeyValue
	buf      []byte
}

// New returns an exporter posting to url (the whole address, ending in
// /v1/traces) with headers on every request, for spans of the resource
// whose attributes are resource; nil client means one with a 10 s
// timeout, as the OTLP exporter's default.
func New(url string, headers map[string]string, resource []attribute.KeyValue, client *http.Client) *Exporter {
	if client == nil {
		client = &http.Client{Timeout: 10 * time.Second}
	}
	return &Exporter{url: url, headers: headers, client: client, resource: resource}
}

// Export posts spans as one ExportTraceServiceRequest.
func (e *Exporter) Export(ctx context.Context, spans []*SpanData) error {
	if len(spans) == 0 {
		return nil
	}
	e.buf = AppendRequest(e.buf[:0], e.resource, spans)
	body := &body{Reader: bytes.NewReader(e.buf)}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.url, nil)
	if err != nil {
		return fmt.Errorf("otlp: %w", err)
	}
	req.Body, req.ContentLength = body, int64(len(e.buf))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "nb (Nano Bots)")
	for k, v := range e.headers {
		req.Header.Set(k, v)
	}
	resp, err := e.client.Do(req)
	if !body.closed.Load() {
		// The transport may still read the body: the next request
		// gets a buffer of its own.
		e.buf = nil
	}
	if err != nil {
		return fmt.Errorf("otlp: %w", err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("otlp: %s answered %s: %s", e.url, resp.Status, bytes.TrimSpace(msg))
	}
	return nil
}

// body is a request body that tells when the transport is done with it.
type body struct {
	*bytes.Reader
	closed atomic.Bool
}

func (b *body) Close() error {
	b.closed.Store(true)
	return nil
}

// Request is ExportTraceServiceRequest.
type Request struct {
	ResourceSpans []ResourceSpans `json:"resourceSpans"`
}

// ResourceSpans are the spans of one resource.
type ResourceSpans struct {
	Resource   Resource     `json:"resource"`
	ScopeSpans []ScopeSpans `json:"scopeSpans"`
}

// Resource is the process the spans come from.
type Resource struct {
	Attributes []KeyValue `json:"attributes,omitempty"`
}

// ScopeSpans are the spans of one instrumentation scope.
type ScopeSpans struct {
	Scope Scope  `json:"scope"`
	Spans []Span `json:"spans"`
}

// Scope is an instrumentation scope.
type Scope struct {
	Name    string `json:"name"`
	Version string `json:"version,omitempty"`
}

// Span is one span.
type Span struct {
	TraceID           string     `json:"traceId"`
	SpanID            string     `json:"spanId"`
	TraceState        string     `json:"traceState,omitempty"`
	ParentSpanID      string     `json:"parentSpanId,omitempty"`
	Flags             uint32     `json:"flags,omitempty"`
	Name              string     `json:"name"`
	Kind              int        `json:"kind"`
	StartTimeUnixNano string     `json:"startTimeUnixNano"`
	EndTimeUnixNano   string     `json:"endTimeUnixNano"`
	Attributes        []KeyValue `json:"attributes,omitempty"`
	DroppedAttributes int        `json:"droppedAttributesCount,omitempty"`
	Events            []Event    `json:"events,omitempty"`
	DroppedEvents     int        `json:"droppedEventsCount,omitempty"`
	Links             []Link     `json:"links,omitempty"`
	DroppedLinks      int        `json:"droppedLinksCount,omitempty"`
	Status            *Status    `json:"status,omitempty"`
}

// Event is a timed event of a span (an exception, say).
type Event struct {
	TimeUnixNano      string     `json:"timeUnixNano"`
	Name              string     `json:"name"`
	Attributes        []KeyValue `json:"attributes,omitempty"`
	DroppedAttributes int        `json:"droppedAttributesCount,omitempty"`
}

// Link points at another span.
type Link struct {
	TraceID           string     `json:"traceId"`
	SpanID            string     `json:"spanId"`
	TraceState        string     `json:"traceState,omitempty"`
	Attributes        []KeyValue `json:"attributes,omitempty"`
	DroppedAttributes int        `json:"droppedAttributesCount,omitempty"`
	Flags             uint32     `json:"flags,omitempty"`
}

// Status is a span's outcome: code 0 unset, 1 ok, 2 error.
type Status struct {
	Code    int    `json:"code,omitempty"`
	Message string `json:"message,omitempty"`
}

// KeyValue is an attribute.
type KeyValue struct {
	Key   string   `json:"key"`
	Value AnyValue `json:"value"`
}

// AnyValue holds one of its fields (none: an empty value).
type AnyValue struct {
	StringValue *string     `json:"stringValue,omitempty"`
	BoolValue   *bool       `json:"boolValue,omitempty"`
	IntValue    *string     `json:"intValue,omitempty"`
	DoubleValue any         `json:"doubleValue,omitempty"` // a float64, or "NaN", "Infinity", "-Infinity"
	ArrayValue  *ArrayValue `json:"arrayValue,omitempty"`
	KvlistValue *KvList     `json:"kvlistValue,omitempty"`
	BytesValue  *string     `json:"bytesValue,omitempty"` // base64
}

// ArrayValue is a list of values.
type ArrayValue struct {
	Values []AnyValue `json:"values"`
}

// KvList is a map value.
type KvList struct {
	Values []KeyValue `json:"values"`
}
