package mistral_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/nbots/nb/provider"
	"github.com/nbots/nb/provider/mistral/mistraltest"
	"github.com/nbots/nb/provider/providertest"
	"github.com/nbots/nb/tool"
)

// TestForcedToolChoice: a forced call is sent as the named function
// Mistral documents ({"type": "function", "function": {"name"}}), over
// the cartridge's own tool_choice; the fake accepts only documented forms.
func TestForcedToolChoice(t *testing.T) {
	brain := func(providertest.Turn) providertest.Reply {
		return providertest.Reply{Calls: []providertest.Call{{Name: "save_memory", Arguments: `{"history_entry":"x"}`}}}
	}
	p, fake := setup(t, brain, map[string]any{"model": "mistral-large-latest", "tool_choice": "auto"})
	spec := tool.Spec{Name: "save_memory", Parameters: tool.DefaultParameters()}
	resp, err := p.Complete(context.Background(), provider.Request{Messages: []provider.Message{user("hi")}, Tools: []tool.Spec{spec}, ToolChoice: "save_memory"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.ToolCalls) != 1 || resp.ToolCalls[0].Name != "save_memory" {
		t.Fatalf("calls %+v", resp.ToolCalls)
	}
	got, _ := json.Marshal(fake.Recorder.Last()["tool_choice"])
	if want := `{"function":{"name":"save_memory"},"type":"function"}`; string(got) != want {
		t.Errorf("tool_choice %s, want %s", got, want)
	}
}

// TestFakeRefusesUndocumentedToolChoice: the fake holds tool_choice to the
// documented forms, so the test above can fail on a wrong shape.
func TestFakeRefusesUndocumentedToolChoice(t *testing.T) {
	tools := `"tools":[{"type":"function","function":{"name":"save_memory","parameters":{}}}]`
	for body, ok := range map[string]bool{
		`{"model":"m","messages":[{"role":"user","content":"hi"}],` + tools + `,"tool_choice":"any"}`:                                                 true,
		`{"model":"m","messages":[{"role":"user","content":"hi"}],` + tools + `,"tool_choice":{"type":"function","function":{"name":"save_memory"}}}`: true,
		`{"model":"m","messages":[{"role":"user","content":"hi"}],` + tools + `,"tool_choice":"REQUIRED"}`:                                            false,
		`{"model":"m","messages":[{"role":"user","content":"hi"}],` + tools + `,"tool_choice":{"type":"function","function":{"name":"other"}}}`:       false,
		`{"model":"m","messages":[{"role":"user","content":"hi"}],` + tools + `,"tool_choice":{"type":"tool","name":"save_memory"}}`:                  false,
	} {
		if _, err := mistraltest.Decode([]byte(body)); (err == nil) != ok {
			t.Errorf("%s: err %v, want ok=%v", body, err, ok)
		}
	}
}
