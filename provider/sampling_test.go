package provider

import (
	"errors"
	"testing"
)

// Apply writes the settings under the API's names, copying the maps on
// their paths, and refuses a setting the API has not.
func TestSamplingApply(t *testing.T) {
	shared := map[string]any{"num_ctx": 1024, "temperature": 0.8}
	body := map[string]any{"model": "m", "options": shared}
	temp, limit := 0.1, 5
	s := &Sampling{Temperature: &temp, MaxTokens: &limit}
	names := SamplingNames{Temperature: "options.temperature", MaxTokens: "options.num_predict"}
	if err := s.Apply(body, "p", names); err != nil {
		t.Fatal(err)
	}
	opts := body["options"].(map[string]any)
	if opts["temperature"] != 0.1 || opts["num_predict"] != 5 || opts["num_ctx"] != 1024 || body["model"] != "m" {
		t.Errorf("body %v", body)
	}
	if shared["temperature"] != 0.8 || len(shared) != 2 {
		t.Errorf("the shared map was written: %v", shared)
	}
	seed := int64(1)
	err := (&Sampling{Seed: &seed, PresencePenalty: &temp}).Apply(map[string]any{}, "anthropic", SamplingNames{})
	var ue *UnsupportedError
	if !errors.As(err, &ue) || err.Error() != "anthropic: the sampling settings seed, presence_penalty are not supported (this API has no such setting: leave it out of the request)" {
		t.Errorf("err = %v", err)
	}
	if err := (*Sampling)(nil).Apply(body, "p", SamplingNames{}); err != nil || !(*Sampling)(nil).IsZero() {
		t.Error("a nil Sampling does something")
	}
}
