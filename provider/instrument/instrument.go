// Package instrument wraps the providers a bot calls in nb's observation
// of their calls: the metrics (internal/metric) and the spans (package
// tracing) of each call, with the model the call asks for worked out
// once (provider.Request.Model) for both.
package instrument

import (
	"context"
	"encoding/json"

	"github.com/nbots/nb/internal/metric"
	"github.com/nbots/nb/provider"
	"github.com/nbots/nb/tracing"
)

// Provider wraps p, built from cfg, so that each Complete is counted in
// the metrics with the labels l and, when tracing is on, is a span
// (tracing.StartChat). Wrap it inside provider.WithRetry, so that each
// attempt is counted and traced. The wrapper hides p's other methods.
func Provider(p provider.Provider, cfg provider.Config, l metric.ProviderLabels) provider.Provider {
	return &observed{Provider: p, model: cfg.Model(), count: metric.NewProviderCounter(p.ID(), l)}
}

type observed struct {
	provider.Provider
	model string // the configuration's
	count *metric.ProviderCounter
}

func (o *observed) Complete(ctx context.Context, req provider.Request, onEvent func(provider.Event)) (*provider.Response, error) {
	model, overridden := req.Model(o.model)
	call := o.count.Start(overridden)
	wrapped := onEvent
	if onEvent != nil {
		wrapped = func(ev provider.Event) {
			call.Event()
			onEvent(ev)
		}
	}
	if !tracing.Enabled() {
		resp, err := o.Provider.Complete(ctx, req, wrapped)
		call.Done(resp, err)
		return resp, err
	}
	ctx, span := tracing.StartChat(ctx, o.ID(), model)
	tracing.SetContent(span, "gen_ai.input.messages", func() string { return contentJSON(req.Messages) })
	if req.System != "" {
		tracing.SetContent(span, "gen_ai.system_instructions", func() string { return req.System })
	}
	resp, err := o.Provider.Complete(ctx, req, wrapped)
	call.Done(resp, err)
	var r tracing.ChatResult
	if resp != nil {
		u := resp.Usage
		r = tracing.ChatResult{ResponseModel: resp.Model, InputTokens: u.InputTokens, OutputTokens: u.OutputTokens,
			CacheReadTokens: u.CacheReadTokens, CacheWriteTokens: u.CacheWriteTokens, ReasoningTokens: u.ReasoningTokens}
		if resp.FinishReason != "" {
			r.FinishReasons = []string{resp.FinishReason}
		}
		if err == nil {
			tracing.SetContent(span, "gen_ai.output.messages", func() string { return contentJSON([]provider.Message{resp.Message()}) })
		}
	}
	tracing.EndChat(span, r, err)
	return resp, err
}

func contentJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	return string(b)
}
