package ollama_test

import (
	"context"
	"testing"

	"github.com/nbots/nb/provider"
	"github.com/nbots/nb/provider/providertest"
	"github.com/nbots/nb/tool"
)

// TestForcedToolChoiceNotSent: Ollama's /api/chat has no way to force a
// call, so a forced choice sends nothing for it and the model chooses.
func TestForcedToolChoiceNotSent(t *testing.T) {
	brain := func(providertest.Turn) providertest.Reply {
		return providertest.Reply{Calls: []providertest.Call{{Name: "save_memory", Arguments: `{"history_entry":"x"}`}}}
	}
	p, fake := setup(t, brain)
	spec := tool.Spec{Name: "save_memory", Parameters: tool.DefaultParameters()}
	resp, err := p.Complete(context.Background(), provider.Request{Messages: []provider.Message{{Role: provider.RoleUser, Content: "hi"}}, Tools: []tool.Spec{spec}, ToolChoice: "save_memory"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.ToolCalls) != 1 {
		t.Fatalf("calls %+v", resp.ToolCalls)
	}
	body := fake.Recorder.Last()
	for _, k := range []string{"tool_choice", "toolChoice", "tool_config"} {
		if _, ok := body[k]; ok {
			t.Errorf("%s sent to Ollama", k)
		}
	}
}
