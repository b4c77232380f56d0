package mistral_test

import (
	"testing"

	"github.com/nbots/nb/provider"
	"github.com/nbots/nb/provider/providertest"
)

// Sampling settings under Mistral's names (random_seed); no top_k.
func TestSampling(t *testing.T) {
	s := providertest.FullSampling()
	s.TopK = nil
	p, fake := setup(t, providertest.Echo, map[string]any{"model": "mistral-large-latest", "temperature": 1.5})
	providertest.CheckSampling(t, p, fake.Recorder.Bodies, s, map[string]string{"model": `"mistral-large-latest"`, "temperature": `0.25`, "top_p": `0.5`,
		"max_tokens": `42`, "random_seed": `1234`, "presence_penalty": `0.125`, "frequency_penalty": `0.375`, "seed": `null`})
	p, fake = setup(t, providertest.Echo, nil)
	full := providertest.FullSampling()
	providertest.CheckUnsupported(t, p, provider.Request{Messages: []provider.Message{{Role: provider.RoleUser, Content: "x"}}, Override: &provider.Override{Sampling: full}},
		func() int { return len(fake.Recorder.Bodies()) })
}
