package anthropic_test

import (
	"testing"

	"github.com/nbots/nb/provider"
	"github.com/nbots/nb/provider/providertest"
)

// Sampling settings under Anthropic's names (the
// cartridge's max_tokens replaced); no seed and no penalties.
func TestSampling(t *testing.T) {
	s := providertest.FullSampling()
	s.Seed, s.PresencePenalty, s.FrequencyPenalty = nil, nil, nil
	p, fake := setup(t, providertest.Echo, map[string]any{"model": "claude-sonnet-4-5", "max_tokens": 1024, "temperature": 1})
	providertest.CheckSampling(t, p, fake.Recorder.Bodies, s, map[string]string{"model": `"claude-sonnet-4-5"`, "temperature": `0.25`, "top_p": `0.5`,
		"top_k": `7`, "max_tokens": `42`})
	p, fake = setup(t, providertest.Echo, nil)
	full := providertest.FullSampling()
	providertest.CheckUnsupported(t, p, provider.Request{Messages: []provider.Message{{Role: provider.RoleUser, Content: "x"}}, Override: &provider.Override{Sampling: full}},
		func() int { return len(fake.Recorder.Bodies()) })
}
