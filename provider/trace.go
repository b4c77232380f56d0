package provider

import (
	"context"
	"encoding/json"

	"github.com/nbots/nb/tracing"
)

// tracedProvider records a span per call (see tracing.StartChat).
type tracedProvider struct {
	Provider
	model string
}

// Traced wraps p, built from cfg, so that each Complete is a span when
// tracing is on (see tracing.StartChat). The wrapper hides p's other
// methods: wrap last but for retries.
func Traced(p Provider, cfg Config) Provider {
	model, _ := cfg.Settings["model"].(string)
	if model == "" {
		model, _ = cfg.Options["model"].(string) // Google's
	}
	return &tracedProvider{Provider: p, model: model}
}

func (t *tracedProvider) Complete(ctx context.Context, req Request, onEvent func(Event)) (*Response, error) {
	if !tracing.Enabled() {
		return t.Provider.Complete(ctx, req, onEvent)
	}
	model := t.model
	if req.Override != nil {
		if m, ok := req.Override.Settings["model"].(string); ok && m != "" {
			model = m
		}
	}
	ctx, span := tracing.StartChat(ctx, t.ID(), model)
	tracing.SetContent(span, "gen_ai.input.messages", func() string { return contentJSON(req.Messages) })
	if req.System != "" {
		tracing.SetContent(span, "gen_ai.system_instructions", func() string { return req.System })
	}
	resp, err := t.Provider.Complete(ctx, req, onEvent)
	var r tracing.ChatResult
	if resp != nil {
		u := resp.Usage
		r = tracing.ChatResult{ResponseModel: resp.Model, InputTokens: u.InputTokens, OutputTokens: u.OutputTokens,
			CacheReadTokens: u.CacheReadTokens, CacheWriteTokens: u.CacheWriteTokens, ReasoningTokens: u.ReasoningTokens}
		if resp.FinishReason != "" {
			r.FinishReasons = []string{resp.FinishReason}
		}
		if err == nil {
			tracing.SetContent(span, "gen_ai.output.messages", func() string { return contentJSON([]Message{resp.Message()}) })
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
