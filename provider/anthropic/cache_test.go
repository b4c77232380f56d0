package anthropic_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/nbots/nb/provider"
	"github.com/nbots/nb/provider/anthropic"
	"github.com/nbots/nb/provider/anthropic/anthropictest"
	"github.com/nbots/nb/provider/providertest"
	"github.com/nbots/nb/tool"
)

// toolLoop runs a ten-round tool loop against the fake with its prompt
// cache, and returns each round's usage.
func toolLoop(t *testing.T, cache bool) []provider.Usage {
	t.Helper()
	round := 0
	fake := anthropictest.New(func(providertest.Turn) providertest.Reply {
		round++
		if round < 10 {
			return providertest.Reply{Calls: []providertest.Call{{Name: "read_file", Arguments: fmt.Sprintf(`{"path":"f%d.go"}`, round)}}}
		}
		return providertest.Reply{Chunks: []string{"done"}}
	})
	fake.Cache = &anthropictest.PromptCache{}
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	p, err := anthropic.New(provider.Config{ID: "anthropic", Credentials: map[string]any{"address": srv.URL, "api-key": "k"},
		Options: map[string]any{"cache": cache}, Settings: map[string]any{"model": "claude-sonnet-4-5"}, HTTPClient: srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	var tools []tool.Spec
	for _, name := range []string{"read_file", "write_file", "edit_file", "exec", "grep"} {
		tools = append(tools, tool.Spec{Name: name, Description: strings.Repeat("What "+name+" does. ", 40), Parameters: map[string]any{"type": "object"}})
	}
	req := provider.Request{System: strings.Repeat("You are a careful coding agent. ", 200), Tools: tools,
		Messages: []provider.Message{{Role: provider.RoleUser, Content: "Fix the failing test."}}, Stream: true}
	var usage []provider.Usage
	for {
		resp, err := p.Complete(context.Background(), req, nil)
		if err != nil {
			t.Fatal(err)
		}
		usage = append(usage, resp.Usage)
		if len(resp.ToolCalls) == 0 {
			return usage
		}
		req.Messages = append(req.Messages, resp.Message())
		for _, c := range resp.ToolCalls {
			req.Messages = append(req.Messages, provider.Message{Role: provider.RoleTool, ToolCallID: c.ID, ToolName: c.Name, Content: strings.Repeat("package main // contents of "+c.Arguments+"\n", 20)})
		}
	}
}

// TestCachedToolLoop checks that with caching on (the default) a tool loop
// of ten rounds sends its unchanged prefix once at full price: each round
// reads everything the previous rounds sent from the cache.
func TestCachedToolLoop(t *testing.T) {
	on, off := toolLoop(t, true), toolLoop(t, false)
	if len(on) != 10 || len(off) != 10 {
		t.Fatalf("rounds: %d with cache, %d without", len(on), len(off))
	}
	var sumOn, sumOff provider.Usage
	for i := range on {
		sumOn.Add(on[i])
		sumOff.Add(off[i])
		if on[i].InputTokens != off[i].InputTokens {
			t.Errorf("round %d: %d input tokens with cache, %d without: the prompts differ", i+1, on[i].InputTokens, off[i].InputTokens)
		}
		if i > 0 && on[i].CacheReadTokens < on[i-1].InputTokens {
			t.Errorf("round %d read %d tokens from the cache, less than the previous request's %d", i+1, on[i].CacheReadTokens, on[i-1].InputTokens)
		}
	}
	last := on[len(on)-1].InputTokens
	// Billed at full (or cache-write) price: what was not read from the cache.
	fullOn := sumOn.InputTokens - sumOn.CacheReadTokens
	if fullOn != last {
		t.Errorf("with caching, %d tokens billed at full price; want each token of the final prompt once: %d", fullOn, last)
	}
	if sumOff.CacheReadTokens != 0 || sumOff.CacheWriteTokens != 0 {
		t.Errorf("without caching the fake reports cache use: %+v", sumOff)
	}
	t.Logf("ten rounds: %d input tokens in all; full price with caching %d (+%d read from the cache), without %d", sumOn.InputTokens, fullOn, sumOn.CacheReadTokens, sumOff.InputTokens)
}

// TestCacheBreakpoints checks where the breakpoints go: the last tool,
// the system text, the last block of the last two user turns.
func TestCacheBreakpoints(t *testing.T) {
	fake := anthropictest.New(providertest.Echo)
	srv := httptest.NewServer(fake)
	defer srv.Close()
	p, _ := anthropic.New(provider.Config{ID: "anthropic", Credentials: map[string]any{"address": srv.URL, "api-key": "k"}, HTTPClient: srv.Client()})
	req := provider.Request{System: "sys", Tools: []tool.Spec{{Name: "a", Parameters: map[string]any{"type": "object"}}, {Name: "b", Parameters: map[string]any{"type": "object"}}},
		Messages: []provider.Message{{Role: provider.RoleUser, Content: "one"}, {Role: provider.RoleAssistant, Content: "two"}, {Role: provider.RoleUser, Content: "three"}, {Role: provider.RoleAssistant, Content: "four"}, {Role: provider.RoleUser, Content: "five"}}}
	if _, err := p.Complete(context.Background(), req, nil); err != nil {
		t.Fatal(err)
	}
	body := fake.Recorder.Last()
	ephemeral := map[string]any{"type": "ephemeral"}
	tools := body["tools"].([]any)
	if tools[0].(map[string]any)["cache_control"] != nil || fmt.Sprint(tools[1].(map[string]any)["cache_control"]) != fmt.Sprint(ephemeral) {
		t.Errorf("tools: %v", tools)
	}
	if fmt.Sprint(body["system"]) != fmt.Sprint([]any{map[string]any{"type": "text", "text": "sys", "cache_control": ephemeral}}) {
		t.Errorf("system: %v", body["system"])
	}
	msgs := body["messages"].([]any)
	for i, want := range []bool{false, false, true, false, true} {
		content := msgs[i].(map[string]any)["content"]
		_, isBlocks := content.([]any)
		if isBlocks != want {
			t.Errorf("message %d: breakpoint %v, content %v", i, want, content)
		}
	}
	if v := fake.Header().Get("anthropic-beta"); v != "" {
		t.Errorf("anthropic-beta %q: prompt caching needs no beta header", v)
	}
}
