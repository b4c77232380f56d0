package cohere_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/nbots/nb/provider"
	"github.com/nbots/nb/provider/cohere/coheretest"
	"github.com/nbots/nb/provider/providertest"
	"github.com/nbots/nb/tool"
)

// TestForcedToolChoice: on v2 a forced call is tool_choice "REQUIRED"
// (Cohere's tool_choice names no tool; the gateway offers only the one);
// v1 has no tool_choice and sends none.
func TestForcedToolChoice(t *testing.T) {
	brain := func(providertest.Turn) providertest.Reply {
		return providertest.Reply{Calls: []providertest.Call{{Name: "save_memory", Arguments: `{"history_entry":"x"}`}}}
	}
	spec := tool.Spec{Name: "save_memory", Parameters: tool.DefaultParameters()}
	for _, tc := range []struct {
		options map[string]any
		want    string
	}{{v2, `"REQUIRED"`}, {v1, `null`}} {
		p, fake := setup(t, brain, map[string]any{"model": "command-a-03-2025"}, tc.options)
		resp, err := p.Complete(context.Background(), provider.Request{Messages: []provider.Message{user("hi")}, Tools: []tool.Spec{spec}, ToolChoice: "save_memory"}, nil)
		if err != nil {
			t.Fatalf("%v: %v", tc.options, err)
		}
		if len(resp.ToolCalls) != 1 || resp.ToolCalls[0].Name != "save_memory" {
			t.Fatalf("%v: calls %+v", tc.options, resp.ToolCalls)
		}
		got, _ := json.Marshal(fake.Recorder.Last()["tool_choice"])
		if string(got) != tc.want {
			t.Errorf("%v: tool_choice %s, want %s", tc.options, got, tc.want)
		}
	}
}

// TestFakeRefusesUndocumentedToolChoice: the v2 fake takes only the
// documented REQUIRED and NONE.
func TestFakeRefusesUndocumentedToolChoice(t *testing.T) {
	for choice, ok := range map[string]bool{`"REQUIRED"`: true, `"NONE"`: true, `"required"`: false, `"any"`: false,
		`{"type":"function","function":{"name":"save_memory"}}`: false} {
		body := `{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"save_memory","parameters":{}}}],"tool_choice":` + choice + `}`
		if _, err := coheretest.DecodeV2([]byte(body)); (err == nil) != ok {
			t.Errorf("%s: err %v, want ok=%v", choice, err, ok)
		}
	}
}
