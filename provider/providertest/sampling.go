package providertest

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/nbots/nb/provider"
)

// FullSampling sets every sampling setting, each to a value no default
// has.
func FullSampling() provider.Sampling {
	temperature, topP, presence, frequency := 0.25, 0.5, 0.125, 0.375
	topK, maxTokens := 7, 42
	seed := int64(1234)
	return provider.Sampling{Temperature: &temperature, TopP: &topP, TopK: &topK, MaxTokens: &maxTokens,
		Seed: &seed, PresencePenalty: &presence, FrequencyPenalty: &frequency}
}

// CheckSampling sends s with a request, streamed and not, and checks the
// body the fake received: want maps dotted paths ("options.num_predict")
// to the JSON each must hold; bodies returns the bodies the fake
// received.
func CheckSampling(t *testing.T, p provider.Provider, bodies func() [][]byte, s provider.Sampling, want map[string]string) {
	t.Helper()
	for _, stream := range []bool{false, true} {
		req := provider.Request{Messages: []provider.Message{{Role: provider.RoleUser, Content: "hi"}}, Stream: stream, Override: &provider.Override{Sampling: s}}
		if _, err := p.Complete(context.Background(), req, nil); err != nil {
			t.Fatalf("stream=%v: %v", stream, err)
		}
		all := bodies()
		var body map[string]any
		if err := json.Unmarshal(all[len(all)-1], &body); err != nil {
			t.Fatal(err)
		}
		for path, w := range want {
			var v any = body
			for _, k := range strings.Split(path, ".") {
				m, _ := v.(map[string]any)
				v = m[k]
			}
			got, _ := json.Marshal(v)
			if string(got) != w {
				t.Errorf("stream=%v: %s = %s, want %s", stream, path, got, w)
			}
		}
	}
}
