package tracing

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/nbots/nb/tracing/otlpjson"
)

// collector is an OTLP/HTTP receiver in the test: it keeps the spans it
// decodes, and can hold its answers until release is closed.
type collector struct {
	srv     *httptest.Server
	mu      sync.Mutex
	spans   []otlpjson.Span
	scopes  []string
	hold    chan struct{}
	arrived chan struct{}
}

func newCollector(t *testing.T) *collector {
	c := &collector{arrived: make(chan struct{}, 100)}
	c.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		dec := json.NewDecoder(strings.NewReader(string(body)))
		dec.DisallowUnknownFields()
		var req otlpjson.Request
		if err := dec.Decode(&req); err != nil {
			t.Errorf("undecodable export: %v\n%s", err, body)
		}
		c.mu.Lock()
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				c.scopes = append(c.scopes, ss.Scope.Name)
				c.spans = append(c.spans, ss.Spans...)
			}
		}
		hold := c.hold
		c.mu.Unlock()
		c.arrived <- struct{}{}
		if hold != nil {
			<-hold
		}
	}))
	t.Cleanup(c.srv.Close)
	return c
}

func (c *collector) byName() map[string]otlpjson.Span {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := map[string]otlpjson.Span{}
	for _, s := range c.spans {
		m[s.Name] = s
	}
	return m
}

// enable turns tracing on to c with sampler, and returns the function
// that flushes and turns it off.
func enable(t *testing.T, c *collector, sampler Sampler, onError func(error)) func() {
	stop := Enable(Config{Endpoint: c.srv.URL, ServiceName: "nb", Sampler: sampler, OnError: onError}, "t")
	return func() {
		if err := stop(context.Background()); err != nil {
			t.Error(err)
		}
	}
}

func sampler(t *testing.T, name, arg string) Sampler {
	t.Helper()
	s, err := parseSampler(name, arg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Each standard sampler decides as the specification says: for a root
// span, and under a remote parent that was sampled or not.
func TestSamplers(t *testing.T) {
	remote := func(sampled bool) trace.SpanContext {
		c := trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}, Remote: true}
		if sampled {
			c.TraceFlags = trace.FlagsSampled
		}
		return trace.NewSpanContext(c)
	}
	// Trace ids whose last 8 bytes are a quarter and three quarters of
	// the way: a ratio of 0.5 samples the first only.
	low, high := trace.TraceID{}, trace.TraceID{}
	binary.BigEndian.PutUint64(low[8:], 1<<62)
	binary.BigEndian.PutUint64(high[8:], 3<<62)
	for _, c := range []struct {
		name, arg                     string
		rootLow, rootHigh, under, not bool
	}{
		{"", "", true, true, true, false},
		{"parentbased_always_on", "", true, true, true, false},
		{"always_on", "", true, true, true, true},
		{"always_off", "", false, false, false, false},
		{"parentbased_always_off", "", false, false, true, false},
		{"traceidratio", "0.5", true, false, true, true},
		{"traceidratio", "", true, true, true, true},
		{"traceidratio", "0", false, false, false, false},
		{"parentbased_traceidratio", "0.5", true, false, true, false},
		{"PARENTBASED_TRACEIDRATIO", "1", true, true, true, false},
	} {
		s := sampler(t, c.name, c.arg)
		got := [4]bool{s.sample(trace.SpanContext{}, low), s.sample(trace.SpanContext{}, high), s.sample(remote(true), low), s.sample(remote(false), low)}
		if want := [4]bool{c.rootLow, c.rootHigh, c.under, c.not}; got != want {
			t.Errorf("%s %s: root, root, under sampled, under not sampled = %v, want %v", c.name, c.arg, got, want)
		}
	}
}

// A span the sampler leaves out is not exported, but its context goes
// on: the provider is sent a traceparent with the sampled flag off, and
// the children stay in the trace (and out of the export).
func TestSampledOut(t *testing.T) {
	c := newCollector(t)
	stop := enable(t, c, sampler(t, "parentbased_traceidratio", "0"), nil)
	ctx, root := StartAgent(context.Background(), "A")
	cctx, chat := StartChat(ctx, "openai", "m")
	h := http.Header{}
	Inject(cctx, h)
	EndChat(chat, ChatResult{}, nil)
	End(root, nil)
	stop()
	if root.IsRecording() || !root.SpanContext().IsValid() || root.SpanContext().IsSampled() {
		t.Errorf("sampled-out root: recording %v, context %+v", root.IsRecording(), root.SpanContext())
	}
	want := fmt.Sprintf("00-%s-%s-00", root.SpanContext().TraceID(), chat.SpanContext().SpanID())
	if got := h.Get("Traceparent"); got != want || chat.SpanContext().TraceID() != root.SpanContext().TraceID() {
		t.Errorf("traceparent %q, want %q", got, want)
	}
	if n := len(c.byName()); n != 0 {
		t.Errorf("%d spans exported", n)
	}
}

// A traceparent that says sampled is followed by the default sampler,
// and the request's span joins that trace as a remote child.
func TestServerContinuesTrace(t *testing.T) {
	c := newCollector(t)
	stop := enable(t, c, Sampler{}, nil)
	r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", nil)
	r.Header.Set("Traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	r.Header.Set("Tracestate", "vendor=x")
	_, span := StartServer(r)
	EndServer(span, http.MethodPost, "/v1/chat/completions", 502)
	stop()
	s, ok := c.byName()["POST /v1/chat/completions"]
	if !ok {
		t.Fatalf("spans %v", c.byName())
	}
	if s.TraceID != "4bf92f3577b34da6a3ce929d0e0e4736" || s.ParentSpanID != "00f067aa0ba902b7" || s.Flags != 0x301 || s.TraceState != "vendor=x" || s.Kind != 2 {
		t.Errorf("request span %+v", s)
	}
	if s.Status == nil || s.Status.Code != 2 {
		t.Errorf("status %+v", s.Status)
	}
}

// The API as other code sees it: a tracer of another scope, start
// options, attributes set again and beyond the limit, events, links,
// status precedence, and nothing after End.
func TestSpanAPI(t *testing.T) {
	c := newCollector(t)
	stop := enable(t, c, Sampler{}, nil)
	_, nbSpan := StartAgent(context.Background(), "A")
	tr := nbSpan.TracerProvider().Tracer("other/lib", trace.WithInstrumentationVersion("2"))
	if nbSpan.TracerProvider().Tracer(ScopeName, trace.WithInstrumentationVersion("t")) != current.Load().rec.tracer {
		t.Error("nb's scope gives another tracer")
	}
	at := time.Unix(1700000000, 5)
	link := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{9}, SpanID: trace.SpanID{8}, Remote: true})
	ctx, s := tr.Start(trace.ContextWithSpan(context.Background(), nbSpan), "op", trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(attribute.Int("n", 1)), trace.WithTimestamp(at), trace.WithLinks(trace.Link{SpanContext: link}))
	if trace.SpanFromContext(ctx) != s {
		t.Error("the context does not hold the span")
	}
	for i := range maxAttributes + 2 {
		s.SetAttributes(attribute.Int(fmt.Sprintf("a%d", i), i))
	}
	s.SetAttributes(attribute.Int("n", 2), attribute.String("", "invalid"))
	s.AddEvent("ev", trace.WithAttributes(attribute.Bool("b", true)))
	s.RecordError(errors.New("bad"))
	s.SetStatus(codes.Ok, "ignored")
	s.SetStatus(codes.Error, "too late")
	s.SetName("renamed")
	s.End(trace.WithTimestamp(at.Add(time.Second)))
	s.SetName("after end")
	s.SetAttributes(attribute.Int("after", 1))
	s.End()
	_, root := tr.Start(ctx, "root", trace.WithNewRoot())
	root.End()
	End(nbSpan, nil)
	stop()

	spans := c.byName()
	got, ok := spans["renamed"]
	if !ok || len(spans) != 3 {
		t.Fatalf("spans %v", spans)
	}
	if got.Kind != 4 || got.StartTimeUnixNano != "1700000000000000005" || got.EndTimeUnixNano != "1700000001000000005" || got.ParentSpanID != spans["invoke_agent A"].SpanID {
		t.Errorf("span %+v", got)
	}
	if len(got.Attributes) != maxAttributes || got.DroppedAttributes != 3 || got.Attributes[0].Key != "n" || *got.Attributes[0].Value.IntValue != "2" {
		t.Errorf("%d attributes, %d dropped, first %+v", len(got.Attributes), got.DroppedAttributes, got.Attributes[0])
	}
	if len(got.Events) != 2 || got.Events[0].Name != "ev" || got.Events[1].Name != "exception" ||
		attrOf(got.Events[1].Attributes, "exception.message") != "bad" || attrOf(got.Events[1].Attributes, "exception.type") != "*errors.errorString" {
		t.Errorf("events %+v", got.Events)
	}
	if len(got.Links) != 1 || got.Links[0].TraceID != link.TraceID().String() || got.Links[0].Flags != 0x300 {
		t.Errorf("links %+v", got.Links)
	}
	if got.Status == nil || got.Status.Code != 1 || got.Status.Message != "" {
		t.Errorf("status %+v, want ok", got.Status)
	}
	if r := spans["root"]; r.ParentSpanID != "" || r.TraceID == got.TraceID {
		t.Errorf("new root %+v", r)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if strings.Join(c.scopes, " ") != "other/lib "+ScopeName {
		t.Errorf("scopes %v", c.scopes)
	}
}

func attrOf(kvs []otlpjson.KeyValue, key string) string {
	for _, kv := range kvs {
		if kv.Key == key && kv.Value.StringValue != nil {
			return *kv.Value.StringValue
		}
	}
	return ""
}

// With the collector stuck, the queue fills: a span that ends then is
// dropped and counted, never waited for; the rest are exported once the
// collector answers.
func TestQueueFullDrops(t *testing.T) {
	c := newCollector(t)
	c.hold = make(chan struct{})
	errs := make(chan error, 10)
	stop := enable(t, c, Sampler{}, func(err error) { errs <- err })
	for range maxBatch {
		_, s := StartTool(context.Background(), "t", "")
		EndTool(s, false, nil)
	}
	<-c.arrived // the exporter is now waiting for the collector
	done := make(chan struct{})
	go func() {
		for range maxQueue + 5 {
			_, s := StartTool(context.Background(), "t", "")
			EndTool(s, false, nil)
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("ending a span waits for the export")
	}
	c.mu.Lock()
	close(c.hold)
	c.hold = nil
	c.mu.Unlock()
	stop()
	c.mu.Lock()
	n := len(c.spans)
	c.mu.Unlock()
	if n != maxBatch+maxQueue {
		t.Errorf("%d spans exported, want %d", n, maxBatch+maxQueue)
	}
	select {
	case err := <-errs:
		if err.Error() != "5 spans dropped: the export queue was full" {
			t.Errorf("error %v", err)
		}
	default:
		t.Error("the drops were not reported")
	}
}

// A collector that answers an error is reported through OnError, and
// stop gives the error of the last export.
func TestExportError(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "quota exceeded", http.StatusTooManyRequests)
	}))
	defer srv.Close()
	stop := Enable(Config{Endpoint: srv.URL}, "t")
	_, s := StartAgent(context.Background(), "A")
	End(s, nil)
	_, late := StartTool(context.Background(), "t", "")
	err := stop(context.Background())
	if err == nil || !strings.Contains(err.Error(), "429") || !strings.Contains(err.Error(), "quota exceeded") {
		t.Errorf("stop: %v", err)
	}
	if Enabled() {
		t.Error("still on")
	}
	// A span that ends after stop is dropped quietly.
	EndTool(late, false, nil)
}
