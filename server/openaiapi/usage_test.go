package openaiapi

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/nbots/nb/agent"
	"github.com/nbots/nb/provider"
	"github.com/nbots/nb/provider/providertest"
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

// A limit that stops the exchange before an answer (here the round
// limit) is not an error that loses the turn: the client gets a 200
// whose content says why and how to go on, with finish_reason length on
// Chat Completions and status incomplete on the Responses API.
func TestRoundLimitAnswered(t *testing.T) {
	var n atomic.Int64
	brain := func(providertest.Turn) providertest.Reply {
		i := n.Add(1)
		return providertest.Reply{Calls: []providertest.Call{{ID: fmt.Sprintf("c%d", i), Name: "get-weather", Arguments: fmt.Sprintf(`{"city":"c%d"}`, i)}}}
	}
	cart := cartridgeOn("openai", strings.Replace(weatherTool, "confirmable: false", "confirmable: false\n    rounds: 2", 1))
	s := newTestServer(t, brain, map[string]string{"w": cart}, Options{})
	resp, got := s.post(t, "/v1/chat/completions", `{"model":"w","messages":[{"role":"user","content":"weather?"}]}`)
	if resp.StatusCode != 200 || !strings.Contains(got, `"content":"[nb: stopped after 2 rounds of tool calls without an answer`) || !strings.Contains(got, `"finish_reason":"length"`) {
		t.Errorf("chat completions: %d %s", resp.StatusCode, got)
	}
	resp, got = s.post(t, "/v1/responses", `{"model":"w","input":"weather?"}`)
	if resp.StatusCode != 200 || !strings.Contains(got, `[nb: stopped after 2 rounds`) || !strings.Contains(got, `"status":"incomplete"`) {
		t.Errorf("responses: %d %s", resp.StatusCode, got)
	}
}
