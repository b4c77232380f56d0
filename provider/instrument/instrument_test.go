package instrument

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/nbots/nb/internal/metric"
	"github.com/nbots/nb/internal/metric/metrictest"
	"github.com/nbots/nb/provider"
	"github.com/nbots/nb/tracing"
	"github.com/nbots/nb/tracing/otlpjson"
)

// fake answers every call with a streamed event and some tokens.
type fake struct{}

func (fake) ID() string { return "openai" }

func (fake) Complete(_ context.Context, _ provider.Request, onEvent func(provider.Event)) (*provider.Response, error) {
	if onEvent != nil {
		onEvent(provider.Event{Kind: provider.TextDelta, Text: "hi"})
	}
	return &provider.Response{Text: "hi", Model: "served", Usage: provider.Usage{InputTokens: 5, OutputTokens: 2}}, nil
}

// One wrapper counts and traces each call with the model worked out
// once: the configuration's, or a client's override (counted as
// "override", traced by its name); an override's "" or a value that is
// not a name overrides nothing, for both.
func TestMetricsAndSpanAgreeOnTheModel(t *testing.T) {
	var mu sync.Mutex
	var bodies []string
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, string(b))
		mu.Unlock()
	}))
	defer sink.Close()
	stop, err := tracing.Setup(func(k string) string {
		if k == "OTEL_EXPORTER_OTLP_ENDPOINT" {
			return sink.URL
		}
		return ""
	}, "test")
	if err != nil || !tracing.Enabled() {
		t.Fatal(err)
	}
	p := Provider(fake{}, provider.Config{ID: "openai", Settings: map[string]any{"model": "conf-model"}},
		metric.ProviderLabels{Cartridge: "instrument-test", Model: "conf-model"})
	for _, tc := range []struct {
		override map[string]any
		span     string // the span's gen_ai.request.model
		label    string // the metrics' model
	}{
		{nil, "conf-model", "conf-model"},
		{map[string]any{"model": "client-model"}, "client-model", "override"},
		{map[string]any{"model": ""}, "conf-model", "conf-model"},
		{map[string]any{"model": 7}, "conf-model", "conf-model"},
		{map[string]any{"temperature": 0.2}, "conf-model", "conf-model"},
	} {
		before := metrictest.Read(t)
		req := provider.Request{Messages: []provider.Message{{Role: "user", Content: "hello"}}}
		if tc.override != nil {
			req.Override = &provider.Override{Settings: tc.override}
		}
		events := 0
		if _, err := p.Complete(context.Background(), req, func(provider.Event) { events++ }); err != nil || events != 1 {
			t.Fatalf("%v: %v, %d events", tc.override, err, events)
		}
		after := metrictest.Read(t)
		calls := `nb_provider_calls_total{provider="openai",model="` + tc.label + `",cartridge="instrument-test",outcome="ok"}`
		if d := metrictest.Delta(before, after, calls); d != 1 {
			t.Errorf("%v: %s grew by %v\n%s", tc.override, calls, d, after.Text)
		}
		tokens := `nb_tokens_total{provider="openai",model="` + tc.label + `",cartridge="instrument-test",kind="input"}`
		if d := metrictest.Delta(before, after, tokens); d != 5 {
			t.Errorf("%v: %s grew by %v", tc.override, tokens, d)
		}
		first := `nb_provider_time_to_first_token_seconds_count{provider="openai",model="` + tc.label + `"}`
		if d := metrictest.Delta(before, after, first); d != 1 {
			t.Errorf("%v: %s grew by %v", tc.override, first, d)
		}
	}
	if err := stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	var models []string
	for _, b := range bodies {
		var req otlpjson.Request
		if err := json.Unmarshal([]byte(b), &req); err != nil {
			t.Fatal(err)
		}
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					for _, a := range s.Attributes {
						if a.Key == "gen_ai.request.model" && a.Value.StringValue != nil {
							models = append(models, *a.Value.StringValue)
						}
					}
				}
			}
		}
	}
	want := "conf-model client-model conf-model conf-model conf-model"
	if got := strings.Join(models, " "); got != want {
		t.Errorf("the spans' models: %s, want %s", got, want)
	}
}
