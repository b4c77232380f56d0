package tracing

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nbots/nb/tracing/otlpjson"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// Bad variables are errors naming the variable, never showing a header's
// value; without an endpoint tracing stays off.
func TestFromEnv(t *testing.T) {
	for _, c := range []struct {
		vars map[string]string
		want string
	}{
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "localhost:4318"}, "OTEL_EXPORTER_OTLP_ENDPOINT"},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x", "OTEL_EXPORTER_OTLP_HEADERS": "authorization"}, "OTEL_EXPORTER_OTLP_HEADERS"},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x", "OTEL_EXPORTER_OTLP_HEADERS": "api-key=sec%zzret"}, "the value of api-key"},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x", "OTEL_TRACES_SAMPLER": "sometimes"}, "OTEL_TRACES_SAMPLER"},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x", "OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "2"}, "OTEL_TRACES_SAMPLER_ARG"},
	} {
		_, err := FromEnv(env(c.vars))
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "sec") {
			t.Errorf("%v: %v", c.vars, err)
		}
	}
	c, err := FromEnv(env(map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "https://otlp.example:4318", "OTEL_EXPORTER_OTLP_HEADERS": "api-key=a%20b, x-tenant = t1"}))
	if err != nil || c.Headers["Api-Key"] != "a b" || c.Headers["X-Tenant"] != "t1" || c.ServiceName != "nb" {
		t.Errorf("%+v %v", c, err)
	}
	stop, err := Setup(env(nil), "test")
	if err != nil || Enabled() {
		t.Fatal("tracing on without an endpoint")
	}
	stop(context.Background()) //nolint:errcheck // nothing to stop
}

// The exporter posts OTLP's JSON encoding: hex ids, integers and times as
// strings, the span tree, OTLP's status codes; log lines name the span.
func TestExportJSON(t *testing.T) {
	var mu sync.Mutex
	var bodies [][]byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, b)
		mu.Unlock()
		if r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/json" || r.Header.Get("Authorization") != "Bearer t" {
			w.WriteHeader(400)
		}
	}))
	defer srv.Close()
	stop, err := Setup(env(map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": srv.URL + "/", "OTEL_EXPORTER_OTLP_HEADERS": "Authorization=Bearer%20t"}), "1.2.3")
	if err != nil || !Enabled() {
		t.Fatal(err)
	}
	var logs strings.Builder
	log := slog.New(LogHandler(slog.NewJSONHandler(&logs, nil)))
	ctx, agent := StartAgent(context.Background(), "Echo")
	cctx, chat := StartChat(ctx, "google", "gemini")
	log.InfoContext(cctx, "calling")
	EndChat(chat, ChatResult{ResponseModel: "gemini-001", InputTokens: 12, OutputTokens: 3, FinishReasons: []string{"stop"}}, nil)
	_, tool := StartTool(ctx, "get-weather", "call_1")
	EndTool(tool, true, nil)
	End(agent, errors.New("boom"))
	if err := stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if Enabled() {
		t.Error("still on after stop")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(bodies) != 1 {
		t.Fatalf("%d requests", len(bodies))
	}
	var req otlpjson.Request
	if err := json.Unmarshal(bodies[0], &req); err != nil || len(req.ResourceSpans) != 1 {
		t.Fatalf("%v %s", err, bodies[0])
	}
	spans := map[string]otlpjson.Span{}
	for _, s := range req.ResourceSpans[0].ScopeSpans[0].Spans {
		spans[s.Name] = s
	}
	a, c, tl := spans["invoke_agent Echo"], spans["chat gemini"], spans["execute_tool get-weather"]
	if len(a.TraceID) != 32 || len(a.SpanID) != 16 || c.TraceID != a.TraceID || c.ParentSpanID != a.SpanID || tl.ParentSpanID != a.SpanID {
		t.Errorf("tree: %+v", spans)
	}
	if a.Status == nil || a.Status.Code != 2 || a.Status.Message != "boom" || c.Status != nil || tl.Status == nil || tl.Status.Code != 2 {
		t.Errorf("statuses: agent %+v chat %+v tool %+v", a.Status, c.Status, tl.Status)
	}
	if c.Kind != 3 || a.Kind != 1 {
		t.Errorf("kinds %d %d", c.Kind, a.Kind)
	}
	for _, want := range []string{`"gen_ai.provider.name","value":{"stringValue":"gcp.gemini"}`, `"gen_ai.usage.input_tokens","value":{"intValue":"12"}`,
		`"gen_ai.response.finish_reasons","value":{"arrayValue":{"values":[{"stringValue":"stop"}]}}`, `"startTimeUnixNano":"1`, `"service.version","value":{"stringValue":"1.2.3"}`} {
		if !strings.Contains(string(bodies[0]), want) {
			t.Errorf("no %s in %s", want, bodies[0])
		}
	}
	if !strings.Contains(logs.String(), `"trace_id":"`+c.TraceID+`","span_id":"`+c.SpanID+`"`) {
		t.Errorf("log line: %s", logs.String())
	}
}

// Off, a span costs nothing measurable: no allocation.
func TestOffAllocates(t *testing.T) {
	ctx := context.Background()
	n := testing.AllocsPerRun(1000, func() {
		c, s := StartChat(ctx, "openai", "m")
		EndChat(s, ChatResult{InputTokens: 1}, nil)
		c2, s2 := StartTool(c, "t", "id")
		EndTool(s2, false, nil)
		Inject(c2, nil)
	})
	if n != 0 {
		t.Errorf("%v allocations per call with tracing off", n)
	}
}

// cpuTime is the process's user and system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru) //nolint:errcheck // never fails
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// loop runs b's loop over op, reporting the CPU time per op of the whole
// process (all goroutines: export and the test's receiver included),
// which a busy machine does not inflate as it does the wall time. With
// tracing on, the spans are exported every batch (every ops), so that
// none is dropped and their export is counted; dropped/op says so.
func loop(b *testing.B, every int, op func()) {
	var dropped atomic.Int64
	if every > 0 {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.Copy(io.Discard, r.Body) }))
		defer srv.Close()
		stop := Enable(Config{Endpoint: srv.URL, ServiceName: "nb", OnError: func(err error) {
			var n int64
			if _, e := fmt.Sscanf(err.Error(), "%d spans dropped", &n); e == nil {
				dropped.Add(n)
			}
		}}, "b")
		defer stop(context.Background()) //nolint:errcheck // benchmark
	}
	flush := func() {
		if s := current.Load(); s != nil {
			s.rec.flush(context.Background(), false) //nolint:errcheck // benchmark
		}
	}
	cpu := cpuTime()
	i := 0
	for b.Loop() {
		op()
		if i++; every > 0 && i%every == 0 {
			flush()
		}
	}
	flush()
	b.ReportMetric(float64(cpuTime()-cpu)/float64(b.N), "cpu-ns/op")
	b.ReportMetric(float64(dropped.Load())/float64(b.N), "dropped/op")
}

// twoSpans are the spans of a provider call with a tool call.
func twoSpans() {
	ctx := context.Background()
	c, s := StartChat(ctx, "openai", "m")
	EndChat(s, ChatResult{InputTokens: 1}, nil)
	_, s2 := StartTool(c, "t", "id")
	EndTool(s2, false, nil)
}

func BenchmarkSpanOff(b *testing.B) { loop(b, 0, twoSpans) }

func BenchmarkSpanOn(b *testing.B) { loop(b, maxBatch/2, twoSpans) }

// request is what a request of nb serve to /v1/chat/completions does
// with tracing: its span, the agent exchange's, the provider call's with
// its traceparent and its answer's attributes.
func request(r *http.Request, h http.Header) func() {
	return func() {
		ctx, srv := StartServer(r)
		ctx, agent := StartAgent(ctx, "bench")
		cctx, chat := StartChat(ctx, "openai", "gpt-4o-mini")
		Inject(cctx, h)
		EndChat(chat, ChatResult{ResponseModel: "gpt-4o-mini-2024-07-18", InputTokens: 12, OutputTokens: 6, FinishReasons: []string{"stop"}}, nil)
		End(agent, nil)
		EndServer(srv, http.MethodPost, "POST /v1/chat/completions", 200)
	}
}

func BenchmarkSpanRequestOff(b *testing.B) {
	loop(b, 0, request(httptest.NewRequest(http.MethodPost, "/v1/chat/completions", nil), http.Header{}))
}

func BenchmarkSpanRequestOn(b *testing.B) {
	loop(b, maxBatch/3, request(httptest.NewRequest(http.MethodPost, "/v1/chat/completions", nil), http.Header{}))
}
