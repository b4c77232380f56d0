package budget

import (
	"context"
	"testing"

	"github.com/nbots/nb/gateway/modelcall"
	"github.com/nbots/nb/internal/metric/metrictest"
	"github.com/nbots/nb/provider"
)

// nb_gateway_tokens_total counts what the ledger counts, by source: the
// calls Guard settles and those the gateway reports with Spent.
func TestTokensBySourceCounted(t *testing.T) {
	before := metrictest.Read(t)
	l := &Ledger{}
	model := Guard(modelcall.Func(func(context.Context, modelcall.Request) (modelcall.Reply, error) {
		return modelcall.Reply{Usage: provider.Usage{InputTokens: 300, OutputTokens: 20}}, nil
	}), l)
	for _, src := range []string{"consolidation", "consolidation", "heartbeat"} {
		if _, err := model.Call(context.Background(), modelcall.Request{Session: "telegram:1", Source: src}); err != nil {
			t.Fatal(err)
		}
	}
	l.Spent("telegram:1", "chat", provider.Usage{InputTokens: 1000, OutputTokens: 70})
	l.Spent("cron:ab12", "cron", provider.Usage{InputTokens: 5})
	after := metrictest.Read(t)
	for series, want := range map[string]float64{
		`nb_gateway_tokens_total{source="consolidation",kind="input"}`:  600,
		`nb_gateway_tokens_total{source="consolidation",kind="output"}`: 40,
		`nb_gateway_tokens_total{source="heartbeat",kind="input"}`:      300,
		`nb_gateway_tokens_total{source="heartbeat",kind="output"}`:     20,
		`nb_gateway_tokens_total{source="chat",kind="input"}`:           1000,
		`nb_gateway_tokens_total{source="chat",kind="output"}`:          70,
		`nb_gateway_tokens_total{source="cron",kind="input"}`:           5,
		`nb_gateway_tokens_total{source="cron",kind="output"}`:          0,
	} {
		if got := metrictest.Delta(before, after, series); got != want {
			t.Errorf("%s: %v, want %v", series, got, want)
		}
	}
}
