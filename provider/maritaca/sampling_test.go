package maritaca_test

import (
	"testing"

	"github.com/nbots/nb/provider"
	"github.com/nbots/nb/provider/providertest"
)

// Sampling settings under Maritaca's names, on both APIs; no top_k, seed
// or penalties.
func TestSampling(t *testing.T) {
	s := providertest.FullSampling()
	s.TopK, s.Seed, s.PresencePenalty, s.FrequencyPenalty = nil, nil, nil, nil
	for _, options := range []string{"", "inference"} {
		var opts map[string]any
		if options != "" {
			opts = map[string]any{"api": options}
		}
		p, fake := setup(t, providertest.Echo, nil, opts)
		providertest.CheckSampling(t, p, fake.Recorder.Bodies, s, map[string]string{"model": `"sabia-3"`, "temperature": `0.25`, "top_p": `0.5`,
			"max_tokens": `42`})
		full := providertest.FullSampling()
		p, fake = setup(t, providertest.Echo, nil, opts)
		providertest.CheckUnsupported(t, p, provider.Request{Messages: []provider.Message{{Role: provider.RoleUser, Content: "x"}}, Override: &provider.Override{Sampling: full}},
			func() int { return len(fake.Recorder.Bodies()) })
	}
}
