package google_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/nbots/nb/provider"
	"github.com/nbots/nb/provider/google/googletest"
	"github.com/nbots/nb/provider/providertest"
	"github.com/nbots/nb/tool"
)

// TestForcedToolChoice: a forced call is toolConfig.functionCallingConfig
// with mode ANY and the one allowed name, as Gemini documents; the rest of
// the cartridge's toolConfig is kept, and the fake checks the name is
// declared.
func TestForcedToolChoice(t *testing.T) {
	brain := func(providertest.Turn) providertest.Reply {
		return providertest.Reply{Calls: []providertest.Call{{Name: "save_memory", Arguments: `{"history_entry":"x"}`}}}
	}
	settings := map[string]any{"toolConfig": map[string]any{"retrievalConfig": map[string]any{"languageCode": "en"},
		"functionCallingConfig": map[string]any{"mode": "AUTO"}}}
	p, fake := setup(t, brain, settings)
	spec := tool.Spec{Name: "save_memory", Parameters: tool.DefaultParameters()}
	resp, err := p.Complete(context.Background(), provider.Request{Messages: []provider.Message{user("hi")}, Tools: []tool.Spec{spec}, ToolChoice: "save_memory"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.ToolCalls) != 1 || resp.ToolCalls[0].Name != "save_memory" {
		t.Fatalf("calls %+v", resp.ToolCalls)
	}
	got, _ := json.Marshal(fake.Recorder.Last()["toolConfig"])
	if want := `{"functionCallingConfig":{"allowedFunctionNames":["save_memory"],"mode":"ANY"},"retrievalConfig":{"languageCode":"en"}}`; string(got) != want {
		t.Errorf("toolConfig %s, want %s", got, want)
	}
	// Without a forced choice the cartridge's toolConfig goes as written.
	if _, err := p.Complete(context.Background(), provider.Request{Messages: []provider.Message{user("hi")}, Tools: []tool.Spec{spec}}, nil); err != nil {
		t.Fatal(err)
	}
	got, _ = json.Marshal(fake.Recorder.Last()["toolConfig"])
	if want := `{"functionCallingConfig":{"mode":"AUTO"},"retrievalConfig":{"languageCode":"en"}}`; string(got) != want {
		t.Errorf("unforced toolConfig %s, want %s", got, want)
	}
}

// TestFakeRefusesUndocumentedToolConfig: the fake holds
// functionCallingConfig to the documented modes, and allowed names to
// mode ANY and to declared functions.
func TestFakeRefusesUndocumentedToolConfig(t *testing.T) {
	for fcc, ok := range map[string]bool{
		`{"mode":"ANY","allowedFunctionNames":["save_memory"]}`: true,
		`{"mode":"AUTO"}`:     true,
		`{"mode":"REQUIRED"}`: false,
		`{"mode":"AUTO","allowedFunctionNames":["save_memory"]}`: false,
		`{"mode":"ANY","allowedFunctionNames":["other"]}`:        false,
	} {
		body := `{"contents":[{"role":"user","parts":[{"text":"hi"}]}],"tools":[{"functionDeclarations":[{"name":"save_memory"}]}],"toolConfig":{"functionCallingConfig":` + fcc + `}}`
		if _, err := googletest.Decode([]byte(body)); (err == nil) != ok {
			t.Errorf("%s: err %v, want ok=%v", fcc, err, ok)
		}
	}
}
