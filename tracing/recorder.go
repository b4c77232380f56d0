package tracing

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"reflect"
	"runtime"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/embedded"

	"github.com/nbots/nb/tracing/otlpjson"
)

// nb records its spans itself, implementing the OpenTelemetry trace API
// (trace.TracerProvider, Tracer and Span): what it needs of an SDK is
// ids, sampling, a span's fields, a queue and batches, and the general
// SDK's options, processors and per-span allocations cost several times
// more per request. A span's record has room for its attributes inline
// and is reused once exported; an ended span goes into a bounded queue
// (dropped and counted when it is full, never waiting); one goroutine
// takes the queue in batches and encodes them to OTLP/JSON (otlpjson)
// into one reused buffer.

// The limits of a span and of the queue, the SDK's defaults.
const (
	maxAttributes = 128 // per span, event and link
	maxEvents     = 128
	maxLinks      = 128
	maxQueue      = 2048
	maxBatch      = 512
)

// batchDelay is the longest an ended span waits to be exported.
const batchDelay = 2 * time.Second

// inlineAttributes is how many attributes a record holds without
// allocating: nb's spans have up to 10 (a model call that failed).
const inlineAttributes = 10

// record is what a recording span holds until it is exported.
type record struct {
	otlpjson.SpanData
	attrs [inlineAttributes]attribute.KeyValue
}

// reset empties d for another span, letting go of its strings.
func (d *record) reset() {
	clear(d.attrs[:min(len(d.Attributes), inlineAttributes)])
	d.SpanData = otlpjson.SpanData{}
}

// setAttributes sets kvs on d: a key it already has takes the new value;
// beyond the limit, new keys are dropped and counted.
func (d *record) setAttributes(kvs []attribute.KeyValue) {
outer:
	for _, kv := range kvs {
		if !kv.Valid() {
			continue
		}
		for i := range d.Attributes {
			if d.Attributes[i].Key == kv.Key {
				d.Attributes[i].Value = kv.Value
				continue outer
			}
		}
		if len(d.Attributes) >= maxAttributes {
			d.DroppedAttributes++
			continue
		}
		d.Attributes = append(d.Attributes, kv)
	}
}

// limited returns at most maxAttributes of kvs (a copy) and how many it
// left out, for events and links.
func limited(kvs []attribute.KeyValue) ([]attribute.KeyValue, int) {
	dropped := 0
	if len(kvs) > maxAttributes {
		dropped = len(kvs) - maxAttributes
		kvs = kvs[:maxAttributes]
	}
	return append([]attribute.KeyValue(nil), kvs...), dropped
}

// maxFree is how many exported records the recorder keeps for new
// spans: two batches' (about 0.9 MB). The spans that end while a batch
// is exported need records too: with one batch's, BenchmarkServeWholeTraced
// allocated 0.7 KB more a request.
const maxFree = 2 * maxBatch

// recorder records, samples, queues and exports spans.
type recorder struct {
	sampler  Sampler
	scope    *otlpjson.Scope
	exp      *otlpjson.Exporter
	onError  func(error)
	provider *tracerProvider
	tracer   *tracer

	mu      sync.Mutex
	queue   []*record
	dropped int
	closed  bool
	// free are exported records, for new spans: a list of the
	// recorder's own rather than a sync.Pool, which the garbage
	// collector empties and which a record, taken by a request and
	// given back by the exporting goroutine, crosses from P to P.
	free []*record

	wake    chan struct{}
	flushes chan flushRequest
	done    chan struct{}
}

// flushRequest asks the exporting goroutine to export the queue now,
// within ctx, and to stop after when stop is set.
type flushRequest struct {
	ctx  context.Context
	stop bool
	err  chan error
}

func newRecorder(exp *otlpjson.Exporter, sampler Sampler, scope *otlpjson.Scope, onError func(error)) *recorder {
	if onError == nil {
		onError = func(error) {}
	}
	r := &recorder{sampler: sampler, scope: scope, exp: exp, onError: onError,
		queue: make([]*record, 0, maxQueue),
		wake:  make(chan struct{}, 1), flushes: make(chan flushRequest), done: make(chan struct{})}
	r.provider = &tracerProvider{r: r}
	r.tracer = &tracer{r: r, scope: scope}
	go r.run()
	return r
}

// start starts a span named name+suffix of kind as a child of parent
// (none when not valid), with attrs (copied), in ctx.
func (r *recorder) start(ctx context.Context, parent trace.SpanContext, scope *otlpjson.Scope, name, suffix string, kind trace.SpanKind, attrs []attribute.KeyValue) (context.Context, *span) {
	tid := parent.TraceID()
	if !tid.IsValid() {
		tid = newTraceID()
	}
	sid := newSpanID()
	flags := parent.TraceFlags() &^ trace.FlagsSampled
	sampled := r.sampler.sample(parent, tid)
	if sampled {
		flags |= trace.FlagsSampled
	}
	s := &span{r: r, sc: trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: flags, TraceState: parent.TraceState()})}
	if sampled {
		d := r.newRecord()
		d.Scope, d.TraceID, d.SpanID, d.TraceState, d.Flags = scope, tid, sid, parent.TraceState(), flags
		if parent.IsValid() {
			d.Parent, d.ParentRemote = parent.SpanID(), parent.IsRemote()
		}
		d.Name, d.NameSuffix, d.Kind, d.Start = name, suffix, trace.ValidateSpanKind(kind), time.Now()
		d.setAttributes(attrs)
		s.d = d
	}
	return trace.ContextWithSpan(ctx, s), s
}

// newRecord returns an empty record, an exported one when there is one.
func (r *recorder) newRecord() *record {
	var d *record
	r.mu.Lock()
	if n := len(r.free); n > 0 {
		d = r.free[n-1]
		r.free[n-1] = nil
		r.free = r.free[:n-1]
	}
	r.mu.Unlock()
	if d == nil {
		d = new(record)
	}
	d.Attributes = d.attrs[:0]
	return d
}

// recycle keeps ds (reset) for new spans, as many as maxFree.
func (r *recorder) recycle(ds []*record) {
	for _, d := range ds {
		d.reset()
	}
	r.mu.Lock()
	n := min(len(ds), maxFree-len(r.free))
	r.free = append(r.free, ds[:n]...)
	r.mu.Unlock()
}

// enqueue queues an ended span for export, or drops it when the queue is
// full or the recorder shut down.
func (r *recorder) enqueue(d *record) {
	r.mu.Lock()
	if r.closed || len(r.queue) >= maxQueue {
		if !r.closed {
			r.dropped++
		}
		r.mu.Unlock()
		return
	}
	r.queue = append(r.queue, d)
	full := len(r.queue) == maxBatch
	r.mu.Unlock()
	if full {
		select {
		case r.wake <- struct{}{}:
		default:
		}
	}
}

// run exports the queue every batchDelay, as soon as it holds a batch,
// or when asked to, until shutdown asks for the last export.
func (r *recorder) run() {
	defer close(r.done)
	timer := time.NewTimer(batchDelay)
	spare := make([]*record, 0, maxQueue)
	batch := make([]*otlpjson.SpanData, 0, maxBatch)
	for {
		var req *flushRequest
		select {
		case <-timer.C:
		case <-r.wake:
		case f := <-r.flushes:
			req = &f
		}
		stop := req != nil && req.stop
		r.mu.Lock()
		queue, all := r.queue, r.queue
		r.queue = spare
		dropped := r.dropped
		r.dropped = 0
		if stop {
			r.closed = true
		}
		r.mu.Unlock()
		if dropped > 0 {
			r.onError(fmt.Errorf("%d spans dropped: the export queue was full", dropped))
		}
		ctx := context.Background()
		if req != nil {
			ctx = req.ctx
		}
		var firstErr error
		for len(queue) > 0 {
			n := min(len(queue), maxBatch)
			batch = batch[:0]
			for _, d := range queue[:n] {
				batch = append(batch, &d.SpanData)
			}
			if err := r.exp.Export(ctx, batch); err != nil {
				if req == nil {
					r.onError(err)
				} else if firstErr == nil {
					firstErr = err
				}
			}
			r.recycle(queue[:n])
			clear(queue[:n])
			queue = queue[n:]
		}
		clear(batch[:cap(batch)])
		spare = all[:0]
		if req != nil {
			req.err <- firstErr
		}
		if stop {
			timer.Stop()
			return
		}
		timer.Reset(batchDelay)
	}
}

// shutdown exports the spans ended so far (within ctx) and stops the
// recorder: spans that end later are dropped.
func (r *recorder) shutdown(ctx context.Context) error { return r.flush(ctx, true) }

// flush exports the spans ended so far, within ctx, and stops the
// recorder when stop is set.
func (r *recorder) flush(ctx context.Context, stop bool) error {
	req := flushRequest{ctx: ctx, stop: stop, err: make(chan error, 1)}
	select {
	case r.flushes <- req:
	case <-r.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-req.err:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Trace ids are random (the W3C recommendation); span ids too.
func newTraceID() (id trace.TraceID) {
	for !id.IsValid() {
		binary.BigEndian.PutUint64(id[:8], rand.Uint64())
		binary.BigEndian.PutUint64(id[8:], rand.Uint64())
	}
	return id
}

func newSpanID() (id trace.SpanID) {
	for !id.IsValid() {
		binary.BigEndian.PutUint64(id[:], rand.Uint64())
	}
	return id
}

// span is nb's trace.Span. Its record is nil when it is not sampled and
// once it has ended; its SpanContext stays, for the contexts that hold it.
type span struct {
	embedded.Span
	r  *recorder
	sc trace.SpanContext

	mu sync.Mutex
	d  *record
}

var _ trace.Span = (*span)(nil)

func (s *span) SpanContext() trace.SpanContext { return s.sc }

func (s *span) IsRecording() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.d != nil
}

func (s *span) End(options ...trace.SpanEndOption) {
	s.mu.Lock()
	d := s.d
	s.d = nil
	s.mu.Unlock()
	if d == nil {
		return
	}
	// The end is the start plus the monotonic clock's duration.
	d.End = d.Start.Add(time.Since(d.Start))
	if len(options) > 0 {
		if c := trace.NewSpanEndConfig(options...); !c.Timestamp().IsZero() {
			d.End = c.Timestamp()
		}
	}
	s.r.enqueue(d)
}

func (s *span) SetAttributes(kv ...attribute.KeyValue) {
	s.mu.Lock()
	if s.d != nil {
		s.d.setAttributes(kv)
	}
	s.mu.Unlock()
}

func (s *span) SetName(name string) { s.setName(name, "") }

// setName names the span name+suffix.
func (s *span) setName(name, suffix string) {
	s.mu.Lock()
	if s.d != nil {
		s.d.Name, s.d.NameSuffix = name, suffix
	}
	s.mu.Unlock()
}

// SetStatus sets the status as the API says: Ok wins over Error, which
// wins over Unset; only Error keeps a description.
func (s *span) SetStatus(code codes.Code, description string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.d == nil || rank(s.d.Status) > rank(code) {
		return
	}
	s.d.Status, s.d.StatusMessage = code, ""
	if code == codes.Error {
		s.d.StatusMessage = description
	}
}

func rank(c codes.Code) int {
	switch c {
	case codes.Ok:
		return 2
	case codes.Error:
		return 1
	}
	return 0
}

func (s *span) AddEvent(name string, options ...trace.EventOption) {
	if !s.IsRecording() {
		return
	}
	c := trace.NewEventConfig(options...)
	s.addEvent(name, c.Timestamp(), c.Attributes())
}

func (s *span) addEvent(name string, at time.Time, attrs []attribute.KeyValue) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.d == nil {
		return
	}
	if len(s.d.Events) >= maxEvents {
		s.d.DroppedEvents++
		return
	}
	kvs, dropped := limited(attrs)
	s.d.Events = append(s.d.Events, otlpjson.EventData{Time: at, Name: name, Attributes: kvs, DroppedAttributes: dropped})
}

// RecordError adds an exception event for err, as the semantic
// conventions name it (exception.type, exception.message, and
// exception.stacktrace when asked for).
func (s *span) RecordError(err error, options ...trace.EventOption) {
	if err == nil || !s.IsRecording() {
		return
	}
	c := trace.NewEventConfig(options...)
	attrs := append(c.Attributes(), attribute.String("exception.type", typeName(err)), attribute.String("exception.message", err.Error()))
	if c.StackTrace() {
		buf := make([]byte, 8<<10)
		attrs = append(attrs, attribute.String("exception.stacktrace", string(buf[:runtime.Stack(buf, false)])))
	}
	s.addEvent("exception", c.Timestamp(), attrs)
}

// typeName is the type of v as the SDK names it: package path and name,
// or Go's spelling for the unnamed (*errors.errorString).
func typeName(v any) string {
	t := reflect.TypeOf(v)
	if t.PkgPath() == "" && t.Name() == "" {
		return t.String()
	}
	return t.PkgPath() + "." + t.Name()
}

func (s *span) AddLink(link trace.Link) {
	if !link.SpanContext.IsValid() && len(link.Attributes) == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.d == nil {
		return
	}
	if len(s.d.Links) >= maxLinks {
		s.d.DroppedLinks++
		return
	}
	kvs, dropped := limited(link.Attributes)
	s.d.Links = append(s.d.Links, otlpjson.LinkData{SpanContext: link.SpanContext, Attributes: kvs, DroppedAttributes: dropped})
}

func (s *span) TracerProvider() trace.TracerProvider { return s.r.provider }

// tracerProvider is the recorder as a trace.TracerProvider, for code
// written against the API.
type tracerProvider struct {
	embedded.TracerProvider
	r *recorder
}

// Tracer returns the tracer of the scope name: nb's own, or one that
// records into the same queue under its scope.
func (p *tracerProvider) Tracer(name string, options ...trace.TracerOption) trace.Tracer {
	c := trace.NewTracerConfig(options...)
	if name == p.r.scope.Name && c.InstrumentationVersion() == p.r.scope.Version {
		return p.r.tracer
	}
	return &tracer{r: p.r, scope: &otlpjson.Scope{Name: name, Version: c.InstrumentationVersion()}}
}

type tracer struct {
	embedded.Tracer
	r     *recorder
	scope *otlpjson.Scope
}

func (t *tracer) Start(ctx context.Context, name string, options ...trace.SpanStartOption) (context.Context, trace.Span) {
	c := trace.NewSpanStartConfig(options...)
	var parent trace.SpanContext
	if !c.NewRoot() {
		parent = trace.SpanContextFromContext(ctx)
	}
	ctx, s := t.r.start(ctx, parent, t.scope, name, "", c.SpanKind(), c.Attributes())
	if s.d != nil {
		if ts := c.Timestamp(); !ts.IsZero() {
			s.d.Start = ts
		}
		for _, l := range c.Links() {
			s.AddLink(l)
		}
	}
	return ctx, s
}
