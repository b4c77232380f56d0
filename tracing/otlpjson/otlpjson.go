// Package otlpjson exports OpenTelemetry spans over OTLP/HTTP in its JSON
// encoding (Content-Type application/json, POST to .../v1/traces), the
// encoding the OTLP specification defines beside protobuf. It exists to
// keep nb's binary small: the stock OTLP exporter links protobuf and the
// generated OTLP packages (about 11 MB more in nb).
//
// The JSON follows the OTLP rules: lowerCamelCase field names, trace and
// span ids as lower-case hex (not base64), 64-bit integers and nanosecond
// times as decimal strings, enums as their integer values.
package otlpjson

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// Exporter sends spans to one OTLP/HTTP traces endpoint.
type Exporter struct {
	url     string
	headers map[string]string
	client  *http.Client
}

// New returns an exporter posting to url (the whole address, ending in
// /v1/traces) with headers on every request; nil client means one with a
// 10 s timeout, as the OTLP exporter's default.
func New(url string, headers map[string]string, client *http.Client) *Exporter {
	if client == nil {
		client = &http.Client{Timeout: 10 * time.Second}
	}
	return &Exporter{url: url, headers: headers, client: client}
}

// ExportSpans posts spans as one ExportTraceServiceRequest.
func (e *Exporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	if len(spans) == 0 {
		return nil
	}
	body, err := json.Marshal(Encode(spans))
	if err != nil {
		return fmt.Errorf("otlp: encode spans: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.url, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("otlp: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "nb (Nano Bots)")
	for k, v := range e.headers {
		req.Header.Set(k, v)
	}
	resp, err := e.client.Do(req)
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

// Shutdown does nothing: the exporter holds no resources.
func (e *Exporter) Shutdown(context.Context) error { return nil }

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
	TimeUnixNano string     `json:"timeUnixNano"`
	Name         string     `json:"name"`
	Attributes   []KeyValue `json:"attributes,omitempty"`
}

// Link points at another span.
type Link struct {
	TraceID    string     `json:"traceId"`
	SpanID     string     `json:"spanId"`
	TraceState string     `json:"traceState,omitempty"`
	Attributes []KeyValue `json:"attributes,omitempty"`
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

// AnyValue holds one of its fields.
type AnyValue struct {
	StringValue *string     `json:"stringValue,omitempty"`
	BoolValue   *bool       `json:"boolValue,omitempty"`
	IntValue    *string     `json:"intValue,omitempty"`
	DoubleValue any         `json:"doubleValue,omitempty"` // a float64, or "NaN", "Infinity", "-Infinity"
	ArrayValue  *ArrayValue `json:"arrayValue,omitempty"`
}

// ArrayValue is a list of values.
type ArrayValue struct {
	Values []AnyValue `json:"values"`
}

// Encode maps spans to the request that carries them, grouped by
// resource and scope in the order they come.
func Encode(spans []sdktrace.ReadOnlySpan) Request {
	var req Request
	type scopeKey struct {
		res   int
		scope string
	}
	resIdx := map[string]int{}
	scopeIdx := map[scopeKey]int{}
	for _, s := range spans {
		rk := ""
		var rattrs []attribute.KeyValue
		if r := s.Resource(); r != nil {
			rk = r.Encoded(attribute.DefaultEncoder())
			rattrs = r.Attributes()
		}
		ri, ok := resIdx[rk]
		if !ok {
			ri = len(req.ResourceSpans)
			resIdx[rk] = ri
			req.ResourceSpans = append(req.ResourceSpans, ResourceSpans{Resource: Resource{Attributes: keyValues(rattrs)}})
		}
		sc := s.InstrumentationScope()
		sk := scopeKey{ri, sc.Name + "\x00" + sc.Version}
		si, ok := scopeIdx[sk]
		if !ok {
			si = len(req.ResourceSpans[ri].ScopeSpans)
			scopeIdx[sk] = si
			req.ResourceSpans[ri].ScopeSpans = append(req.ResourceSpans[ri].ScopeSpans, ScopeSpans{Scope: Scope{Name: sc.Name, Version: sc.Version}})
		}
		ss := &req.ResourceSpans[ri].ScopeSpans[si]
		ss.Spans = append(ss.Spans, span(s))
	}
	return req
}

func span(s sdktrace.ReadOnlySpan) Span {
	sc := s.SpanContext()
	out := Span{
		TraceID:           traceID(sc.TraceID()),
		SpanID:            spanID(sc.SpanID()),
		TraceState:        sc.TraceState().String(),
		Flags:             uint32(sc.TraceFlags()),
		Name:              s.Name(),
		Kind:              kind(s.SpanKind()),
		StartTimeUnixNano: nanos(s.StartTime()),
		EndTimeUnixNano:   nanos(s.EndTime()),
		Attributes:        keyValues(s.Attributes()),
		DroppedAttributes: s.DroppedAttributes(),
		DroppedEvents:     s.DroppedEvents(),
		DroppedLinks:      s.DroppedLinks(),
	}
	// Bit 8 (0x100) says whether the parent is known to be remote, bit 9
	// whether it is; the low 8 bits are the W3C trace flags.
	out.Flags |= 0x100
	if p := s.Parent(); p.IsValid() {
		out.ParentSpanID = spanID(p.SpanID())
		if p.IsRemote() {
			out.Flags |= 0x200
		}
	}
	for _, e := range s.Events() {
		out.Events = append(out.Events, Event{TimeUnixNano: nanos(e.Time), Name: e.Name, Attributes: keyValues(e.Attributes)})
	}
	for _, l := range s.Links() {
		out.Links = append(out.Links, Link{TraceID: traceID(l.SpanContext.TraceID()), SpanID: spanID(l.SpanContext.SpanID()),
			TraceState: l.SpanContext.TraceState().String(), Attributes: keyValues(l.Attributes)})
	}
	if st := s.Status(); st.Code != 0 || st.Description != "" {
		// otel's codes: Unset 0, Error 1, Ok 2; OTLP's: Unset 0, Ok 1, Error 2.
		code := 0
		switch st.Code.String() {
		case "Ok":
			code = 1
		case "Error":
			code = 2
		}
		out.Status = &Status{Code: code, Message: st.Description}
	}
	return out
}

func traceID(id trace.TraceID) string {
	if !id.IsValid() {
		return ""
	}
	return hex.EncodeToString(id[:])
}

func spanID(id trace.SpanID) string {
	if !id.IsValid() {
		return ""
	}
	return hex.EncodeToString(id[:])
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

func nanos(t time.Time) string {
	if t.IsZero() {
		return "0"
	}
	return strconv.FormatInt(t.UnixNano(), 10)
}

func keyValues(attrs []attribute.KeyValue) []KeyValue {
	if len(attrs) == 0 {
		return nil
	}
	out := make([]KeyValue, 0, len(attrs))
	for _, a := range attrs {
		out = append(out, KeyValue{Key: string(a.Key), Value: value(a.Value)})
	}
	return out
}

func value(v attribute.Value) AnyValue {
	switch v.Type() {
	case attribute.BOOL:
		b := v.AsBool()
		return AnyValue{BoolValue: &b}
	case attribute.INT64:
		s := strconv.FormatInt(v.AsInt64(), 10)
		return AnyValue{IntValue: &s}
	case attribute.FLOAT64:
		return double(v.AsFloat64())
	case attribute.STRING:
		s := v.AsString()
		return AnyValue{StringValue: &s}
	case attribute.BOOLSLICE:
		var vs []AnyValue
		for _, b := range v.AsBoolSlice() {
			vs = append(vs, value(attribute.BoolValue(b)))
		}
		return AnyValue{ArrayValue: &ArrayValue{Values: nonNil(vs)}}
	case attribute.INT64SLICE:
		var vs []AnyValue
		for _, n := range v.AsInt64Slice() {
			vs = append(vs, value(attribute.Int64Value(n)))
		}
		return AnyValue{ArrayValue: &ArrayValue{Values: nonNil(vs)}}
	case attribute.FLOAT64SLICE:
		var vs []AnyValue
		for _, f := range v.AsFloat64Slice() {
			vs = append(vs, double(f))
		}
		return AnyValue{ArrayValue: &ArrayValue{Values: nonNil(vs)}}
	case attribute.STRINGSLICE:
		var vs []AnyValue
		for _, s := range v.AsStringSlice() {
			vs = append(vs, value(attribute.StringValue(s)))
		}
		return AnyValue{ArrayValue: &ArrayValue{Values: nonNil(vs)}}
	}
	s := v.Emit()
	return AnyValue{StringValue: &s}
}

// double is a float value; JSON has no NaN or infinities, so those are
// the strings protobuf's JSON mapping uses.
func double(f float64) AnyValue {
	switch {
	case math.IsNaN(f):
		return AnyValue{DoubleValue: "NaN"}
	case math.IsInf(f, 1):
		return AnyValue{DoubleValue: "Infinity"}
	case math.IsInf(f, -1):
		return AnyValue{DoubleValue: "-Infinity"}
	}
	return AnyValue{DoubleValue: f}
}

func nonNil(vs []AnyValue) []AnyValue {
	if vs == nil {
		return []AnyValue{}
	}
	return vs
}
