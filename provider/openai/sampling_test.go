package openai_test

import (
	"testing"

	"github.com/nbots/nb/provider"
	"github.com/nbots/nb/provider/providertest"
)

// A client's sampling settings reach the wire under Chat Completions
// names, over the cartridge's: the answer's limit under the cartridge's own
// name for it, else max_tokens on a compatible server; top_k, which the
// API has not, is refused before anything is sent.
func TestSampling(t *testing.T) {
	s := providertest.FullSampling()
	s.TopK = nil
	want := map[string]string{"model": `"gpt-4o"`, "temperature": `0.25`, "top_p": `0.5`, "max_tokens": `42`,
		"seed": `1234`, "presence_penalty": `0.125`, "frequency_penalty": `0.375`}
	p, fake := setup(t, providertest.Echo, map[string]any{"model": "gpt-4o", "temperature": 1.5})
	providertest.CheckSampling(t, p, fake.Recorder.Bodies, s, want)
	p, fake = setup(t, providertest.Echo, map[string]any{"model": "gpt-4o", "max_completion_tokens": 100})
	providertest.CheckSampling(t, p, fake.Recorder.Bodies, s, map[string]string{"max_completion_tokens": `42`, "max_tokens": `null`})
	p, fake = setup(t, providertest.Echo, nil)
	full := providertest.FullSampling()
	providertest.CheckUnsupported(t, p, provider.Request{Messages: []provider.Message{{Role: provider.RoleUser, Content: "x"}}, Override: &provider.Override{Sampling: full}},
		func() int { return len(fake.Recorder.Bodies()) })
}
