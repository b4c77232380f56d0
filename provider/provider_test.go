package provider

import (
	"errors"
	"testing"

	"github.com/nbots/nb/cartridge"
)

func TestNormalizeFinishReason(t *testing.T) {
	for _, tc := range []struct {
		raw   string
		calls bool
		want  string
	}{
		{"stop", false, FinishStop}, {"end_turn", false, FinishStop}, {"stop_sequence", false, FinishStop},
		{"COMPLETE", false, FinishStop}, {"STOP", false, FinishStop}, {"STOP_SEQUENCE", false, FinishStop}, {"", false, FinishStop},
		{"length", false, FinishLength}, {"max_tokens", false, FinishLength}, {"MAX_TOKENS", false, FinishLength}, {"model_length", false, FinishLength},
		{"tool_calls", false, FinishToolCalls}, {"tool_use", false, FinishToolCalls}, {"TOOL_CALL", false, FinishToolCalls}, {"function_call", false, FinishToolCalls},
		{"STOP", true, FinishToolCalls}, {"stop", true, FinishToolCalls}, // Gemini and Ollama say stop with calls
		{"content_filter", false, FinishContentFilter}, {"SAFETY", false, FinishContentFilter}, {"RECITATION", false, FinishContentFilter},
		{"refusal", false, FinishContentFilter}, {"ERROR_TOXIC", false, FinishContentFilter},
		{"pause_turn", false, FinishOther}, {"MALFORMED_FUNCTION_CALL", false, FinishOther}, {"load", false, FinishOther},
	} {
		if got := NormalizeFinishReason(tc.raw, tc.calls); got != tc.want {
			t.Errorf("NormalizeFinishReason(%q, %v) = %q, want %q", tc.raw, tc.calls, got, tc.want)
		}
	}
	r := &Response{ToolCalls: []ToolCall{{ID: "1"}}}
	r.SetFinishReason("tool_use")
	if r.FinishReason != FinishToolCalls || r.RawFinishReason != "tool_use" {
		t.Errorf("%+v", r)
	}
}

func TestUnsupportedError(t *testing.T) {
	err := error(&UnsupportedError{Provider: "maritaca", Feature: "images", Hint: "this provider's API takes text only"})
	if err.Error() != "maritaca: images are not supported (this provider's API takes text only)" || !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("%q", err)
	}
}

// The cartridge's provider.timeouts converts to Timeouts as it is: the
// runtime passes it into Config.
func TestCartridgeTimeoutsConvert(t *testing.T) {
	c := cartridge.Timeouts{Connect: 1, FirstByte: 2, Idle: 3}
	if got := Timeouts(c); got != (Timeouts{Connect: 1, FirstByte: 2, Idle: 3}) {
		t.Fatal(got)
	}
}
