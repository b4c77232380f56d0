// Package tracing is nb's OpenTelemetry tracing: configured only by the
// standard OTEL_* variables, exported over OTLP/HTTP as JSON (see
// otlpjson), and off — a few atomic loads per span — when
// OTEL_EXPORTER_OTLP_ENDPOINT is unset. Spans follow the OpenTelemetry
// GenAI semantic conventions; W3C trace context comes in on nb's HTTP
// servers and goes out on its provider and MCP requests.
package tracing

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/nbots/nb/tracing/otlpjson"
)

// ScopeName is the instrumentation scope of nb's spans.
const ScopeName = "github.com/nbots/nb"

// state is what Setup configured; nil while tracing is off.
type state struct {
	rec     *recorder
	content bool
}

var current atomic.Pointer[state]

var (
	// noSpan is what the Start functions return while tracing is off:
	// it records nothing and ending it does nothing.
	noSpan = trace.SpanFromContext(context.Background())
	// propagator reads and writes the W3C traceparent and tracestate headers.
	propagator = propagation.TraceContext{}
)

// Span is an OpenTelemetry span, so that the packages nb instruments
// need not import otel's.
type Span = trace.Span

// NoSpan returns the span that records nothing.
func NoSpan() Span { return noSpan }

// Enabled reports whether spans are recorded and exported.
func Enabled() bool { return current.Load() != nil }

// Content reports whether message contents go into spans
// (NB_TRACE_CONTENT=1).
func Content() bool {
	s := current.Load()
	return s != nil && s.content
}

// start starts a span of nb's scope named name+suffix as a child of
// ctx's span, or returns noSpan while tracing is off.
func start(ctx context.Context, name, suffix string, kind trace.SpanKind, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	s := current.Load()
	if s == nil {
		return ctx, noSpan
	}
	return s.rec.start(ctx, trace.SpanContextFromContext(ctx), s.rec.scope, name, suffix, kind, attrs)
}

// set sets attrs on sp; nb's own spans copy them, so that attrs need
// not go to the heap.
func set(sp trace.Span, attrs ...attribute.KeyValue) {
	if s, ok := sp.(*span); ok {
		s.SetAttributes(attrs...)
		return
	}
	sp.SetAttributes(slices.Clone(attrs)...)
}

// setName names sp name+suffix.
func setName(sp trace.Span, name, suffix string) {
	if s, ok := sp.(*span); ok {
		s.setName(name, suffix)
		return
	}
	sp.SetName(name + suffix)
}

// Config is tracing's configuration, as the environment gives it.
type Config struct {
	// Endpoint is the OTLP/HTTP base address; spans go to
	// Endpoint + "/v1/traces". Empty means tracing is off.
	Endpoint string
	Headers  map[string]string
	// ServiceName is the service.name resource attribute ("nb").
	ServiceName string
	// Sampler decides which traces are recorded; the zero Sampler is
	// parentbased_always_on.
	Sampler Sampler
	// Content records message contents (NB_TRACE_CONTENT=1).
	Content bool
	// OnError, when not nil, is told of each failed export and of the
	// spans dropped because the export queue was full (from the
	// exporting goroutine, at most once per batch).
	OnError func(error)
}

// FromEnv reads the configuration: OTEL_EXPORTER_OTLP_ENDPOINT,
// OTEL_EXPORTER_OTLP_HEADERS, OTEL_SERVICE_NAME, OTEL_TRACES_SAMPLER
// and OTEL_TRACES_SAMPLER_ARG, and NB_TRACE_CONTENT. A value it cannot
// read is an error naming the variable.
func FromEnv(getenv func(string) string) (Config, error) {
	c := Config{Endpoint: strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_ENDPOINT")), ServiceName: getenv("OTEL_SERVICE_NAME")}
	if c.ServiceName == "" {
		c.ServiceName = "nb"
	}
	c.Content = getenv("NB_TRACE_CONTENT") == "1"
	if c.Endpoint == "" {
		return c, nil
	}
	u, err := url.Parse(c.Endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return c, fmt.Errorf("OTEL_EXPORTER_OTLP_ENDPOINT %q: want an http:// or https:// address such as http://localhost:4318", redact(c.Endpoint))
	}
	if c.Headers, err = parseHeaders(getenv("OTEL_EXPORTER_OTLP_HEADERS")); err != nil {
		return c, err
	}
	if c.Sampler, err = parseSampler(getenv("OTEL_TRACES_SAMPLER"), getenv("OTEL_TRACES_SAMPLER_ARG")); err != nil {
		return c, err
	}
	return c, nil
}

// Redact drops a password from an address, for messages.
func Redact(s string) string { return redact(s) }

func redact(s string) string {
	if u, err := url.Parse(s); err == nil && u.User != nil {
		u.User = url.User(u.User.Username())
		return u.String()
	}
	return s
}

// parseHeaders reads the W3C-baggage-like list key=value,key2=value2
// whose values are percent-encoded.
func parseHeaders(s string) (map[string]string, error) {
	h := map[string]string{}
	for _, part := range strings.Split(s, ",") {
		if strings.TrimSpace(part) == "" {
			continue
		}
		k, v, ok := strings.Cut(part, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			// The value may be a secret: only the key is named.
			return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_HEADERS: %q is not key=value", k)
		}
		dv, err := url.PathUnescape(strings.TrimSpace(v))
		if err != nil {
			return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_HEADERS: the value of %s is not percent-encoded", k)
		}
		h[http.CanonicalHeaderKey(k)] = dv
	}
	return h, nil
}

// Sampler decides whether a new span is recorded and exported, as
// OTEL_TRACES_SAMPLER names the standard samplers. The zero Sampler is
// the default, parentbased_always_on.
type Sampler struct {
	// root decides for a span without a parent (and, when ignoreParent
	// is set, for all).
	root         sampleMode
	ignoreParent bool
	// bound: a traceidratio samples a trace when the last 8 bytes of
	// its id, shifted right one bit, are below it (as the OpenTelemetry
	// SDK does).
	bound uint64
}

type sampleMode uint8

const (
	sampleAlways sampleMode = iota
	sampleNever
	sampleRatio
)

// sample decides for a span of trace tid whose parent is parent.
func (s Sampler) sample(parent trace.SpanContext, tid trace.TraceID) bool {
	if !s.ignoreParent && parent.IsValid() {
		return parent.IsSampled()
	}
	switch s.root {
	case sampleNever:
		return false
	case sampleRatio:
		return binary.BigEndian.Uint64(tid[8:16])>>1 < s.bound
	}
	return true
}

// ratioSampler samples the fraction f of new traces.
func ratioSampler(f float64, ignoreParent bool) Sampler {
	switch {
	case f >= 1:
		return Sampler{root: sampleAlways, ignoreParent: ignoreParent}
	case f <= 0:
		return Sampler{root: sampleNever, ignoreParent: ignoreParent}
	}
	return Sampler{root: sampleRatio, ignoreParent: ignoreParent, bound: uint64(f * (1 << 63))}
}

// parseSampler reads OTEL_TRACES_SAMPLER (default parentbased_always_on).
func parseSampler(name, arg string) (Sampler, error) {
	ratio := func() (float64, error) {
		if arg == "" {
			return 1, nil
		}
		f, err := strconv.ParseFloat(arg, 64)
		if err != nil || f < 0 || f > 1 {
			return 0, fmt.Errorf("OTEL_TRACES_SAMPLER_ARG %q: want a ratio from 0 to 1", arg)
		}
		return f, nil
	}
	switch strings.ToLower(strings.TrimSpace(name)) {
	case "", "parentbased_always_on":
		return Sampler{}, nil
	case "always_on":
		return Sampler{ignoreParent: true}, nil
	case "always_off":
		return Sampler{root: sampleNever, ignoreParent: true}, nil
	case "parentbased_always_off":
		return Sampler{root: sampleNever}, nil
	case "traceidratio":
		f, err := ratio()
		return ratioSampler(f, true), err
	case "parentbased_traceidratio":
		f, err := ratio()
		return ratioSampler(f, false), err
	}
	return Sampler{}, fmt.Errorf("OTEL_TRACES_SAMPLER %q: use always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off or parentbased_traceidratio", name)
}

// Setup starts tracing as the environment says, for a command whose
// version is version. When OTEL_EXPORTER_OTLP_ENDPOINT is unset it does
// nothing. stop flushes the spans not yet sent (within ctx) and turns
// tracing off again; it is never nil.
func Setup(getenv func(string) string, version string) (stop func(context.Context) error, err error) {
	c, err := FromEnv(getenv)
	if err != nil || c.Endpoint == "" {
		return func(context.Context) error { return nil }, err
	}
	return Enable(c, version), nil
}

// Enable turns tracing on with c (whose Endpoint must be set) and returns
// the function that flushes and turns it off.
func Enable(c Config, version string) func(context.Context) error {
	// The resource's attributes, sorted by key as OpenTelemetry's
	// resources are. The SDK is nb's own recorder: telemetry.sdk.name
	// names its package, as the semantic conventions ask of SDKs other
	// than OpenTelemetry's.
	res := []attribute.KeyValue{
		attribute.String("service.name", c.ServiceName),
		attribute.String("service.version", version),
		attribute.String("telemetry.sdk.language", "go"),
		attribute.String("telemetry.sdk.name", "github.com/nbots/nb/tracing"),
		attribute.String("telemetry.sdk.version", version),
	}
	exp := otlpjson.New(strings.TrimRight(c.Endpoint, "/")+"/v1/traces", c.Headers, res, nil)
	rec := newRecorder(exp, c.Sampler, &otlpjson.Scope{Name: ScopeName, Version: version}, c.OnError)
	st := &state{rec: rec, content: c.Content}
	current.Store(st)
	return func(ctx context.Context) error {
		current.CompareAndSwap(st, nil)
		return rec.shutdown(ctx)
	}
}

// Inject writes the trace context of ctx into h (traceparent, and
// tracestate when there is one) so that the server h is sent to can
// continue the trace. Without a span in ctx it writes nothing.
func Inject(ctx context.Context, h http.Header) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return
	}
	propagator.Inject(ctx, header(h))
}

// header is an http.Header as the propagator's carrier, without
// canonicalising the two keys it asks for at each request.
type header http.Header

func canonical(key string) string {
	switch key {
	case "traceparent":
		return "Traceparent"
	case "tracestate":
		return "Tracestate"
	}
	return http.CanonicalHeaderKey(key)
}

func (h header) Get(key string) string {
	if v := h[canonical(key)]; len(v) > 0 {
		return v[0]
	}
	return ""
}

func (h header) Set(key, value string) { h[canonical(key)] = []string{value} }

func (h header) Keys() []string {
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	return keys
}

// StartServer starts the span of one HTTP request a server received,
// continuing the trace of its traceparent header. The span is named by
// the method until EndServer names its route.
func StartServer(r *http.Request) (context.Context, trace.Span) {
	ctx := r.Context()
	if !Enabled() {
		return ctx, noSpan
	}
	ctx = propagator.Extract(ctx, header(r.Header))
	return start(ctx, r.Method, "", trace.SpanKindServer,
		attribute.String("http.request.method", r.Method),
		attribute.String("url.path", r.URL.Path))
}

// EndServer ends a StartServer span with the answer's status (0: none
// was sent) and the route that served it (a net/http pattern such as
// "POST /v1/chat/completions" or "/healthz", "" when none did).
func EndServer(span trace.Span, method, route string, status int) {
	if !span.IsRecording() {
		return
	}
	var buf [3]attribute.KeyValue
	attrs := buf[:0]
	if route != "" {
		if _, path, ok := strings.Cut(route, " "); ok {
			setName(span, route, "")
			route = path
		} else {
			setName(span, methodPrefix(method), route)
		}
		attrs = append(attrs, attribute.String("http.route", route))
	}
	if status > 0 {
		attrs = append(attrs, attribute.Int("http.response.status_code", status))
	}
	if status >= 500 {
		span.SetStatus(codes.Error, "")
		attrs = append(attrs, attribute.String("error.type", strconv.Itoa(status)))
	}
	set(span, attrs...)
	span.End()
}

// methodPrefix is method and a space.
func methodPrefix(method string) string {
	switch method {
	case http.MethodGet:
		return "GET "
	case http.MethodPost:
		return "POST "
	case http.MethodPut:
		return "PUT "
	case http.MethodDelete:
		return "DELETE "
	}
	return method + " "
}

// End ends span, marking it failed when err is not nil.
func End(span trace.Span, err error) {
	if !span.IsRecording() {
		return
	}
	if err != nil {
		Fail(span, err)
	}
	span.End()
}

// Fail marks span failed with err: its status, error.type and an
// exception event.
func Fail(span trace.Span, err error) {
	span.SetStatus(codes.Error, err.Error())
	set(span, attribute.String("error.type", errorType(err)))
	span.RecordError(err)
}

// errorType is a low-cardinality name for err: context ends by name,
// others by their Go type.
func errorType(err error) string {
	switch {
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	}
	t := fmt.Sprintf("%T", err)
	if t == "*errors.errorString" || t == "*fmt.wrapError" || t == "*fmt.wrapErrors" {
		return "_OTHER"
	}
	return strings.TrimPrefix(t, "*")
}

// Transport wraps base (nil: http.DefaultTransport) so that each request
// carries the trace context of its own context (see Inject).
func Transport(base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return &transport{base: base}
}

type transport struct{ base http.RoundTripper }

func (t *transport) RoundTrip(r *http.Request) (*http.Response, error) {
	if !Enabled() || !trace.SpanContextFromContext(r.Context()).IsValid() || r.Header.Get("Traceparent") != "" {
		return t.base.RoundTrip(r)
	}
	r = r.Clone(r.Context()) // a RoundTripper must not change its request
	Inject(r.Context(), r.Header)
	return t.base.RoundTrip(r)
}

// TraceParent returns the traceparent of ctx's span, "" without one: for
// protocols that carry it in their messages (MCP's _meta).
func TraceParent(ctx context.Context) string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ""
	}
	c := propagation.MapCarrier{}
	propagator.Inject(ctx, c)
	return c["traceparent"]
}
