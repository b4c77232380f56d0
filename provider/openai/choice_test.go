package openai_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/nbots/nb/provider"
	"github.com/nbots/nb/provider/providertest"
	"github.com/nbots/nb/tool"
)

// TestResponsesForcedToolChoice: over the Responses API a forced call is
// the flat {"type": "function", "name"} that API takes (Chat Completions
// nests the name under "function").
func TestResponsesForcedToolChoice(t *testing.T) {
	brain := func(providertest.Turn) providertest.Reply {
		return providertest.Reply{Calls: []providertest.Call{{Name: "save_memory", Arguments: `{"history_entry":"x"}`}}}
	}
	p, fake := responsesClient(t, brain, nil)
	spec := tool.Spec{Name: "save_memory", Parameters: tool.DefaultParameters()}
	resp, err := p.Complete(context.Background(), provider.Request{Messages: []provider.Message{{Role: provider.RoleUser, Content: "hi"}}, Tools: []tool.Spec{spec}, ToolChoice: "save_memory"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.ToolCalls) != 1 || resp.ToolCalls[0].Name != "save_memory" {
		t.Fatalf("calls %+v", resp.ToolCalls)
	}
	got, _ := json.Marshal(fake.Recorder.Last()["tool_choice"])
	if want := `{"name":"save_memory","type":"function"}`; string(got) != want {
		t.Errorf("tool_choice %s, want %s", got, want)
	}
}
