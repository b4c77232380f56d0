package tracing

import (
	"context"
	"slices"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// The spans nb records, by the OpenTelemetry GenAI semantic conventions
// where they have one, and under nb.* where they do not.

// providerNames are gen_ai.provider.name's well-known values for nb's
// provider ids; others go as they are.
var providerNames = map[string]string{
	"google":  "gcp.gemini",
	"mistral": "mistral_ai",
}

// StartChat starts the span of one call to a model's API: "chat MODEL",
// kind client, with gen_ai.operation.name, gen_ai.provider.name and
// gen_ai.request.model.
func StartChat(ctx context.Context, providerID, model string) (context.Context, trace.Span) {
	if !Enabled() {
		return ctx, noSpan
	}
	name := providerID
	if n, ok := providerNames[providerID]; ok {
		name = n
	}
	attrs := [3]attribute.KeyValue{
		attribute.String("gen_ai.operation.name", "chat"),
		attribute.String("gen_ai.provider.name", name),
	}
	if model == "" {
		return start(ctx, "chat", "", trace.SpanKindClient, attrs[:2]...)
	}
	attrs[2] = attribute.String("gen_ai.request.model", model)
	return start(ctx, "chat ", model, trace.SpanKindClient, attrs[:]...)
}

// ChatResult is what a model call's span records of the answer.
type ChatResult struct {
	// ResponseModel is the model that answered, as the API says ("" when
	// it does not).
	ResponseModel string
	InputTokens   int
	OutputTokens  int
	// CacheReadTokens and CacheWriteTokens are input tokens read from and
	// written to the provider's prompt cache.
	CacheReadTokens  int
	CacheWriteTokens int
	ReasoningTokens  int
	// FinishReasons are why the model stopped (one per choice).
	FinishReasons []string
}

// EndChat ends a StartChat span with the answer, or err.
func EndChat(span trace.Span, r ChatResult, err error) {
	if !span.IsRecording() {
		return
	}
	if err != nil {
		Fail(span, err)
		span.End()
		return
	}
	var buf [7]attribute.KeyValue
	attrs := buf[:0]
	if r.ResponseModel != "" {
		attrs = append(attrs, attribute.String("gen_ai.response.model", r.ResponseModel))
	}
	attrs = append(attrs,
		attribute.Int("gen_ai.usage.input_tokens", r.InputTokens),
		attribute.Int("gen_ai.usage.output_tokens", r.OutputTokens))
	if r.CacheReadTokens > 0 {
		attrs = append(attrs, attribute.Int("gen_ai.usage.cache_read.input_tokens", r.CacheReadTokens))
	}
	if r.CacheWriteTokens > 0 {
		attrs = append(attrs, attribute.Int("gen_ai.usage.cache_creation.input_tokens", r.CacheWriteTokens))
	}
	if r.ReasoningTokens > 0 {
		attrs = append(attrs, attribute.Int("gen_ai.usage.reasoning.output_tokens", r.ReasoningTokens))
	}
	if len(r.FinishReasons) > 0 {
		attrs = append(attrs, attribute.KeyValue{Key: "gen_ai.response.finish_reasons", Value: finishReasons(r.FinishReasons)})
	}
	set(span, attrs...)
	span.End()
}

// finishValues are the finish reasons nb's providers give (see
// provider.NormalizeFinishReason), made once: a string slice attribute
// costs a reflected copy.
var finishValues = func() map[string]attribute.Value {
	m := map[string]attribute.Value{}
	for _, r := range []string{"stop", "length", "tool_calls", "content_filter", "other"} {
		m[r] = attribute.StringSliceValue([]string{r})
	}
	return m
}()

func finishReasons(rs []string) attribute.Value {
	if len(rs) == 1 {
		if v, ok := finishValues[rs[0]]; ok {
			return v
		}
	}
	return attribute.StringSliceValue(slices.Clone(rs))
}

// StartAgent starts the span of one agent exchange: "invoke_agent NAME",
// with gen_ai.operation.name and gen_ai.agent.name.
func StartAgent(ctx context.Context, agent string) (context.Context, trace.Span) {
	if !Enabled() {
		return ctx, noSpan
	}
	return start(ctx, "invoke_agent ", agent, trace.SpanKindInternal,
		attribute.String("gen_ai.operation.name", "invoke_agent"),
		attribute.String("gen_ai.agent.name", agent))
}

// StartTool starts the span of one tool call: "execute_tool NAME", with
// gen_ai.operation.name, gen_ai.tool.name, gen_ai.tool.call.id and
// gen_ai.tool.type.
func StartTool(ctx context.Context, name, callID string) (context.Context, trace.Span) {
	if !Enabled() {
		return ctx, noSpan
	}
	attrs := [4]attribute.KeyValue{
		attribute.String("gen_ai.operation.name", "execute_tool"),
		attribute.String("gen_ai.tool.name", name),
		attribute.String("gen_ai.tool.type", "function"),
	}
	n := 3
	if callID != "" {
		attrs[3] = attribute.String("gen_ai.tool.call.id", callID)
		n = 4
	}
	return start(ctx, "execute_tool ", name, trace.SpanKindInternal, attrs[:n]...)
}

// EndTool ends a StartTool span: failed with error.type tool_error when
// the tool reported a failure, with err's type when it returned one.
func EndTool(span trace.Span, isError bool, err error) {
	if !span.IsRecording() {
		return
	}
	switch {
	case err != nil:
		Fail(span, err)
	case isError:
		span.SetStatus(codes.Error, "the tool reported a failure")
		set(span, attribute.String("error.type", "tool_error"))
	}
	span.End()
}

// StartMCP starts the span of one request to an MCP server: "METHOD
// TARGET" (tools/call search), kind client, with mcp.method.name, and
// for a tool call gen_ai.operation.name and gen_ai.tool.name. server is
// the cartridge's name for the server.
func StartMCP(ctx context.Context, method, target, server string) (context.Context, trace.Span) {
	if !Enabled() {
		return ctx, noSpan
	}
	attrs := make([]attribute.KeyValue, 1, 4)
	attrs[0] = attribute.String("mcp.method.name", method)
	if server != "" {
		attrs = append(attrs, attribute.String("nb.mcp.server", server))
	}
	name := method
	if target != "" {
		name += " " + target
		if method == "tools/call" {
			attrs = append(attrs, attribute.String("gen_ai.operation.name", "execute_tool"), attribute.String("gen_ai.tool.name", target))
		}
	}
	return start(ctx, name, "", trace.SpanKindClient, attrs...)
}

// StartTurn starts the root span of one gateway turn: "gateway.turn
// CHANNEL", with nb.gateway.channel.
func StartTurn(ctx context.Context, channel string) (context.Context, trace.Span) {
	if !Enabled() {
		return ctx, noSpan
	}
	return start(ctx, "gateway.turn ", channel, trace.SpanKindServer, attribute.String("nb.gateway.channel", channel))
}

// StartNode starts the span of one pipeline node's run: "pipeline.node
// NODE", with nb.pipeline.name, nb.pipeline.node and nb.pipeline.handler.
func StartNode(ctx context.Context, pipeline, node, handler string) (context.Context, trace.Span) {
	if !Enabled() {
		return ctx, noSpan
	}
	return start(ctx, "pipeline.node ", node, trace.SpanKindInternal,
		attribute.String("nb.pipeline.name", pipeline),
		attribute.String("nb.pipeline.node", node),
		attribute.String("nb.pipeline.handler", handler))
}

// SetContent records a message content attribute (gen_ai.input.messages,
// gen_ai.output.messages, gen_ai.tool.call.arguments ...) on span, only
// when NB_TRACE_CONTENT=1. value is called only then.
func SetContent(span trace.Span, key string, value func() string) {
	if !span.IsRecording() || !Content() {
		return
	}
	set(span, attribute.String(key, value()))
}
