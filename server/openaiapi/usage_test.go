package openaiapi

import (
	"encoding/json"
	"testing"

	"github.com/nbots/nb/agent"
	"github.com/nbots/nb/provider"
)

// TestUsageShapes checks that the cache and reasoning counts of an
// exchange reach clients in OpenAI's own usage shapes.
func TestUsageShapes(t *testing.T) {
	u := provider.Usage{InputTokens: 2006, OutputTokens: 300, CacheReadTokens: 1920, CacheWriteTokens: 50, ReasoningTokens: 256}
	var chat struct {
		PromptTokens        int `json:"prompt_tokens"`
		TotalTokens         int `json:"total_tokens"`
		PromptTokensDetails struct {
			CachedTokens int `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
		CompletionTokensDetails struct {
			ReasoningTokens int `json:"reasoning_tokens"`
		} `json:"completion_tokens_details"`
	}
	if err := json.Unmarshal(appendChatUsage(nil, u), &chat); err != nil {
		t.Fatal(err)
	}
	if chat.PromptTokens != 2006 || chat.TotalTokens != 2306 || chat.PromptTokensDetails.CachedTokens != 1920 || chat.CompletionTokensDetails.ReasoningTokens != 256 {
		t.Errorf("chat usage %+v", chat)
	}
	var r responseObject
	r.finish(&outcome{res: &agent.Result{Usage: u}}, 1)
	if r.Usage.InputTokensDetails.CachedTokens != 1920 || r.Usage.OutputTokensDetails.ReasoningTokens != 256 || r.Usage.TotalTokens != 2306 {
		t.Errorf("responses usage %+v", r.Usage)
	}
}
